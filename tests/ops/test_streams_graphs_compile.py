"""The ops under streams, CUDA graphs and torch.compile.

- Side streams (CUDA): the op runs on the current stream. The input is written on a side stream after a long
  torch.cuda._sleep there; an op launched on another stream would read the zero-filled input first.
- CUDA graphs: captured once, replayed with new data copied into the static inputs; every ladder step of matmul.
- torch.compile (CPU and CUDA): fullgraph, dynamic shapes without recompiles (a CompileCounter backend counts the
  frames compiled: it must stay 1 across sizes), mark_dynamic, autograd through the compiled graph, and errors
  raised while tracing still name the op.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
from conftest import DEVICES, DTYPES, assert_matmul_close, rand, requires_caching_allocator, requires_cuda

import cuda_kernels
from cuda_kernels.ops import matmul_cuda_variants

SLEEP_CYCLES = 200_000_000  # ~0.1 s: much longer than launching the op


def variants(device: str, dtype: torch.dtype) -> list[int]:
    """variant 0 and, on CUDA, every ladder step that takes `dtype`."""
    return [0] + matmul_cuda_variants(dtype) if device == "cuda" else [0]


def exact_square(x: torch.Tensor) -> torch.Tensor:
    return x.double().square().to(x.dtype)


# ---------------------------------------------------------------------------------------------------------------
# Streams


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_side_stream_input_written_late(dtype: torch.dtype) -> None:
    """Input written on side stream s after a long sleep on s; the ops, called with s current, must run on s."""
    host_x = rand(4097, dtype=dtype) + 0.5
    host_a, host_b = rand(150, 70, dtype=dtype, seed=1), rand(70, 40, dtype=dtype, seed=2)
    x, a, b = (torch.zeros(h.shape, dtype=dtype, device="cuda") for h in (host_x, host_a, host_b))
    staged = [h.cuda() for h in (host_x, host_a, host_b)]
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(SLEEP_CYCLES)
        for dst, src in zip((x, a, b), staged, strict=True):
            dst.copy_(src, non_blocking=True)
        out_sq = cuda_kernels.square(x)
        out_sq_mis = cuda_kernels.square(x[1:])  # misaligned: the scalar-load path
        outs_mm = [cuda_kernels.matmul(a, b, variant=v) for v in variants("cuda", dtype)]
    s.synchronize()  # only s
    torch.testing.assert_close(out_sq.cpu(), exact_square(host_x), rtol=0, atol=0)
    torch.testing.assert_close(out_sq_mis.cpu(), exact_square(host_x[1:]), rtol=0, atol=0)
    for out in outs_mm:
        assert_matmul_close(out.cpu(), host_a, host_b)


@requires_cuda
@pytest.mark.gpu
def test_side_stream_with_wait_stream() -> None:
    """The documented pattern: the side stream waits for the producer, the consumer waits for the side stream."""
    main = torch.cuda.current_stream()
    a = torch.zeros(300, 200, device="cuda")
    b = rand(200, 100, device="cuda", seed=1)
    host_a = rand(300, 200)
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES)  # on main: the producer is slow
    a.copy_(host_a.cuda())
    s = torch.cuda.Stream()
    s.wait_stream(main)
    with torch.cuda.stream(s):
        c = cuda_kernels.matmul(a, b)
        d = cuda_kernels.square(c)
    main.wait_stream(s)
    c.record_stream(main)
    d.record_stream(main)
    e = d + 0  # consumer on main
    torch.cuda.synchronize()
    assert_matmul_close(c.cpu(), host_a, b.cpu())
    torch.testing.assert_close(e.cpu(), exact_square(c).cpu(), rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------------------------
# CUDA graphs


def _capture(fn, *static_inputs: torch.Tensor) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
    """Warm up on a side stream (as torch.cuda.graph requires), then capture fn(*static_inputs)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn(*static_inputs)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = fn(*static_inputs)
    return g, static_out


@requires_cuda
@requires_caching_allocator
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cuda_graph_square(dtype: torch.dtype) -> None:
    for name, shape, view in [
        ("contiguous", (1000, 33), lambda t: t),
        ("misaligned", (33001,), lambda t: t[3:]),
        ("transposed", (70, 50), lambda t: t.t()),
    ]:
        static_x = rand(*shape, dtype=dtype, device="cuda")
        g, static_out = _capture(lambda t, view=view: cuda_kernels.square(view(t)), static_x)
        for seed in range(1, 4):
            new = rand(*shape, dtype=dtype, seed=seed)
            static_x.copy_(new)
            g.replay()
            torch.cuda.synchronize()
            torch.testing.assert_close(static_out.cpu(), exact_square(view(new)), rtol=0, atol=0, msg=name)


@requires_cuda
@requires_caching_allocator
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cuda_graph_matmul_every_variant(dtype: torch.dtype) -> None:
    for variant in variants("cuda", dtype):
        for m, k, n in [(64, 64, 64), (129, 31, 67), (5, 0, 3)]:
            static_a = rand(m, k, dtype=dtype, device="cuda")
            static_b = rand(k, n, dtype=dtype, device="cuda", seed=1)
            g, static_out = _capture(
                lambda x, y, v=variant: cuda_kernels.square(cuda_kernels.matmul(x, y, variant=v)), static_a, static_b
            )
            for seed in range(2, 5):
                new_a, new_b = rand(m, k, dtype=dtype, seed=seed), rand(k, n, dtype=dtype, seed=seed + 10)
                static_a.copy_(new_a)
                static_b.copy_(new_b)
                g.replay()
                torch.cuda.synchronize()
                # square of an (already rounded) matmul result: compare with the eager ops on the same data.
                eager = cuda_kernels.matmul(new_a.cuda(), new_b.cuda(), variant=variant)
                assert_matmul_close(eager.cpu(), new_a, new_b)
                torch.testing.assert_close(static_out, exact_square(eager), rtol=0, atol=0, msg=f"variant {variant}")


# ---------------------------------------------------------------------------------------------------------------
# torch.compile


def _model(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return cuda_kernels.square(cuda_kernels.matmul(a, b)).sum()


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_inductor(device: str) -> None:
    """The default backend (inductor) with fullgraph=True: forward and backward right."""
    torch._dynamo.reset()
    compiled = torch.compile(_model, fullgraph=True)
    a = rand(12, 7, device=device, dtype=torch.float64).requires_grad_()
    b = rand(7, 5, device=device, dtype=torch.float64, seed=1).requires_grad_()
    loss = compiled(a, b)
    loss.backward()
    a2, b2 = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    ref = ((a2 @ b2) ** 2).sum()
    ref.backward()
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(a.grad, a2.grad)
    torch.testing.assert_close(b.grad, b2.grad)


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("how", ["dynamic=True", "mark_dynamic"])
def test_compile_dynamic_shapes_no_recompile(device: str, how: str) -> None:
    """Four different (M, K, N) and lengths: one frame compiled (CompileCounter), results right, grads right."""
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")

    def f(a: torch.Tensor, b: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return cuda_kernels.matmul(a, b), cuda_kernels.square(x)

    compiled = torch.compile(f, backend=counter, fullgraph=True, dynamic=True if how == "dynamic=True" else None)
    for i, (m, k, n, length) in enumerate([(3, 5, 7, 11), (10, 4, 6, 100), (33, 17, 2, 1000), (64, 65, 9, 4099)]):
        a = rand(m, k, device=device, seed=i).requires_grad_()
        b = rand(k, n, device=device, seed=i + 10)
        x = rand(length, device=device, seed=i + 20)
        if how == "mark_dynamic":
            for t in (a, b, x):
                for d in range(t.dim()):
                    torch._dynamo.mark_dynamic(t, d)
        c, y = compiled(a, b, x)
        assert_matmul_close(c.detach(), a.detach(), b)
        torch.testing.assert_close(y, exact_square(x), rtol=0, atol=0)
        c.sum().backward()
        assert_matmul_close(a.grad, torch.ones(m, n, device=device), b.t())
        assert counter.frame_count == 1, f"recompiled at sizes {(m, k, n, length)}: {counter.frame_count} frames"


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_compile_autograd_matches_eager(device: str) -> None:
    """A two-layer model through AOTAutograd (aot_eager) in float64: loss and grads equal eager torch's."""
    torch._dynamo.reset()

    def model(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
        return cuda_kernels.square(cuda_kernels.matmul(cuda_kernels.square(cuda_kernels.matmul(x, w1)), w2)).mean()

    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    params = [rand(16, 8, dtype=torch.float64, device=device, seed=s) for s in range(3)]
    params[2] = params[2][:8, :3].contiguous()  # w2: (8, 3)
    params[1] = params[1][:8, :8].t()  # w1: (8, 8), transposed view
    x, w1, w2 = (p.clone().requires_grad_() for p in params)
    loss = compiled(x, w1, w2)
    loss.backward()
    xr, w1r, w2r = (p.clone().requires_grad_() for p in params)
    ref = (((xr @ w1r) ** 2) @ w2r).pow(2).mean()
    ref.backward()
    torch.testing.assert_close(loss, ref, rtol=1e-12, atol=0)
    for got, want in ((x.grad, xr.grad), (w1.grad, w1r.grad), (w2.grad, w2r.grad)):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-14)


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_compile_errors_name_the_op(device: str) -> None:
    """Bad input found while tracing (by the fake kernels) gives the same messages as eager."""
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b: cuda_kernels.matmul(a, b), backend="aot_eager", fullgraph=True)
    with pytest.raises(RuntimeError, match=r"cuda_kernels.matmul: inner dimensions differ"):
        compiled(rand(3, 4, device=device), rand(5, 2, device=device))
    with pytest.raises(RuntimeError, match=r"cuda_kernels.matmul: a and b must have the same dtype"):
        compiled(rand(3, 4, device=device), rand(4, 2, device=device, dtype=torch.float64))
    compiled_sq = torch.compile(cuda_kernels.square, backend="aot_eager", fullgraph=True)
    with pytest.raises(RuntimeError, match=r"cuda_kernels.square: x must be float32, float64, float16 or bfloat16"):
        compiled_sq(torch.ones(3, dtype=torch.int32, device=device))


@pytest.mark.slow
@requires_cuda
@requires_caching_allocator
@pytest.mark.gpu
def test_compile_reduce_overhead_cuda_graphs() -> None:
    """torch.compile(mode="reduce-overhead") records CUDA graphs through inductor; results stay right on replay."""
    from torch.utils._triton import has_triton

    if not has_triton():
        pytest.skip("inductor on CUDA needs triton")
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b: cuda_kernels.square(cuda_kernels.matmul(a, b)), mode="reduce-overhead")
    for seed in range(4):
        a, b = rand(64, 48, device="cuda", seed=seed), rand(48, 32, device="cuda", seed=seed + 1)
        out = compiled(a, b).clone()
        eager = cuda_kernels.matmul(a, b)
        torch.testing.assert_close(out, exact_square(eager), rtol=0, atol=0)
