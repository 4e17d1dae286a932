"""Reference checks shared by the tests (tests/conftest.py) and the benchmark (cuda_kernels.tools.bench).

matmul error model, for c = a @ b of dtype T with K-term dot products accumulated in type A (float32; float64
for float64), compared with ref = a.double() @ b.double() computed from the same (already rounded) inputs:

    |c - ref| <= u_out * |ref| + tiny_out + min(K, LAMBDA * sqrt(K)) * u_acc * (|a| @ |b|)

u_out, the unit roundoff of T, covers rounding the result once; tiny_out (half T's smallest subnormal) covers
results that underflow; the last term is the accumulation error. Its deterministic worst case is K * u_acc
(Higham, gamma_K); for sums of rounding errors that behave like independent random variables it is
LAMBDA * sqrt(K) * u_acc with probability at least 1 - 2 * exp(-LAMBDA^2 / 2) per element (Higham and Mary,
2019): LAMBDA = 6 gives 3e-8, negligible over the ~10^7 elements a test run checks. Wrong indexing, a dropped
K tail or accumulating in TF32 or bf16 exceed the bound by orders of magnitude for large K.
"""

from __future__ import annotations

import math
import os

import torch
from torch import Tensor

UNIT_ROUNDOFF = {torch.float64: 2.0**-53, torch.float32: 2.0**-24, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}
ACCUMULATOR = {
    torch.float64: torch.float64,
    torch.float32: torch.float32,
    torch.float16: torch.float32,
    torch.bfloat16: torch.float32,
}
LAMBDA = 6.0  # probabilistic-bound confidence factor, see the module docstring


def accumulation_factor(k: int) -> float:
    """min(K, LAMBDA * sqrt(K)): the deterministic bound for short sums, the probabilistic one for long sums."""
    k = max(1, k)
    return min(float(k), LAMBDA * math.sqrt(k))


def matmul_error_bound(a: Tensor, b: Tensor, ref: Tensor) -> Tensor:
    """Elementwise bound on |cuda_kernels.matmul(a, b) - ref|, ref = a.double() @ b.double() (module docstring)."""
    u_out = UNIT_ROUNDOFF[a.dtype]
    u_acc = UNIT_ROUNDOFF[ACCUMULATOR[a.dtype]]
    tiny_out = torch.finfo(a.dtype).smallest_normal * torch.finfo(a.dtype).eps / 2
    abs_prod = (a.double().abs() @ b.double().abs()).to(ref.device)
    return u_out * ref.abs() + tiny_out + (1 + u_out) * accumulation_factor(a.shape[1]) * u_acc * abs_prod


TF32_UNIT_ROUNDOFF = 2.0**-11  # TF32 keeps 10 explicit mantissa bits: round to nearest is off by at most 2^-11


def tf32_matmul_error_bound(a: Tensor, b: Tensor, ref: Tensor) -> Tensor:
    """Elementwise bound on |matmul(a, b) - ref| for float32 a, b when TF32 is allowed, ref = a.double() @ b.double().

    TF32 math rounds each input to TF32 (a' = a (1 + d), |d| <= u_in = TF32_UNIT_ROUNDOFF), multiplies exactly (two
    11-bit significands make 22 bits, which float32 holds) and accumulates in float32. So with S = |a| @ |b|:
    |sum a'b' - ref| <= (2 u_in + u_in^2) S from the inputs, and the float32 sum of the products adds the float32
    accumulation term of matmul_error_bound on |a'| @ |b'| <= (1 + u_in)^2 S. The input term does not shrink with K
    (it is a relative error of each product), so the bound is about 1e-3 S: some 4000 times matmul_error_bound's
    for float32 at K = 4096. A float32 kernel that does not use TF32 meets it too; it is not a test of TF32 use.
    It assumes rounding to nearest (cvt.rna.tf32.f32, as cuBLAS); a kernel that truncates (hands float32 bits to
    mma's .tf32 operands) errs by up to 2 u_in per input and could exceed it on adversarial data.
    """
    if a.dtype != torch.float32:
        raise ValueError(f"tf32_matmul_error_bound: TF32 applies to float32 inputs, got {a.dtype}")
    u_in = TF32_UNIT_ROUNDOFF
    u_out = UNIT_ROUNDOFF[torch.float32]
    u_acc = UNIT_ROUNDOFF[ACCUMULATOR[torch.float32]]
    tiny_out = torch.finfo(torch.float32).smallest_normal * torch.finfo(torch.float32).eps / 2
    abs_prod = (a.double().abs() @ b.double().abs()).to(ref.device)
    per_s = (2 * u_in + u_in**2) + (1 + u_in) ** 2 * accumulation_factor(a.shape[1]) * u_acc
    return u_out * ref.abs() + tiny_out + (1 + u_out) * per_s * abs_prod


# A GPU host with a CPU-only build of the extension: the test session stops at the start (tests/conftest.py) and
# benchmark.py says so on its first line, unless this variable marks the CPU-only build as deliberate.
# Shapes whose float64 reference may be skipped (with a note) when it does not fit in device memory.
MATMUL_MAX_CHECKED_DIM = 8192


def check_matmul(a: Tensor, b: Tensor, out: Tensor, tf32: bool = False) -> tuple[bool | None, str]:
    """The one matmul check of the tests and the benchmark: (ok, message) for out = a @ b.

    a: (M, K), b: (K, N), out: (M, N), all one dtype on one device. ok is True when every element is within
    matmul_error_bound (tf32_matmul_error_bound with tf32) of ref = a.double() @ b.double(); False with a message
    naming the count of bad elements, the first one and the worst error/bound (NaN counts as bad); None ("not
    checked", with the reason) when the float64 reference of a large shape fits neither the device nor the host.
    """
    m, k = a.shape
    n = b.shape[1]
    if out.shape != (m, n) or out.dtype != a.dtype or out.device != a.device:
        return False, (
            f"got {tuple(out.shape)} {out.dtype} on {out.device}, expected ({m}, {n}) {a.dtype} on {a.device}"
        )
    bound_fn = tf32_matmul_error_bound if tf32 else matmul_error_bound
    try:
        ref = a.double() @ b.double()
        bound = bound_fn(a, b, ref)
    except torch.OutOfMemoryError:
        if max(m, n, k) > MATMUL_MAX_CHECKED_DIM:
            return None, "not checked: the float64 reference does not fit in device memory"
        ref = a.cpu().double() @ b.cpu().double()
        ref, bound = ref.to(a.device), bound_fn(a.cpu(), b.cpu(), ref).to(a.device)
    return check_within(out, ref, bound)


def check_within(out: Tensor, ref: Tensor, bound: Tensor) -> tuple[bool, str]:
    """(ok, message): every element of out within bound (elementwise) of the float64 ref; the message names the count
    of bad elements, the first one and the worst error/bound. NaN counts as bad."""
    got = out.detach().double()
    err = (got - ref).abs()
    bad = ~(err <= bound)  # NaN compares False, so NaN counts as bad
    if not bad.any():
        return True, ""
    i = tuple(int(v) for v in bad.nonzero()[0])
    return False, (
        f"{int(bad.sum())} of {out.numel()} elements out of tolerance; first at {i}: got {got[i].item():.9g}, "
        f"expected {ref[i].item():.9g} (bound {bound[i].item():.3g}); "
        f"worst error/bound {(err / bound).nan_to_num(float('inf')).max().item():.3g}"
    )


ALLOW_CPU_ONLY_ENV = "CUDA_KERNELS_ALLOW_CPU_ONLY"


def cpu_only_allowed() -> bool:
    """Whether CUDA_KERNELS_ALLOW_CPU_ONLY is set to something other than "" or "0"."""
    return os.environ.get(ALLOW_CPU_ONLY_ENV, "") not in ("", "0")
