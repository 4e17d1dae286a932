"""The edit-compile-test loop: rebuild what changed in csrc/ (JIT), rerun one op's fast tests, say where time went.

    python -m cuda_kernels.dev square          # or: make dev OP=square
    python -m cuda_kernels.dev matmul -k bad   # extra arguments go to pytest
    python -m cuda_kernels.dev                 # every fast test (-m "not slow"), not one op's

Step 1 imports cuda_kernels with CUDA_KERNELS_JIT=1 in a child process: the JIT build (cuda_kernels/_jit.py)
recompiles only the sources whose content changed, or nothing (then it loads the cached module in milliseconds).
The files ninja compiled are listed with their compile times (the build folder's .ninja_log, read by the JIT). Step 2 runs
`pytest -m "not slow" tests/test_<op>.py` in JIT mode, which finds the module built in step 1. The summary line
splits the wall time into build, test collection and the tests; a slow loop shows which to cut.

The slow tier (torch.compile through inductor, large tensors, subprocess builds) is left out here; `make test`
and CI run everything.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from cuda_kernels import _build_config as bc

TESTS = os.path.join(bc.ROOT, "tests")
FAST = "not slow"


def op_tests(op: str | None) -> list[str]:
    """tests/test_<op>.py for one op (a clear error naming the ones there are), or the whole tests/ folder."""
    if op is None:
        return [TESTS]
    path = os.path.join(TESTS, f"test_{op}.py")
    if not os.path.exists(path):
        ops = sorted(f[5:-3] for f in os.listdir(TESTS) if f.startswith("test_") and f.endswith(".py"))
        raise SystemExit(f"cuda_kernels.dev: no tests/test_{op}.py; test files: {', '.join(ops)}")
    return [path]


def jit_env() -> dict[str, str]:
    env = dict(os.environ, CUDA_KERNELS_JIT="1")
    env["PYTHONPATH"] = os.pathsep.join([bc.ROOT, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def build(env: dict[str, str]) -> tuple[float, list[tuple[str, float]]]:
    """Imports cuda_kernels in JIT mode in a child process: (seconds, what ninja ran: [(output, seconds)])."""
    probe = "import json, cuda_kernels; from cuda_kernels import _jit; print(json.dumps(_jit.LAST_LOAD))"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", probe], env=env, cwd=bc.ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"cuda_kernels.dev: the JIT build failed after {seconds:.1f} s (compiler output above)")
    sys.stderr.write(proc.stderr)  # the JIT's own lines (a cold build says so)
    load = json.loads(proc.stdout.strip().splitlines()[-1])
    return seconds, [(str(out), float(sec)) for out, sec in load.get("compiled", [])]


def run_tests(paths: list[str], extra: list[str], env: dict[str, str]) -> tuple[int, float]:
    """pytest -m "not slow" on paths, its output shown; (exit code, seconds)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", FAST, "--durations=5", *paths, *extra]
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=bc.ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    return proc.returncode, seconds


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
    parser.add_argument("op", nargs="?", help="the op whose tests/test_<op>.py to run (default: every fast test)")
    parser.add_argument("--collect", action="store_true", help="also time pytest's collection (one more run)")
    args, extra = parser.parse_known_args(argv)
    paths = op_tests(args.op)
    env = jit_env()
    start = time.perf_counter()
    build_s, compiled = build(env)
    print(describe_build(build_s, compiled), flush=True)
    code, test_s = run_tests(paths, extra, env)
    total = time.perf_counter() - start
    summary = f"dev loop {total:.1f} s = {describe_build(build_s, compiled)}; tests {test_s:.1f} s"
    if args.collect:
        summary += f" (of which pytest start-up and collection {collect_seconds(paths, extra, env):.1f} s)"
    print(summary + ("" if code == 0 else f"; pytest exit code {code}"))
    return code


if __name__ == "__main__":
    sys.exit(main())
