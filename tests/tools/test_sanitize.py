"""compute-sanitizer catches a planted out-of-bounds write (GPU), and scripts/sanitize.sh reports and fails right.

The planted kernel (tests/planted/oob.cu) exists only for this file: it is not in csrc/, setup.py or the ops.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap

import pytest
import torch

from cuda_kernels.tools.replay import find_compute_sanitizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOADER = os.path.join(ROOT, "tests", "planted", "oob_loader.py")
SCRIPT = os.path.join(ROOT, "scripts", "sanitize.sh")
SANITIZER = find_compute_sanitizer()


def needs_gpu_and_sanitizer(test):
    test = pytest.mark.gpu(test)
    test = pytest.mark.skipif(SANITIZER is None, reason="compute-sanitizer not found (PATH or $CUDA_HOME/bin)")(test)
    return pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible")(test)


@pytest.fixture(scope="module")
def planted_lib(tmp_path_factory: pytest.TempPathFactory) -> str:
    build_dir = str(tmp_path_factory.mktemp("planted"))
    proc = subprocess.run(
        [sys.executable, LOADER, "build", build_dir], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert proc.returncode == 0, f"building the planted kernel failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout.strip().splitlines()[-1]


def memcheck(lib: str, *flags: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTORCH_NO_CUDA_MEMORY_CACHING="1")
    cmd = [SANITIZER, "--tool", "memcheck", "--error-exitcode", "99", sys.executable, LOADER, "run", lib, *flags]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)


@needs_gpu_and_sanitizer
def test_memcheck_catches_the_planted_out_of_bounds_write(planted_lib: str) -> None:
    proc = memcheck(planted_lib, "--bug")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "Invalid __global__ write of size 4 bytes" in out, out
    assert "planted_oob_kernel" in out, out


@needs_gpu_and_sanitizer
def test_the_same_kernel_without_the_bug_is_clean(planted_lib: str) -> None:
    proc = memcheck(planted_lib)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "ERROR SUMMARY: 0 errors" in out and "values correct" in out, out


# scripts/sanitize.sh, with a stand-in compute-sanitizer: runs on any machine.

FAKE_SANITIZER = """#!/usr/bin/env bash
echo "$@" >> "$FAKE_ARGS_LOG"
args=("$@")
while [ $# -gt 0 ] && [ "$1" != "$FAKE_PYTHON" ]; do shift; done   # drop the sanitizer's own options
"$@"
rc=$?
if [ "${args[1]}" = racecheck ]; then   # racecheck's own summary format
  echo "========= RACECHECK SUMMARY: ${FAKE_ERRORS} hazards displayed (${FAKE_ERRORS} errors, 0 warnings)"
else
  echo "========= ERROR SUMMARY: ${FAKE_ERRORS} errors"
fi
if [ "$FAKE_ERRORS" -gt 0 ]; then exit 99; fi
exit $rc
"""

TINY_TEST = """
import os
import pytest

@pytest.mark.gpu
def test_runs_with_the_sanitize_environment():
    assert os.environ["PYTORCH_NO_CUDA_MEMORY_CACHING"] == "1"
    assert os.environ["CUDA_KERNELS_SANITIZE"] in ("memcheck", "racecheck")

def test_not_a_gpu_test_so_not_selected():
    raise AssertionError("sanitize.sh must select only the gpu-marked tests")
"""


def run_script(tmp_path, errors: int, **env: str) -> subprocess.CompletedProcess:
    fake = tmp_path / "compute-sanitizer"
    fake.write_text(FAKE_SANITIZER)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    tiny = tmp_path / "test_tiny.py"
    tiny.write_text(textwrap.dedent(TINY_TEST))
    full_env = dict(
        os.environ,
        COMPUTE_SANITIZER=str(fake),
        FAKE_PYTHON=sys.executable,
        FAKE_ERRORS=str(errors),
        FAKE_ARGS_LOG=str(tmp_path / "args.log"),
        PYTHON=sys.executable,
        SANITIZE_GPU_CHECK="0",
        SANITIZE_TOOLS="memcheck racecheck",
        SANITIZE_TESTS=str(tiny),
        SANITIZE_LOG_DIR=str(tmp_path / "logs"),
        # The tiny test needs no plugin; loading them (hypothesis, xdist) was most of each of its pytest runs.
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
        **env,
    )
    return subprocess.run(["bash", SCRIPT], env=full_env, capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_sanitize_script_passes_when_every_tool_is_clean(tmp_path) -> None:
    proc = run_script(tmp_path, errors=0)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("sanitize: ")]
    assert any(line.startswith("sanitize: memcheck  ok   0 errors, exit 0") for line in lines), proc.stdout
    assert any(line.startswith("sanitize: racecheck ok   0 errors, exit 0") for line in lines), proc.stdout
    assert "1 passed, 1 deselected" in proc.stdout
    assert lines[-1] == "sanitize: clean"
    calls = (tmp_path / "args.log").read_text().splitlines()
    assert len(calls) == 2
    assert calls[0].startswith("--tool memcheck --error-exitcode 99 --target-processes all")
    assert "-m gpu and not slow" in calls[0] and "--ignore=tests/tools/test_sanitize.py" in calls[0]
    # By default only the project's kernels are checked (not torch's or cuBLAS's).
    assert all("--kernel-name regex=square_kernel|matmul_kernel" in call for call in calls), calls


def test_sanitize_script_can_check_every_kernel(tmp_path) -> None:
    proc = run_script(tmp_path, errors=0, SANITIZE_KERNEL="all")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = (tmp_path / "args.log").read_text().splitlines()
    assert calls and not any("--kernel-name" in call for call in calls), calls


def run_cases_under(tool: str, *cases: str) -> str:
    """Runs test cases (of different files) in one pytest process with CUDA_KERNELS_SANITIZE=tool; returns its output:
    a line "<case> PASSED" or "<case> SKIPPED" per case, and "SKIPPED [1] <file>:<line>: <reason>" per skip."""
    # No plugins (hypothesis's, xdist): these cases need none, and loading them was half of each run.
    env = dict(os.environ, CUDA_KERNELS_SANITIZE=tool, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    cmd = [sys.executable, "-m", "pytest", "-v", "-rs", "-p", "no:cacheprovider", *cases]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def assert_outcome(out: str, case: str, skip_reason: str | None) -> None:
    """case skipped with skip_reason in the output of run_cases_under, or passed if skip_reason is None."""
    (line,) = [line for line in out.splitlines() if line.startswith(case + " ")]
    if skip_reason is not None:
        file = case.split("::")[0]
        reasons = [r for r in out.splitlines() if r.startswith(f"SKIPPED [1] {file}:")]
        assert " SKIPPED" in line and len(reasons) == 1 and skip_reason in reasons[0], out
    else:
        assert " PASSED" in line, out


HEAVY_CASE = "tests/ops/test_matmul.py::test_matmul_matches_reference[999x999x999-torch.float32-cpu]"


def test_the_heavy_cases_carry_the_mark() -> None:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", "-m", "heavy"]
    cmd += ["tests/ops/test_matmul.py", "tests/ops/test_matmul_ladder.py"]
    collected = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert HEAVY_CASE in collected.stdout, collected.stdout


API_ERROR_CASE = "tests/ops/test_bad_input.py::test_bad_input[sq-output-alloc-fails-cpu]"


@pytest.mark.parametrize("tool", ["racecheck", "synccheck", "memcheck", ""])
def test_heavy_and_api_error_cases_skip_under_sanitizer_tools(tool: str) -> None:
    """tests/conftest.py skips `heavy` tests when CUDA_KERNELS_SANITIZE names racecheck/initcheck/synccheck (too slow
    there; memcheck runs them), and rows that fail a CUDA allocation on purpose (`api_error`) under any tool (each
    one reports the failure). Both cases in one pytest process per tool."""
    out = run_cases_under(tool, HEAVY_CASE, API_ERROR_CASE)
    heavy_skips = tool in ("racecheck", "synccheck")
    assert_outcome(out, HEAVY_CASE, f"too slow under compute-sanitizer {tool}" if heavy_skips else None)
    assert_outcome(out, API_ERROR_CASE, "fails a CUDA API call on purpose" if tool else None)


def test_sanitize_script_fails_and_counts_errors(tmp_path) -> None:
    proc = run_script(tmp_path, errors=3)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "sanitize: memcheck  FAIL 3 errors, exit 99" in proc.stdout
    assert "sanitize: racecheck FAIL 3 errors, exit 99" in proc.stdout
    assert "sanitize: FAILED" in proc.stdout


def test_sanitize_script_fails_when_a_test_fails(tmp_path) -> None:
    proc = run_script(tmp_path, errors=0, SANITIZE_MARK="not gpu")  # selects the failing test
    assert proc.returncode == 1 and "FAIL 0 errors, exit 1" in proc.stdout, proc.stdout


def test_sanitize_script_skips_without_a_gpu(tmp_path) -> None:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", COMPUTE_SANITIZER="/bin/true", PYTHON=sys.executable)
    proc = subprocess.run(["bash", SCRIPT], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0 and "SKIPPED: no CUDA device is visible" in proc.stdout, proc.stdout
    env["SANITIZE_REQUIRE"] = "1"
    proc = subprocess.run(["bash", SCRIPT], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 1 and "SKIPPED" in proc.stdout
