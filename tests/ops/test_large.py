"""Tensors past 2^31 elements on the GPU (64-bit indexing): square on 2^31 + 5 elements, strided views whose offsets
pass 2^31, the kernel's 32/64-bit index switch, and matmul whose output has more than 2^31 elements, every ladder
step. Marked slow and gpu; each test skips with a reason when the GPU lacks the free memory it needs.

The same checking code runs at a small size on the CPU (test_*_small), so CI exercises it too.
Run on a GPU: python3 -m pytest -v -s -m slow tests/ops/test_large.py
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from conftest import CUDA_SKIP_REASON, matmul_error_bound

import cuda_kernels
from cuda_kernels.ops import matmul_cuda_variants

GiB = 2**30
CHUNK = 2**26  # elements per chunk when filling or checking (keeps temporaries at ~0.5 GiB)
PRIME = 251  # the fill pattern repeats every PRIME elements; 2^31 is not a multiple, so a wrapped index shows


def require_gpu_memory(nbytes: int) -> None:
    """Skips unless CUDA runs here and nbytes (plus 10%) of GPU memory are free."""
    if CUDA_SKIP_REASON:
        pytest.skip(CUDA_SKIP_REASON)
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    if free < nbytes * 1.1:
        pytest.skip(
            f"needs {nbytes * 1.1 / GiB:.1f} GiB of free GPU memory; {free / GiB:.1f} of {total / GiB:.1f} free"
        )


def pattern_value(i: int) -> float:
    """The value at flat index i of fill_pattern: a multiple of 1/8 in [-15.625, 15.625], exact in every dtype."""
    return ((i % PRIME) - 125) / 8


def fill_pattern(x: torch.Tensor) -> None:
    """Writes pattern_value(i) into flat element i of the contiguous tensor x, chunk by chunk."""
    flat = x.view(-1)
    for s in range(0, flat.numel(), CHUNK):
        e = min(flat.numel(), s + CHUNK)
        idx = torch.arange(s, e, device=x.device, dtype=torch.int64)
        flat[s:e] = ((idx % PRIME) - 125).to(torch.float32).div_(8).to(x.dtype)


def exact_square(x: torch.Tensor) -> torch.Tensor:
    return x.double().square().to(x.dtype)


def check_square_ends(out: torch.Tensor, n: int, index_of: Callable[[int], int]) -> None:
    """The first and last 8 elements and 64 random ones against pattern values computed on the host.
    index_of(j): the flat index into the filled buffer that output element j reads."""
    flat = out.view(-1)
    g = torch.Generator().manual_seed(0)
    js = list(range(8)) + list(range(n - 8, n)) + torch.randint(0, n, (64,), generator=g).tolist()
    got = flat[torch.tensor(js, device=out.device)].cpu()
    want = torch.tensor([pattern_value(index_of(j)) for j in js], dtype=torch.float64).square().to(out.dtype)
    bad = [(j, g_, w) for j, g_, w in zip(js, got.tolist(), want.tolist(), strict=True) if g_ != w]
    assert not bad, f"wrong elements (index, got, expected): {bad[:8]}"


def check_square_all(out: torch.Tensor, view: torch.Tensor) -> None:
    """Every output element against float64 x*x of the view, chunk by chunk over the flattened output."""
    flat = out.view(-1)
    if view.dim() == 1:
        for s in range(0, flat.numel(), CHUNK):
            e = min(flat.numel(), s + CHUNK)
            ref = exact_square(view[s:e])
            assert torch.equal(flat[s:e], ref), f"mismatch in elements [{s}, {e})"
    else:  # rows of a 2-D view
        rows = max(1, CHUNK // max(1, view.shape[1]))
        for r in range(0, view.shape[0], rows):
            ref = exact_square(view[r : r + rows])
            assert torch.equal(out[r : r + rows], ref), f"mismatch in rows [{r}, {r + rows})"


def run_square_contiguous(n: int, dtype: torch.dtype, device: str) -> None:
    x = torch.empty(n, dtype=dtype, device=device)
    fill_pattern(x)
    out = cuda_kernels.square(x)
    assert out.shape == x.shape and out.dtype == dtype
    check_square_ends(out, n, lambda j: j)
    check_square_all(out, x)
    del out
    # Non-contiguous: every other element; offsets reach n - 1 (past 2^31 when n is), numel about n / 2.
    view = x[1::2]
    out = cuda_kernels.square(view)
    check_square_ends(out, view.numel(), lambda j: 1 + 2 * j)
    check_square_all(out, view)


def run_square_transposed(rows: int, cols: int, dtype: torch.dtype, device: str) -> None:
    """A (cols, rows) transposed view of a (rows, cols) tensor: strided kernel, numel and offsets past 2^31."""
    x = torch.empty(rows, cols, dtype=dtype, device=device)
    fill_pattern(x)
    view = x.t()
    out = cuda_kernels.square(view)
    assert out.shape == (cols, rows) and out.is_contiguous()
    # output element j = (c, r) reads x[r, c], flat index r * cols + c
    check_square_ends(out, out.numel(), lambda j: (j % rows) * cols + j // rows)
    check_square_all(out, view)


def randn(*shape: int, dtype: torch.dtype, device: str, seed: int) -> torch.Tensor:
    """Normal random numbers generated on `device` (fast for GiB-sized tensors)."""
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(shape, generator=g, device=device, dtype=torch.float32).to(dtype)


def run_matmul_big_output(m: int, k: int, n: int, dtype: torch.dtype, device: str, variants: list[int]) -> None:
    """c = a @ b with m * n > 2^31 (at full size): the corners, then every element in blocks of rows x cols,
    against float64 references within conftest.matmul_error_bound."""
    a = randn(m, k, dtype=dtype, device=device, seed=1)
    b = randn(k, n, dtype=dtype, device=device, seed=2)
    cols = min(n, CHUNK)
    rows = max(1, CHUNK // cols)  # a block of the float64 reference is <= CHUNK elements (0.5 GiB)
    for variant in variants:
        out = cuda_kernels.matmul(a, b, variant=variant)
        assert out.shape == (m, n) and out.dtype == dtype and out.is_contiguous()
        corners = [(0, 0), (0, n - 1), (m - 1, 0), (m - 1, n - 1)]
        for i, j in corners:
            ref = (a[i].double() @ b[:, j].double()).item()
            bound = matmul_error_bound(a[i : i + 1], b[:, j : j + 1], torch.tensor([[ref]], device=a.device)).item()
            assert abs(out[i, j].item() - ref) <= bound, (
                f"variant {variant}: corner {(i, j)}: {out[i, j].item()} vs {ref}"
            )
        for r in range(0, m, rows):
            for c in range(0, n, cols):
                ra, bc = a[r : r + rows], b[:, c : c + cols]
                ref = ra.double() @ bc.double()
                err = (out[r : r + rows, c : c + cols].double() - ref).abs()
                bad = err > matmul_error_bound(ra, bc, ref)
                assert not bad.any(), (
                    f"variant {variant}: {int(bad.sum())} elements out of tolerance in the block at ({r}, {c}); "
                    f"first at {tuple(int(v) for v in bad.nonzero()[0])} inside it"
                )
        del out


def cuda_variants(dtype: torch.dtype) -> list[int]:
    """variant 0 and every ladder step that takes `dtype` on this GPU."""
    return [0] + matmul_cuda_variants(dtype)


# ---------------------------------------------------------------------------------------------------------------
# GPU, full size


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16], ids=str)
def test_square_2_31_plus_5(dtype: torch.dtype) -> None:
    n = 2**31 + 5
    # x + out + the strided view's output + check temporaries
    require_gpu_memory(n * 2 * 2 + n + 2 * GiB)
    run_square_contiguous(n, dtype, "cuda")


@pytest.mark.slow
@pytest.mark.gpu
def test_square_transposed_view_past_2_31() -> None:
    rows, cols = 32771, 65537  # 2^31 + 215,... elements
    assert rows * cols > 2**31
    require_gpu_memory(rows * cols * 2 * 2 + 2 * GiB)
    run_square_transposed(rows, cols, torch.float16, "cuda")


@pytest.mark.slow
@pytest.mark.gpu
def test_square_around_the_32_64_bit_switch() -> None:
    """square_cuda uses 32-bit indices below 2^30 elements/offsets and 64-bit from there: both sides, contiguous
    and strided, and a small strided view whose last offset is 2^30 (64-bit with few elements)."""
    require_gpu_memory((2**30 + 1) * 2 * 3 + GiB)
    for n in (2**30 - 1, 2**30, 2**30 + 1):
        x = torch.empty(n, dtype=torch.float16, device="cuda")
        fill_pattern(x)
        out = cuda_kernels.square(x)
        check_square_ends(out, n, lambda j: j)
        check_square_all(out, x)
        del out
        view = x[:: 2**15]
        out = cuda_kernels.square(view)
        check_square_ends(out, view.numel(), lambda j: j * 2**15)
        del x, out


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_matmul_output_past_2_31_elements(dtype: torch.dtype) -> None:
    m, k, n = 65536, 13, 32769  # m * n = 2^31 + 2^16 outputs; k = 13 leaves a tail in every K tile
    assert m * n > 2**31
    require_gpu_memory(m * n * 2 + (m + n) * k * 2 + 4 * GiB)
    run_matmul_big_output(m, k, n, dtype, "cuda", cuda_variants(dtype))


@pytest.mark.slow
@pytest.mark.gpu
def test_matmul_wide_output_past_2_31_elements() -> None:
    m, k, n = 2, 3, 2**30 + 3  # column indices past 2^30, output offsets past 2^31
    require_gpu_memory(m * n * 2 + k * n * 2 + 4 * GiB)
    run_matmul_big_output(m, k, n, torch.float16, "cuda", cuda_variants(torch.float16))


# ---------------------------------------------------------------------------------------------------------------
# The same checks at a small size on the CPU: CI runs the checking code.


def test_square_large_checks_small_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(__import__(__name__), "CHUNK", 4099)  # several chunks, a partial last one
    run_square_contiguous(2**20 + 5, torch.float16, "cpu")
    run_square_transposed(131, 257, torch.bfloat16, "cpu")


def test_matmul_large_checks_small_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(__import__(__name__), "CHUNK", 4099)
    run_matmul_big_output(300, 13, 257, torch.bfloat16, "cpu", [0])
    run_matmul_big_output(2, 3, 2**15 + 3, torch.float16, "cpu", [0])
