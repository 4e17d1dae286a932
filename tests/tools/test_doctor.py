"""`python -m cuda_kernels.doctor`: its checks on made-up facts, and the command itself on this machine."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

from cuda_kernels.tools import doctor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize(
    "built, cc",
    [
        (["8.0"], (8, 0)),
        (["8.0"], (8, 6)),  # sm_80 SASS runs on every 8.x GPU
        (["8.0", "9.0a"], (9, 0)),  # the arch-specific 9.0a runs on exactly 9.0
        (["8.0+PTX"], (9, 0)),  # PTX is JIT-compiled for newer GPUs
        (["8.0", "12.0+PTX"], (12, 1)),  # sm_120 SASS runs on 12.1
        (["10.0f"], (10, 3)),  # family-specific: same major
        (["native"], (9, 0)),  # cannot tell from the name: the op calls will
        ([], (9, 0)),  # CPU-only build: another check covers it
    ],
)
def test_archs_that_run(built, cc) -> None:
    assert doctor.check_archs(built, cc) is None


@pytest.mark.parametrize(
    "built, cc",
    [
        (["8.0"], (9, 0)),  # SASS does not cross a major version
        (["8.0", "9.0a"], (10, 0)),
        (["9.0a"], (9, 1)),  # arch-specific: that GPU only
        (["9.0a+PTX"], (10, 0)),  # arch-specific PTX neither
        (["12.0+PTX"], (10, 0)),  # PTX only runs on newer GPUs
        (["8.6"], (8, 0)),  # nor on older minor versions
    ],
)
def test_archs_that_do_not_run_say_how_to_rebuild(built, cc) -> None:
    line = doctor.check_archs(built, cc, "GPU 0 (Test GPU)")
    want = f"COMPUTE_CAPABILITY={cc[0]}{cc[1]} pip install --no-build-isolation -e ."
    assert line is not None and "no kernel image" in line and want in line and "GPU 0 (Test GPU)" in line


def test_arch_coverage_names_sass_before_ptx() -> None:
    assert doctor.arch_coverage(["8.0+PTX", "9.0"], (9, 0)) == "sm_90 SASS"
    assert doctor.arch_coverage(["8.0+PTX"], (9, 0)).startswith("compute_80 PTX")
    assert doctor.Arch.parse("9.0a+PTX") == doctor.Arch(9, 0, "a", True)


def test_nvcc_major_mismatch() -> None:
    assert doctor.check_nvcc("13.0.88", "13.0") is None
    assert doctor.check_nvcc("12.8.93", "12.6") is None  # minor versions may differ
    line = doctor.check_nvcc("12.4.131", "13.0")
    assert line and "nvcc 12.4.131" in line and "13.0" in line and "major" in line
    assert doctor.check_nvcc(None, "13.0") is None and doctor.check_nvcc("13.0", None) is None


def test_driver_too_old() -> None:
    assert doctor.check_driver("13.0", "13.0") is None and doctor.check_driver("13.1", "12.8") is None
    line = doctor.check_driver("12.4", "13.0")
    assert line and "update the driver" in line


def test_torch_older_than_the_stable_abi_target() -> None:
    """The stable ABI runs the binary under its target torch and every later one: only an older torch is a problem."""
    assert doctor.check_torch_target("2.11", "2.11.0+cu130") is None
    assert doctor.check_torch_target("2.11", "2.15.0") is None
    line = doctor.check_torch_target("2.11", "2.10.1+cpu")
    assert line and "2.11" in line and "2.10.1+cpu" in line


def test_build_kind_against_the_machine() -> None:
    assert doctor.check_built_cuda(True, True, "13.0", "13.0", 1) is None
    assert doctor.check_built_cuda(False, False, None, "13.0", 0) is None  # CPU-only build, no GPU: fine
    assert "WITH_CUDA=1" in doctor.check_built_cuda(False, False, None, "13.0", 1)
    # A CUDA build under a CPU-only torch: its CUDA library is left unloaded, which is no problem.
    assert doctor.check_built_cuda(True, False, None, None, 0) is None
    assert "CUDA 12.8" in doctor.check_built_cuda(True, True, "12.8", "13.0", 1)


def test_import_errors_are_explained() -> None:
    err = ImportError("cuda_kernels: could not load")
    err.__cause__ = ImportError("/x/_C.so: undefined symbol: _ZN3c104cuda9SetDeviceEi")
    line = doctor.explain_import(err)
    assert "undefined symbol" in line and "rebuild" in line
    line = doctor.explain_import(ImportError("cuda_kernels (JIT): building csrc/ in /x failed:\nerror: ..."))
    assert line.startswith("cuda_kernels (JIT): building csrc/ in /x failed:")


def test_op_errors_are_explained() -> None:
    msg = "CUDA error: no kernel image is available for execution on the device"
    line = doctor.explain_op_error(msg, (9, 0), ["8.0"])
    assert "COMPUTE_CAPABILITY=90" in line and "8.0" in line
    msg = "Could not run 'cuda_kernels::square' with arguments from the 'CUDA' backend."
    assert "WITH_CUDA=1" in doctor.explain_op_error(msg)
    assert "driver" in doctor.explain_op_error("CUDA driver version is insufficient for CUDA runtime version")


def facts(**changes) -> doctor.Facts:
    base = dict(
        python="3.11",
        os="Linux",
        torch="2.14.1+cu130",
        torch_cuda="13.0",
        cudnn=None,
        gpus=[doctor.Gpu(0, "NVIDIA H100 80GB HBM3", (9, 0), 132, 79.1)],
        driver="580.65.06",
        driver_cuda="13.0",
        cuda_home="/usr/local/cuda",
        nvcc="13.0.88",
        build_info={
            "mode": "installed",
            "cuda": True,
            "archs": ["8.0", "9.0a"],
            "debug": False,
            "torch": "2.14.1",
            "torch_target": "2.11",
            "cuda_version": "13.0",
            "torch_runtime": "2.14.1+cu130",
            "path": "/x/_C.abi3.so",
            "cuda_path": "/x/_C_cuda.abi3.so",
        },
        load_error=None,
    )
    base.update(changes)
    return doctor.Facts(**base)


def test_static_problems_of_a_healthy_machine_are_none() -> None:
    assert doctor.static_problems(facts()) == []
    assert any("sm_90a SASS" in line for line in doctor.report(facts()))


def test_a_torch_compiled_from_source_in_every_process_is_reported() -> None:
    # Not a problem (nothing is wrong), but the reason a machine is seconds slower per process: said with the fix.
    assert not any(line.lstrip().startswith("bytecode") for line in doctor.report(facts()))
    slow = facts(pycache="/h/.cache/cuda_kernels/pycache")
    line = next(line for line in doctor.report(slow) if line.lstrip().startswith("bytecode"))
    assert "export PYTHONPYCACHEPREFIX=/h/.cache/cuda_kernels/pycache; unset PYTHONDONTWRITEBYTECODE" in line
    assert doctor.static_problems(slow) == []


def test_static_problems_collect_every_mismatch() -> None:
    f = facts(nvcc="12.4.131", gpus=[doctor.Gpu(0, "NVIDIA B200", (10, 0), 148, 178.0)])
    problems = doctor.static_problems(f)
    assert len(problems) == 2
    assert any("no kernel image" in p and "COMPUTE_CAPABILITY=100" in p for p in problems)
    assert any("nvcc 12.4.131" in p for p in problems)


def run_doctor(**env: str) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]), **env)
    return subprocess.run(
        [sys.executable, "-m", "cuda_kernels.doctor"], env=full, capture_output=True, text=True, timeout=600
    )


def test_doctor_runs_here() -> None:
    proc = run_doctor()
    out = proc.stdout
    for heading in ("python", "torch", "driver", "nvcc", "cuda_kernels  mode=", "op calls"):
        assert heading in out, out
    assert "ok    square on cpu" in out and "ok    matmul float32 variant=0 on cpu" in out
    assert "ok    matmul bfloat16 variant=0 on cpu" in out
    # 0 exactly when no problem is listed.
    assert (proc.returncode == 0) == ("no problems found" in out), out + proc.stderr


def test_doctor_reports_an_extension_that_does_not_load(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")  # the JIT cache cannot be created under a file: the import fails at once
    proc = run_doctor(CUDA_KERNELS_JIT="1", CUDA_KERNELS_JIT_DIR=str(blocker))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "NOT LOADED" in proc.stdout and "problems (1)" in proc.stdout
    assert "cannot create the build folder" in proc.stdout


@pytest.mark.parametrize(
    "archs, runs",
    [
        (["Hopper"], "sm_90 SASS"),  # what build_info() of a binary built with a name could hold
        (["8.0", "Ampere+PTX"], "compute_86 PTX"),
        (["what"], "cannot tell"),  # unreadable: no claim either way
    ],
)
def test_arch_names_never_break_the_doctor(archs, runs) -> None:
    f = facts(build_info=dict(facts().build_info, archs=archs))
    assert doctor.static_problems(f) == []
    assert any(f"runs: {runs}" in line for line in doctor.report(f)), doctor.report(f)


def test_a_named_arch_list_that_misses_the_gpu_is_reported() -> None:
    f = facts(build_info=dict(facts().build_info, archs=["Ampere+Tegra"]))  # 8.7, no PTX
    (problem,) = doctor.static_problems(f)
    assert "no kernel image" in problem and "COMPUTE_CAPABILITY=90" in problem


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the tiny libraries")
def test_a_binary_with_its_own_cxx_runtime_is_a_problem(tmp_path) -> None:
    from test_build_config import tiny_library

    static = tiny_library(str(tmp_path), "static", "-static-libstdc++")
    problems = doctor.static_problems(facts(binary=static))
    assert len(problems) == 1 and static in problems[0] and "static copy of the C++ runtime" in problems[0]
    assert "Fix: CC=" in problems[0]
    assert doctor.static_problems(facts(binary=tiny_library(str(tmp_path), "shared"))) == []
    # The loader refuses such a binary with the same line; the doctor lists it once, with the fix.
    err = ImportError(problems[0])
    f = facts(binary=static, build_info=None, load_error=err)
    assert doctor.static_problems(f) == problems


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build a library with a static C++ runtime")
def test_doctor_reports_an_installed_binary_with_its_own_cxx_runtime(tmp_path) -> None:
    # The package with a _C that links libstdc++ statically: the loader refuses it before loading it (so a tiny
    # library stands in for the extension), and the doctor says why, with the fix, once.
    from test_build_config import tiny_library

    # A copy of the package this test imported (a checkout's, or an installed wheel's, as in CI), without binaries.
    pkg = tmp_path / "pkg" / "cuda_kernels"
    imported = os.path.dirname(os.path.dirname(os.path.abspath(doctor.__file__)))
    shutil.copytree(imported, pkg, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    binary = pkg / ("_C" + sysconfig.get_config_var("EXT_SUFFIX"))
    shutil.copy(tiny_library(str(tmp_path), "static", "-static-libstdc++"), binary)
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "pkg"))
    env.pop("CUDA_KERNELS_JIT", None)
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_kernels.doctor"],
        cwd=tmp_path,  # -m puts the working folder first on sys.path: not the checkout's cuda_kernels
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "NOT LOADED" in proc.stdout and "problems (1)" in proc.stdout, proc.stdout
    assert f"{binary} carries its own static copy of the C++ runtime" in proc.stdout
    assert "Fix: CC=" in proc.stdout


def test_build_info_and_doctor_name_the_matmul_path() -> None:
    """build_info()["matmul"] and the doctor say what variant 0 runs per dtype on this GPU and why; on a GPU of
    compute capability 8.0 or newer bfloat16 takes a tensor-core step, float32 does only with TF32 allowed (and on
    Hopper: step 13)."""
    import torch

    import cuda_kernels

    info = cuda_kernels.build_info()
    if not (info["cuda"] and torch.cuda.is_available()):
        assert info["matmul"] == {}
        pytest.skip("needs a CUDA build and a GPU: without them build_info() names no matmul path")
    assert sorted(info["matmul"]) == ["bfloat16", "float16", "float32", "float32+tf32", "float64"]
    if not torch.backends.cuda.matmul.allow_tf32:
        assert info["matmul"]["float32"].startswith("06_async_pipeline: ")
    wgmma = cuda_kernels.ops.matmul_unmet_need(13, "float32+tf32", -1) == ""
    tf32_path = info["matmul"]["float32+tf32"]
    assert tf32_path.startswith("tf32_wgmma: " if wgmma else "06_async_pipeline: "), tf32_path
    assert "float32 (TF32 allowed)" in tf32_path, tf32_path
    lines = doctor.matmul_paths(torch.cuda.current_device())
    assert len(lines) == 5 and all(" (" in line for line in lines)
    if torch.cuda.get_device_capability() >= (8, 0):
        variant, name, reason = cuda_kernels.ops.matmul_default_kernel("bfloat16")
        assert variant >= 7 and info["matmul"]["bfloat16"] == f"{name}: {reason}"


def test_build_info_survives_a_gpu_that_cannot_be_queried(monkeypatch) -> None:
    """A driver too old for the CUDA runtime makes the matmul-path query raise: build_info() must still describe the
    binary (the session check and the doctor call it first), with no matmul path."""
    import cuda_kernels

    def fail(dtype, device: int = -1):
        raise RuntimeError("CUDA error: CUDA driver version is insufficient for CUDA runtime version")

    monkeypatch.setattr(cuda_kernels.ops, "matmul_default_kernel", fail)
    assert cuda_kernels._matmul_paths() == {}
