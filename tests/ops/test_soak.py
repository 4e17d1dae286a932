"""Soak: many calls at varying sizes leave no memory behind.

GPU (slow): 10^4 calls of each op (matmul cycling through every ladder step, inputs of changing shapes and
layouts) and 10^3 failing calls; torch.cuda.memory_allocated() must end exactly where it started, and the peak must
stay within one call's footprint. CPU (CI): 2000 calls of each op; no output is kept alive (weak references die)
and the process's resident memory does not grow by more than a few MiB.
"""

from __future__ import annotations

import gc
import os
import weakref

import pytest
import torch
from conftest import DTYPES, rand, requires_cuda

import cuda_kernels
from cuda_kernels.ops import matmul_cuda_variants

MiB = 2**20


def square_sizes(count: int, max_numel: int, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, max_numel + 1, (count,), generator=g).tolist()


def matmul_shapes(count: int, max_dim: int, seed: int) -> list[tuple[int, int, int]]:
    g = torch.Generator().manual_seed(seed)
    return [tuple(v) for v in torch.randint(0, max_dim + 1, (count, 3), generator=g).tolist()]


def soak(device: str, calls: int, max_numel: int, max_dim: int, variants: dict, on_each=None) -> None:
    """`calls` calls of each op. Inputs are views of buffers allocated up front (the loop itself allocates only
    the ops' outputs); sizes, offsets (alignment), transposes, dtypes and matmul variants vary per call."""
    bufs = {dt: rand(max_numel + 8, dtype=dt, device=device) for dt in DTYPES}
    mats = {dt: rand(max_dim + 1, max_dim + 1, dtype=dt, device=device, seed=1) for dt in DTYPES}
    for i, n in enumerate(square_sizes(calls, max_numel, seed=0)):
        x = bufs[DTYPES[i % 4]][i % 8 : i % 8 + n]
        if i % 3 == 0 and n >= 6:
            x = x[: n - n % 6].view(-1, 6).t()  # non-contiguous
        out = cuda_kernels.square(x)
        if on_each is not None:
            on_each(out)
        del out
    for i, (m, k, n) in enumerate(matmul_shapes(calls, max_dim, seed=1)):
        base = mats[DTYPES[i % 4]]
        a = base[i % 2 : i % 2 + m, :k]
        b = base[:k, :n] if i % 5 else base[:n, :k].t()
        dtype_variants = variants[base.dtype]  # the steps that take this dtype
        out = cuda_kernels.matmul(a, b, variant=dtype_variants[i % len(dtype_variants)])
        if on_each is not None:
            on_each(out)
        del out


def failing_calls(device: str, calls: int) -> None:
    for i in range(calls):
        with pytest.raises(RuntimeError, match="cuda_kernels"):
            if i % 2:
                cuda_kernels.square(torch.ones(64, dtype=torch.int32, device=device))
            else:
                cuda_kernels.matmul(torch.ones(8, 4, device=device), torch.ones(5, 8, device=device))


def rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads resident memory from /proc (Linux)")
def test_soak_cpu_outputs_not_retained() -> None:
    refs: list[weakref.ref] = []
    soak(
        "cpu", 300, 1 << 14, 48, dict.fromkeys(DTYPES, [0])
    )  # warm-up: allocator pools, thread pool, dispatcher caches
    failing_calls("cpu", 200)
    gc.collect()
    before = rss_bytes()
    soak("cpu", 2000, 1 << 16, 96, dict.fromkeys(DTYPES, [0]), on_each=lambda out: refs.append(weakref.ref(out)))
    failing_calls("cpu", 500)
    gc.collect()
    grown = rss_bytes() - before
    alive = sum(r() is not None for r in refs)
    assert alive == 0, f"{alive} of {len(refs)} outputs are still referenced after the loop"
    # 2000 leaked square outputs alone would be ~250 MiB; allow allocator noise only.
    assert grown < 48 * MiB, f"resident memory grew by {grown / MiB:.1f} MiB over 4000 calls"


@pytest.mark.slow
@pytest.mark.gpu
@requires_cuda
def test_soak_cuda_memory_flat() -> None:
    variants = {dtype: [0] + matmul_cuda_variants(dtype) for dtype in DTYPES}
    soak("cuda", 200, 1 << 20, 256, variants)  # warm-up
    failing_calls("cuda", 100)
    torch.cuda.synchronize()
    start = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    soak("cuda", 10_000, 1 << 20, 256, variants)
    failing_calls("cuda", 1000)
    torch.cuda.synchronize()
    end = torch.cuda.memory_allocated()
    peak = torch.cuda.max_memory_allocated()
    assert end == start, (
        f"memory_allocated {start} -> {end} bytes after 2 x 10^4 calls (+{(end - start) / MiB:.2f} MiB)"
    )
    # One call's output (<= 8 MiB) plus possible contiguous copies of matmul inputs (< 1 MiB), with slack.
    assert peak - start <= 32 * MiB, f"peak {(peak - start) / MiB:.1f} MiB above the start: something accumulates"
