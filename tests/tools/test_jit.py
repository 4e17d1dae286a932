"""The JIT loop (CUDA_KERNELS_JIT=1): builds csrc/ on import, reloads without recompiling, rebuilds only what changed.

One cold CPU build (WITH_CUDA=0) in a temporary cache, shared by the tests of this file (~40-60 s on 2 cores); the
tests that need it are marked slow (the fast tier, -m "not slow", runs the planning tests only).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

from cuda_kernels.tools import build_config as bc
from cuda_kernels.tools import jit as _jit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Runs in a fresh interpreter: imports cuda_kernels in JIT mode, times it, checks the ops against torch.
SCRIPT = r"""
import json, sys, time
start = time.perf_counter()
import cuda_kernels
import_s = time.perf_counter() - start
import torch
from cuda_kernels.tools import jit as _jit
x = torch.randn(5, 3)
a, b = torch.randn(4, 3, dtype=torch.float64), torch.randn(3, 2, dtype=torch.float64)
print(json.dumps({
    "import_s": import_s,
    "load": _jit.LAST_LOAD,
    "build_info": cuda_kernels.build_info(),
    "installed_C_imported": "cuda_kernels._C" in sys.modules,
    "modules": sorted(m for m in sys.modules if m.startswith("torch.utils.cpp_extension")),
    "square_ok": torch.equal(cuda_kernels.square(x), x * x),
    "matmul_ok": torch.allclose(cuda_kernels.matmul(a, b), a @ b, rtol=1e-12, atol=1e-12),
}))
"""


def run_jit(cache: str, **env: str) -> dict:
    full_env = dict(os.environ, CUDA_KERNELS_JIT="1", WITH_CUDA="0", CUDA_KERNELS_JIT_DIR=cache, **env)
    full_env["PYTHONPATH"] = os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    for var in ("DEBUG", "LINEINFO", "CUDA_KERNELS_DUMP_DIR"):
        full_env.pop(var, None)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=full_env, cwd=ROOT, capture_output=True, text=True, timeout=1200
    )
    assert proc.returncode == 0, f"JIT import failed:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cpu_library(build_dir: str) -> str:
    """The CPU library's folder in a JIT build folder (each library has its own)."""
    return os.path.join(build_dir, bc.CPU_LIBRARY)


def ninja_log(build_dir: str) -> list[str]:
    """The outputs ninja built, in order (one entry per command run; the log is only appended to)."""
    with open(os.path.join(build_dir, ".ninja_log")) as f:
        return [line.split("\t")[3] for line in f if not line.startswith("#")]


@pytest.fixture(scope="module")
def cold(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return run_jit(str(tmp_path_factory.mktemp("jit")))


@pytest.mark.slow
def test_cold_build_loads_the_jit_module(cold: dict) -> None:
    assert cold["load"]["cold"] is True
    info = cold["build_info"]
    assert info["mode"] == "jit"
    assert info["cuda"] is False and info["archs"] == [] and info["cuda_version"] is None and info["debug"] is False
    assert info["path"].startswith(cold["load"]["build_dir"])
    assert os.path.basename(info["path"]).startswith("cuda_kernels_jit_")
    assert not cold["installed_C_imported"], "JIT mode must not import the installed cuda_kernels._C"
    assert cold["square_ok"] and cold["matmul_ok"]
    # Linked against the C++ runtime torch loaded (bc.cxx_runtime_link_args), not a copy of its own.
    assert "libstdc++.so.6" in bc.elf_needed(info["path"]) and bc.cxx_runtime_problem(info["path"]) is None
    print(f"\nJIT cold CPU build + import: {cold['import_s']:.1f} s")


@pytest.mark.slow
def test_warm_load_does_not_recompile(cold: dict) -> None:
    build_dir = cold["load"]["build_dir"]
    before = ninja_log(cpu_library(build_dir))
    warm = run_jit(os.path.dirname(build_dir))
    assert ninja_log(cpu_library(build_dir)) == before, "a warm import ran the compiler"
    assert warm["load"]["cold"] is False and warm["build_info"]["mode"] == "jit"
    assert warm["load"]["cached"] is True, "nothing changed: the fingerprint must match and skip torch's load()"
    assert "torch.utils.cpp_extension" not in warm["modules"], "the warm path imported the build machinery"
    assert warm["load"]["seconds"] < cold["load"]["seconds"] / 4
    assert warm["square_ok"] and warm["matmul_ok"]
    print(f"\nJIT warm import: {warm['import_s']:.2f} s (build step {warm['load']['seconds']:.3f} s)")


@pytest.mark.slow
def test_a_stale_object_is_the_only_one_rebuilt(cold: dict) -> None:
    # What an edit of csrc/cpu/square.cpp does, without touching csrc/: the fingerprint no longer matches (so the
    # import goes through torch's load() and ninja) and square.o is older than its source.
    build_dir = cold["load"]["build_dir"]
    with open(os.path.join(build_dir, cold["load"]["name"] + ".fingerprint"), "w") as f:
        f.write("an edit\n")
    os.utime(os.path.join(cpu_library(build_dir), "square.o"), (0, 0))
    before = ninja_log(cpu_library(build_dir))
    again = run_jit(os.path.dirname(build_dir))
    rebuilt = ninja_log(cpu_library(build_dir))[len(before) :]
    assert sorted(rebuilt) == sorted(["square.o", again["load"]["name"] + ".so"])
    assert again["square_ok"] and again["matmul_ok"] and again["load"]["cached"] is False


def test_fingerprint_covers_every_file_under_csrc_and_the_flags(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """An edit anywhere under csrc/ (a header too) or another flag changes the fingerprint; nothing else does."""
    csrc = tmp_path / "csrc"
    shutil.copytree(bc.CSRC, csrc)
    monkeypatch.setattr(bc, "CSRC", str(csrc))
    monkeypatch.setenv("CUDA_KERNELS_JIT_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WITH_CUDA", "0")
    for var in ("DEBUG", "LINEINFO"):
        monkeypatch.delenv(var, raising=False)
    p = _jit.plan()
    base = _jit.fingerprint(p)
    assert _jit.fingerprint(p) == base  # deterministic
    header = csrc / "checks.h"
    original = header.read_text()
    header.write_text(original + "\n// an edit\n")
    assert _jit.fingerprint(p) != base
    header.write_text(original)
    os.utime(header, (0, 0))  # a touch without a change is no change
    assert _jit.fingerprint(p) == base
    (csrc / "cpu" / "new_op.cpp").write_text("// a new source\n")
    assert _jit.fingerprint(p) != base
    (csrc / "cpu" / "new_op.cpp").unlink()
    monkeypatch.setenv("DEBUG", "1")
    assert _jit.fingerprint(_jit.plan()) != base


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build a library with a static C++ runtime")
def test_a_cached_binary_with_its_own_cxx_runtime_is_linked_again(cold: dict, tmp_path) -> None:
    # What a JIT cache built by a compiler that linked libstdc++ statically holds: the loader must not import it.
    from test_build_config import tiny_library

    build_dir = cold["load"]["build_dir"]
    so_path = os.path.join(cpu_library(build_dir), cold["load"]["name"] + ".so")
    shutil.copy(tiny_library(str(tmp_path), "static", "-static-libstdc++"), so_path)
    assert bc.cxx_runtime_problem(so_path) is not None
    before = ninja_log(cpu_library(build_dir))
    again = run_jit(os.path.dirname(build_dir))
    assert ninja_log(cpu_library(build_dir))[len(before) :] == [cold["load"]["name"] + ".so"]  # linked again only
    assert bc.cxx_runtime_problem(so_path) is None
    assert again["square_ok"] and again["matmul_ok"]


def test_plan_expands_torch_arch_names(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    if bc.find_cuda_home() is None or torch.version.cuda is None:
        pytest.skip("needs a CUDA toolkit and a CUDA build of torch to plan a CUDA build")
    monkeypatch.setenv("CUDA_KERNELS_JIT_DIR", str(tmp_path))
    monkeypatch.setenv("WITH_CUDA", "1")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "Hopper")
    p = _jit.plan()
    assert p.build.arch_list == "9.0+PTX" and p.build.tag.endswith("-90_PTX")
    assert "-DCUDA_KERNELS_ARCHS=90_PTX" in p.build.nvcc_flags


def test_plan_follows_the_build_switches(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("CUDA_KERNELS_JIT_DIR", str(tmp_path))
    monkeypatch.setenv("WITH_CUDA", "0")
    monkeypatch.setenv("DEBUG", "1")
    p = _jit.plan()
    assert not p.build.with_cuda and p.build.arch_list is None
    assert p.build.tag.endswith("-cpu-debug") and "torch" in p.build.tag
    assert p.build_dir == os.path.join(str(tmp_path), f"{p.build.tag}-{_jit.checkout_key(bc.CSRC)}")
    assert "-O0" in p.build.cxx_flags and "-DCUDA_KERNELS_DEBUG=1" in p.build.cxx_flags
    monkeypatch.setenv("DEBUG", "0")
    release = _jit.plan()
    assert release.build_dir != p.build_dir and release.name != p.name  # both builds stay warm side by side


def test_plan_is_the_build_plan_of_setup_py(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    # The JIT loader plans nothing itself: its build is bc.build_plan()'s (tests/tools/test_build_config.py compares
    # that with what setup.py builds); only the cache folder and the module name are its own.
    made: list[bc.BuildPlan] = []
    real = bc.build_plan

    def spy(*args, **kwargs) -> bc.BuildPlan:
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(bc, "build_plan", spy)
    monkeypatch.setenv("CUDA_KERNELS_JIT_DIR", str(tmp_path))
    monkeypatch.setenv("WITH_CUDA", "0")
    p = _jit.plan()
    assert len(made) == 1 and p.build is made[0]
    assert p.build_dir.startswith(os.path.join(str(tmp_path), made[0].tag)) and p.name.startswith("cuda_kernels_jit_")


def test_each_checkout_builds_in_a_folder_of_its_own(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Every checkout of a user shares the JIT cache, not a build folder: its build.ninja names one checkout's
    sources by path, so two clones in one folder rebuilt over each other."""
    monkeypatch.setenv("CUDA_KERNELS_JIT_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WITH_CUDA", "0")
    here = _jit.plan()
    key = _jit.checkout_key(bc.CSRC)
    assert len(key) == 8 and here.build_dir == os.path.join(str(tmp_path / "cache"), f"{here.build.tag}-{key}")
    assert _jit.plan().build_dir == here.build_dir  # the same checkout keeps its folder (and its objects)
    clone = tmp_path / "clone" / "csrc"
    shutil.copytree(bc.CSRC, clone)
    monkeypatch.setattr(bc, "CSRC", str(clone))
    there = _jit.plan()
    assert there.build.tag == here.build.tag and there.build_dir != here.build_dir
    assert all(src.startswith(str(clone)) for src in there.build.sources)


@pytest.mark.parametrize(
    "switches, toolkit, error",
    [
        ({"WITH_CUDA": "1"}, None, "WITH_CUDA=1 but no CUDA toolkit"),
        ({"WITH_CUDA": "1", "COMPUTE_CAPABILITY": "nine"}, "/fake/cuda", "COMPUTE_CAPABILITY: cannot read 'nine'"),
    ],
)
def test_a_build_that_cannot_be_planned_is_an_import_error(
    switches: dict[str, str], toolkit: str | None, error: str, monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    # setup.py stops with "cuda_kernels: <why>"; the JIT loader raises the same line as an ImportError, before it
    # compiles anything or creates its cache folder.
    if toolkit and torch.version.cuda is None:
        pytest.skip("a CPU-only torch refuses WITH_CUDA=1 before the arch list is read")
    monkeypatch.setattr(_jit, "_MODULES", None)
    monkeypatch.setattr(bc, "find_cuda_home", lambda env=None: toolkit)
    monkeypatch.setenv("CUDA_KERNELS_JIT_DIR", str(tmp_path / "cache"))
    for var, value in switches.items():
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    with pytest.raises(ImportError, match=rf"^cuda_kernels \(JIT\): {error}"):
        _jit.load()
    assert not (tmp_path / "cache").exists()


def test_same_basename_sources_are_refused() -> None:
    _jit.check_object_names(["csrc/cpu/square.cpp", "csrc/cuda/square.cu"])  # square.o and square.cuda.o: fine
    with pytest.raises(ImportError, match="both compile to matmul.o"):
        _jit.check_object_names(["csrc/cpu/matmul.cpp", "csrc/extra/matmul.cpp"])


@pytest.mark.slow
def test_dev_loop_reports_where_time_went(cold: dict) -> None:
    """python -m cuda_kernels.dev OP: builds in JIT mode (nothing to do here: the cache is warm), runs that op's fast
    tests and ends with the summary line; an unknown op is a clear error."""
    # A CPU-only JIT build: on a GPU host the test session it starts must be told that is deliberate.
    env = dict(os.environ, WITH_CUDA="0", CUDA_KERNELS_JIT_DIR=os.path.dirname(cold["load"]["build_dir"]))
    env["CUDA_KERNELS_ALLOW_CPU_ONLY"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    for var in ("DEBUG", "LINEINFO", "CUDA_KERNELS_DUMP_DIR"):
        env.pop(var, None)
    cmd = [sys.executable, "-m", "cuda_kernels.dev", "square", "-k", "matches_torch and cpu"]
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("dev loop ") and "build " in last and "nothing changed" in last and "tests " in last, last
    bad = subprocess.run(
        [sys.executable, "-m", "cuda_kernels.dev", "no_such_op"], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert bad.returncode != 0 and "no tests/ops/test_no_such_op.py" in bad.stderr and "square" in bad.stderr
