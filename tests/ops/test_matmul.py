"""cuda_kernels.matmul against float64 references on every device x dtype (default variant; the ladder's steps are
tested one by one in test_matmul_ladder.py), plus opcheck, gradcheck, torch.compile and bad input."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import (
    DEVICES,
    DTYPES,
    assert_matmul_close,
    assert_matmul_nd_close,
    disassemble_extension,
    rand,
    requires_cuda,
    requires_objdump,
)

import cuda_kernels

# (M, K, N): zeros, ones, primes, tile tails, odd rectangles, the CPU kernel's paths and block edges, 999^3.
SHAPES = [
    (0, 5, 3),
    (4, 5, 0),
    (1, 1, 1),
    (1, 7, 1),
    (2, 3, 5),
    (31, 33, 17),
    (64, 64, 64),
    (127, 129, 131),
    (1, 4096, 3),
    (300, 1, 200),
    (5, 301, 37),  # fewer rows than the CPU kernel's register tile: its matrix-vector path (and a K tail)
    (37, 301, 5),  # fewer columns: the dot-product path
    (75, 300, 260),  # past one CPU block in every dimension (72 rows, 256 deep, 256 float columns with AVX2)
    pytest.param((999, 999, 999), marks=pytest.mark.heavy),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mkn", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matmul_matches_reference(device, dtype, mkn):
    M, K, N = mkn
    if device == "cpu" and dtype == torch.float64 and M * K * N > 10**8:
        pytest.skip("float64 999^3 on the CPU is slow and covered by float32")
    a = rand(M, K, dtype=dtype, device=device, seed=1)
    b = rand(K, N, dtype=dtype, device=device, seed=2)
    out = cuda_kernels.matmul(a, b)
    assert out.is_contiguous()
    assert_matmul_close(out, a, b)


# torch.matmul's other shapes (a, b): 1-D operands, a batched a with a 2-D b (folded into rows), an empty batch,
# batches on both sides (broadcast, a 1-D or 2-D operand against a batch, an empty batch).
ND_SHAPES = [
    ((5,), (5, 3)),
    ((4, 5), (5,)),
    ((5,), (5,)),
    ((2, 3, 4, 5), (5, 6)),
    ((7, 1, 5), (5, 2)),
    ((0, 3, 5), (5, 2)),
    ((3, 4, 5), (3, 5, 2)),
    ((2, 1, 4, 5), (3, 5, 6)),
    ((4, 5), (2, 5, 3)),
    ((5,), (2, 5, 3)),
    ((1, 4, 5), (2, 3, 5, 1)),
    ((0, 4, 5), (1, 5, 3)),
    ((2, 4, 0), (2, 0, 3)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shapes", ND_SHAPES, ids=lambda s: f"{s[0]}@{s[1]}".replace(" ", ""))
def test_matmul_takes_torch_matmul_shapes(device, dtype, shapes):
    a = rand(*shapes[0], dtype=dtype, device=device, seed=1)
    b = rand(*shapes[1], dtype=dtype, device=device, seed=2)
    out = cuda_kernels.matmul(a, b)
    assert out.dtype == dtype
    assert_matmul_nd_close(out, a, b)


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_batched_gradients(device):
    """Gradients of a batched product reach both operands, summed over the batch for a broadcast one."""
    a = rand(4, 5, dtype=torch.float64, device=device, seed=3).requires_grad_()
    b = rand(3, 5, 2, dtype=torch.float64, device=device, seed=4).requires_grad_()
    assert torch.autograd.gradcheck(cuda_kernels.matmul, (a, b))
    c = rand(2, 1, 2, 5, dtype=torch.float64, device=device, seed=5).transpose(-1, -2).requires_grad_()
    assert torch.autograd.gradcheck(cuda_kernels.matmul, (c, b.transpose(-1, -2)))


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_batched_a_strided_and_differentiable(device):
    """A batched a whose batch dims do not fold into a view (transposed) is copied once; gradients flow to both."""
    a = rand(3, 4, 6, dtype=torch.float64, device=device, seed=3).transpose(0, 1).requires_grad_()
    b = rand(6, 2, dtype=torch.float64, device=device, seed=4).requires_grad_()
    torch.testing.assert_close(cuda_kernels.matmul(a, b), torch.matmul(a, b))
    assert torch.autograd.gradcheck(cuda_kernels.matmul, (a, b))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matmul_k_zero_gives_zeros(device, dtype):
    a = torch.empty(6, 0, dtype=dtype, device=device)
    b = torch.empty(0, 4, dtype=dtype, device=device)
    out = cuda_kernels.matmul(a, b)
    torch.testing.assert_close(out, torch.mm(a, b), rtol=0, atol=0)
    assert (out == 0).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "views",
    [
        pytest.param(lambda a, b: (a.t().contiguous().t(), b), id="a-column-major"),
        pytest.param(lambda a, b: (a, b.t().contiguous().t()), id="b-column-major"),
        pytest.param(lambda a, b: (a[:, ::2], b[::2, :]), id="step-slices"),
        pytest.param(lambda a, b: (a[1:, 1:], b[1:, 1:]), id="offsets"),
        pytest.param(lambda a, b: (a[:1].expand(a.shape[0], -1), b), id="expanded-a"),
    ],
)
def test_matmul_non_contiguous(device, dtype, views):
    a0 = rand(70, 90, dtype=dtype, device=device, seed=3)
    b0 = rand(90, 50, dtype=dtype, device=device, seed=4)
    a, b = views(a0, b0)
    assert_matmul_close(cuda_kernels.matmul(a, b), a, b)


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_opcheck(device):
    for dtype in (torch.float32, torch.bfloat16):
        a = rand(5, 7, dtype=dtype, device=device).requires_grad_()
        b = rand(7, 3, dtype=dtype, device=device).requires_grad_()
        torch.library.opcheck(torch.ops.cuda_kernels.matmul.default, (a, b, 0))
        torch.library.opcheck(torch.ops.cuda_kernels.matmul.default, (a.detach().t().contiguous().t(), b.detach(), 0))
        # A batch, one operand broadcast (stride 0 along the batch), as the wrapper passes torch.matmul's shapes.
        a3 = rand(3, 5, 7, dtype=dtype, device=device).requires_grad_()
        b3 = rand(1, 7, 4, dtype=dtype, device=device).expand(3, 7, 4)
        torch.library.opcheck(torch.ops.cuda_kernels.matmul.default, (a3, b3, 0))


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_gradcheck(device):
    a = rand(6, 5, dtype=torch.float64, device=device, seed=5).requires_grad_()
    b = rand(5, 4, dtype=torch.float64, device=device, seed=6).requires_grad_()
    assert torch.autograd.gradcheck(cuda_kernels.matmul, (a, b))
    assert torch.autograd.gradgradcheck(cuda_kernels.matmul, (a, b))


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_matmul_compile_fullgraph(device):
    torch._dynamo.reset()

    def f(a, b):
        return cuda_kernels.square(cuda_kernels.matmul(a, b)).sum()

    compiled = torch.compile(f, fullgraph=True)
    a = rand(8, 16, device=device, dtype=torch.float64, seed=7).requires_grad_()
    b = rand(16, 4, device=device, dtype=torch.float64, seed=8).requires_grad_()
    loss = compiled(a, b)
    loss.backward()
    a2, b2 = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    ((a2 @ b2) ** 2).sum().backward()
    torch.testing.assert_close(loss, ((a2 @ b2) ** 2).sum())
    torch.testing.assert_close(a.grad, a2.grad)
    torch.testing.assert_close(b.grad, b2.grad)


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_matmul_batched_compile_fullgraph(device):
    """torch.matmul's batched shapes through torch.compile: the wrapper's broadcasting traces into the graph."""
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b: cuda_kernels.matmul(a, b).sum(), fullgraph=True)
    a = rand(2, 1, 4, 6, device=device, dtype=torch.float64, seed=9).requires_grad_()
    b = rand(3, 6, 5, device=device, dtype=torch.float64, seed=10).requires_grad_()
    compiled(a, b).backward()
    a2, b2 = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    torch.matmul(a2, b2).sum().backward()
    torch.testing.assert_close(a.grad, a2.grad)
    torch.testing.assert_close(b.grad, b2.grad)


OP = "cuda_kernels.matmul"
BAD_INPUTS = [
    ("int", lambda d: (torch.ones(2, 2, dtype=torch.int64, device=d), torch.ones(2, 2, device=d)), f"{OP}: a must be float32.*got Long"),
    ("bool", lambda d: (torch.ones(2, 2, device=d), torch.ones(2, 2, dtype=torch.bool, device=d)), f"{OP}: b must be float32.*got Bool"),
    ("complex", lambda d: (torch.ones(2, 2, dtype=torch.complex64, device=d),) * 2, f"{OP}: a must be float32.*got ComplexFloat"),
    ("dtype-mismatch", lambda d: (torch.ones(2, 2, device=d), torch.ones(2, 2, dtype=torch.float64, device=d)), f"{OP}: a and b must have the same dtype"),
    ("batch-mismatch", lambda d: (torch.ones(2, 2, 2, device=d), torch.ones(3, 2, 2, device=d)), rf"{OP}: the batch dimensions of a \[2, 2, 2\] and b \[3, 2, 2\] do not broadcast"),
    ("a-0d", lambda d: (torch.tensor(1.0, device=d), torch.ones(2, 2, device=d)), f"{OP}: a and b must have at least 1 dimension"),
    ("inner-mismatch", lambda d: (torch.ones(2, 3, device=d), torch.ones(4, 2, device=d)), f"{OP}: inner dimensions differ"),
]  # fmt: skip


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name, make, message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_matmul_bad_input(device, name, make, message):
    a, b = make(device)
    with pytest.raises(RuntimeError, match=message):
        cuda_kernels.matmul(a, b)


# requires_cuda, not just a visible GPU: a CPU-only build on a GPU host (CUDA_KERNELS_ALLOW_CPU_ONLY=1) has no CUDA
# kernels, and the dispatcher's "no kernel for the CUDA backend" is not the device check this test is about.
@requires_cuda
@pytest.mark.gpu
def test_matmul_different_devices():
    a, b = torch.ones(2, 2), torch.ones(2, 2, device="cuda")
    for x, y in ((a, b), (b, a)):
        with pytest.raises(RuntimeError, match=f"{OP}: a and b must be on the same device"):
            cuda_kernels.matmul(x, y)
    with pytest.raises(RuntimeError, match="cuda_kernels.square"):
        cuda_kernels.square(torch.ones(2, dtype=torch.int32, device="cuda"))


def test_matmul_variant_on_cpu_is_an_error():
    with pytest.raises(RuntimeError, match=f"{OP}: variant 1 is a CUDA kernel"):
        cuda_kernels.matmul(torch.ones(2, 2), torch.ones(2, 2), variant=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_matmul_cpu_packed_buffers_kept_and_not(dtype):
    """The CPU kernel keeps its packed operands' buffers (up to 16 MiB each) for the calling thread's next call and
    allocates bigger ones per call: a bigger product grows a kept buffer, a smaller one then reuses it (its tail still
    holds the last call's values), and one over the limit goes through a buffer of its own, after which the kept
    one still serves. Each result against the reference."""
    # (M, K, N); the packed B of the third is 4096 x 1100 floats and more (padded to whole panels): over 16 MiB.
    for M, K, N in [(70, 1000, 700), (13, 200, 33), (8, 4096, 1100), (70, 1000, 700), (7, 9, 6)]:
        a = rand(M, K, dtype=dtype, device="cpu", seed=M + K)
        b = rand(K, N, dtype=dtype, device="cpu", seed=N)
        assert_matmul_close(cuda_kernels.matmul(a, b), a, b)


@requires_objdump
def test_matmul_cpu_micro_kernel_keeps_its_tile_in_registers():
    """No build's micro_kernel (csrc/cpu/matmul_kernel.h) stores a vector register to the stack inside a loop.
    Depending on the compiler and the code around it, GCC has kept a copy of the accumulator tile there and stored all
    of it at every k step, which made the AVX512 kernel 2-3x slower with nothing else wrong; the kernel is written to
    avoid that (noinline, the row loops unrolled by pragma), and this checks the binary that was built. Stores before
    the loop (GCC 13 zeroes the tile's unused stack copy once) cost nothing and are allowed."""
    disassembly = disassemble_extension()
    # "  7324e:\tvmovaps %zmm2,-0x78(%rsp)": a vector register stored at a stack address.
    stack_store = re.compile(r"\tv?mov\w*\s+%[xyz]mm\d+,\s*-?(0x[0-9a-f]+)?\(%r[sb]p\)")
    # "  7324e:\tjne    731c0 <...>": a jump and its target.
    jump = re.compile(r"^\s*([0-9a-f]+):\tj\w+\s+([0-9a-f]+)\b")
    kernels: dict[str, list[str]] = {}
    name = ""
    for line in disassembly.splitlines():
        if line.endswith(">:"):  # "0000000000012340 <void cuda_kernels::cpu::AVX2::micro_kernel<float>(...)>:"
            name = line if "::micro_kernel<" in line else ""
            if name:
                kernels[name] = []
        elif name and re.match(r"^\s*[0-9a-f]+:\t", line):
            kernels[name].append(line)
    assert kernels, "no micro_kernel in the binary (inlined or renamed?): nothing was checked"
    spilling = []
    for name, lines in kernels.items():
        # Loops: a jump back to an earlier address spans [target, jump].
        loops = [(int(m[2], 16), int(m[1], 16)) for m in map(jump.match, lines) if m and int(m[2], 16) < int(m[1], 16)]
        assert loops, f"no loop found in {name}: the check would be empty"
        for line in lines:
            address = int(line.split(":")[0], 16)
            if stack_store.search(line) and any(lo <= address <= hi for lo, hi in loops):
                spilling.append(f"{name} {line.strip()}")
    assert not spilling, "micro_kernel stores vector registers to the stack in a loop:\n" + "\n".join(spilling[:20])
