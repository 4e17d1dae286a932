"""cuda_kernels.square against torch on every device x dtype, plus opcheck, gradcheck, torch.compile and bad input."""

from __future__ import annotations

import pytest
import torch
from conftest import DEVICES, DTYPES, rand

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
