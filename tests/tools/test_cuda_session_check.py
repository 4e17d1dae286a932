"""A GPU host never passes the suite on a CPU-only build: tests/conftest.py stops the session at the start unless
CUDA_KERNELS_ALLOW_CPU_ONLY=1 says the CPU-only build is deliberate (then the CUDA cases skip, saying so).

The decision is a pure function (conftest.cuda_session_check), tested directly; the whole path is tested by running
pytest in a subprocess that pretends to be a GPU host with a CPU-only build (torch.cuda.is_available patched to
True, cuda_kernels.build_info()["cuda"] to False, before conftest reads them), so it runs on every machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import ALLOW_CPU_ONLY_ENV, cuda_session_check

ROOT = Path(__file__).resolve().parents[2]

# The pretend GPU host: patches what conftest reads, then runs pytest with this script's arguments.
_PRETEND_GPU_HOST = """
import sys
import torch
import cuda_kernels

torch.cuda.is_available = lambda: True
_real_build_info = cuda_kernels.build_info
cuda_kernels.build_info = lambda: {**_real_build_info(), "cuda": False}
import pytest

sys.exit(pytest.main(sys.argv[1:]))
"""
# One CUDA-only test (the device-mismatch error test) and one test parametrized over both devices.
CASES = [
    "tests/ops/test_matmul.py::test_matmul_different_devices",
    "tests/ops/test_matmul.py::test_matmul_k_zero_gives_zeros",
]


def test_decision_table():
    assert cuda_session_check(False, False, False) == ("no CUDA device visible", "")
    assert cuda_session_check(False, True, False) == ("no CUDA device visible", "")
    assert cuda_session_check(True, True, False) == ("", "")
    assert cuda_session_check(True, True, True) == ("", "")
    skip, error = cuda_session_check(True, False, False, "/x/_C.so")
    assert "built without CUDA" in skip
    assert "a CUDA device is visible" in error and "built without CUDA" in error
    assert f"{ALLOW_CPU_ONLY_ENV}=1" in error and "/x/_C.so" in error  # how to opt out; which binary was loaded
    skip, error = cuda_session_check(True, False, True)
    assert error == "" and "built without CUDA" in skip and f"{ALLOW_CPU_ONLY_ENV}=1" in skip


def run_pretending_gpu_host(allow_cpu_only: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != ALLOW_CPU_ONLY_ENV}
    if allow_cpu_only is not None:
        env[ALLOW_CPU_ONLY_ENV] = allow_cpu_only
    cmd = [sys.executable, "-c", _PRETEND_GPU_HOST, "-q", "-rs", "-p", "no:cacheprovider", *CASES]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_gpu_host_with_cpu_only_build_fails_at_the_start():
    for value in (None, "0"):
        run = run_pretending_gpu_host(value)
        out = run.stdout + run.stderr
        assert run.returncode == 4, out  # pytest's usage error: nothing was collected or run
        assert "a CUDA device is visible" in run.stderr and f"{ALLOW_CPU_ONLY_ENV}=1" in run.stderr, out
        assert "passed" not in out and "skipped" not in out, out


def test_gpu_host_with_cpu_only_build_and_opt_out_skips_cuda_cases():
    run = run_pretending_gpu_host("1")
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    # CPU cases run; every CUDA case (4 dtypes + the device-mismatch test) skips with the opt-out named.
    assert "4 passed, 5 skipped" in run.stdout, out
    reason = f"built without CUDA (WITH_CUDA=0, or no toolkit or no GPU at build time); {ALLOW_CPU_ONLY_ENV}=1"
    assert reason in out, out
