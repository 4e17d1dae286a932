"""cuda_kernels.rms_norm and its backward against torch.nn.functional.rms_norm in float64, on every device x dtype:
row lengths from 1 to 2^18 (both CUDA paths: rows in registers, and the two-pass path of long rows), odd lengths,
empty tensors, non-contiguous and misaligned rows; gradcheck, opcheck, torch.compile, a deterministic dweight and
bad input."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import DEVICES, DTYPES, rand, requires_cuda

import cuda_kernels

# (rtol, atol) against the float64 reference, per dtype. Ours computes in float32 (float64 for float64) and rounds
# once, so a result is a few units of the dtype's last place from the exact one; float32 adds the error of a float32
# sum over the row and of rsqrtf (2 ulp).
TOL = {
    torch.float32: (2e-5, 2e-5),
    torch.float64: (1e-10, 1e-10),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
}

# Rows of 1 element to 2^18: around the 16-byte pack (4 float32, 8 half), lengths that are not whole packs, the
# lengths the CUDA split changes threads per row at (the backward takes twice its packs past 128 threads a row: from
# 2049 16-bit or 1025 float32 elements), enough rows that the blocks walk several row groups (20000 short rows: the
# backward's prefetch of the next group; 300 of 8200), and past the register path (16384 half, 8192 float32) into
# the two-pass path; odd lengths there take the element-wise loads and stores.
SHAPES = [
    (1,),
    (1, 1),
    (3, 1),
    (5, 7),
    (4, 8),
    (4, 33),
    (2, 3, 64),
    (9, 256),
    (20000, 64),
    (3, 1000),
    (2, 4096),
    (2, 8200),
    (300, 8200),
    (3, 8201),
    (2, 16384),
    (2, 16392),
    (2, 16393),
    (1, 2**18),
    (0, 8),
    (4, 0),
]


def reference(x: torch.Tensor, weight: torch.Tensor | None, eps: float | None) -> torch.Tensor:
    """torch's rms_norm in float64 on the same inputs, rounded once to x's dtype."""
    e = torch.finfo(x.dtype).eps if eps is None else eps
    w = None if weight is None else weight.double()
    return F.rms_norm(x.double(), (x.shape[-1],), w, e).to(x.dtype)


def reference_grads(
    x: torch.Tensor, weight: torch.Tensor | None, eps: float | None, grad: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(dx, dweight) of torch's rms_norm in float64."""
    e = torch.finfo(x.dtype).eps if eps is None else eps
    xd = x.detach().double().requires_grad_()
    wd = None if weight is None else weight.detach().double().requires_grad_()
    F.rms_norm(xd, (x.shape[-1],), wd, e).backward(grad.double())
    return xd.grad, None if wd is None else wd.grad


def assert_close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, scale: float = 1.0) -> None:
    """Within TOL of the reference; `scale` widens atol for sums (dweight adds a term per row)."""
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(out.double(), ref.double(), rtol=rtol, atol=atol * scale)


def weight_for(x: torch.Tensor, with_weight: bool) -> torch.Tensor | None:
    return rand(x.shape[-1], dtype=x.dtype, device=str(x.device), seed=7) if with_weight else None


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("with_weight", [True, False], ids=["weight", "no-weight"])
def test_rms_norm_matches_torch(device, dtype, shape, with_weight):
    x = rand(*shape, dtype=dtype, device=device)
    w = weight_for(x, with_weight)
    for eps in (None, 1e-5):
        out = cuda_kernels.rms_norm(x, w, eps)
        assert out.shape == x.shape and out.dtype == x.dtype and out.device == x.device and out.is_contiguous()
        assert_close(out, reference(x, w, eps), dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "shape", [s for s in SHAPES if s != (1, 2**18)] + [pytest.param((2, 2**18), marks=pytest.mark.slow)], ids=str
)
def test_rms_norm_backward_matches_torch(device, dtype, shape):
    x = rand(*shape, dtype=dtype, device=device)
    grad = rand(*shape, dtype=dtype, device=device, seed=3)
    rows = max(1, x.numel() // max(1, x.shape[-1]))
    for with_weight in (True, False):
        w = weight_for(x, with_weight)
        dx_ref, dw_ref = reference_grads(x, w, None, grad)
        dx, dw = torch.ops.cuda_kernels.rms_norm_backward(grad, x, w, None)
        assert dx.shape == x.shape and dx.dtype == dtype
        assert_close(dx, dx_ref, dtype, scale=4)
        if with_weight:
            assert dw.shape == w.shape and dw.dtype == dtype
            assert_close(dw, dw_ref, dtype, scale=4 * rows**0.5)
        else:
            assert dw.numel() == 0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "make_view",
    [
        pytest.param(lambda t: t[:, ::2], id="strided-last-dim"),
        pytest.param(lambda t: t.t(), id="transposed"),
        pytest.param(lambda t: t[1:, 1:], id="offset-rows"),
        pytest.param(lambda t: t.flatten()[1 : 1 + 39 * 40].view(39, 40), id="misaligned-contiguous"),
        pytest.param(lambda t: t[:1].expand(40, -1), id="expanded-rows"),
        pytest.param(lambda t: t.view(4, 10, 48).permute(1, 0, 2), id="permuted-leading"),
        pytest.param(lambda t: t[::2], id="every-other-row"),
    ],
)
def test_rms_norm_non_contiguous(device, dtype, make_view):
    base = rand(40, 48, dtype=dtype, device=device, seed=1)
    x = make_view(base)
    w = weight_for(x, True)
    assert_close(cuda_kernels.rms_norm(x, w), reference(x, w, None), dtype)
    grad = rand(*x.shape, dtype=dtype, device=device, seed=2)
    dx_ref, dw_ref = reference_grads(x, w, None, grad)
    dx, dw = torch.ops.cuda_kernels.rms_norm_backward(grad, x, w, None)
    assert_close(dx, dx_ref, dtype, scale=4)
    assert_close(dw, dw_ref, dtype, scale=4 * x.shape[0] ** 0.5)
    # A gradient laid out unlike x (here transposed) is read correctly too.
    g2 = rand(*reversed(x.shape), dtype=dtype, device=device, seed=4).permute(*reversed(range(x.dim())))
    dx2, _ = torch.ops.cuda_kernels.rms_norm_backward(g2, x, w, None)
    assert_close(dx2, reference_grads(x, w, None, g2)[0], dtype, scale=4)


@pytest.mark.parametrize("device", DEVICES)
def test_rms_norm_autograd(device):
    """Through autograd: dx and dweight as torch's, nothing recorded when nothing needs it."""
    x = rand(6, 40, device=device)
    w = rand(40, device=device, seed=5)
    assert cuda_kernels.rms_norm(x, w).grad_fn is None
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    y = cuda_kernels.rms_norm(xg, wg, 1e-6)
    assert y.grad_fn is not None
    grad = rand(6, 40, device=device, seed=6)
    y.backward(grad)
    dx_ref, dw_ref = reference_grads(x, w, 1e-6, grad)
    assert_close(xg.grad, dx_ref, torch.float32, scale=4)
    assert_close(wg.grad, dw_ref, torch.float32, scale=16)
    # Only x requires grad: weight gets none.
    xg2 = x.clone().requires_grad_()
    cuda_kernels.rms_norm(xg2, w).sum().backward()
    assert xg2.grad is not None and w.grad is None


@pytest.mark.parametrize("device", DEVICES)
def test_rms_norm_gradcheck(device):
    x = rand(3, 7, dtype=torch.float64, device=device).requires_grad_()
    w = rand(7, dtype=torch.float64, device=device, seed=1).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, w: cuda_kernels.rms_norm(x, w, 1e-6), (x, w))
    assert torch.autograd.gradcheck(lambda x: cuda_kernels.rms_norm(x), (x,))


@pytest.mark.parametrize("device", DEVICES)
def test_rms_norm_dweight_is_deterministic(device):
    """dweight is reduced without atomics: the same inputs give the same bits, call after call."""
    x = rand(3000, 256, dtype=torch.bfloat16, device=device)
    grad = rand(3000, 256, dtype=torch.bfloat16, device=device, seed=1)
    w = rand(256, dtype=torch.bfloat16, device=device, seed=2)
    first = torch.ops.cuda_kernels.rms_norm_backward(grad, x, w, None)[1]
    for _ in range(3):
        assert torch.equal(torch.ops.cuda_kernels.rms_norm_backward(grad, x, w, None)[1], first)


@requires_cuda
@pytest.mark.parametrize("shape", [(3000, 256), (64, 20000)], ids=lambda s: "x".join(map(str, s)))
def test_rms_norm_backward_in_a_cuda_graph(shape):
    """The backward's column sum is launched as a programmatic dependent of its main kernel (sm_90); captured in a
    CUDA graph and replayed on new inputs it gives what a plain call gives, bit for bit (rows in registers, and the
    two-pass kernel)."""
    x = rand(*shape, dtype=torch.bfloat16, device="cuda")
    grad = rand(*shape, dtype=torch.bfloat16, device="cuda", seed=1)
    w = rand(shape[1], dtype=torch.bfloat16, device="cuda", seed=2)
    op = torch.ops.cuda_kernels.rms_norm_backward
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up outside the capture, as torch.cuda.graphs asks
        op(grad, x, w, None)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dx, dw = op(grad, x, w, None)
    for seed in (3, 4):
        x.copy_(rand(*shape, dtype=torch.bfloat16, device="cuda", seed=seed))
        graph.replay()
        want_dx, want_dw = op(grad, x, w, None)
        assert torch.equal(dx, want_dx) and torch.equal(dw, want_dw)


@pytest.mark.parametrize("device", DEVICES)
def test_rms_norm_opcheck(device):
    for dtype in (torch.float32, torch.float16):
        x = rand(5, 24, dtype=dtype, device=device).requires_grad_()
        w = rand(24, dtype=dtype, device=device, seed=1).requires_grad_()
        torch.library.opcheck(torch.ops.cuda_kernels.rms_norm.default, (x, w, 1e-5))
        torch.library.opcheck(torch.ops.cuda_kernels.rms_norm.default, (x, None, None))
        grad = rand(5, 24, dtype=dtype, device=device, seed=2)
        torch.library.opcheck(torch.ops.cuda_kernels.rms_norm_backward.default, (grad, x.detach(), w.detach(), None))


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_rms_norm_compile_fullgraph(device):
    torch._dynamo.reset()

    def f(x, w):
        return cuda_kernels.rms_norm(x, w) * 2

    compiled = torch.compile(f, fullgraph=True)
    x = rand(9, 64, device=device).requires_grad_()
    w = rand(64, device=device, seed=1).requires_grad_()
    out = compiled(x, w)
    assert_close(out, 2 * reference(x.detach(), w.detach(), None), torch.float32)
    out.sum().backward()
    dx_ref, dw_ref = reference_grads(x, w, None, torch.full_like(out, 2.0))
    assert_close(x.grad, dx_ref, torch.float32, scale=4)
    assert_close(w.grad, dw_ref, torch.float32, scale=16)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "args, message",
    [
        (
            lambda d: (torch.ones(3, 4, dtype=torch.int32, device=d), None),
            "cuda_kernels.rms_norm: x must be float32.*got Int",
        ),
        (lambda d: (torch.tensor(1.0, device=d), None), "cuda_kernels.rms_norm: x must have at least 1 dimension"),
        (
            lambda d: (torch.ones(3, 4, device=d), torch.ones(5, device=d)),
            r"weight must be 1-D with x.shape\[-1\] = 4 elements, got shape \[5\]",
        ),
        (
            lambda d: (torch.ones(3, 4, device=d), torch.ones(2, 4, device=d)),
            r"weight must be 1-D .* got shape \[2, 4\]",
        ),
        (
            lambda d: (torch.ones(3, 4, device=d), torch.ones(4, dtype=torch.float64, device=d)),
            r"weight must have x's dtype \(Float\), got Double",
        ),
        (
            lambda d: (torch.ones(3, 4, device=d), torch.ones(4, dtype=torch.int64, device=d)),
            "weight must be float32.*got Long",
        ),
    ],
    ids=["int-x", "0-d", "weight-length", "weight-2d", "weight-dtype", "weight-int"],
)
def test_rms_norm_bad_input(device, args, message):
    x, w = args(device)
    with pytest.raises(RuntimeError, match=message):
        cuda_kernels.rms_norm(x, w)


@requires_cuda
@pytest.mark.gpu
def test_rms_norm_weight_on_another_device():
    with pytest.raises(RuntimeError, match=r"cuda_kernels.rms_norm: weight must be on x's device \(cuda:0\), got cpu"):
        cuda_kernels.rms_norm(torch.ones(3, 4, device="cuda"), torch.ones(4))


@pytest.mark.parametrize("device", DEVICES)
def test_rms_norm_backward_bad_grad(device):
    x = torch.ones(3, 4, device=device)
    with pytest.raises(
        RuntimeError, match=r"cuda_kernels.rms_norm_backward: grad must have x's shape \[3, 4\], got \[4, 3\]"
    ):
        torch.ops.cuda_kernels.rms_norm_backward(torch.ones(4, 3, device=device), x, None, None)
