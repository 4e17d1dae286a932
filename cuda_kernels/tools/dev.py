"""The edit-compile-test loop: rebuild what changed in csrc/ (JIT), rerun one op's fast tests, say where time went.

    python -m cuda_kernels.dev square          # or: make dev OP=square
    python -m cuda_kernels.dev matmul -k bad   # extra arguments go to pytest
    python -m cuda_kernels.dev                 # every fast test (-m "not slow"), not one op's

One process does it all, so torch is imported once: it loads cuda_kernels with CUDA_KERNELS_JIT=1 (the JIT build,
cuda_kernels/tools/jit.py, recompiles only the sources whose content changed, or nothing: then it loads the cached
module in milliseconds), then runs `pytest -m "not slow" tests/ops/test_<op>.py` in the same interpreter. While the
compiler runs, a background thread imports what torch.library.opcheck loads on its first call (torch's dynamo,
inductor and functorch: seconds), which the tests would otherwise wait for. The files ninja compiled are listed with
their compile times (the build folder's .ninja_log, read by the JIT); the summary line splits the wall time into
build and tests, so a slow loop shows which to cut.

The slow tier (torch.compile through inductor, large tensors, subprocess builds) is left out here; `make test`
and CI run everything.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from cuda_kernels.tools import build_config as bc

TESTS = os.path.join(bc.ROOT, "tests")
OP_TESTS = os.path.join(TESTS, "ops")
FAST = "not slow"


def seconds_since_start() -> float | None:
    """Wall-clock seconds since this process started (Linux: /proc), None where that cannot be read."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime, in clock ticks
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def op_tests(op: str | None) -> list[str]:
    """tests/ops/test_<op>.py for one op (a clear error naming the ones there are), or the whole tests/ folder."""
    if op is None:
        return [TESTS]
    path = os.path.join(OP_TESTS, f"test_{op}.py")
    if not os.path.exists(path):
        ops = sorted(f[5:-3] for f in os.listdir(OP_TESTS) if f.startswith("test_") and f.endswith(".py"))
        raise SystemExit(f"cuda_kernels.dev: no tests/ops/test_{op}.py; test files: {', '.join(ops)}")
    return [path]


def jit_env() -> dict[str, str]:
    env = dict(os.environ, CUDA_KERNELS_JIT="1")
    env["PYTHONPATH"] = os.pathsep.join([bc.ROOT, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def build() -> tuple[float, list[tuple[str, float]]]:
    """The JIT build that importing cuda_kernels ran in this process: (seconds, what ninja ran: [(output, seconds)])."""
    import cuda_kernels
    from cuda_kernels.tools import jit

    if cuda_kernels._LOAD_ERROR is not None:
        sys.stderr.write(f"{cuda_kernels._LOAD_ERROR}\n")
        raise SystemExit("cuda_kernels.dev: the JIT build failed (compiler output above)")
    if cuda_kernels._MODE != "jit":
        raise SystemExit("cuda_kernels.dev: run it as `python -m cuda_kernels.dev OP` (or make dev OP=...)")
    load = jit.LAST_LOAD
    return float(load.get("seconds", 0.0)), [(str(out), float(sec)) for out, sec in load.get("compiled", [])]


def run_tests(paths: list[str], extra: list[str]) -> tuple[int, float]:
    """pytest -m "not slow" on paths in this process, its output shown; (exit code, seconds)."""
    import pytest

    start = time.perf_counter()
    code = pytest.main(["-q", "-m", FAST, "--durations=5", *paths, *extra])
    return int(code), time.perf_counter() - start


def collect_seconds(paths: list[str], extra: list[str], env: dict[str, str]) -> float:
    """How long pytest takes to import the tests and collect them (a collect-only run)."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--collect-only", "-m", FAST, *paths, *extra],
        env=env,
        cwd=bc.ROOT,
        capture_output=True,
    )
    return time.perf_counter() - start


def describe_build(seconds: float, compiled: list[tuple[str, float]]) -> str:
    """'build 12.3 s: compiled square.cuda.o 11.8 s, cuda_kernels_jit_....so 0.4 s' or '... nothing changed'."""
    if not compiled:
        return f"build {seconds:.1f} s: nothing changed (cached module)"
    parts = [f"{output} {sec:.1f} s" for output, sec in compiled]
    return f"build {seconds:.1f} s: compiled " + ", ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cuda_kernels.dev",
        description="Rebuild what changed (JIT) and rerun one op's fast tests, with where the time went.",
    )
    parser.add_argument("op", nargs="?", help="the op whose tests/ops/test_<op>.py to run (default: every fast test)")
    parser.add_argument("--collect", action="store_true", help="also time pytest's collection (one more run)")
    args, extra = parser.parse_known_args(argv)
    paths = op_tests(args.op)
    os.chdir(bc.ROOT)
    os.environ["CUDA_KERNELS_JIT"] = "1"  # processes the tests start load the same JIT build
    import cuda_kernels

    startup_s = seconds_since_start()  # the interpreter, torch and the build (the package's import ran it)
    build_s, compiled = build()
    print(describe_build(build_s, compiled), flush=True)
    start = time.perf_counter()
    cuda_kernels._PREFETCH.join()
    wait_s = time.perf_counter() - start
    code, test_s = run_tests(paths, extra)
    parts = [describe_build(build_s, compiled), f"opcheck's imports {wait_s:.1f} s more", f"tests {test_s:.1f} s"]
    if startup_s is None:
        summary = "dev loop: " + "; ".join(parts)
    else:
        total = startup_s + wait_s + test_s
        parts.insert(0, f"python and torch start-up {max(startup_s - build_s, 0.0):.1f} s")
        summary = f"dev loop {total:.1f} s = " + "; ".join(parts)
    if args.collect:
        summary += f" (pytest's start-up and collection, alone: {collect_seconds(paths, extra, jit_env()):.1f} s)"
    print(summary + ("" if code == 0 else f"; pytest exit code {code}"))
    return code


if __name__ == "__main__":
    sys.exit(main())
