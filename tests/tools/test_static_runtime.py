"""A compiler that links the C++ runtime statically still gives a working extension, or a clear stop.

A container image's CC/CXX can be wrappers (`g++ -B/opt/gcc/... "$@"`) whose -B folder holds libstdc++.a but no
libstdc++.so, so g++'s implicit -lstdc++ takes the archive: the extension then carries its own copy of the C++
runtime, and the first error message that formats a number crashes or stops early (docs/debugging.md). Here a
wrapper g++ whose -B folder holds only this machine's libstdc++.a does the same. In a temporary copy of setup.py,
cuda_kernels/ and csrc/, a CPU-only build (WITH_CUDA=0) with that wrapper as CC and CXX

  1. with CUDA_KERNELS_LINK_SHARED_CXX_RUNTIME=0 (the link as the compiler makes it) stops with the fix, leaving
     no binary behind;
  2. by default links the libstdc++ that torch loaded: the binary needs libstdc++.so.6, loads, and matmul's
     shape error carries the full shapes.

Build 1 compiles the objects (45-60 s on 2 cores, more when they are busy); build 2 reuses them and only links
again (~3 s). Both are DEBUG=1 builds: -O0 compiles faster, and the link, the part under test, is the same.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from cuda_kernels.tools import build_config as bc

# Not in the fast tier (-m 'not slow'): it builds a CPU-only copy of the extension (about a minute).
pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Runs in a fresh interpreter with the temporary copy first on sys.path (a crash must not take pytest down).
PROBE = r"""
import json, torch, cuda_kernels
try:
    cuda_kernels.matmul(torch.randn(3, 4), torch.randn(5, 6))
    error = None
except RuntimeError as err:
    error = str(err)
print(json.dumps({"path": cuda_kernels.build_info()["path"], "error": error}))
"""


def _skip_reason() -> str:
    gxx = shutil.which("g++")
    if gxx is None:
        return "needs g++ to mimic a compiler that links libstdc++ statically"
    archive = subprocess.run([gxx, "-print-file-name=libstdc++.a"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(archive):
        return "g++ has no libstdc++.a here, so it cannot link the C++ runtime statically"
    if bc.loaded_cxx_runtime() is None:
        return "this process has no shared libstdc++ loaded (not Linux?): nothing to link against"
    return ""


def _make_static_runtime_compiler(folder: str) -> str:
    """A g++ wrapper like a container image's: its -B folder holds only libstdc++.a, so -lstdc++ finds the archive."""
    gxx = shutil.which("g++")
    archive = subprocess.run([gxx, "-print-file-name=libstdc++.a"], capture_output=True, text=True).stdout.strip()
    libdir = os.path.join(folder, "gcclib")
    os.makedirs(libdir)
    os.symlink(archive, os.path.join(libdir, "libstdc++.a"))
    wrapper = os.path.join(folder, "g++")
    with open(wrapper, "w") as f:
        f.write(f'#!/bin/sh\nexec {gxx} -B{libdir}/ "$@"\n')
    os.chmod(wrapper, 0o755)
    return wrapper


def _copy_sources(dest: str) -> None:
    for name in ("setup.py", "pyproject.toml"):
        shutil.copy(os.path.join(ROOT, name), dest)
    shutil.copytree(os.path.join(ROOT, "csrc"), os.path.join(dest, "csrc"))
    shutil.copytree(
        os.path.join(ROOT, "cuda_kernels"),
        os.path.join(dest, "cuda_kernels"),
        ignore=shutil.ignore_patterns("*.so", "__pycache__"),
    )


def _build(src: str, cxx: str, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    full = dict(os.environ, WITH_CUDA="0", DEBUG="1", CC=cxx, CXX=cxx, **env)
    for var in ("LINEINFO", "CUDA_KERNELS_JIT", "PYTHONPATH"):
        full.pop(var, None)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace"],
        cwd=src,
        env=full,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    return proc, time.perf_counter() - start


def _binaries(src: str) -> list[str]:
    return glob.glob(os.path.join(src, "cuda_kernels", "_C*.so")) + glob.glob(
        os.path.join(src, "build", "lib*", "cuda_kernels", "_C*.so")
    )


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    root = str(tmp_path_factory.mktemp("static_runtime"))
    cxx = _make_static_runtime_compiler(root)
    src = os.path.join(root, "src")
    os.makedirs(src)
    _copy_sources(src)
    off, off_s = _build(src, cxx, **{bc.LINK_SHARED_CXX_RUNTIME_ENV: "0"})
    off_binaries = _binaries(src)
    on, on_s = _build(src, cxx)
    print(f"\nstatic-runtime builds: link fix off {off_s:.1f} s (compiles), on {on_s:.1f} s (links)")
    return {"src": src, "off": off, "off_binaries": off_binaries, "on": on}


def test_without_the_link_fix_the_build_stops_with_the_fix(builds: dict) -> None:
    proc = builds["off"]
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, "the build installed a binary with a static C++ runtime:\n" + out[-3000:]
    assert "static copy of the C++ runtime" in proc.stderr and "the build deleted that binary" in proc.stderr, out
    assert "Fix: CC=" in proc.stderr and "pip install --no-build-isolation -e ." in proc.stderr, out
    assert builds["off_binaries"] == [], "the refused binary was left behind"


def test_the_build_links_the_shared_runtime_and_error_messages_work(builds: dict) -> None:
    proc, src = builds["on"], builds["src"]
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    assert "linking against the C++ runtime torch loaded" in proc.stdout
    (binary,) = glob.glob(os.path.join(src, "cuda_kernels", "_C*.so"))
    assert any(n.startswith("libstdc++.so") for n in bc.elf_needed(binary)), bc.elf_needed(binary)

    env = dict(os.environ, PYTHONPATH=src)
    env.pop("CUDA_KERNELS_JIT", None)
    probe = subprocess.run([sys.executable, "-c", PROBE], cwd=src, env=env, capture_output=True, text=True, timeout=300)
    # A second C++ runtime in the process shows here: SIGSEGV (returncode -11) or a message cut at "a is [".
    assert probe.returncode == 0, f"returncode {probe.returncode}\n{probe.stdout}\n{probe.stderr[-3000:]}"
    result = json.loads(probe.stdout.strip().splitlines()[-1])
    assert os.path.realpath(result["path"]) == os.path.realpath(binary), "the probe imported another build"
    assert result["error"] is not None, "matmul accepted (3, 4) @ (5, 6)"
    assert "[3, 4]" in result["error"] and "[5, 6]" in result["error"], result["error"]
