#!/usr/bin/env python
"""Cross-checks benchmark.py's timing against triton.testing.do_bench on the same torch reference calls.

    python scripts/crosscheck_do_bench.py docs/results/h100_crosscheck.json    # needs a CUDA GPU and triton

Times torch.square (float32, 2^24 and 2^28 elements) and torch.mm (4096 x 4096 x 4096, float32 with TF32 off,
and bfloat16) three ways: with timing.time_fn as benchmark.py runs it (its L2 flush reads a buffer), with
timing.time_fn flushing the way do_bench does (zeroing a buffer, which leaves dirty lines for the timed call to
write back), and with triton.testing.do_bench(return_mode="median"). The check compares the second with the
third, so that it tests the timing method (events, warm-up, stop rule) and not the choice of flush; the first
column shows what the flush alone changes (docs/benchmarks.md, "L2 flush"). Prints the medians and the ratio and
writes them as JSON to the given path.

Exit codes: 0 all within --tolerance (default 5%), 1 some case differs by more, 2 no GPU or no triton.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any
from unittest import mock

import torch

from cuda_kernels.tools.bench import env, run, table, timing

# (op, dtype, shape): the torch reference of each case is timed, never our kernels.
CASES = [
    table.Case("square", torch.float32, (2**24,)),
    table.Case("square", torch.float32, (2**28,)),
    table.Case("matmul", torch.float32, (4096, 4096, 4096)),
    table.Case("matmul", torch.bfloat16, (4096, 4096, 4096)),
]


def crosscheck(tolerance: float) -> list[dict[str, Any]]:
    """One row per case: the harness's medians (ms) with its own and with do_bench's flush, do_bench's median, the
    ratio of the like-for-like pair (zeroing flush on both sides) and whether it is within tolerance."""
    from triton.testing import do_bench

    device = torch.device("cuda")
    flush = timing.make_flush_buffer(device)
    rows = []
    for case in CASES:
        inputs = run.make_inputs(case, device)
        fn = run.make_fn(case, table.Impl("torch"), inputs)
        harness_ms = timing.time_fn(fn, device, timing.CUDA_TIMING, flush).median_ms
        # timing.time_fn with do_bench's flush: zeroing the buffer instead of reading it.
        with mock.patch.object(timing, "flush_l2", lambda buffer: buffer.zero_()):
            harness_zeroing_ms = timing.time_fn(fn, device, timing.CUDA_TIMING, flush).median_ms
        do_bench_ms = do_bench(fn, return_mode="median")
        ratio = harness_zeroing_ms / do_bench_ms
        rows.append(
            {
                "op": case.op,
                "dtype": case.dtype_name,
                "shape": list(case.shape),
                "call": "torch.square" if case.op == "square" else "torch.mm",
                "harness_ms": harness_ms,
                "harness_zeroing_flush_ms": harness_zeroing_ms,
                "do_bench_ms": do_bench_ms,
                "ratio": ratio,
                "ok": abs(ratio - 1) <= tolerance,
            }
        )
        del inputs, fn
        torch.cuda.empty_cache()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="where to write the JSON")
    parser.add_argument("--tolerance", type=float, default=0.05, help="allowed |harness/do_bench - 1| (0.05)")
    args = parser.parse_args(argv)

    if not torch.cuda.is_available():
        print("crosscheck_do_bench: needs a CUDA device", file=sys.stderr)
        return 2
    try:
        import triton.testing  # noqa: F401
    except ImportError:
        print("crosscheck_do_bench: needs triton (pip install triton)", file=sys.stderr)
        return 2

    allow_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 torch.mm in true FP32, as in benchmark.py
    try:
        rows = crosscheck(args.tolerance)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32

    print(f"{'case':<34} {'harness ms':>11} {'zeroing ms':>11} {'do_bench ms':>12} {'zeroing / do_bench':>19}")
    for r in rows:
        name = f"{r['call']} {r['dtype']} {'x'.join(map(str, r['shape']))}"
        flag = "" if r["ok"] else f"  DIFFERS by more than {args.tolerance:.0%}"
        print(
            f"{name:<34} {r['harness_ms']:>11.4f} {r['harness_zeroing_flush_ms']:>11.4f} {r['do_bench_ms']:>12.4f}"
            f" {r['ratio']:>19.3f}{flag}"
        )

    import triton

    settings = {"tolerance": args.tolerance, "timing": asdict(timing.CUDA_TIMING), "triton": triton.__version__}
    environment = env.collect_env(torch.device("cuda"), settings)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"env": environment, "rows": rows}, indent=1) + "\n")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
