"""Two GPUs: with the current device 0, ops on tensors on cuda:1 run on cuda:1, on cuda:1's current stream, and are
right; a cuda:0 + cuda:1 pair is a clear error. Skipped with a reason unless two GPUs are visible.

How "runs on cuda:1's current stream" is tested: the input is written on a side stream s of cuda:1 after a long
torch.cuda._sleep on s. An op that launched on any other stream (cuda:1's default stream, or a stream of cuda:0)
would read the input before it is written (it holds zeros until then) and give zeros; the result is read after
s.synchronize() alone, which would not wait for a kernel on another stream.
"""

from __future__ import annotations

import pytest
import torch
from conftest import DTYPES, TWO_GPU_SKIP_REASON, assert_matmul_close, rand

import cuda_kernels
from cuda_kernels.ops import matmul_cuda_variants

SKIP = TWO_GPU_SKIP_REASON

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(bool(SKIP), reason=SKIP or "n/a")]

SLEEP_CYCLES = 200_000_000  # ~0.1 s at ~2 GHz: far longer than any launch of the op
DEV1 = "cuda:1"


def variants(dtype: torch.dtype) -> list[int]:
    """variant 0 and every ladder step that takes `dtype` on cuda:1."""
    return [0] + matmul_cuda_variants(dtype, device=1)


@pytest.fixture(autouse=True)
def _current_device_0():
    torch.cuda.set_device(0)
    yield
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    torch.cuda.set_device(0)


def _on_side_stream_of_dev1(fn, *host_inputs: torch.Tensor) -> tuple[torch.Tensor, torch.cuda.Stream]:
    """Zeros on cuda:1, then on a side stream s of cuda:1 (made current with torch.cuda.stream): sleep, copy the
    real data in, and call fn with the current device set back to 0. Returns (fn's output, s)."""
    inputs = [torch.zeros(h.shape, dtype=h.dtype, device=DEV1) for h in host_inputs]
    staged = [h.to(DEV1) for h in host_inputs]
    torch.cuda.synchronize(1)
    s = torch.cuda.Stream(device=DEV1)
    with torch.cuda.stream(s):  # makes s current on cuda:1 (and cuda:1 the current device)
        torch.cuda.set_device(0)  # back to device 0; s stays cuda:1's current stream
        assert torch.cuda.current_device() == 0
        assert torch.cuda.current_stream(1) == s
        with torch.cuda.device(1):
            torch.cuda._sleep(SLEEP_CYCLES)  # on s: the data below arrives late
            for dst, src in zip(inputs, staged, strict=True):
                dst.copy_(src, non_blocking=True)
        assert torch.cuda.current_device() == 0
        out = fn(*inputs)
        assert torch.cuda.current_device() == 0, "the op must restore the current device"
    s.synchronize()  # only s: a kernel on another stream might still be running
    return out, s


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_square_on_cuda1_side_stream(dtype: torch.dtype) -> None:
    x = rand(1000, 37, dtype=dtype) + 0.5  # no zeros: an early read of the zero-filled input shows
    views = {
        "contiguous": lambda t: t,
        "misaligned": lambda t: t.view(-1)[1:],
        "transposed": lambda t: t.t(),
    }
    for name, view in views.items():
        out, _ = _on_side_stream_of_dev1(lambda t, view=view: cuda_kernels.square(view(t)), x)
        assert out.device == torch.device(DEV1), name
        ref = view(x).double().square().to(dtype)
        torch.testing.assert_close(out.cpu(), ref, rtol=0, atol=0, msg=f"{name}: wrong result on cuda:1")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matmul_on_cuda1_side_stream(dtype: torch.dtype) -> None:
    a = rand(130, 70, dtype=dtype, seed=1)
    b = rand(70, 90, dtype=dtype, seed=2)
    for variant in variants(dtype):
        for layout in ("contiguous", "column-major"):

            def fn(x: torch.Tensor, y: torch.Tensor, variant: int = variant, layout: str = layout) -> torch.Tensor:
                if layout == "column-major":  # the copies run on cuda:1's current stream too
                    x, y = x.t().contiguous().t(), y.t().contiguous().t()
                return cuda_kernels.matmul(x, y, variant=variant)

            out, _ = _on_side_stream_of_dev1(fn, a, b)
            assert out.device == torch.device(DEV1), (variant, layout)
            assert_matmul_close(out.cpu(), a, b)


def test_default_streams_and_k0_on_cuda1() -> None:
    """Plain calls on cuda:1 (default streams) with current device 0, including the K = 0 path (zeros)."""
    x = rand(513, device=DEV1)
    torch.testing.assert_close(cuda_kernels.square(x), x.double().square().float(), rtol=0, atol=0)
    out = cuda_kernels.matmul(torch.empty(5, 0, device=DEV1), torch.empty(0, 3, device=DEV1))
    assert out.device == torch.device(DEV1) and (out == 0).all()
    assert torch.cuda.current_device() == 0


def test_backward_on_cuda1() -> None:
    a = rand(20, 30, device=DEV1, dtype=torch.float64).requires_grad_()
    b = rand(30, 10, device=DEV1, dtype=torch.float64, seed=1).requires_grad_()
    cuda_kernels.square(cuda_kernels.matmul(a, b)).sum().backward()
    a2, b2 = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    ((a2 @ b2) ** 2).sum().backward()
    assert a.grad.device == torch.device(DEV1)
    torch.testing.assert_close(a.grad, a2.grad)
    torch.testing.assert_close(b.grad, b2.grad)


@pytest.mark.parametrize("order", ["0-then-1", "1-then-0"])
def test_mixed_gpus_is_a_clear_error(order: str) -> None:
    a, b = rand(3, 4, device="cuda:0"), rand(4, 2, device=DEV1)
    if order == "1-then-0":
        a, b = rand(3, 4, device=DEV1), rand(4, 2, device="cuda:0")
    with pytest.raises(
        RuntimeError, match=r"cuda_kernels.matmul: a and b must be on the same device, got cuda:\d and cuda:\d"
    ):
        cuda_kernels.matmul(a, b)
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
