"""What the debugging switches cost: wall-clock time per call of each op under a release build, CUDA_LAUNCH_BLOCKING=1,
a LINEINFO=1 build and a DEBUG=1 build (device code -G), in one run on one GPU.

    python scripts/debug_costs.py --json out/debug_costs.json          # all four configurations
    python scripts/debug_costs.py --configs release,launch_blocking     # a subset

Each configuration runs in its own process (CUDA_LAUNCH_BLOCKING is read when the CUDA context is created; the
DEBUG and LINEINFO builds are JIT builds, CUDA_KERNELS_JIT=1, cached beside the release one, so the installed
extension is not touched). Inputs and calls come from the benchmark's op table (cuda_kernels.bench); the timing is
not the harness's CUDA events on purpose: a case's time is wall clock per call over a loop of back-to-back calls
followed by one synchronize: what a training loop sees, host overhead included (CUDA events would hide the cost of
CUDA_LAUNCH_BLOCKING, which is the host waiting for every kernel). Median of several such loops.
The first JIT build of a configuration compiles every source (minutes for DEBUG=1); its time is reported too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CONFIGS: dict[str, dict[str, str]] = {
    "release": {},
    "launch_blocking": {"CUDA_LAUNCH_BLOCKING": "1"},
    "lineinfo": {"CUDA_KERNELS_JIT": "1", "LINEINFO": "1"},
    "debug": {"CUDA_KERNELS_JIT": "1", "DEBUG": "1"},
}

# (name, op, shape, dtype): a launch-bound call, a bandwidth-bound call, a small and a compute-bound matmul.
CASES = [
    ("square 2^10 fp32", "square", (2**10,), "float32"),
    ("square 2^24 fp32", "square", (2**24,), "float32"),
    ("matmul 256^3 fp32", "matmul", (256, 256, 256), "float32"),
    ("matmul 2048^3 fp32", "matmul", (2048, 2048, 2048), "float32"),
]
LOOP_S = 0.05  # each timed loop runs about this long (at least one call)
ROUNDS = 7  # timed loops per case; the median is reported
MAX_CASE_S = 20.0  # stop a case's rounds early past this (a DEBUG build is slow)


def measure() -> dict[str, object]:
    """Runs in the child process: imports the package (building it first under CUDA_KERNELS_JIT=1), times CASES."""
    t0 = time.perf_counter()
    import torch

    import cuda_kernels

    load_s = time.perf_counter() - t0
    info = cuda_kernels.build_info()
    results = {}
    from cuda_kernels.tools.bench.run import make_fn, make_inputs
    from cuda_kernels.tools.bench.table import Case, Impl

    for name, op, shape, dtype in CASES:
        case = Case(op, getattr(torch, dtype), shape)
        call = make_fn(case, Impl("ours"), make_inputs(case, "cuda"))  # the benchmark table's inputs and call
        call()
        torch.cuda.synchronize()
        # Calls per loop: from one timed call, so that a loop lasts about LOOP_S.
        t = time.perf_counter()
        call()
        torch.cuda.synchronize()
        reps = max(1, int(LOOP_S / max(time.perf_counter() - t, 1e-7)))
        samples: list[float] = []
        start = time.perf_counter()
        while len(samples) < ROUNDS and (not samples or time.perf_counter() - start < MAX_CASE_S):
            t = time.perf_counter()
            for _ in range(reps):
                call()
            torch.cuda.synchronize()
            samples.append((time.perf_counter() - t) / reps)
        results[name] = {"us_per_call": statistics.median(samples) * 1e6, "reps": reps, "rounds": len(samples)}
    return {"load_s": load_s, "build_info": {k: str(v) for k, v in info.items()}, "cases": results}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, of: {', '.join(CONFIGS)}")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure()))
        return 0

    names = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in names if c not in CONFIGS]
    if unknown:
        parser.error(f"unknown configuration(s) {unknown}; choose from {list(CONFIGS)}")
    out: dict[str, object] = {}
    for name in names:
        env = {k: v for k, v in os.environ.items() if k not in ("CUDA_KERNELS_JIT", "DEBUG", "LINEINFO")}
        env.update(CONFIGS[name])
        proc = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"{name}: failed (exit {proc.returncode})\n{proc.stderr[-3000:]}", file=sys.stderr)
            return 1
        out[name] = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"{name}: import (and JIT build) {out[name]['load_s']:.1f} s", flush=True)

    base = out.get("release")
    header = f"{'case':<20}" + "".join(f"{n:>24}" for n in names)
    print(header)
    for case, *_ in CASES:
        row = f"{case:<20}"
        for name in names:
            us = out[name]["cases"][case]["us_per_call"]
            ratio = f" ({us / base['cases'][case]['us_per_call']:.2f}x)" if base else ""
            row += f"{us:>14.1f} us{ratio:>8}"
        print(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
