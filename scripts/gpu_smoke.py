"""Quick GPU sanity numbers for square: our kernel vs torch.square vs a device copy (events, L2 flushed, median).

Used during bring-up; the real harness is benchmark.py.
"""

import statistics

import torch

import cuda_kernels


def time_ms(fn, reps=50):
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    for _ in range(5):
        fn()
    times = []
    for _ in range(reps):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


for dtype in (torch.float32, torch.bfloat16):
    for p in (12, 16, 20, 24, 26, 28):
        n = 2**p
        x = torch.randn(n, device="cuda").to(dtype)
        y = torch.empty_like(x)
        nbytes = 2 * x.numel() * x.element_size()
        t_ours = time_ms(lambda x=x: cuda_kernels.square(x))
        t_torch = time_ms(lambda x=x: torch.square(x))
        t_copy = time_ms(lambda x=x, y=y: y.copy_(x))

        def gbps(t, nbytes=nbytes):
            return nbytes / t / 1e6

        print(
            f"{str(dtype):15s} 2^{p:<3d} ours {gbps(t_ours):7.0f} GB/s  torch {gbps(t_torch):7.0f}  "
            f"copy {gbps(t_copy):7.0f}  ours/copy {t_copy / t_ours:5.3f}  ours/torch {t_torch / t_ours:5.3f}"
        )
