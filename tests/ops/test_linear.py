"""cuda_kernels.linear (activation(x @ weight.T + bias)) and the cuda_kernels.Linear module against float64
references, on every device x dtype x activation (None, relu, gelu, gelu_tanh, silu, swiglu): M (the product of x's
leading dims) from 0 to 257, K from 0 to 300, N from 1 to 256, leading shapes (), (5,), (2, 3), non-contiguous x,
weight and bias; rounding once beats torch's 16-bit chain where the op rounds once (rounds_z says where it may not);
gradients
(gradcheck in float64, every dtype against a float64 reference); opcheck, torch.compile, the module (parameters, state
dict, repr, swiglu's even out_features) and bad input. TF32 is off throughout (_no_tf32).

Error model. The op computes z = x @ weight.T + bias in the accumulator type (float32; float64 for float64), applies
the activation there and rounds once to x's dtype. Against ref = act(z_ref), z_ref computed in float64 from the same
(already rounded) inputs, elementwise (linear_reference):

    |out - ref| <= u_out * |ref| + tiny_out + (1 + u_out) * (L * E + ACT_ULPS * u_acc * (|z_ref| + |ref|))

E = min(K', LAMBDA * sqrt(K')) * u_acc * (|x| @ |weight|.T + |bias|), K' = K (+1 with a bias), is the accumulation
term of the matmul model in cuda_kernels/tools/testing.py; L is the activation's Lipschitz constant (max |act'|:
1.129 for gelu and gelu_tanh, 1.100 for silu), which carries E through the activation; ACT_ULPS accumulator ulps of
|z| cover evaluating erf/tanh/exp in float32 (0 for None and relu, which are exact). For swiglu = silu(a) * v the same
terms are carried through the product. Without an activation and a bias this is matmul_error_bound. A kernel that
rounds x @ W.T + b to 16 bits before the activation (torch's chain) errs by up to L * u_out * |z|, which for
negative z is far above u_out * |ref|: the strict forward bound is meant to catch that.

The backward is not required to round once: its bound (grad_bounds) admits a formula written in torch ops in x's
dtype (z recomputed and rounded, act' and dz = grad * act'(z) rounded a few times, then float32-accumulated
matmuls), and no more.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import DEVICES, DTYPES, assert_matmul_close, rand, requires_cuda
from torch import Tensor

import cuda_kernels
from cuda_kernels.tools.testing import ACCUMULATOR, LAMBDA, UNIT_ROUNDOFF, accumulation_factor, check_within

OP = "cuda_kernels.linear"
ACTIVATIONS = [None, "relu", "gelu", "gelu_tanh", "silu", "swiglu"]
SMOOTH = ["gelu", "gelu_tanh", "silu", "swiglu"]  # the activations torch's 16-bit chain rounds before

# max |act'| (Lipschitz constant) and max |act''| over the reals, rounded up (float64 on a 2e6-point grid of
# [-20, 20]: gelu 1.12890 and 0.79788, gelu_tanh 1.12899 and 0.79788, silu 1.09984 and 0.5). relu's kink is handled
# where it matters (the backward near z = 0).
LIPSCHITZ = {None: 1.0, "relu": 1.0, "gelu": 1.13, "gelu_tanh": 1.13, "silu": 1.1}
CURVATURE = {None: 0.0, "relu": 0.0, "gelu": 0.8, "gelu_tanh": 0.8, "silu": 0.5}
# Roundings allowed in evaluating a transcendental activation (forward, in the accumulator type) or its derivative
# and dz (backward, in x's dtype), each relative to |z| or to |act'| + 1 (module docstring; grad_bounds).
ACT_ULPS = 8


@pytest.fixture(autouse=True)
def _no_tf32():
    """float32 is computed as float32: TF32 off for these tests, whatever an earlier test left set (the bounds are
    float32's; tf32_matmul_error_bound is about 4000 times wider at K = 4096)."""
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = saved


def n_out(n: int, activation: str | None) -> int:
    return n // 2 if activation == "swiglu" else n


def even(n: int, activation: str | None) -> int:
    """N for the activation: swiglu needs an even N (1 -> 2, 17 -> 18)."""
    return n + n % 2 if activation == "swiglu" else n


def act64(z: Tensor, activation: str | None) -> Tensor:
    """The activation in float64 (torch's definitions)."""
    if activation is None:
        return z
    if activation == "relu":
        return F.relu(z)
    if activation == "gelu":
        return F.gelu(z)
    if activation == "gelu_tanh":
        return F.gelu(z, approximate="tanh")
    if activation == "silu":
        return F.silu(z)
    if activation == "swiglu":
        gate, up = z.chunk(2, dim=-1)
        return F.silu(gate) * up
    raise ValueError(activation)


def scaled(*shape: int, fan_in: int, dtype: torch.dtype, device: str, seed: int) -> Tensor:
    """Weights as torch.nn.Linear scales them (std 1/sqrt(K)), so that z = x @ W.T spends time in the activations'
    curved region around 0 rather than far out where gelu and silu are relu."""
    return (rand(*shape, seed=seed) * max(fan_in, 1) ** -0.5).to(dtype=dtype, device=device)


def make_inputs(
    lead: tuple[int, ...], k: int, n: int, dtype: torch.dtype, device: str, with_bias: bool, seed: int = 0
) -> tuple[Tensor, Tensor, Tensor | None]:
    x = rand(*lead, k, dtype=dtype, device=device, seed=seed + 1)
    w = scaled(n, k, fan_in=k, dtype=dtype, device=device, seed=seed + 2)
    b = rand(n, dtype=dtype, device=device, seed=seed + 3) if with_bias else None
    return x, w, b


# ---------------------------------------------------------------------------------------------------------------
# The reference and its bounds (module docstring)


def _roundoffs(dtype: torch.dtype) -> tuple[float, float, float]:
    """(u_out, u_acc, tiny_out) as matmul_error_bound has them."""
    finfo = torch.finfo(dtype)
    return UNIT_ROUNDOFF[dtype], UNIT_ROUNDOFF[ACCUMULATOR[dtype]], finfo.smallest_normal * finfo.eps / 2


def _rows(t: Tensor) -> Tensor:
    """t as 2-D (product of the leading dims, last dim); reshape(-1, 0) cannot tell the rows when K = 0."""
    return t.reshape(math.prod(t.shape[:-1]), t.shape[-1])


def _preactivation(x2: Tensor, w: Tensor, b: Tensor | None) -> tuple[Tensor, Tensor]:
    """(z, E): z = x2 @ w.T + b in float64, and E the bound on the error of accumulating it in x2's accumulator type
    (the accumulation term of matmul_error_bound, over K products and the bias)."""
    xd, wd = x2.detach().double(), w.detach().double()
    z = xd @ wd.T
    s = xd.abs() @ wd.abs().T
    terms = x2.shape[1]
    if b is not None:
        z = z + b.detach().double()
        s = s + b.detach().double().abs()
        terms += 1
    return z, accumulation_factor(terms) * UNIT_ROUNDOFF[ACCUMULATOR[x2.dtype]] * s


def rounds_z(out: Tensor, x: Tensor, w: Tensor, b: Tensor | None, activation: str | None) -> bool:
    """Whether the call that made `out` may round z = x @ w.T (+ b) to x's 16-bit dtype before adding the bias or
    applying a smooth activation (torch's chain) instead of rounding once:
      - while autograd records the call with a smooth activation: the wrapper applies it as torch ops on the op's z + b,
        so that the backward needs no second matmul;
      - on CUDA where no kernel fuses the epilogue (outputs with M or N <= 16, which matvec takes; GPUs without
        12_hopper_gemm): z is rounded, then bias and activation are applied in a pass of their own;
      - swiglu on CUDA: the gating pass reads z + b rounded.
    float32 and float64 keep z in the accumulator type, and relu commutes with rounding."""
    if x.dtype not in (torch.float16, torch.bfloat16):
        return False
    smooth = activation in SMOOTH
    if out.grad_fn is not None and smooth:
        return True
    if out.device.type != "cuda":
        return False
    m, n = math.prod(x.shape[:-1]), w.shape[0]
    fused = min(m, n) > 16 and cuda_kernels.ops.matmul_default_kernel(x.dtype)[1] == "12_hopper_gemm"
    return (smooth or b is not None) if not fused else activation == "swiglu"


def linear_reference(
    x: Tensor, w: Tensor, b: Tensor | None, activation: str | None, z_rounded: bool = False
) -> tuple[Tensor, Tensor]:
    """(ref, bound), both float64 of the op's output shape: ref = act(x @ w.T + b) from the same inputs, bound on
    |out - ref| elementwise (module docstring); z_rounded (rounds_z): z may also be rounded to x's dtype first."""
    z, e = _preactivation(_rows(x), w, b)
    u_out, u_acc, tiny = _roundoffs(x.dtype)
    # z rounded first (z_rounded): up to u_out of |x @ w.T| (before the bias) and again of |z| (after it).
    e = e + (u_out * (2 * z.abs() + (b.detach().double().abs() if b is not None else 0)) if z_rounded else 0)
    if activation == "swiglu":
        a, v = z.chunk(2, dim=-1)
        ea, ev = e.chunk(2, dim=-1)
        s = F.silu(a)
        s_err = LIPSCHITZ["silu"] * ea + ACT_ULPS * u_acc * (a.abs() + s.abs())  # of the float32 silu(a)
        ref = s * v
        err = (1 + u_acc) * (s_err * (v.abs() + ev) + s.abs() * ev) + u_acc * ref.abs()  # the product rounded too
    else:
        ref = act64(z, activation)
        ulps = 0 if activation in (None, "relu") else ACT_ULPS
        err = LIPSCHITZ[activation] * e + ulps * u_acc * (z.abs() + ref.abs())
    bound = u_out * ref.abs() + tiny + (1 + u_out) * err
    shape = (*x.shape[:-1], ref.shape[-1])
    return ref.reshape(shape), bound.reshape(shape)


def check_linear(out: Tensor, x: Tensor, w: Tensor, b: Tensor | None, activation: str | None) -> tuple[bool, str]:
    """(ok, message) for out = cuda_kernels.linear(x, w, b, activation), as conftest's check_matmul."""
    shape = (*x.shape[:-1], n_out(w.shape[0], activation))
    if tuple(out.shape) != shape or out.dtype != x.dtype or out.device != x.device:
        return False, f"got {tuple(out.shape)} {out.dtype} on {out.device}, expected {shape} {x.dtype} on {x.device}"
    return check_within(out, *linear_reference(x, w, b, activation, rounds_z(out, x, w, b, activation)))


def assert_linear_close(out: Tensor, x: Tensor, w: Tensor, b: Tensor | None, activation: str | None) -> None:
    ok, message = check_linear(out, x, w, b, activation)
    assert ok, f"activation={activation}, bias={b is not None}: {message}"


def reference_grads(
    x: Tensor, w: Tensor, b: Tensor | None, activation: str | None, grad: Tensor
) -> tuple[Tensor, Tensor, Tensor | None, Tensor, Tensor]:
    """(dx, dweight, dbias or None, z, dz): float64 autograd through F.linear and the activation, same inputs."""
    xd = x.detach().double().requires_grad_()
    wd = w.detach().double().requires_grad_()
    bd = None if b is None else b.detach().double().requires_grad_()
    z = F.linear(xd, wd, bd)
    z.retain_grad()
    act64(z, activation).backward(grad.double())
    dz = z.grad if z.grad is not None else torch.zeros_like(z)
    return xd.grad, wd.grad, None if bd is None else bd.grad, z.detach(), dz


def _random_sum(d: Tensor, a: Tensor) -> Tensor:
    """Bound on |sum_j e_ij a_jk| for errors |e_ij| <= d_ij that are independent with mean zero (rounding errors):
    the deterministic d @ |a| for short sums, LAMBDA * sqrt(d^2 @ a^2) (as accumulation_factor) for long ones."""
    return torch.minimum(d @ a, LAMBDA * ((d * d) @ (a * a)).sqrt())


def grad_bounds(
    x: Tensor, w: Tensor, b: Tensor | None, activation: str | None, grad: Tensor, ref: tuple
) -> tuple[Tensor, Tensor, Tensor | None]:
    """Elementwise bounds on the errors of (dx, dweight, dbias) against reference_grads' `ref`.

    dz = grad * act'(z) may be computed in x's dtype from a recomputed z: z's error is E = u * |z| + the forward's
    accumulation term; act' moves by at most CURVATURE * E (silu's terms for swiglu's two halves), and evaluating act'
    and the products rounds ACT_ULPS times relative to |act'| + 1. Where relu's z is within the accumulation error of
    0 its derivative may be either 0 or 1. The matmuls dx = dz @ W, dW = dz.T @ x, db = sum(dz) then add their own
    accumulation term (float32) and one rounding, and carry dz's errors (independent roundings: _random_sum).
    """
    dx_ref, dw_ref, db_ref, z, dz = ref
    n, k = w.shape
    u, u_acc, tiny = _roundoffs(x.dtype)
    x2 = _rows(x.detach())
    _, e_acc = _preactivation(x2, w, b)
    xa = x2.double().abs()
    wa = w.detach().double().abs()
    z, dz = _rows(z), _rows(dz)
    g = _rows(grad.detach()).double().abs()
    e = u * z.abs() + e_acc
    if activation == "swiglu":
        a, v = z.chunk(2, dim=-1)
        ea, ev = e.chunk(2, dim=-1)
        sig = torch.sigmoid(a)
        s, ds = a * sig, (sig * (1 + a * (1 - sig))).abs()
        c = CURVATURE["silu"]
        d_gate = g * (v.abs() * c * ea + (ds + c * ea) * ev + ACT_ULPS * u * (ds + 1) * (v.abs() + ev))
        d_up = g * (LIPSCHITZ["silu"] * ea + ACT_ULPS * u * s.abs())
        d = torch.cat([d_gate, d_up], dim=-1)
    else:
        zz = z.clone().requires_grad_()
        (deriv,) = torch.autograd.grad(act64(zz, activation).sum(), zz)
        ulps = 0 if activation in (None, "relu") else ACT_ULPS
        d = g * (CURVATURE[activation] * e + ulps * u * (deriv.abs() + 1))
        if activation == "relu":
            d = d + g * (z.abs() <= e_acc)
    dz_abs = dz.abs() + d
    m = dz.shape[0]
    bound_dx = u * _rows(dx_ref).abs() + tiny
    bound_dx += (1 + u) * (accumulation_factor(n) * u_acc * (dz_abs @ wa) + _random_sum(d, wa))
    bound_dw = u * dw_ref.abs() + tiny
    bound_dw += (1 + u) * (accumulation_factor(m) * u_acc * (dz_abs.T @ xa) + _random_sum(d.T, xa))
    bound_db = None
    if b is not None:
        ones = torch.ones(m, 1, dtype=torch.float64, device=d.device)
        bound_db = u * db_ref.abs() + tiny
        bound_db += (1 + u) * (accumulation_factor(m) * u_acc * dz_abs.sum(0) + _random_sum(d.T, ones)[:, 0])
    return bound_dx.reshape(x.shape), bound_dw, bound_db


def assert_grads_close(
    grads: tuple[Tensor | None, Tensor | None, Tensor | None],
    x: Tensor,
    w: Tensor,
    b: Tensor | None,
    activation: str | None,
    grad: Tensor,
) -> None:
    """grads = (dx, dweight, dbias) (None: not checked) within grad_bounds of the float64 reference."""
    ref = reference_grads(x, w, b, activation, grad)
    bounds = grad_bounds(x, w, b, activation, grad, ref)
    for name, got, want, bound, like in zip(("x", "weight", "bias"), grads, ref[:3], bounds, (x, w, b), strict=True):
        if like is None or got is None:
            continue
        assert got.shape == like.shape and got.dtype == like.dtype and got.device == like.device, (
            f"grad of {name}: got {tuple(got.shape)} {got.dtype} on {got.device}, expected {tuple(like.shape)} "
            f"{like.dtype} on {like.device}"
        )
        ok, message = check_within(got, want, bound)
        assert ok, f"grad of {name} (activation={activation}, bias={b is not None}): {message}"


# ---------------------------------------------------------------------------------------------------------------
# Forward

# (M, K, N): every M in 0, 1, 3, 16, 17, 64, 257, K in 1, 7, 64, 300 and N in 1, 2, 8, 30, 256 (swiglu rounds N up
# to even): empty, one row (matrix-vector), tails of 16-wide tiles, one element, deep and wide.
SHAPES = [
    (0, 7, 8),
    (1, 1, 1),
    (1, 300, 30),
    (3, 7, 2),
    (16, 64, 8),
    (17, 64, 30),
    (17, 1, 256),
    (64, 64, 2),
    (64, 300, 256),
    (257, 7, 30),
    (257, 300, 1),
]


def _ids(s: tuple[int, ...]) -> str:
    return "x".join(map(str, s))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mkn", SHAPES, ids=_ids)
@pytest.mark.parametrize("activation", ACTIVATIONS, ids=str)
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no-bias"])
def test_linear_matches_reference(device, dtype, mkn, activation, with_bias):
    m, k, n = mkn
    n = even(n, activation)
    x, w, b = make_inputs((m,), k, n, dtype, device, with_bias)
    out = cuda_kernels.linear(x, w, b, activation)
    assert_linear_close(out, x, w, b, activation)
    if activation is None and b is None:  # the same check as cuda_kernels.matmul's
        assert_matmul_close(out, x, w.t())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("lead", [(), (5,), (2, 3), (0,), (2, 0), (1, 2, 1, 3)], ids=str)
def test_linear_leading_shapes(device, dtype, lead):
    """x of any leading shape: the result has that shape and N columns (1-D x gives 1-D), as the 2-D case."""
    for activation in ACTIVATIONS:
        for with_bias in (True, False):
            x, w, b = make_inputs(lead, 20, 6, dtype, device, with_bias, seed=len(lead))
            out = cuda_kernels.linear(x, w, bias=b, activation=activation)
            assert out.dim() == x.dim()
            assert_linear_close(out, x, w, b, activation)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_linear_k_zero(device, dtype):
    """K = 0: the result is activation(bias) on every row, activation(0) = 0 without a bias."""
    x = torch.empty(3, 0, dtype=dtype, device=device)
    w = torch.empty(8, 0, dtype=dtype, device=device)
    b = rand(8, dtype=dtype, device=device, seed=4)
    for activation in ACTIVATIONS:
        out = cuda_kernels.linear(x, w, None, activation)
        assert out.shape == (3, n_out(8, activation)) and out.dtype == dtype
        assert (out == 0).all(), f"activation={activation}: {out}"
        out = cuda_kernels.linear(x, w, b, activation)
        assert_linear_close(out, x, w, b, activation)
        if activation in (None, "relu"):  # exact: bias and relu(bias) are representable
            torch.testing.assert_close(out, act64(b.double(), activation).to(dtype).expand(3, 8), rtol=0, atol=0)


# Views built from the device and dtype: (x, weight, bias), every one of them with N = 30 and K = 48.
def _dense(*shape: int, seed: int, dtype: torch.dtype, device: str) -> Tensor:
    return scaled(*shape, fan_in=48, dtype=dtype, device=device, seed=seed)


VIEWS = {
    "x-transposed": lambda dt, d: (rand(48, 40, dtype=dt, device=d).t(), None, None),
    "x-step-slice": lambda dt, d: (rand(40, 96, dtype=dt, device=d)[:, ::2], None, None),
    "x-offset": lambda dt, d: (rand(41, 49, dtype=dt, device=d)[1:, 1:], None, None),
    "x-expanded-rows": lambda dt, d: (rand(1, 48, dtype=dt, device=d).expand(40, 48), None, None),
    "x-permuted-3d": lambda dt, d: (rand(4, 10, 48, dtype=dt, device=d).permute(1, 0, 2), None, None),
    "x-every-other-row-3d": lambda dt, d: (rand(2, 10, 48, dtype=dt, device=d)[:, ::2], None, None),
    "weight-step-slice": lambda dt, d: (None, _dense(30, 96, seed=5, dtype=dt, device=d)[:, ::2], None),
    "weight-transposed": lambda dt, d: (None, _dense(48, 30, seed=5, dtype=dt, device=d).t(), None),
    "weight-offset": lambda dt, d: (None, _dense(31, 49, seed=5, dtype=dt, device=d)[1:, 1:], None),
    "bias-step-slice": lambda dt, d: (None, None, rand(60, dtype=dt, device=d, seed=6)[::2]),
    "all-transposed": lambda dt, d: (
        rand(48, 40, dtype=dt, device=d).t(),
        _dense(48, 30, seed=5, dtype=dt, device=d).t(),
        rand(60, dtype=dt, device=d, seed=6)[1::2],
    ),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("view", VIEWS.keys())
def test_linear_non_contiguous(device, dtype, view):
    """Transposed, sliced, offset and expanded views of x, weight and bias are read as they are (and left as they
    were); forward and backward."""
    x0, w0, b0 = make_inputs((40,), 48, 30, dtype, device, True, seed=7)
    views = VIEWS[view](dtype, device)
    x, w, b = (dense if given is None else given for given, dense in zip(views, (x0, w0, b0), strict=True))
    assert not (x.is_contiguous() and w.is_contiguous() and b.is_contiguous())
    saved = [t.clone() for t in (x, w, b)]
    for activation, bias in [(a, b) for a in ACTIVATIONS] + [(None, None), ("swiglu", None)]:
        assert_linear_close(cuda_kernels.linear(x, w, bias, activation), x, w, bias, activation)
    for before, after in zip(saved, (x, w, b), strict=True):
        assert torch.equal(before, after), "an input was modified"
    for activation in ("gelu", "swiglu"):
        xg, wg, bg = (t.detach().requires_grad_() for t in (x, w, b))  # leaves with the views' strides
        out = cuda_kernels.linear(xg, wg, bg, activation)
        grad = rand(*out.shape, dtype=dtype, device=device, seed=8)
        out.backward(grad)
        assert_grads_close((xg.grad, wg.grad, bg.grad), x, w, b, activation, grad)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [300, 301, 64])
def test_linear_bias_at_an_odd_offset(device, dtype, n):
    """A contiguous bias that starts one element into its storage (not 4-byte aligned for 16-bit dtypes) is read
    as it is: the fused epilogue reads bias pairs as 32-bit words only where they are aligned."""
    x, w, _ = make_inputs((257,), 64, n, dtype, device, False, seed=11)
    b = rand(n + 1, dtype=dtype, device=device, seed=12)[1:]
    assert b.is_contiguous() and b.storage_offset() == 1
    for activation in (None, "gelu"):
        assert_linear_close(cuda_kernels.linear(x, w, b, activation), x, w, b, activation)


# Step 12's schedules, as its tuning knobs force them (the defaults pick one per shape).
SCHEDULES12 = {
    "stream-k": {"stream_k12": "on"},
    "static": {"stream_k12": "off"},
    "split-k": {"stream_k12": "off", "k_splits12": 2},
}


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("tile", ["64x64", "128x64", "128x128", "128x256"])
@pytest.mark.parametrize("schedule", SCHEDULES12.keys())
def test_linear_epilogue_in_every_tile(matmul_tuning, dtype, tile, schedule):
    """The fused epilogue in each of step 12's tiles and schedules (on GPUs without it, whatever kernel runs):
    bias staged in shared memory (N even, aligned) or read from global memory (N odd), in stream-K's owner and
    partial tiles and in split-K clusters (which read it from global memory), over several waves with edge tiles."""
    if schedule == "split-k" and tile == "128x256":
        pytest.skip("split-K clusters split the 64- and 128-wide tiles only")
    block_m, block_n = map(int, tile.split("x"))
    matmul_tuning(block_m12=block_m, block_n12=block_n, **SCHEDULES12[schedule])
    for m, n, k in [(1000, 1536, 512), (300, 1001, 256)]:
        x, w, b = make_inputs((m,), k, n, dtype, "cuda", True, seed=m + n)
        for activation in (None, "gelu"):
            assert_linear_close(cuda_kernels.linear(x, w, b, activation), x, w, b, activation)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("activation", SMOOTH)
def test_linear_rounds_once(device, dtype, activation):
    """Rounding once is at least as accurate as torch's 16-bit chain (x @ W.T + b rounded to 16 bits, then the
    activation): the mean error against the float64 reference is no larger."""
    x, w, b = make_inputs((257,), 300, 256, dtype, device, True, seed=9)
    ref, _ = linear_reference(x, w, b, activation)
    out = cuda_kernels.linear(x, w, b, activation)
    if rounds_z(out, x, w, b, activation):
        pytest.skip("this path rounds z first, as torch's chain does (rounds_z)")
    ours = (out.double() - ref).abs().mean().item()
    z = F.linear(x, w, b)
    chain = F.silu(z[:, :128]) * z[:, 128:] if activation == "swiglu" else act64(z, activation)
    theirs = (chain.double() - ref).abs().mean().item()
    assert ours <= theirs, f"mean error {ours:.4g}, torch's {dtype} chain {theirs:.4g}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("activation", ACTIVATIONS, ids=str)
def test_linear_forward_when_recording_grads(device, dtype, activation):
    """The forward while autograd records it (inputs that require grad, as a module's parameters in training): at
    worst torch's 16-bit chain (z rounded before a smooth activation: rounds_z), through the wrapper and torch.ops."""
    x, w, b = make_inputs((64,), 300, 30, dtype, device, True, seed=10)
    for needs in [(True, True, True), (False, True, False), (True, False, False)]:
        args = [t.clone().requires_grad_(r) for t, r in zip((x, w, b), needs, strict=True)]
        for call in (cuda_kernels.linear, torch.ops.cuda_kernels.linear):
            out = call(*args, activation)
            assert out.grad_fn is not None
            assert_linear_close(out, x, w, b, activation)


@pytest.mark.parametrize("device", DEVICES)
def test_linear_defaults_and_keywords(device):
    """bias and activation default to None, by the wrapper and by the op's schema; both take keywords."""
    x, w, b = make_inputs((5,), 12, 4, torch.float32, device, True)
    for out in (
        cuda_kernels.linear(x, w),
        cuda_kernels.linear(x, w, None, None),
        cuda_kernels.linear(x, weight=w, bias=None, activation=None),
        torch.ops.cuda_kernels.linear(x, w),
        torch.ops.cuda_kernels.linear.default(x, w, None, None),
    ):
        assert_linear_close(out, x, w, None, None)
    for out in (
        cuda_kernels.linear(x, w, b, "silu"),
        cuda_kernels.linear(x, w, activation="silu", bias=b),
        torch.ops.cuda_kernels.linear(x, w, b, "silu"),
        torch.ops.cuda_kernels.linear(x, w, bias=b, activation="silu"),
    ):
        assert_linear_close(out, x, w, b, "silu")
    assert_linear_close(cuda_kernels.linear(x, w, activation="relu"), x, w, None, "relu")


# ---------------------------------------------------------------------------------------------------------------
# Backward

# (M, K, N): dx sums over N (up to 256), dweight and dbias over M (up to 257); empty, K = 0, single elements.
GRAD_SHAPES = [(0, 7, 8), (1, 300, 30), (3, 0, 8), (16, 1, 1), (17, 64, 30), (64, 64, 256), (257, 7, 2)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mkn", GRAD_SHAPES, ids=_ids)
@pytest.mark.parametrize("activation", ACTIVATIONS, ids=str)
def test_linear_backward_matches_reference(device, dtype, mkn, activation):
    """dx, dweight and dbias through autograd within grad_bounds of float64 torch."""
    m, k, n = mkn
    n = even(n, activation)
    for with_bias in (True, False):
        x, w, b = (
            None if t is None else t.requires_grad_()
            for t in make_inputs((m,), k, n, dtype, device, with_bias, seed=11)
        )
        out = cuda_kernels.linear(x, w, b, activation)
        assert out.grad_fn is not None
        grad = rand(*out.shape, dtype=dtype, device=device, seed=12)
        out.backward(grad)
        assert x.grad is not None and w.grad is not None and (b is None or b.grad is not None)
        assert_grads_close((x.grad, w.grad, None if b is None else b.grad), x, w, b, activation, grad)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("activation", ACTIVATIONS, ids=str)
def test_linear_autograd_inputs(device, activation):
    """Gradients for exactly the inputs that require them, through the wrapper and through torch.ops (the
    registered formula); nothing recorded when nothing needs it; leading shapes."""
    x0, w0, b0 = make_inputs((2, 3), 10, 6, torch.float32, device, True, seed=13)
    assert cuda_kernels.linear(x0, w0, b0, activation).grad_fn is None
    grad = rand(2, 3, n_out(6, activation), device=device, seed=14)
    for call in (cuda_kernels.linear, torch.ops.cuda_kernels.linear):
        for needs in [(True, True, True), (True, False, False), (False, True, False), (False, False, True)]:
            x, w, b = (t.detach().clone().requires_grad_(r) for t, r in zip((x0, w0, b0), needs, strict=True))
            out = call(x, w, b, activation)
            out.backward(grad)
            for t, r in zip((x, w, b), needs, strict=True):
                assert (t.grad is not None) == r
            assert_grads_close((x.grad, w.grad, b.grad), x, w, b, activation, grad)
        # No bias: weight and x only.
        x, w = x0.clone().requires_grad_(), w0.clone().requires_grad_()
        call(x, w, None, activation).backward(grad)
        assert_grads_close((x.grad, w.grad, None), x, w, None, activation, grad)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("activation", ACTIVATIONS, ids=str)
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no-bias"])
def test_linear_gradcheck(device, activation, with_bias):
    # Seeds picked so that no z is within 1e-3 of relu's kink (gradcheck's finite differences step by 1e-6).
    x = rand(3, 5, dtype=torch.float64, device=device, seed=21).requires_grad_()
    w = rand(4, 5, dtype=torch.float64, device=device, seed=22).requires_grad_()
    b = rand(4, dtype=torch.float64, device=device, seed=23).requires_grad_() if with_bias else None
    inputs = (x, w, b) if with_bias else (x, w)

    def f(x, w, b=None):
        return cuda_kernels.linear(x, w, b, activation)

    def g(x, w, b=None):
        return torch.ops.cuda_kernels.linear(x, w, b, activation)

    assert torch.autograd.gradcheck(f, inputs)
    assert torch.autograd.gradcheck(g, inputs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("lead", [(), (2, 3)], ids=str)
@pytest.mark.parametrize("activation", ["gelu_tanh", "swiglu"])
def test_linear_gradcheck_leading_shapes(device, lead, activation):
    x = rand(*lead, 5, dtype=torch.float64, device=device, seed=24).requires_grad_()
    w = rand(4, 5, dtype=torch.float64, device=device, seed=25).requires_grad_()
    b = rand(4, dtype=torch.float64, device=device, seed=26).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, w, b: cuda_kernels.linear(x, w, b, activation), (x, w, b))


# ---------------------------------------------------------------------------------------------------------------
# opcheck, torch.compile


@pytest.mark.parametrize("device", DEVICES)
def test_linear_opcheck(device):
    op = torch.ops.cuda_kernels.linear.default
    # Each opcheck traces the op through AOTAutograd (about 0.3 s on a CPU): the activations that differ in what the
    # schema and the fake kernel see (none, a name, swiglu's N/2 columns), a bias or not, float32 and bfloat16.
    x, w, b = (t.requires_grad_() for t in make_inputs((5,), 24, 8, torch.float32, device, True))
    torch.library.opcheck(op, (x, w, b, "gelu"))
    torch.library.opcheck(op, (x, w, b, "swiglu"))
    torch.library.opcheck(op, (x, w, None, None))
    x, w, b = (t.requires_grad_() for t in make_inputs((5,), 24, 8, torch.bfloat16, device, True))
    torch.library.opcheck(op, (x, w, b, "relu"))
    x, w, b = make_inputs((2, 3), 24, 8, torch.float32, device, True)
    torch.library.opcheck(op, (x.requires_grad_(), w.t().contiguous().t().requires_grad_(), None, "swiglu"))
    torch.library.opcheck(op, (x[0, 0].detach(), w, b, "gelu"))  # 1-D x


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("activation", ["gelu", "swiglu"])
def test_linear_compile_fullgraph(device, activation):
    torch._dynamo.reset()

    def f(x, w, b):
        return cuda_kernels.linear(x, w, b, activation) * 2

    compiled = torch.compile(f, fullgraph=True)
    params = make_inputs((2, 3), 64, 32, torch.float32, device, True, seed=31)
    x, w, b = (t.clone().requires_grad_() for t in params)
    out = compiled(x, w, b)
    assert_linear_close(out.detach() / 2, *params, activation)
    xe, we, be = (t.clone().requires_grad_() for t in params)
    eager = f(xe, we, be)
    torch.testing.assert_close(out, eager)
    grad = rand(*out.shape, device=device, seed=32)
    out.backward(grad)
    eager.backward(grad)
    for got, want in ((x.grad, xe.grad), (w.grad, we.grad), (b.grad, be.grad)):
        torch.testing.assert_close(got, want)


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_linear_module_compile_fullgraph(device):
    torch._dynamo.reset()
    torch.manual_seed(0)
    module = cuda_kernels.Linear(64, 32, activation="silu", device=device)
    compiled = torch.compile(module, fullgraph=True)
    x = rand(9, 64, device=device, seed=33)
    torch.testing.assert_close(compiled(x), module(x))
    compiled(x).sum().backward()
    w_grad = module.weight.grad.clone()
    module.zero_grad()
    module(x).sum().backward()
    torch.testing.assert_close(w_grad, module.weight.grad)


# ---------------------------------------------------------------------------------------------------------------
# cuda_kernels.Linear


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("activation", ACTIVATIONS, ids=str)
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no-bias"])
def test_Linear_is_an_nn_linear(device, activation, with_bias):
    """Same parameters and state dict keys as torch.nn.Linear; forward is cuda_kernels.linear with the module's
    weight, bias and activation, and so are its gradients."""
    module = cuda_kernels.Linear(16, 8, bias=with_bias, activation=activation, device=device)
    plain = torch.nn.Linear(16, 8, bias=with_bias, device=device)
    assert isinstance(module, torch.nn.Linear)
    assert module.activation == activation
    assert (module.in_features, module.out_features) == (16, 8)
    assert [(k, v.shape) for k, v in module.named_parameters()] == [(k, v.shape) for k, v in plain.named_parameters()]
    assert list(module.state_dict().keys()) == list(plain.state_dict().keys())
    assert module.weight.device.type == device and module.weight.dtype == torch.float32
    x = rand(2, 3, 16, device=device, seed=41)
    out = module(x)
    assert out.shape == (2, 3, n_out(8, activation))
    assert torch.equal(out, cuda_kernels.linear(x, module.weight, module.bias, activation))
    out.backward(torch.ones_like(out))
    wg, bg = module.weight.detach().clone().requires_grad_(), None
    if with_bias:
        bg = module.bias.detach().clone().requires_grad_()
    cuda_kernels.linear(x, wg, bg, activation).backward(torch.ones_like(out))
    assert torch.equal(module.weight.grad, wg.grad)
    if with_bias:
        assert torch.equal(module.bias.grad, bg.grad)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_Linear_loads_nn_linear_state_dict(device, dtype):
    torch.manual_seed(0)
    for with_bias in (True, False):
        plain = torch.nn.Linear(24, 10, bias=with_bias, device=device, dtype=dtype)
        module = cuda_kernels.Linear(24, 10, bias=with_bias, activation="swiglu", device=device, dtype=dtype)
        assert module.weight.dtype == dtype and module.weight.device.type == device
        module.load_state_dict(plain.state_dict())
        assert torch.equal(module.weight, plain.weight)
        x = rand(7, 24, dtype=dtype, device=device, seed=42)
        with torch.no_grad():
            assert_linear_close(module(x), x, plain.weight, plain.bias, "swiglu")
        # And back: torch.nn.Linear loads the module's state dict.
        torch.nn.Linear(24, 10, bias=with_bias, device=device, dtype=dtype).load_state_dict(module.state_dict())


def test_Linear_swiglu_needs_even_out_features():
    with pytest.raises((ValueError, RuntimeError), match="swiglu"):
        cuda_kernels.Linear(8, 7, activation="swiglu")
    assert cuda_kernels.Linear(8, 6, activation="swiglu")(rand(3, 8)).shape == (3, 3)


@pytest.mark.parametrize("activation", ACTIVATIONS[1:])
def test_Linear_extra_repr(activation):
    module = cuda_kernels.Linear(8, 6, activation=activation)
    assert activation in module.extra_repr()
    assert activation in repr(module)


# ---------------------------------------------------------------------------------------------------------------
# Bad input


def _t(*shape: int, dtype: torch.dtype = torch.float32, device: str = "cpu") -> Tensor:
    return torch.ones(shape, dtype=dtype, device=device)


# (id, make(device) -> (x, weight, bias, activation), regex after "cuda_kernels.linear"). Each row has exactly one
# thing wrong; the regex names it where the contract fixes a word (the activation's name, the argument).
BAD_INPUTS = [
    ("unknown-activation", lambda d: (_t(3, 4, device=d), _t(5, 4, device=d), None, "gleu"), r"['\"]gleu['\"]"),
    ("unknown-activation-empty-x", lambda d: (_t(0, 4, device=d), _t(5, 4, device=d), None, "gleu"), r"['\"]gleu['\"]"),
    ("weight-1d", lambda d: (_t(3, 4, device=d), _t(4, device=d), None, None), "weight"),
    ("weight-3d", lambda d: (_t(3, 4, device=d), _t(1, 5, 4, device=d), None, None), "weight"),
    ("weight-0d", lambda d: (_t(3, 1, device=d), _t(device=d), None, "relu"), "weight"),
    ("in-features", lambda d: (_t(3, 4, device=d), _t(5, 3, device=d), None, None), ""),
    ("in-features-1d-x", lambda d: (_t(4, device=d), _t(5, 3, device=d), None, "gelu"), ""),
    ("in-features-empty-x", lambda d: (_t(0, 4, device=d), _t(5, 3, device=d), None, None), ""),
    ("bias-length", lambda d: (_t(3, 4, device=d), _t(5, 4, device=d), _t(4, device=d), None), "bias"),
    ("bias-2d", lambda d: (_t(3, 4, device=d), _t(5, 4, device=d), _t(1, 5, device=d), None), "bias"),
    ("bias-0d", lambda d: (_t(3, 4, device=d), _t(5, 4, device=d), _t(device=d), None), "bias"),
    ("swiglu-odd-n", lambda d: (_t(3, 4, device=d), _t(5, 4, device=d), None, "swiglu"), "swiglu"),
    ("swiglu-odd-n-bias", lambda d: (_t(3, 4, device=d), _t(5, 4, device=d), _t(5, device=d), "swiglu"), "swiglu"),
    ("weight-dtype", lambda d: (_t(3, 4, device=d), _t(5, 4, dtype=torch.float64, device=d), None, None), "weight"),
    ("bias-dtype", lambda d: (_t(3, 4, device=d), _t(5, 4, device=d), _t(5, dtype=torch.float16, device=d), None), "bias"),
    ("x-dtype", lambda d: (_t(3, 4, dtype=torch.bfloat16, device=d), _t(5, 4, device=d), _t(5, device=d), "silu"), ""),
    ("integer-x", lambda d: (_t(3, 4, dtype=torch.int64, device=d), _t(5, 4, dtype=torch.int64, device=d), None, None), ""),
    ("integer-x-float-weight", lambda d: (_t(3, 4, dtype=torch.int32, device=d), _t(5, 4, device=d), None, None), ""),
    ("x-0d", lambda d: (_t(device=d), _t(5, 1, device=d), None, None), ""),
]  # fmt: skip


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name, make, detail", BAD_INPUTS, ids=[row[0] for row in BAD_INPUTS])
def test_linear_bad_input(device, name, make, detail):
    x, w, b, activation = make(device)
    for call in (cuda_kernels.linear, torch.ops.cuda_kernels.linear):
        with pytest.raises((RuntimeError, ValueError), match=f"(?s){OP}.*{detail}"):
            call(x, w, b, activation)
    if device == "cuda":  # no sticky error left behind
        torch.cuda.synchronize()
        assert cuda_kernels.linear(_t(2, 3, device=device), _t(4, 3, device=device)).sum().item() == 24


@requires_cuda
@pytest.mark.gpu
def test_linear_different_devices():
    x, w, b = _t(3, 4, device="cuda"), _t(5, 4, device="cuda"), _t(5, device="cuda")
    for args in ((x.cpu(), w, b), (x, w.cpu(), b), (x, w, b.cpu())):
        with pytest.raises((RuntimeError, ValueError), match=OP):
            cuda_kernels.linear(*args, "relu")


def test_linear_bound_constants():
    """LIPSCHITZ and CURVATURE bound |act'| and |act''| of every activation (the bounds rest on them)."""
    z = torch.linspace(-20, 20, 400_001, dtype=torch.float64, requires_grad=True)
    assert set(LIPSCHITZ) == set(CURVATURE) == set(ACTIVATIONS) - {"swiglu"}
    for activation in LIPSCHITZ:
        (d1,) = torch.autograd.grad(act64(z, activation).sum(), z, create_graph=True)
        d2 = torch.zeros_like(z)  # None and relu: act' is constant (piecewise)
        if d1.requires_grad:
            (d2,) = torch.autograd.grad(d1.sum(), z, allow_unused=True, materialize_grads=True)
        assert d1.abs().max().item() <= LIPSCHITZ[activation]
        assert d2.abs().max().item() <= CURVATURE[activation]
