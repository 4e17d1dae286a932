"""Shared test helpers: which devices to test on, dtypes, and per-dtype tolerances."""

from __future__ import annotations

import pytest
import torch

import cuda_kernels
from cuda_kernels.testing import matmul_error_bound  # noqa: F401  (tests import it from here)

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]

HAS_GPU = torch.cuda.is_available()
EXT_HAS_CUDA = cuda_kernels.build_info()["cuda"]

if not HAS_GPU:
    CUDA_SKIP_REASON = "no CUDA device visible"
elif not EXT_HAS_CUDA:
    CUDA_SKIP_REASON = "the extension was built without CUDA (WITH_CUDA=0 or no toolkit)"
else:
    CUDA_SKIP_REASON = ""

if CUDA_SKIP_REASON:
    TWO_GPU_SKIP_REASON = CUDA_SKIP_REASON
elif torch.cuda.device_count() < 2:
    TWO_GPU_SKIP_REASON = f"needs two GPUs, {torch.cuda.device_count()} visible"
else:
    TWO_GPU_SKIP_REASON = ""

requires_cuda = pytest.mark.skipif(bool(CUDA_SKIP_REASON), reason=CUDA_SKIP_REASON or "n/a")

DEVICES = ["cpu", pytest.param("cuda", marks=[requires_cuda, pytest.mark.gpu])]

# matmul tolerance: the error model in cuda_kernels/testing.py (shared with benchmark.py).


def assert_matmul_close(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """Checks out against float64 a @ b within matmul_error_bound; reports the worst element on failure."""
    assert out.dtype == a.dtype and out.shape == (a.shape[0], b.shape[1]) and out.device == a.device
    ref = a.double() @ b.double()
    got = out.double()
    assert not torch.isnan(got).any(), "NaN in the output"
    bound = matmul_error_bound(a, b, ref)
    err = (got - ref).abs()
    bad = err > bound
    if bad.any():
        idx = tuple(int(i) for i in bad.nonzero()[0])
        raise AssertionError(
            f"{int(bad.sum())} of {err.numel()} elements out of tolerance; first at {idx}: "
            f"got {got[idx].item()}, expected {ref[idx].item()} (bound {bound[idx].item():.3g}); "
            f"worst error/bound {(err / bound.clamp_min(1e-300)).max().item():.3g}"
        )


def rand(*shape: int, dtype: torch.dtype = torch.float32, device: str = "cpu", seed: int = 0) -> torch.Tensor:
    """Random normal data (never zeros: zeros hide unwritten outputs), generated on the CPU for reproducibility."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(tuple(shape), generator=g, dtype=torch.float32).to(dtype=dtype, device=device)
