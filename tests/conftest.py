"""Shared test helpers: which devices to test on, dtypes, and per-dtype tolerances."""

from __future__ import annotations

import pytest
import torch

import cuda_kernels

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]

HAS_GPU = torch.cuda.is_available()
EXT_HAS_CUDA = cuda_kernels.build_info()["cuda"]

if not HAS_GPU:
    CUDA_SKIP_REASON = "no CUDA device visible"
elif not EXT_HAS_CUDA:
    CUDA_SKIP_REASON = "the extension was built without CUDA (WITH_CUDA=0 or no toolkit)"
else:
    CUDA_SKIP_REASON = ""

requires_cuda = pytest.mark.skipif(bool(CUDA_SKIP_REASON), reason=CUDA_SKIP_REASON or "n/a")

DEVICES = ["cpu", pytest.param("cuda", marks=[requires_cuda, pytest.mark.gpu])]

# matmul tolerance per dtype, from the standard error model of a dot product (Higham, probabilistic form):
#   |out - ref| <= u_out * |ref| + tiny_out + sqrt(K) * u_acc * (|a| @ |b|)
# ref is computed in float64 from the same (already rounded) inputs; u_out is the unit roundoff of the output
# dtype (rounding the result once; tiny_out, half its smallest subnormal, for results that underflow), u_acc that
# of the accumulator (fp32; fp64 for fp64). Indexing bugs, a
# dropped K tail or accumulating in a narrower type (tf32, bf16) all exceed it by orders of magnitude.
UNIT_ROUNDOFF = {
    torch.float64: 2.0**-53,
    torch.float32: 2.0**-24,
    torch.float16: 2.0**-11,
    torch.bfloat16: 2.0**-8,
}
ACCUMULATOR = {torch.float64: torch.float64, torch.float32: torch.float32, torch.float16: torch.float32,
               torch.bfloat16: torch.float32}  # fmt: skip


def matmul_error_bound(a: torch.Tensor, b: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Elementwise bound on |cuda_kernels.matmul(a, b) - ref| (ref = float64 a @ b), see above."""
    u_out = UNIT_ROUNDOFF[a.dtype]
    u_acc = UNIT_ROUNDOFF[ACCUMULATOR[a.dtype]]
    abs_prod = (a.double().abs() @ b.double().abs()).to(ref.device)
    tiny_out = torch.finfo(a.dtype).smallest_normal * torch.finfo(a.dtype).eps / 2
    return u_out * ref.abs() + tiny_out + (1 + u_out) * max(1, a.shape[1]) ** 0.5 * u_acc * abs_prod


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
