#!/usr/bin/env python
"""Measures what the benchmark's L2 flush costs the call it precedes, for three ways of flushing.

    python scripts/l2_flush_check.py     # needs a CUDA GPU and the extension installed

Times skinny matmuls (torch.mm and cuda_kernels.matmul; bfloat16 and float32; 1 x 4096 x 4096, 16 x 4096 x 4096,
4096 x 1 x 4096) and device-to-device copies of 32 MB, 64 MB and 1 GB, each call preceded by one of: zeroing a
buffer of twice the L2 size (what triton.testing.do_bench does, and benchmark.py did before), zeroing it and then
reading another one, or only reading one (what cuda_kernels.bench.timing.flush_l2 does). Prints the median of 300
calls (CUDA events around the call only) and bytes moved / time. docs/benchmarks.md quotes what it measured.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

import torch

import cuda_kernels
from cuda_kernels.tools.bench import timing


def median_us(fn: Callable[[], object], flush: Callable[[], object], reps: int = 300) -> float:
    """Median GPU time of fn() in microseconds, flush() enqueued before every call, outside the events."""
    for _ in range(10):
        flush()
        fn()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for start, end in events:
        flush()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) * 1e3 for start, end in events)


def main() -> None:
    dev = "cuda"
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    zero_buf = torch.empty(2 * l2, dtype=torch.int8, device=dev)
    read_buf = timing.make_flush_buffer(dev)
    flushes = {
        "zero": zero_buf.zero_,
        "zero+read": lambda: (zero_buf.zero_(), timing.flush_l2(read_buf)),
        "read": lambda: timing.flush_l2(read_buf),
    }
    cases: list[tuple[str, Callable[[], object], int]] = []
    for dtype in (torch.bfloat16, torch.float32):
        for m, n in ((1, 4096), (16, 4096), (4096, 1)):
            k = 4096
            a = torch.randn(m, k, device=dev, dtype=dtype)
            b = torch.randn(k, n, device=dev, dtype=dtype)
            nbytes = (a.numel() + b.numel() + m * n) * a.element_size()
            cases.append((f"{dtype} {m}x{n}x{k} torch", lambda a=a, b=b: torch.mm(a, b), nbytes))
            cases.append((f"{dtype} {m}x{n}x{k} ours", lambda a=a, b=b: cuda_kernels.matmul(a, b), nbytes))
    for mb in (32, 64, 1024):
        src = torch.empty(mb << 20, dtype=torch.int8, device=dev)
        dst = torch.empty_like(src)
        cases.append((f"copy {mb} MB", lambda s=src, d=dst: d.copy_(s), 2 * src.numel()))
    print(f"{torch.cuda.get_device_name()}, L2 {l2 >> 20} MB; GB/s = bytes moved / median time", flush=True)
    for name, fn, nbytes in cases:
        cols = [
            f"{fname} {(t := median_us(fn, fl)):7.1f} us {nbytes / t / 1e3:6.0f} GB/s" for fname, fl in flushes.items()
        ]
        print(f"{name:28s} " + " | ".join(cols), flush=True)


if __name__ == "__main__":
    main()
