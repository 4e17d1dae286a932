#!/usr/bin/env python
"""cuda_kernels.square against torch.square on the CPU: interleaved A/B timing, robust to a noisy shared machine.

    python scripts/cpu_square_bench.py                        # 2^20..2^24, all 4 dtypes
    python scripts/cpu_square_bench.py --dtypes bfloat16 --log2 20 --rounds 60
    ATEN_CPU_CAPABILITY=avx2 python scripts/cpu_square_bench.py   # both sides dispatch AVX2 kernels

Two modes (--modes), each a separate table:
  api     as users call them: cuda_kernels.square goes through its Python autograd registration
          (torch.library.register_autograd in cuda_kernels/ops.py) on every call, torch.square through C++.
  kernel  both inside torch.inference_mode(), which skips the autograd layer of both: the C++ kernels compared.
The difference between the two is a per-call cost outside the kernel (a few microseconds of Python, plus the
cache lines and garbage-collector passes it brings), which matters only while one call is short.

Method. Both sides allocate their output on every call (the same CPU allocator, so the same page-fault pattern),
both run on torch.get_num_threads() threads. One *sample* times `reps` back-to-back calls (reps chosen so a sample
lasts about --sample-ms) and keeps the median per call (cuda_kernels.bench.timing.time_fn). A *round* takes one sample of ours and one of torch's, in
alternating order (AB, BA, AB, ...) so that slow drift of the machine hits both sides alike; the round's ratio is
t_torch / t_ours (> 1: ours is faster). Reported per case: the median ratio over rounds and its spread (25th-75th
percentile), and each side's median time per call with the effective bandwidth (bytes read + written).
Before timing, the outputs are compared exactly (rtol=0, atol=0) with torch.square.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics

import torch

import cuda_kernels
from cuda_kernels.tools.bench import timing

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16, "bfloat16": torch.bfloat16}


def time_per_call(fn, x: torch.Tensor, reps: int) -> float:
    """Median seconds per call over `reps` back-to-back calls (the harness's CPU timing), each allocating its
    own output."""
    config = timing.TimingConfig(warmup_ms=0.0, min_reps=reps, max_reps=reps, max_time_s=math.inf, ci_rel_tol=None)
    return timing.time_fn(lambda: fn(x), "cpu", config).median_ms * 1e-3


def bench_case(dtype: torch.dtype, numel: int, rounds: int, sample_ms: float, mode: str) -> dict:
    with torch.inference_mode() if mode == "kernel" else contextlib.nullcontext():
        return _bench_case(dtype, numel, rounds, sample_ms, mode)


def _bench_case(dtype: torch.dtype, numel: int, rounds: int, sample_ms: float, mode: str) -> dict:
    x = torch.randn(numel, dtype=dtype)
    torch.testing.assert_close(cuda_kernels.square(x), torch.square(x), rtol=0, atol=0, equal_nan=True)
    ours, ref = cuda_kernels.square, torch.square
    # Warm up both (allocator, thread pool, caches), then size a sample to about sample_ms.
    for _ in range(5):
        ours(x), ref(x)
    one = max(time_per_call(ref, x, 3), 1e-7)
    reps = max(1, int(sample_ms * 1e-3 / one))
    t_ours, t_ref, ratios = [], [], []
    for r in range(rounds):
        if r % 2 == 0:
            a = time_per_call(ours, x, reps)
            b = time_per_call(ref, x, reps)
        else:
            b = time_per_call(ref, x, reps)
            a = time_per_call(ours, x, reps)
        t_ours.append(a)
        t_ref.append(b)
        ratios.append(b / a)
    bytes_moved = 2 * numel * x.element_size()  # one read and one write per element
    med_ours, med_ref = statistics.median(t_ours), statistics.median(t_ref)
    return {
        "mode": mode,
        "dtype": str(dtype).removeprefix("torch."),
        "log2": numel.bit_length() - 1,
        "ratio_median": statistics.median(ratios),
        "ratio_p25": timing.quantile(ratios, 0.25),
        "ratio_p75": timing.quantile(ratios, 0.75),
        "ours_us": med_ours * 1e6,
        "torch_us": med_ref * 1e6,
        "ours_gbs": bytes_moved / med_ours / 1e9,
        "torch_gbs": bytes_moved / med_ref / 1e9,
        "reps": reps,
        "rounds": rounds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=list(DTYPES))
    parser.add_argument("--log2", nargs="+", type=int, default=[20, 21, 22, 23, 24], help="sizes as powers of 2")
    parser.add_argument("--modes", nargs="+", default=["api", "kernel"], choices=["api", "kernel"])
    parser.add_argument("--rounds", type=int, default=30, help="A/B rounds per case")
    parser.add_argument("--sample-ms", type=float, default=20.0, help="target length of one timed sample")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
        f"torch CPU capability {torch.backends.cpu.get_cpu_capability()}, "
        f"cuda_kernels from {cuda_kernels.__file__}"
    )
    capability = getattr(cuda_kernels._C, "_cpu_capability", None)
    print(f"cuda_kernels CPU kernels: {capability() if capability else '(no _cpu_capability in this build)'}")
    results = []
    for mode in args.modes:
        print(f"\n[{mode}] ours/torch > 1: ours faster. Median over {args.rounds} A/B rounds, p25-p75 spread.")
        print(
            f"{'dtype':>9} {'n':>5} {'ours/torch':>10} {'p25-p75':>11} {'ours us':>9} {'torch us':>9} {'GB/s o/t':>11}"
        )
        for name in args.dtypes:
            for log2 in args.log2:
                res = bench_case(DTYPES[name], 1 << log2, args.rounds, args.sample_ms, mode)
                results.append(res)
                print(
                    f"{name:>9} {'2^' + str(log2):>5} {res['ratio_median']:>9.2f}x "
                    f"{res['ratio_p25']:>5.2f}-{res['ratio_p75']:<5.2f} {res['ours_us']:>9.1f} {res['torch_us']:>9.1f} "
                    f"{res['ours_gbs']:>5.1f}/{res['torch_gbs']:<5.1f}",
                    flush=True,
                )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
