"""cuda_kernels.square against torch on every device x dtype, plus opcheck, gradcheck, torch.compile and bad input."""

from __future__ import annotations

import pytest
import torch
from conftest import DEVICES, DTYPES, rand, requires_cuda

import cuda_kernels

# 0-d, empty, 1, primes, odd rectangles, sizes around the 16-byte vector width and the kernel's per-block tile.
SHAPES = [
    (),
    (0,),
    (1,),
    (7,),
    (8,),
    (9,),
    (1023,),
    (1025,),
    (65537,),
    (3, 0, 5),
    (3, 5, 7),
    (999, 999),
    (2, 3, 4, 5),
]


def reference(x: torch.Tensor) -> torch.Tensor:
    """x * x rounded once to x's dtype. Exact for all four dtypes: the square of a p-bit significand fits in
    float64's 53 bits, so float64 computes it exactly and one rounding gives what float32/float16 math gives."""
    return x.double().square().to(x.dtype)


def check(out: torch.Tensor, x: torch.Tensor) -> None:
    assert out.shape == x.shape and out.dtype == x.dtype and out.device == x.device
    assert out.is_contiguous()
    torch.testing.assert_close(out, reference(x), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_square_matches_torch(device, dtype, shape):
    x = rand(*shape, dtype=dtype, device=device)
    check(cuda_kernels.square(x), x)
    check(torch.ops.cuda_kernels.square(x), x)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "make_view",
    [
        pytest.param(lambda t: t.t(), id="transposed"),
        pytest.param(lambda t: t[:, ::3], id="step-slice"),
        pytest.param(lambda t: t[1:, 1:], id="offset-2d"),
        pytest.param(lambda t: t.flatten()[1:], id="misaligned-contiguous"),
        pytest.param(lambda t: t[:1].expand(40, -1), id="expanded"),
        pytest.param(lambda t: t.view(4, 10, 33).permute(2, 0, 1), id="permuted-3d"),
    ],
)
def test_square_non_contiguous(device, dtype, make_view):
    base = rand(40, 33, dtype=dtype, device=device, seed=1)
    x = make_view(base)
    check(cuda_kernels.square(x), x)


def mid_size_range(dtype: torch.dtype) -> tuple[int, int]:
    """Element counts (exclusive low, inclusive high) that square.cu launches with 4 packs per thread on this GPU:
    its 2-pack grid needs more than one wave of 128-thread blocks, its 4-pack grid at most two (16-byte packs;
    assumes threads, not registers, bound the resident blocks, as launch_bounds ensures)."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    blocks_per_wave = props.multi_processor_count * (props.max_threads_per_multi_processor // 128)
    elements_per_pack = 16 // torch.empty((), dtype=dtype).element_size()
    return blocks_per_wave * 128 * 2 * elements_per_pack, 2 * blocks_per_wave * 128 * 4 * elements_per_pack


@requires_cuda
@pytest.mark.gpu
@pytest.mark.heavy
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_square_both_launch_shapes(dtype):
    """Sizes on both sides of the switches between 2 and 4 packs per thread (contiguous, aligned), odd tails."""
    low, high = mid_size_range(dtype)
    # Made on the GPU: up to 35 M elements on an H100, which conftest's CPU generator takes 0.1-0.4 s a dtype to make.
    g = torch.Generator(device="cuda").manual_seed(2)
    base = torch.randn(2 * high + 64, generator=g, device="cuda").to(dtype)
    for n in (low // 2 + 3, low - 1, low + 1, low + 129, high - 1, high + 1, high + 129, 2 * high + 7):
        x = base[:n]
        check(cuda_kernels.square(x), x)


@pytest.mark.parametrize("device", DEVICES)
def test_square_special_values(device):
    x = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e20, 1e-30, -3.0], device=device)
    for dtype in DTYPES:
        xd = x.to(dtype)
        check(cuda_kernels.square(xd), xd)


@pytest.mark.parametrize("device", DEVICES)
def test_square_opcheck(device):
    for dtype in (torch.float32, torch.float16):
        for x in (rand(5, 3, dtype=dtype, device=device), rand(4, 6, device=device).t().to(dtype)):
            torch.library.opcheck(torch.ops.cuda_kernels.square.default, (x.requires_grad_(dtype.is_floating_point),))


@pytest.mark.parametrize("device", DEVICES)
def test_square_gradcheck(device):
    x = rand(4, 5, dtype=torch.float64, device=device).requires_grad_()
    assert torch.autograd.gradcheck(cuda_kernels.square, (x,))
    assert torch.autograd.gradgradcheck(cuda_kernels.square, (x,))


@pytest.mark.parametrize("device", DEVICES)
def test_square_autograd_records_only_when_needed(device):
    """square's autograd (registered from Python, cuda_kernels/ops.py) skips the graph when nothing needs it, and
    records it otherwise."""
    x = rand(6, device=device)
    assert cuda_kernels.square(x).grad_fn is None
    xg = x.clone().requires_grad_()
    with torch.no_grad():
        assert not cuda_kernels.square(xg).requires_grad
    y = cuda_kernels.square(xg)
    assert y.requires_grad and y.grad_fn is not None
    y.sum().backward()
    torch.testing.assert_close(xg.grad, 2 * x, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_square_forward_mode_ad_is_refused(device):
    """Forward-mode AD has no formula here: a dual tensor is a clear error, not a result without its tangent."""
    from torch.autograd import forward_ad

    x = rand(6, device=device)
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(x, torch.ones_like(x))
        with pytest.raises(RuntimeError, match="cuda_kernels.square: forward-mode AD"):
            cuda_kernels.square(dual)
        torch.testing.assert_close(cuda_kernels.square(x), x * x)  # a plain tensor still works inside the level


def test_direct_c_apply_matches_function_apply():
    """The wrappers' autograd layer on torch < 2.14 (cuda_kernels.ops._c_apply: the C++ apply without torch's Python
    around it) gives the same output, gradient and graph as Function.apply; torch 2.14 needs no such path, so it is
    tested here whatever torch runs the suite. Under a functorch transform it defers to torch's own apply."""
    from cuda_kernels import ops

    function = next(o for o in vars(ops).values() if isinstance(o, ops._Op) and o.name == "cuda_kernels.square")
    apply = ops._c_apply(function.function)
    x = rand(5, 3, device="cpu").requires_grad_()
    y = apply(x)
    assert y.grad_fn is not None and type(y.grad_fn) is type(function.function.apply(x).grad_fn)
    y.sum().backward()
    torch.testing.assert_close(y, x * x, rtol=0, atol=0)
    torch.testing.assert_close(x.grad, 2 * x, rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="setup_context"):  # torch's own apply's error under torch.func
        torch.func.grad(lambda t: apply(t).sum())(x.detach())

    class WithSetupContext(torch.autograd.Function):
        @staticmethod
        def forward(t):
            return t

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

    with pytest.raises(TypeError, match="forward takes ctx"):
        ops._c_apply(WithSetupContext)


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_square_compile_fullgraph(device):
    torch._dynamo.reset()

    def f(x):
        return cuda_kernels.square(x) + 1

    compiled = torch.compile(f, fullgraph=True)
    x = rand(17, 3, device=device)
    torch.testing.assert_close(compiled(x), reference(x) + 1, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "x, message",
    [
        (
            lambda d: torch.ones(3, dtype=torch.int32, device=d),
            "cuda_kernels.square: x must be float32.*got Int",
        ),
        (
            lambda d: torch.ones(3, dtype=torch.bool, device=d),
            "cuda_kernels.square: x must be float32.*got Bool",
        ),
        (
            lambda d: torch.ones(3, dtype=torch.complex64, device=d),
            "cuda_kernels.square: x must be float32.*got ComplexFloat",
        ),
    ],
    ids=["int32", "bool", "complex64"],
)
def test_square_bad_input(device, x, message):
    with pytest.raises(RuntimeError, match=message):
        cuda_kernels.square(x(device))
