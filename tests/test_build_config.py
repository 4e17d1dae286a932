"""The build switches of setup.py (cuda_kernels/_build_config.py): arch resolution, flags, MAX_JOBS."""

from __future__ import annotations

import subprocess
import sys

import pytest

import cuda_kernels
from cuda_kernels import _build_config as bc


@pytest.fixture
def env(monkeypatch):
    for var in ("TORCH_CUDA_ARCH_LIST", "COMPUTE_CAPABILITY", "DEBUG", "LINEINFO", "MAX_JOBS"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_arch_list_is_always_honored(env):
    env.setenv("TORCH_CUDA_ARCH_LIST", "8.0;9.0a")
    assert bc.resolve_arch_list([(8, 6)])[0] == "8.0;9.0a"


def test_compute_capability_is_a_shorthand(env):
    for cc, expected in [("90", "9.0"), ("90a", "9.0a"), ("8.6", "8.6"), ("80;90a", "8.0;9.0a"), ("120", "12.0")]:
        env.setenv("COMPUTE_CAPABILITY", cc)
        assert bc.resolve_arch_list([])[0] == expected


def test_compute_capability_never_overrides_the_list(env):
    env.setenv("TORCH_CUDA_ARCH_LIST", "8.0")
    env.setenv("COMPUTE_CAPABILITY", "90")
    arch_list, why = bc.resolve_arch_list([])
    assert arch_list == "8.0"
    assert "COMPUTE_CAPABILITY=90 ignored" in why


def test_bad_compute_capability_is_an_error(env):
    env.setenv("COMPUTE_CAPABILITY", "nine")
    with pytest.raises(ValueError, match="COMPUTE_CAPABILITY"):
        bc.resolve_arch_list([])


def test_defaults_with_and_without_gpus(env):
    assert bc.resolve_arch_list([(9, 0)])[0] == "9.0+PTX"
    assert bc.resolve_arch_list([(8, 0), (9, 0), (8, 0)])[0] == "8.0;9.0+PTX"
    arch_list = bc.resolve_arch_list([])[0]
    assert arch_list == bc.DEFAULT_ARCH_LIST and arch_list.endswith("+PTX")


def test_arch_tag_round_trips_through_build_info():
    for arch_list, archs in [
        ("8.0;9.0a", ["8.0", "9.0a"]),
        ("9.0+PTX", ["9.0+PTX"]),
        ("8.0;12.0+PTX", ["8.0", "12.0+PTX"]),
    ]:
        assert cuda_kernels._decode_archs(bc.arch_tag(arch_list)) == archs


def test_debug_and_lineinfo_flags(env):
    cfg = bc.make_config(with_cuda=True, arch_list="9.0", cxx11_abi=True)
    assert "-O3" in cfg.nvcc_flags and "-G" not in cfg.nvcc_flags and "-D_GLIBCXX_USE_CXX11_ABI=1" in cfg.cxx_flags
    env.setenv("DEBUG", "1")
    cfg = bc.make_config(with_cuda=True, arch_list="9.0")
    assert {"-O0", "-g", "-G"} <= set(cfg.nvcc_flags) and "-O0" in cfg.cxx_flags
    env.setenv("DEBUG", "0")
    env.setenv("LINEINFO", "1")
    assert "-lineinfo" in bc.make_config(with_cuda=True, arch_list="9.0").nvcc_flags


def test_max_jobs(env):
    assert bc.max_jobs() >= 1
    env.setenv("MAX_JOBS", "3")
    assert bc.max_jobs() == 3


def test_sources_cover_every_kernel_file():
    cpu = bc.sources(with_cuda=False)
    cuda = bc.sources(with_cuda=True)
    assert all(s.endswith(".cpp") for s in cpu) and any(s.endswith("api.cpp") for s in cpu)
    assert set(cpu) < set(cuda) and any(s.endswith("square.cu") for s in cuda)


def test_setup_py_refuses_build_isolation_with_one_line(tmp_path):
    # What pip's isolated build environment looks like: setup.py runs where torch cannot be imported.
    setup_py = str(bc.ROOT) + "/setup.py"
    code = (
        "import sys, builtins; real = builtins.__import__\n"
        "def fake(name, *a, **k):\n"
        "    if name == 'torch' or name.startswith('torch.'): raise ImportError('No module named torch')\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = fake\n"
        "import runpy\n"
        f"sys.argv = [{setup_py!r}, '--version']\n"
        f"runpy.run_path({setup_py!r}, run_name='__main__')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=bc.ROOT)
    assert proc.returncode != 0
    assert "--no-build-isolation" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
