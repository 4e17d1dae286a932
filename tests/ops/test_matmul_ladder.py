"""Every CUDA matmul kernel (csrc/cuda/matmul/: the ladder's steps 1-12 and the special cases 13-15), forced with
variant=N, against float64 references: every dtype the kernel takes (the tensor-core steps 7-12: float16/bfloat16;
tf32_wgmma: float32 as TF32; fp64_dmma: float64), edge tiles,
non-contiguous and misaligned inputs, grid limits, long K; plus the variant list, variant 0's pick, and the errors
for variants that cannot run (unknown, a dtype the step does not take, TF32 not allowed)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from conftest import EXT_HAS_CUDA, rand, requires_cuda, requires_profiler

import cuda_kernels
from cuda_kernels.ops import matmul_default_kernel, matmul_kernels, matmul_unmet_need
from cuda_kernels.tools.testing import check_matmul, check_within, matmul_error_bound

OP = "cuda_kernels.matmul"
TUNING = "cuda_kernels.matmul_tuning"


def ladder() -> list[tuple[int, str]]:
    """[(variant, name)] as the extension reports them; empty in a CPU-only build."""
    return [(v, n) for v, n, _ in matmul_kernels()]


VARIANTS = [v for v, _ in ladder()] if EXT_HAS_CUDA else []
NAMES = dict(ladder()) if EXT_HAS_CUDA else {}
# Without CUDA kernels no variant exists; the CPU tests below still need numbers to try.
CPU_VARIANTS = VARIANTS or [1, 2, 6]

# (M, N, K): single elements, tails of every tile size used (16, 32, 64, 128, 256 and slab depths 8, 16, 32),
# K not a multiple of 4 (no 16-byte loads of a), N not a multiple of 4 (none of b and c), more k slabs than
# pipeline stages. In step 6, the shapes with few output tiles and K >= 256 take the split-K path, 1667 x 1540
# enough 128 x 128 tiles (with edges) for one block per tile.
SHAPES = [
    (1, 1, 1),
    (1, 7, 3),
    (3, 1, 5),
    (17, 33, 65),
    (64, 64, 64),
    (128, 256, 64),
    (129, 257, 63),
    (127, 255, 17),
    (65, 132, 36),
    (130, 4, 1001),
    (256, 260, 520),
    (33, 96, 8),
    (1667, 1540, 40),
]
# Shapes for the 16-byte cp.async paths of steps 7-8 (K and N multiples of 8, which most of the above are not),
# with edges: 257 x 264 leaves 1-row and 8-column tails, K = 328 is 10 32-deep slabs and 8 more (more slabs than
# pipeline stages); 1100 x 520 has 9 row tiles of 128, so step 8's grouped tile order (8 row tiles per group)
# ends with a short group.
SHAPES += [(257, 264, 328), (1100, 520, 136), (8, 8, 8)]
BIG_SHAPE = (999, 999, 999)  # float32 and bfloat16 only: the float64 reference of many of these is slow
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# The dtypes each step takes, as the extension declares them: {variant: [dtype name]}.
STEP_DTYPES = {v: list(dtypes) for v, _, dtypes in matmul_kernels()} if EXT_HAS_CUDA else {}
# The kernels that compute float32 in TF32 (their names say so; test_tf32_step_needs_tf32_allowed checks that they
# refuse to run while TF32 is off). Their cases run with TF32 allowed and are checked against the TF32 bound.
TF32_STEPS = {v for v, name in NAMES.items() if "tf32" in name}
# The kernel made for skinny outputs (M or N <= 16), which variant 0 takes for those shapes only.
SKINNY_STEPS = {v for v, name in NAMES.items() if name == "matvec"}
# The float64 tensor-core kernel (mma.sync .f64, compute >= 8.0).
DMMA_STEPS = {v for v, name in NAMES.items() if "_dmma" in name}
SKINNY_MAX_SIDE = 16
# float32 (TF32 off) with 8-16 rows against a b of fewer than 2^25 elements takes step 6, not matvec (dispatch.cpp).
FP32_TILED_MIN_ROWS, FP32_TILED_MAX_WEIGHT = 8, 2**25


def _tf32(variant: int, dtype: torch.dtype) -> bool:
    return variant in TF32_STEPS and dtype == torch.float32


@contextlib.contextmanager
def allow_tf32(on: bool) -> Iterator[None]:
    """torch.backends.cuda.matmul.allow_tf32 set to `on` (read by torch.mm and by our matmul), restored on exit."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = on
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def mm(a: torch.Tensor, b: torch.Tensor, variant: int) -> torch.Tensor:
    """cuda_kernels.matmul forcing `variant`; a TF32 step's case runs with TF32 allowed, every other with it off."""
    with allow_tf32(_tf32(variant, a.dtype)):
        return cuda_kernels.matmul(a, b, variant=variant)


def assert_step_close(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, variant: int) -> None:
    """out within the error bound of a @ b: testing.matmul_error_bound, or the TF32 bound for a TF32 step."""
    ok, message = check_matmul(a, b, out, tf32=_tf32(variant, a.dtype))
    assert ok, message


def runs(variant: int, dtype: torch.dtype) -> bool:
    """Whether step `variant` (0: the pick) can run dtype here: it takes the dtype and, with a GPU visible, the GPU
    has what it needs (compute capability, ...; TF32 allowed for a TF32 step, as mm() runs it). Without a GPU the
    tests that use this skip anyway."""
    if variant == 0:
        return True
    if not torch.cuda.is_available():
        return _dtype_name(dtype) in STEP_DTYPES[variant]
    name = "float32+tf32" if _tf32(variant, dtype) else _dtype_name(dtype)
    return not matmul_unmet_need(variant, name, -1)


def step_dtype_params(variants: list[int], dtypes: list[torch.dtype]) -> list:
    """pytest params (variant, dtype) for every pair that can run here."""
    return [pytest.param(v, dt, id=f"{v}-{_dtype_name(dt)}") for v in variants for dt in dtypes if runs(v, dt)]


def any_dtype(variant: int) -> torch.dtype:
    """float32 where the step takes it, else bfloat16 (the 16-bit tensor-core steps), else float64 (the float64
    tensor-core step): for tests about indexing, not dtypes."""
    for dtype in (torch.float32, torch.bfloat16, torch.float64):
        if runs(variant, dtype):
            return dtype
    return torch.bfloat16  # a step that cannot run here: the test then checks that it says so


def _seed(*parts: object) -> int:
    """A seed that differs between test cases, so a stale output from an earlier case cannot pass."""
    return sum((i + 1) * ord(ch) for i, ch in enumerate(repr(parts))) % (2**31)


def _mm_case(variant: int, dtype: torch.dtype, m: int, n: int, k: int, b_k_major: bool = False) -> None:
    """One product of random inputs against torch; b_k_major: b is W.t() of a row-major (N, K) W, as linear's."""
    a = rand(m, k, dtype=dtype, device="cuda", seed=_seed(variant, dtype, m, n, k, "a"))
    if b_k_major:
        b = rand(n, k, dtype=dtype, device="cuda", seed=_seed(variant, dtype, m, n, k, "w")).t()
    else:
        b = rand(k, n, dtype=dtype, device="cuda", seed=_seed(variant, dtype, m, n, k, "b"))
    out = mm(a, b, variant)
    assert out.is_contiguous()
    assert_step_close(out, a, b, variant)


# ---------------------------------------------------------------------------------------------------------
# The variant list and its errors (run everywhere)


@pytest.mark.skipif(not EXT_HAS_CUDA, reason="the extension was built without CUDA: no ladder")
def test_variants_listed_in_order():
    steps = ladder()
    assert len(steps) >= 8, steps
    assert [v for v, _ in steps] == list(range(1, len(steps) + 1))
    matmul_dir = Path(__file__).resolve().parents[2] / "csrc" / "cuda" / "matmul"
    has_sources = matmul_dir.is_dir()  # not where the tests run against an installed wheel
    for v, name in steps:
        # The ladder's steps are "NN_what", the number the variant, in csrc/cuda/matmul/ladder/<name>.cu(h); the
        # special cases after them are named for what they do, in csrc/cuda/matmul/<name>.cu.
        if re.fullmatch(r"\d\d_[a-z0-9_]+", name):
            assert int(name[:2]) == v, (v, name)
            assert not has_sources or list((matmul_dir / "ladder").glob(f"{name}.cu*")), name
        else:
            assert v > max(int(n[:2]) for _, n in steps if n[:2].isdigit()), (v, name)  # after every rung
            assert not has_sources or (matmul_dir / f"{name}.cu").is_file(), name
    assert steps[0][1] == "01_tiled"


def test_variants_empty_without_cuda():
    if not EXT_HAS_CUDA:
        assert ladder() == []


@pytest.mark.parametrize("variant", CPU_VARIANTS)
def test_cpu_rejects_ladder_variants(variant):
    a, b = rand(3, 4), rand(4, 5)
    with pytest.raises(RuntimeError, match=rf"{OP}: variant {variant} is a CUDA kernel"):
        cuda_kernels.matmul(a, b, variant=variant)


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize("variant", [-1, len(VARIANTS) + 1, 1000])
def test_cuda_rejects_unknown_variant(variant):
    a, b = rand(3, 4, device="cuda"), rand(4, 5, device="cuda")
    with pytest.raises(
        RuntimeError, match=rf"{OP}: unknown variant {variant}; use 0 \(auto\) or one of 1 \(01_tiled\)"
    ):
        cuda_kernels.matmul(a, b, variant=variant)


FIRST_TENSOR_CORE_STEP = 7  # steps 1-6 run on CUDA cores (all four dtypes), 7 onwards on tensor cores


def test_step_dtypes_declared():
    if not EXT_HAS_CUDA:
        assert STEP_DTYPES == {}
        return
    assert sorted(STEP_DTYPES) == VARIANTS
    assert TF32_STEPS == {13}, NAMES
    assert SKINNY_STEPS == {14}, NAMES
    assert DMMA_STEPS == {15}, NAMES
    for v, names in STEP_DTYPES.items():
        if v in TF32_STEPS:
            want = ["float32"]
        elif v in DMMA_STEPS:
            want = ["float64"]
        elif v >= FIRST_TENSOR_CORE_STEP and v not in SKINNY_STEPS:
            want = ["float16", "bfloat16"]
        else:
            want = ["float32", "float64", "float16", "bfloat16"]
        assert names == want, (v, NAMES[v], names)


UNSUPPORTED = [
    pytest.param(v, dt, id=f"{v}-{_dtype_name(dt)}")
    for v in VARIANTS
    for dt in DTYPES
    if _dtype_name(dt) not in STEP_DTYPES[v]
]


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize(("variant", "dtype"), UNSUPPORTED)
def test_step_rejects_unsupported_dtype(variant, dtype):
    """Forcing a step on a dtype it does not take names the op, the step, what it takes and what it got; so does
    the fake kernel (torch.compile, meta tensors)."""
    takes = STEP_DTYPES[variant]
    msg = rf"{OP}: variant {variant} \({NAMES[variant]}\) supports {' and '.join(takes)}, got {_dtype_name(dtype)}"
    a, b = rand(3, 4, dtype=dtype, device="cuda"), rand(4, 5, dtype=dtype, device="cuda")
    with pytest.raises(RuntimeError, match=msg):
        cuda_kernels.matmul(a, b, variant=variant)
    with pytest.raises(RuntimeError, match=msg):  # K = 0 is no exception: the check comes first
        cuda_kernels.matmul(a[:, :0], b[:0], variant=variant)
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode, pytest.raises(RuntimeError, match=msg):
        cuda_kernels.matmul(mode.from_tensor(a), mode.from_tensor(b), variant=variant)


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_default_step(dtype):
    """matmul_default_kernel says which kernel variant 0 runs: the last of the table that can run the dtype
    here (float16/bfloat16 on compute >= 8.0: a tensor-core step; float64 on compute >= 8.0: fp64_dmma; float32 with
    TF32 off, float64 before compute 8.0: step 6); variant 0 then gives bit for bit what forcing that step gives."""
    with allow_tf32(False):
        variant, name, reason = matmul_default_kernel(dtype)
        large = [v for v in VARIANTS if runs(v, dtype) and not _tf32(v, dtype) and v not in SKINNY_STEPS]
        assert (variant, name) == (max(large), NAMES[variant])
        major, minor = torch.cuda.get_device_capability()
        assert reason.startswith(f"compute {major}.{minor} ({torch.cuda.get_device_name()})"), reason
        if dtype == torch.float64 and (major, minor) >= (8, 0):
            assert name == "fp64_dmma", (name, reason)
            assert "skipped" not in reason, reason
        elif dtype in (torch.float32, torch.float64):
            assert name == "06_async_pipeline", (name, reason)
            # Steps that never take the dtype are not listed as skipped; every SIMT step can run here, and for
            # float32 the TF32 step is skipped, saying why.
            if dtype == torch.float32:
                assert "; skipped tf32_wgmma (computes float32 in TF32" in reason, reason
                assert ", " not in reason.split("; skipped ")[1].split(" (")[0], reason  # no other step
            else:
                assert "skipped" not in reason, reason
        elif (major, minor) >= (8, 0):
            assert name >= "08_mma_pipeline", (name, reason)
        a = rand(300, 264, dtype=dtype, device="cuda", seed=_seed("default", dtype, "a"))
        b = rand(264, 520, dtype=dtype, device="cuda", seed=_seed("default", dtype, "b"))
        out = cuda_kernels.matmul(a, b)
        torch.testing.assert_close(out, cuda_kernels.matmul(a, b, variant=variant), rtol=0, atol=0)
        assert_step_close(out, a, b, 0)


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "mnk",
    [
        (1, 300, 264),
        (7, 520, 264),
        (8, 520, 264),
        (16, 520, 264),
        (16, 8192, 4096),
        (300, 1, 264),
        (300, 16, 65),
        (17, 520, 264),
        (300, 17, 264),
    ],
    ids=str,
)
def test_default_step_skinny(dtype, mnk):
    """Variant 0 takes matvec for outputs with M or N <= 16 (bit for bit what forcing it gives), except float32
    with 8-16 rows and a small b, and the large-output pick otherwise; build_info's reason names matvec."""
    (skinny,) = SKINNY_STEPS
    m, n, k = mnk
    a = rand(m, k, dtype=dtype, device="cuda", seed=_seed("skinny", dtype, mnk, "a"))
    b = rand(k, n, dtype=dtype, device="cuda", seed=_seed("skinny", dtype, mnk, "b"))
    fp32_tiled = (
        dtype == torch.float32 and m >= FP32_TILED_MIN_ROWS and n > SKINNY_MAX_SIDE and n * k < FP32_TILED_MAX_WEIGHT
    )
    with allow_tf32(False):
        out = cuda_kernels.matmul(a, b)
        large, _, reason = matmul_default_kernel(dtype)
        pick = skinny if min(m, n) <= SKINNY_MAX_SIDE and not fp32_tiled else large
        torch.testing.assert_close(out, cuda_kernels.matmul(a, b, variant=pick), rtol=0, atol=0)
    assert f"outputs with M or N <= {SKINNY_MAX_SIDE} take {NAMES[skinny]}" in reason, reason
    assert_step_close(out, a, b, 0)


def _skinny_kernels(a: torch.Tensor, b: torch.Tensor) -> set[str]:
    """Names of the matvec kernels that one forced call of it runs (the result is checked too)."""
    from torch.profiler import ProfilerActivity, profile

    (skinny,) = SKINNY_STEPS
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        out = cuda_kernels.matmul(a, b, variant=skinny)
        torch.cuda.synchronize()
    assert_step_close(out, a, b, skinny)
    return {re.search(r"matmul_kernel_matvec_[a-z]+", e.name).group() for e in prof.events() if "_matvec_" in e.name}


@requires_cuda
@pytest.mark.gpu
@requires_profiler
def test_skinny_blocks_per_sm_switch(matmul_tuning):
    """The matvec_blocks_per_sm knob sets how far matvec splits K: 1 block per SM leaves a 1 x 65536 x 512
    product (512 column tiles) unsplit, so no reduction kernel runs; 64 splits it (clusters off, so the splits add
    up in the reduce kernel). A bad value is a clear error."""
    matmul_tuning(matvec_cluster_splits=1)
    a = rand(1, 512, device="cuda", seed=_seed("bps", "a"))
    b = rand(512, 65536, device="cuda", seed=_seed("bps", "b"))
    matmul_tuning(matvec_blocks_per_sm=1)
    assert _skinny_kernels(a, b) == {"matmul_kernel_matvec_rows"}
    matmul_tuning(matvec_blocks_per_sm=64)
    assert _skinny_kernels(a, b) == {"matmul_kernel_matvec_rows", "matmul_kernel_matvec_reduce"}
    with pytest.raises(RuntimeError, match=rf"{TUNING}: matvec_blocks_per_sm=zero is not a positive integer"):
        matmul_tuning(matvec_blocks_per_sm="zero")


def _clusters_here() -> bool:
    """Whether matvec adds up its K splits in clusters here: an sm_90+ GPU and a build with sm_90+ code."""
    cc = torch.cuda.get_device_capability()
    built = [
        tuple(int(x) for x in re.match(r"(\d+)\.(\d+)", arch).groups()) for arch in cuda_kernels.build_info()["archs"]
    ]
    return cc >= (9, 0) and any((9, 0) <= arch <= cc for arch in built)


@requires_cuda
@requires_profiler
@pytest.mark.gpu
def test_skinny_cluster_switch(matmul_tuning):
    """On sm_90 matvec's K splits form a cluster and add up in distributed shared memory: one kernel, no reduce
    kernel (every result checked against the reference), except where the reduce kernel measured faster (float64,
    "rows" at more than 8 rows). The matvec_cluster_splits knob caps the splits of a cluster (1: clusters
    off, the reduce kernel runs; up to 16 on an H100); a bad value is a clear error. On older GPUs the reduce kernel
    always runs."""
    cases = {  # name: (a, b) of a product whose K matvec splits, whether it takes clusters where there are any
        "rows": (rand(1, 4096, seed=_seed("cl", 1)), rand(4096, 1024, seed=_seed("cl", 2)), True),
        "rows8": (rand(8, 4096, seed=_seed("cl", 3)), rand(4096, 1024, seed=_seed("cl", 4)), True),
        "rows16": (rand(16, 4096, seed=_seed("cl", 3)), rand(4096, 1024, seed=_seed("cl", 4)), False),
        "cols": (rand(1024, 4096, seed=_seed("cl", 5)), rand(4096, 1, seed=_seed("cl", 6)), True),
        "mma": (
            rand(16, 4096, dtype=torch.bfloat16, seed=_seed("cl", 7)),
            rand(4096, 1024, dtype=torch.bfloat16),
            True,
        ),
        "float64": (
            rand(9, 4096, dtype=torch.float64, seed=_seed("cl", 8)),
            rand(4096, 520, dtype=torch.float64),
            False,
        ),
    }
    for name, (a, b, takes) in cases.items():
        a, b = a.cuda(), b.cuda()
        matmul_tuning(matvec_cluster_splits=None)
        kernels = _skinny_kernels(a, b)
        assert ("matmul_kernel_matvec_reduce" in kernels) != (takes and _clusters_here()), (name, kernels)
        matmul_tuning(matvec_cluster_splits=1)
        assert "matmul_kernel_matvec_reduce" in _skinny_kernels(a, b), name
        if takes and _clusters_here():
            for cap in ("2", "16"):  # few splits, and the non-portable size
                matmul_tuning(matvec_cluster_splits=cap)
                assert "matmul_kernel_matvec_reduce" not in _skinny_kernels(a, b), (name, cap)
    with pytest.raises(RuntimeError, match=rf"{TUNING}: matvec_cluster_splits=0 is not a positive integer"):
        matmul_tuning(matvec_cluster_splits=0)


@requires_cuda
@requires_profiler
@pytest.mark.gpu
def test_skinny_mma_splits_by_width(matmul_tuning):
    """With few column tiles (x @ W.t() against a weight of 512 rows: 8 tiles) matvec's mma kernel does not stop at
    8 splits a cluster: while the weight is small its splits add up in clusters (of up to 16: the profiler does not
    show the size), and from 32 MiB of it (64 here, off the edge) it takes every wanted split and the reduce kernel
    (kWideClusterSplits in matvec.cu); the matvec_cluster_splits knob, once set, decides alone. Every result is
    checked against the reference. On older GPUs the reduce kernel always runs."""
    cases = {  # name: (x, weight), whether the default adds the splits in the reduce kernel where clusters exist
        "small": (
            rand(1, 4096, dtype=torch.bfloat16, seed=_seed("wide", 1)),
            rand(512, 4096, dtype=torch.bfloat16),
            False,
        ),
        "64 MiB": (
            rand(16, 65536, dtype=torch.float16, seed=_seed("wide", 2)),
            rand(512, 65536, dtype=torch.float16, seed=_seed("wide", 3)),
            True,
        ),
    }
    for name, (x, w, reduce) in cases.items():
        a, b = x.cuda(), w.cuda().t()
        matmul_tuning(matvec_cluster_splits=None)
        kernels = _skinny_kernels(a, b)
        assert "matmul_kernel_matvec_mma" in kernels, (name, kernels)
        assert ("matmul_kernel_matvec_reduce" in kernels) == (reduce or not _clusters_here()), (name, kernels)
        if _clusters_here():
            matmul_tuning(matvec_cluster_splits=8)
            assert "matmul_kernel_matvec_reduce" not in _skinny_kernels(a, b), name


# (S, K, L) for the CUDA-core "rows" kernel in float32 / float64: S on both sides of 4 and 8 rows (P by broadcast
# loads, or staged in shared memory 64 k at a time: K tails of the chunk), K split or not, L with a tail past the
# block's columns.
ROWS_SHAPES = [(s, k, n) for s in (1, 3, 5, 8, 9, 16) for k, n in [(3, 8), (100, 133), (4099, 260), (200, 4100)]]


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("clusters", ["default", "off"])
@pytest.mark.parametrize("q_layout", ["rows", "strided"])
def test_skinny_rows_shapes(matmul_tuning, dtype, clusters, q_layout):
    """The "rows" kernel gives the product at every S <= 16 (P by broadcast loads up to 4 rows, staged in shared
    memory from 5), K tails and splits, L tails, with Q's rows 16-byte loads or (a strided Q) element by element, P
    contiguous or transposed, with the splits added in clusters (sm_90) or by the reduce kernel."""
    if clusters == "off":
        matmul_tuning(matvec_cluster_splits=1)
    (skinny,) = SKINNY_STEPS
    for s, k, n in ROWS_SHAPES:
        seed = _seed("rows-shapes", dtype, s, k, n)
        a = rand(s, k, dtype=dtype, device="cuda", seed=seed)
        b = rand(k, n, dtype=dtype, device="cuda", seed=seed + 1)
        if q_layout == "strided":
            b = rand(k, n + 1, dtype=dtype, device="cuda", seed=seed + 1)[:, 1:]  # rows 16-byte misaligned
            a = rand(k, s, dtype=dtype, device="cuda", seed=seed).t()  # P along k strided
        out = cuda_kernels.matmul(a, b, variant=skinny)
        ok, message = check_matmul(a, b, out)
        assert ok, f"{s}x{n}x{k} ({q_layout} Q): {message}"


@requires_cuda
@requires_profiler
@pytest.mark.gpu
def test_skinny_mma_switch(matmul_tuning):
    """matvec runs 16-bit problems on the tensor cores ("mma" kernel, compute >= 8.0) at every S, in both layouts
    of Q (B row-major: "rows"; A row-major with the short side N: "cols", K % 8 == 0); the matvec_mma_min_rows knob
    sets the fewest rows it takes (17: never), a bad value is a clear error."""
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("the mma kernel needs compute >= 8.0")
    a = rand(16, 4096, dtype=torch.bfloat16, device="cuda", seed=_seed("mma", "a"))
    b = rand(4096, 1024, dtype=torch.bfloat16, device="cuda", seed=_seed("mma", "b"))
    assert "matmul_kernel_matvec_mma" in _skinny_kernels(a, b)
    assert "matmul_kernel_matvec_mma" in _skinny_kernels(a[:1], b)
    w = b.t().contiguous()  # (1024, 4096) row-major: w @ a.t() is 1024 x 16 with Q = w^T k-contiguous ("cols")
    assert "matmul_kernel_matvec_mma" in _skinny_kernels(w, a.t())
    assert "matmul_kernel_matvec_cols" in _skinny_kernels(w[:, :4095], a.t()[:4095])  # K % 8 != 0
    matmul_tuning(matvec_mma_min_rows=17)
    assert "matmul_kernel_matvec_rows" in _skinny_kernels(a, b)
    matmul_tuning(matvec_mma_min_rows=5)
    assert "matmul_kernel_matvec_rows" in _skinny_kernels(a[:4], b)
    assert "matmul_kernel_matvec_mma" in _skinny_kernels(a[:5], b)
    with pytest.raises(RuntimeError, match=rf"{TUNING}: matvec_mma_min_rows=-2 is not a positive integer"):
        matmul_tuning(matvec_mma_min_rows=-2)


# (S, K, L) for the mma kernel: every S, K not a multiple of the 64-deep slab (and K % 8 != 0, which the "cols"
# layout leaves to the CUDA-core kernel) and long K (split), L with a tail of one 8-column chunk past the
# 128-column block tile, or of fewer columns.
MMA_KL = [(3, 8), (8, 8), (100, 136), (104, 136), (4099, 264), (4104, 130)]
MMA_SHAPES = [(s, k, n) for s in (1, 2, 5, 8, 9, 15, 16) for k, n in MMA_KL]


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("p_layout", ["rows", "transposed"])
@pytest.mark.parametrize("q_layout", ["rows", "cols"])
def test_skinny_mma_shapes(matmul_tuning, dtype, p_layout, q_layout):
    """The mma kernel (taking every S, as by default) gives the product at every S <= 16, K tails and splits, L
    tails, with Q (the big operand) in either layout and P (the small one) in either layout: 16-byte copies of P or
    element by element. "cols": C = A B with N = S, i.e. C^T = B^T A^T, Q = A^T."""
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("the mma kernel needs compute >= 8.0")
    matmul_tuning(matvec_mma_min_rows=1)
    (skinny,) = SKINNY_STEPS
    for s, k, n in MMA_SHAPES:
        seed = _seed("mma-shapes", dtype, p_layout, s, k, n)
        a = rand(s, k, dtype=dtype, device="cuda", seed=seed)
        if p_layout == "transposed":
            a = rand(k, s, dtype=dtype, device="cuda", seed=seed).t()
        b = rand(k, n, dtype=dtype, device="cuda", seed=seed + 1)
        if q_layout == "cols":
            a, b = b.t().contiguous(), a.t()  # (n, k) row-major times (k, s): the same P, Q = A^T k-contiguous
        out = cuda_kernels.matmul(a, b, variant=skinny)
        ok, message = check_matmul(a, b, out)
        assert ok, f"{a.shape[0]}x{b.shape[1]}x{k} ({q_layout} Q, {p_layout} P): {message}"


@requires_cuda
@pytest.mark.gpu
def test_tf32_step_needs_tf32_allowed():
    """tf32_wgmma computes float32 in TF32, so it runs only while torch allows TF32 for matmul (as torch.mm then uses
    TF32): forced with TF32 off it raises, saying how to allow it; variant 0 picks it only with TF32 allowed (where
    the binary and GPU have wgmma) and then gives bit for bit what forcing it gives, within the TF32 bound (which
    the float32 bound is not: the results are really TF32)."""
    a = rand(300, 264, device="cuda", seed=_seed("tf32", "a"))
    b = rand(264, 520, device="cuda", seed=_seed("tf32", "b"))
    (step,) = TF32_STEPS
    with allow_tf32(False):
        why = matmul_unmet_need(step, "float32", -1)
        assert "computes float32 in TF32, which torch does not allow now" in why, why
        assert matmul_unmet_need(step, "float32+tf32", -1) != why
        with pytest.raises(RuntimeError, match=rf"{OP}: variant {step} \(tf32_wgmma\) computes float32 in TF32"):
            cuda_kernels.matmul(a, b, variant=step)
        assert matmul_default_kernel("float32")[0] == 6
    wgmma = runs(step, torch.float32)
    with allow_tf32(True):
        variant, name, reason = matmul_default_kernel("float32")
        assert matmul_default_kernel("float32+tf32") == (variant, name, reason)
        assert "float32 (TF32 allowed)" in reason, reason
        assert variant == (step if wgmma else 6), (variant, name, reason)
        out = cuda_kernels.matmul(a, b)
        if wgmma:
            torch.testing.assert_close(out, cuda_kernels.matmul(a, b, variant=step), rtol=0, atol=0)
            assert not check_matmul(a, b, out)[0]  # TF32 results: outside the float32 bound
        assert_step_close(out, a, b, step)


def test_default_step_names_dtypes():
    if not EXT_HAS_CUDA:
        assert (
            matmul_default_kernel("bfloat16")[:2] == (0, "")
            and "no CUDA kernels" in matmul_default_kernel("bfloat16")[2]
        )
    elif torch.cuda.is_available():
        unknown = rf"{OP}: unknown dtype name 'int8'; use float32, float32\+tf32, float64, float16"
        with pytest.raises(RuntimeError, match=unknown):
            matmul_default_kernel("int8")
        for alias, name in [("torch.bfloat16", "bfloat16"), ("half", "float16"), ("float", "float32")]:
            assert matmul_default_kernel(alias) == matmul_default_kernel(name, -1)


# ---------------------------------------------------------------------------------------------------------
# Every step, CUDA only


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize(("variant", "dtype"), step_dtype_params(VARIANTS, DTYPES))
@pytest.mark.parametrize("mnk", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_step_matches_reference(variant, dtype, mnk):
    _mm_case(variant, dtype, *mnk)


@requires_cuda
@pytest.mark.gpu
@pytest.mark.heavy
@pytest.mark.parametrize(("variant", "dtype"), step_dtype_params([0, *VARIANTS], [torch.float32, torch.bfloat16]))
def test_step_999(variant, dtype):
    _mm_case(variant, dtype, *BIG_SHAPE)


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize(
    ("variant", "dtype"),
    step_dtype_params([0, *VARIANTS], [torch.float16, torch.bfloat16]) + step_dtype_params(TF32_STEPS, [torch.float32]),
)
@pytest.mark.parametrize("mnk", [(16, 24, 65536), (3, 20, 65531)], ids=lambda s: "x".join(map(str, s)))
def test_step_long_k(variant, dtype, mnk):
    """K up to 65536: 2048 slabs of 32, float32 accumulation (K = 65531: not a multiple of 8, the scalar paths)."""
    _mm_case(variant, dtype, *mnk)


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize(("variant", "dtype"), step_dtype_params([0, *VARIANTS], DTYPES))
def test_step_k_zero(variant, dtype):
    """K = 0 gives zeros without reaching a kernel (csrc/cuda/ops.cpp; the launchers assume K >= 1)."""
    a = torch.empty(5, 0, dtype=dtype, device="cuda")
    b = torch.empty(0, 7, dtype=dtype, device="cuda")
    out = mm(a, b, variant)
    assert out.shape == (5, 7) and out.dtype == dtype and out.is_contiguous()
    assert (out == 0).all()


# Each view function gets (M, N, K) and r(*shape, seed=...), which makes random CUDA tensors of the dtype under
# test; the views are taken on the GPU (moving a view to the GPU would make it contiguous and aligned).
VIEWS = [
    # a given transposed (column-major), b sliced to every other column, ...: the dispatcher copies them for the
    # steps that need row-major inputs; step 1 reads them through their strides.
    pytest.param(lambda m, n, k, r: (r(k, m, seed=1).t(), r(k, n, seed=2)), id="a-transposed"),
    pytest.param(lambda m, n, k, r: (r(m, k, seed=1), r(n, k, seed=2).t()), id="b-transposed"),
    # K-major b with a column pitch beyond K and a base 4 or 2 bytes off a 16-byte boundary (step 6 reads it as is).
    pytest.param(lambda m, n, k, r: (r(m, k, seed=1), r(n, k + 3, seed=2)[:, 1 : k + 1].t()), id="b-transposed-pitch"),
    pytest.param(lambda m, n, k, r: (r(m, 2 * k, seed=1)[:, ::2], r(k, 2 * n, seed=2)[:, 1::2]), id="column-steps"),
    pytest.param(lambda m, n, k, r: (r(m + 1, k + 3, seed=1)[1:, 3:], r(k + 1, n + 1, seed=2)[1:, :n]), id="offset-slices"),
    # Contiguous, but one element (4 or 2 bytes) past a 16-byte boundary: no copy is made, so 16-byte loads must
    # not be; also with only one of the two misaligned.
    pytest.param(lambda m, n, k, r: (r(m * k + 1, seed=1)[1:].view(m, k), r(k * n + 1, seed=2)[1:].view(k, n)), id="misaligned"),
    pytest.param(lambda m, n, k, r: (r(m, k, seed=1), r(k * n + 1, seed=2)[1:].view(k, n)), id="misaligned-b"),
    pytest.param(lambda m, n, k, r: (r(1, k, seed=1).expand(m, k), r(k, n, seed=2)), id="expanded-a"),
]  # fmt: skip


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize(("variant", "dtype"), step_dtype_params([0, *VARIANTS], DTYPES))
@pytest.mark.parametrize("views", VIEWS)
# (72, 136, 96): K and N multiples of 8, so for steps 7-8 only the view (not the shape) rules out 16-byte copies.
@pytest.mark.parametrize("mnk", [(70, 132, 92), (1, 40, 300), (72, 136, 96)], ids=lambda s: "x".join(map(str, s)))
def test_step_non_contiguous(variant, dtype, views, mnk):
    base = _seed(variant, dtype, mnk)

    def r(*shape: int, seed: int) -> torch.Tensor:
        return rand(*shape, dtype=dtype, device="cuda", seed=base + seed)

    a, b = views(*mnk, r)
    m, n, k = mnk
    assert a.shape == (m, k) and b.shape == (k, n)
    assert_step_close(mm(a, b, variant), a, b, variant)


# Batches: the op's (batch, M, K) @ (batch, K, N), which its wrapper makes of torch.matmul's batched shapes. Each
# function gets (batch, M, N, K) and r (as VIEWS) and returns 3-D a and b: both batched, one broadcast (batch stride
# 0, as expand makes it), transposed matrices (b K-major: attention's Q @ K^T), batches strided apart or closer
# than a matrix (b's batch stride is one row), bases off a 16-byte boundary.
BATCH_LAYOUTS = [
    pytest.param(lambda s, m, n, k, r: (r(s, m, k, seed=1), r(s, k, n, seed=2)), id="contiguous"),
    pytest.param(lambda s, m, n, k, r: (r(1, m, k, seed=1).expand(s, m, k), r(s, k, n, seed=2)), id="broadcast-a"),
    pytest.param(lambda s, m, n, k, r: (r(s, m, k, seed=1), r(1, k, n, seed=2).expand(s, k, n)), id="broadcast-b"),
    pytest.param(lambda s, m, n, k, r: (r(s, k, m, seed=1).transpose(1, 2), r(s, n, k, seed=2).transpose(1, 2)), id="transposed"),
    pytest.param(lambda s, m, n, k, r: (r(2 * s, m, k, seed=1)[::2], r(k, s, n, seed=2).transpose(0, 1)), id="strided-batch"),
    pytest.param(lambda s, m, n, k, r: (r(s * m * k + 1, seed=1)[1:].view(s, m, k), r(s * k * n + 1, seed=2)[1:].view(s, k, n)), id="misaligned"),
]  # fmt: skip


# (batch, M, N, K): edge tiles with direct stores (N % 8 != 0), batches of matrix-vector products (matvec's short
# side M, and N: its transposed output), whole 16-byte rows (TMA stores in step 12). Every shape for the kernels
# that take a batch in one launch (and variant 0); the first for the others, which loop over the matrices.
BATCH_SHAPES = [(3, 70, 132, 92), (5, 1, 40, 300), (3, 40, 3, 72), (4, 136, 264, 136)]
BATCHED_KERNELS = {"01_tiled", "06_async_pipeline", "12_hopper_gemm", "matvec", "fp64_dmma"}


def _batched_params() -> list:
    params = []
    for p in step_dtype_params([0, *VARIANTS], DTYPES):
        variant = p.values[0]
        shapes = BATCH_SHAPES if variant == 0 or NAMES[variant] in BATCHED_KERNELS else BATCH_SHAPES[:1]
        params += [pytest.param(*p.values, smnk, id=f"{p.id}-{'x'.join(map(str, smnk))}") for smnk in shapes]
    return params


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize(("variant", "dtype", "smnk"), _batched_params())
@pytest.mark.parametrize("layout", BATCH_LAYOUTS)
def test_step_batched(variant, dtype, layout, smnk):
    """Every kernel takes a batch: one launch on those with kBatched (csrc/cuda/matmul/dispatch.cpp), one per
    matrix on the others; each matrix of the result checked."""
    base = _seed(variant, dtype, "batch", smnk)

    def r(*shape: int, seed: int) -> torch.Tensor:
        return rand(*shape, dtype=dtype, device="cuda", seed=base + seed)

    s, m, n, k = smnk
    a, b = layout(s, m, n, k, r)
    assert a.shape == (s, m, k) and b.shape == (s, k, n)
    out = mm(a, b, variant)
    assert out.shape == (s, m, n) and out.is_contiguous()
    for i in range(s):
        assert_step_close(out[i], a[i], b[i], variant)


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize("variant", [0, *[v for v, n in NAMES.items() if n in BATCHED_KERNELS]])
def test_batch_beyond_one_grid(variant):
    """More matrices than one launch's grid.z holds (65535): the launchers that put the batch there launch again."""
    dtype = {"12_hopper_gemm": torch.bfloat16, "fp64_dmma": torch.float64}.get(NAMES.get(variant), torch.float32)
    if not runs(variant, dtype):
        pytest.skip(f"variant {variant} cannot run {dtype} here")
    s, m, n, k = 65535 + 7, 2, 3, 4
    a = rand(s, m, k, dtype=dtype, device="cuda", seed=_seed("grid", variant, "a"))
    b = rand(s, k, n, dtype=dtype, device="cuda", seed=_seed("grid", variant, "b"))
    out = mm(a, b, variant)
    ref = torch.matmul(a.double(), b.double())
    # K = 4 terms of order 1: a few units of the dtype's rounding.
    tol = 4 * torch.finfo(dtype).eps * (a.double().abs() @ b.double().abs()) + torch.finfo(dtype).eps * ref.abs()
    assert ((out.double() - ref).abs() <= tol).all()


STEP12 = [v for v, name in NAMES.items() if name == "12_hopper_gemm"]


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize(("variant", "dtype"), step_dtype_params(STEP12, [torch.float16, torch.bfloat16]))
# A batch of two tiles with a long K (split-K clusters of the 128 x 64 tile) and 80 super-tiles of 1024 slabs on
# 66 clusters (stream-K for the last wave, whose tiles belong to the batch's last matrices).
@pytest.mark.parametrize("smnk", [(2, 100, 60, 4096), (5, 1024, 1024, 1024)], ids=lambda s: "x".join(map(str, s)))
def test_step12_batched_schedules(variant, dtype, smnk):
    s, m, n, k = smnk
    a = rand(s, m, k, dtype=dtype, device="cuda", seed=_seed("b12", smnk, "a"))
    b = rand(s, k, n, dtype=dtype, device="cuda", seed=_seed("b12", smnk, "b"))
    out = mm(a, b, variant)
    for i in range(s):
        assert_step_close(out[i], a[i], b[i], variant)


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize(("variant", "dtype"), step_dtype_params(STEP12, [torch.bfloat16]))
def test_step12_tuning_knobs(matmul_tuning, variant, dtype):
    """block_m12, block_n12, stream_k12 and k_splits12 force step 12's tile (64 x 64, 128 x 64, 128 x 128, 128 x
    256), stream-K (also for a single wave that leaves SMs idle, which the launcher splits only when forced) and
    split-K clusters; every choice computes the same product, one product or a batch. Bad values are clear
    errors."""
    a = rand(300, 4100, dtype=dtype, device="cuda", seed=_seed("knobs", "a"))
    b = rand(4100, 700, dtype=dtype, device="cuda", seed=_seed("knobs", "b"))
    for block_m, block_n in ((64, 64), (128, 64), (128, 128), (128, 256)):
        for stream_k in ("on", "off"):
            matmul_tuning(block_m12=block_m, block_n12=block_n, stream_k12=stream_k)
            assert_step_close(mm(a, b, variant), a, b, variant)
    matmul_tuning(stream_k12=None)
    batch_a, batch_b = a[:200, :1000].reshape(2, 100, 1000), b[:2000].reshape(2, 1000, 700)[:, :, :600]
    for block_m, block_n in ((64, 64), (128, 64), (128, 128)):
        for splits in (1, 2, 4, 8):
            matmul_tuning(block_m12=block_m, block_n12=block_n, k_splits12=splits)
            assert_step_close(mm(a, b, variant), a, b, variant)
            out = mm(batch_a, batch_b, variant)
            for i in range(2):
                assert_step_close(out[i], batch_a[i], batch_b[i], variant)
    matmul_tuning(block_m12=None, block_n12=256, k_splits12=None)
    with pytest.raises(RuntimeError, match=rf"{OP}: step 12: the tuning knob block_n12=256 takes one product"):
        mm(a[None].expand(2, -1, -1), b[None].expand(2, -1, -1), variant)
    matmul_tuning(block_m12=64, block_n12=128)
    with pytest.raises(RuntimeError, match=rf"{OP}: step 12: the tuning knobs block_m12=64 and block_n12=128 name no"):
        mm(a, b, variant)
    matmul_tuning(block_m12=None, block_n12=None)
    with pytest.raises(RuntimeError, match=rf"{TUNING}: block_m12=96 is not 64 or 128"):
        matmul_tuning(block_m12=96)
    with pytest.raises(RuntimeError, match=rf"{TUNING}: block_n12=96 is not 64, 128 or 256"):
        matmul_tuning(block_n12=96)
    with pytest.raises(RuntimeError, match=rf"{TUNING}: stream_k12=yes is not 'on' or 'off'"):
        matmul_tuning(stream_k12="yes")
    with pytest.raises(RuntimeError, match=rf"{TUNING}: k_splits12=3 is not 1, 2, 4 or 8"):
        matmul_tuning(k_splits12=3)


@requires_cuda
@requires_profiler
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_batch_is_one_launch(dtype):
    """Variant 0 runs a batch of 8 products as one launch of its kernel (12_hopper_gemm for 16-bit on an H100,
    06_async_pipeline for float32 with TF32 off; matvec for a batch of matrix-vector products), not a launch per
    matrix."""
    from torch.profiler import ProfilerActivity, profile

    for m in (64, 1):
        a = rand(8, m, 96, dtype=dtype, device="cuda", seed=_seed("one", dtype, m, "a"))
        b = rand(8, 96, 80, dtype=dtype, device="cuda", seed=_seed("one", dtype, m, "b"))
        _, name, _ = matmul_default_kernel(dtype)
        if m <= SKINNY_MAX_SIDE:
            name = "matvec"
        if name not in BATCHED_KERNELS:
            pytest.skip(f"variant 0 takes {name} here, which runs a batch one matrix at a time")
        with allow_tf32(False), profile(activities=[ProfilerActivity.CUDA]) as prof:
            out = cuda_kernels.matmul(a, b)
            torch.cuda.synchronize()
        # One launch of the kernel (matvec: of its main kernel, whichever of "rows", "cols" and "mma" it takes).
        launches = [e.name for e in prof.events() if f"matmul_kernel_{name}" in e.name and "reduce" not in e.name]
        assert len(launches) == 1, launches
        for i in range(8):
            assert_step_close(out[i], a[i], b[i], 0)


@requires_cuda
@requires_profiler
@pytest.mark.gpu
def test_step6_reads_k_major_b_in_place():
    """x @ W.t() with W (N, K) row-major, as linear calls it: step 6 reads the K-major b as it is (its launch and
    nothing else: no copy of W to row-major first), and a batch of them (Q @ K^T) too."""
    from torch.profiler import ProfilerActivity, profile

    if not runs(6, torch.float32):
        pytest.skip("step 6 cannot run float32 here")
    for batch in ((), (3,)):
        a = rand(*batch, 40, 72, dtype=torch.float32, device="cuda", seed=_seed("kmajor", batch, "a"))
        w = rand(*batch, 136, 72, dtype=torch.float32, device="cuda", seed=_seed("kmajor", batch, "w"))
        b = w.transpose(-1, -2)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            out = cuda_kernels.matmul(a, b, variant=6)
            torch.cuda.synchronize()
        kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        assert kernels and all("matmul_kernel_06" in k for k in kernels), kernels
        for i in range(batch[0] if batch else 1):
            assert_step_close(out[i] if batch else out, a[i] if batch else a, b[i] if batch else b, 6)


@requires_cuda
@pytest.mark.gpu
@pytest.mark.heavy
@pytest.mark.parametrize("variant", [0, *VARIANTS])
def test_step_many_row_tiles(variant):
    """More row tiles than gridDim.y allows (65535): M = 128 * 65535 + 200, tiny N and K."""
    m, n, k = 128 * 65535 + 200, 3, 2
    dtype = any_dtype(variant)
    a = rand(m, k, dtype=dtype, device="cuda", seed=_seed(variant, "rows"))
    b = rand(k, n, dtype=dtype, device="cuda", seed=_seed(variant, "rows", 1))
    out = mm(a, b, variant)
    assert_step_close(out, a, b, variant)


@requires_cuda
@pytest.mark.gpu
@pytest.mark.heavy
@pytest.mark.parametrize("variant", [0, *VARIANTS])
def test_step_output_over_2_31_elements(variant):
    """An (M, N) output with more than 2^31 elements: offsets like row * N must not overflow 32 bits."""
    # K = 64, not smaller: the probabilistic error bound of conftest needs a few terms per dot product to hold
    # for every one of the ~230K elements checked.
    m, n, k = 2**16 + 3, 2**15 + 4, 64
    dtype = any_dtype(variant)
    need = m * n * dtype.itemsize + 2 * 2**30  # the output plus slack
    free, _ = torch.cuda.mem_get_info()
    if free < need:
        pytest.skip(f"needs {need / 2**30:.1f} GiB of free GPU memory, {free / 2**30:.1f} GiB free")
    a = rand(m, k, dtype=dtype, device="cuda", seed=_seed(variant, "big"))
    b = rand(k, n, dtype=dtype, device="cuda", seed=_seed(variant, "big", 1))
    out = mm(a, b, variant)
    rows = torch.tensor([0, 1, 2**15, 2**16 - 1, 2**16, m - 2, m - 1], device="cuda")
    assert_step_close(out[rows], a[rows], b, variant)
    del out
    torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------------------------
# Step 6's tile configurations (the config06 knob forces one; tuning builds compile more)


def _compiled_configs(set_knob, knob: str, variant: int, dtype: torch.dtype) -> list[str]:
    """The configurations a launcher has compiled, as its error for an unknown one lists them."""
    a, b = rand(4, 4, dtype=dtype, device="cuda"), rand(4, 4, dtype=dtype, device="cuda")
    set_knob(**{knob: "no-such-config"})
    with pytest.raises(RuntimeError, match=rf"{OP}: tuning knob {knob}=no-such-config is not a compiled") as info:
        cuda_kernels.matmul(a, b, variant=variant)
    set_knob(**{knob: None})
    return [s.strip() for s in str(info.value).split("available: ")[1].split("\n")[0].split(",")]


@requires_cuda
@pytest.mark.gpu
def test_step6_every_config(matmul_tuning):
    configs = _compiled_configs(matmul_tuning, "config06", 6, torch.float32)
    # The two the launcher picks from (big tiles, and 16-row tiles for M <= 16); more with -DCUDA_KERNELS_MATMUL_TUNING.
    assert len(configs) >= 2, configs
    for name in configs:
        matmul_tuning(config06=name)
        for m, n, k in [(1, 4, 1), (129, 260, 63), (300, 516, 100)]:
            for b_k_major in (False, True) if k > 1 else (False,):  # K = 1: b is row-major either way
                try:
                    _mm_case(6, torch.float32, m, n, k, b_k_major)
                except AssertionError as e:
                    raise AssertionError(f"configuration {name}, shape {m}x{n}x{k}, K-major b {b_k_major}: {e}") from e


# fp64_dmma's pipeline configurations (the config_fp64 knob forces one; tuning builds compile more)


@requires_cuda
@pytest.mark.gpu
def test_fp64_dmma_every_config(matmul_tuning):
    """Every compiled configuration of fp64_dmma gives the product (slab tails, pipelines longer and shorter than K,
    odd K and N for the 8-byte copies), or refuses with a clear error where the GPU lacks the shared memory."""
    if not DMMA_STEPS or not runs(min(DMMA_STEPS), torch.float64):
        pytest.skip("fp64_dmma needs compute >= 8.0")
    (step,) = DMMA_STEPS
    configs = _compiled_configs(matmul_tuning, "config_fp64", step, torch.float64)
    assert configs[:3] == ["bk32_s3", "bk16_s4", "bk16_s2"], configs
    optin = torch.cuda.get_device_properties(torch.cuda.current_device()).shared_memory_per_block_optin
    for name in configs:
        matmul_tuning(config_fp64=name)
        bk, stages = (int(x) for x in re.findall(r"\d+", name))
        smem = stages * (128 * (bk + 4) + bk * (128 + 4)) * 8
        if smem > optin:
            with pytest.raises(RuntimeError, match=rf"{OP}: tuning knob config_fp64={name} needs {smem} bytes"):
                _mm_case(step, torch.float64, 64, 64, 64)
            continue
        for m, n, k in [(1, 4, 1), (129, 260, 63), (300, 516, 100), (130, 257, 999)]:
            try:
                _mm_case(step, torch.float64, m, n, k)
            except AssertionError as e:
                raise AssertionError(f"configuration {name}, shape {m}x{n}x{k}: {e}") from e


# (M, N, K) with few output tiles and a long K: step 6 splits K over several blocks (float32 with N % 4 == 0),
# or not (N % 4 != 0, other dtypes). (520, 1028, 1000): 128 x 128 tiles with row and column tails, K split on a GPU
# of more than 45 SMs, a partial last slab.
SPLIT_SHAPES = [(1, 4096, 4096), (7, 520, 3000), (100, 256, 3001), (200, 300, 2000), (16, 64, 777), (520, 1028, 1000)]


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize("variant", [0, 6])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("mnk", SPLIT_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("b_k_major", [False, True], ids=["b-rows", "b-k-major"])
def test_step6_split_k(variant, dtype, mnk, b_k_major):
    _mm_case(variant, dtype, *mnk, b_k_major)


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize("splits", [1, 2, 3, 7, 64, 100000])
def test_step6_forced_splits(matmul_tuning, splits):
    """The splits06 knob forces the split-K factor (clamped to K); every factor gives the product."""
    matmul_tuning(splits06=splits)
    for m, n, k in [(33, 132, 1000), (1, 8, 3), (260, 128, 97)]:
        _mm_case(6, torch.float32, m, n, k)
        _mm_case(6, torch.float32, m, n, k, b_k_major=True)
    # The 128 x 128 tiles forced, both layouts of b, tails in every dimension (where the GPU gives a block the 99 KiB
    # they take with a K-major b).
    if torch.cuda.get_device_properties(torch.cuda.current_device()).shared_memory_per_block_optin >= 99 * 1024:
        matmul_tuning(config06="128x128x32_w32x64_t8x8_s3_b2")
        for b_k_major in (False, True):
            _mm_case(6, torch.float32, 260, 1028, 1000, b_k_major)


# Step 12's tile plans on an H100's 132 SMs (plan_tiles). Split-K clusters of the 128 x 64 tile (few tiles and a
# long K: 2, 4 or 8 blocks share a tile's k-slabs and add up through distributed shared memory): (200, 300, 2000) is
# 10 tiles of 32 slabs (4 splits, row and column tails), (130, 68, 4100) 4 tiles of 65 slabs (8 splits, a partial
# last slab), (200, 64, 1030) 2 tiles of 17 slabs (2 splits of 8 and 9). The other plans: (250, 1000, 4100) 16 tiles
# of 128 x 128 without multicast, 8 splits of 65 slabs each with row and column tails; (100, 8500, 300) one row of
# 128 x 128 tiles without 2-CTA clusters; (20000, 64, 256) 128 x 64 tiles where N = 64 had taken 128 x 256;
# (2048, 3072, 512) 128 x 128 tiles where 128 x 256 would leave most of a second wave empty; (100, 17000, 200) 128 x
# 128 tiles without multicast where 128 x 256's 2-CTA clusters (67 tiles) had an empty second block (one row tile);
# 128 x 128 tiles without multicast at two row tiles (250, 4300, 520) and at a short K in one wave (700, 2000, 1000),
# with it at a long K in one wave (600, 3000, 4100); 128 x 128 tiles split 2 ways for a long K with more rows than
# columns (1100, 500, 8200), 128 x 64 unsplit with fewer (500, 1100, 8200); 64 x 64 tiles unsplit where 128 x 64
# ones would split (a short K): one row tile (64, 64, 1030), two 64-row tiles for each 128-row one (100, 4100,
# 1000), four (256, 2000, 2000); each with row, column and K tails.
STEP12_PLAN_SHAPES = [
    (200, 300, 2000),
    (130, 68, 4100),
    (64, 64, 1030),
    (200, 64, 1030),
    (250, 1000, 4100),
    (100, 8500, 300),
    (20000, 64, 256),
    (2048, 3072, 512),
    (100, 17000, 200),
    (250, 4300, 520),
    (700, 2000, 1000),
    (600, 3000, 4100),
    (100, 4100, 1000),
    (256, 2000, 2000),
    (1100, 500, 8200),
    (500, 1100, 8200),
]


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("views", VIEWS)
@pytest.mark.parametrize("mnk", STEP12_PLAN_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_step12_tile_plans(dtype, views, mnk):
    _step12_case(dtype, views, mnk)


# Step 12's 64 x 64 tiles (one consumer warpgroup), forced by block_m12=64 wherever the launcher would not take them:
# row, column and k tails, one row tile of few rows, more tiles than SMs (stream-K's last wave, several tiles a
# block), a long K split in clusters by shape; the launcher's own plan of each shape runs in test_step12_tile_plans.
STEP12_SHORT_SHAPES = [(100, 4100, 700), (65, 70, 130), (200, 1001, 4100), (1000, 1536, 520), (33, 300, 9000)]


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("views", VIEWS)
@pytest.mark.parametrize("mnk", STEP12_SHORT_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_step12_short_tiles(matmul_tuning, dtype, views, mnk):
    matmul_tuning(block_m12=64)
    _step12_case(dtype, views, mnk)


def _step12_case(dtype: torch.dtype, views, mnk: tuple[int, int, int]) -> None:
    """Step 12 on (M, N, K) with operands laid out by `views`, against the reference."""
    if not runs(12, dtype):
        pytest.skip("step 12 does not run here (needs sm_90a and an H100-class GPU)")
    base = _seed(12, dtype, mnk)

    def r(*shape: int, seed: int) -> torch.Tensor:
        return rand(*shape, dtype=dtype, device="cuda", seed=base + seed)

    a, b = views(*mnk, r)
    assert_step_close(mm(a, b, 12), a, b, 12)


# Step 12's woven epilogue (the 128 x 256 tile's last pass stored between the wgmma of the next tile's second
# k-slab): shapes with more 256 x 256 pairs of tiles than an H100 has clusters, so that blocks run several tiles.
# (2048, 4096, 128): 128 pairs, 2 k-slabs, every pending pass woven in; (1030, 4100, 200): row, column and k tails,
# 4 slabs; (2048, 4096, 64): one k-slab a tile, nothing to weave into, so the pass is stored at the next tile's end.
STEP12_WOVEN_SHAPES = [(2048, 4096, 128), (1030, 4100, 200), (2048, 4096, 64)]


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("views", VIEWS)
@pytest.mark.parametrize("mnk", STEP12_WOVEN_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_step12_woven_epilogue(dtype, views, mnk):
    _step12_case(dtype, views, mnk)


# Step 12 reads a K-major A of fewer than 128 rows in a TMA box of its rows (rounded up to 8), not one of 128 rows
# zero-filled past M: the slot's other rows keep what an earlier product left there, and wgmma computes garbage in
# those rows of C, which must never be stored nor reach a row below M. Products of NaN rows run first, so that slots
# likely hold NaN (best effort: the product under test may run another configuration on other SMs). Shapes: 1 row (a
# box of 8), 9 (16), 33 (40) and 65 rows (72: the second consumer's rows start inside the box), 127; each also as a
# batch of 3 with a matrix of b per product (3-D tensor maps; C's matrices lie back to back, so a stored garbage row
# would land in the next matrix). Plans: the launcher's (split-K clusters at the long K), 128 x 64 and 64 x 64
# tiles split in 2, stream-K forced on unsplit tiles, and 128 x 256 tiles (2-CTA clusters whose second block's box
# lies wholly past M; one product only).
FEW_ROWS_SHAPES = [(1, 1024, 4096), (9, 520, 264), (33, 2048, 4096), (65, 300, 4100), (127, 4100, 700)]
FEW_ROWS_PLANS = [
    {},
    {"k_splits12": 2, "block_n12": 64, "block_m12": 128},
    {"k_splits12": 2, "block_m12": 64},
    {"stream_k12": "on", "k_splits12": 1},
    {"block_n12": 256},
]


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_step12_few_rows_ignore_stale_slots(matmul_tuning, dtype):
    if not runs(12, dtype):
        pytest.skip("step 12 does not run here (needs sm_90a and an H100-class GPU)")
    for knobs in FEW_ROWS_PLANS:
        matmul_tuning(**{"k_splits12": None, "block_n12": None, "stream_k12": None, "block_m12": None, **knobs})
        for m, n, k in FEW_ROWS_SHAPES:
            b = rand(k, n, dtype=dtype, device="cuda", seed=_seed("few", m, n, k, "b"))
            stale = torch.full((256, k), float("nan"), dtype=dtype, device="cuda")
            assert mm(stale, b, 12).isnan().all()
            a = rand(m, k, dtype=dtype, device="cuda", seed=_seed("few", m, n, k, "a"))
            assert_step_close(mm(a, b, 12), a, b, 12)
            if knobs.get("block_n12") == 256:
                continue  # the 128 x 256 tile takes one product
            batch_a = rand(3, m, k, dtype=dtype, device="cuda", seed=_seed("few", m, n, k, "batch a"))
            batch_b = rand(3, k, n, dtype=dtype, device="cuda", seed=_seed("few", m, n, k, "batch b"))
            mm(stale.expand(3, -1, -1), batch_b, 12)
            out = mm(batch_a, batch_b, 12)
            for i in range(3):
                assert_step_close(out[i], batch_a[i], batch_b[i], 12)
    matmul_tuning(k_splits12=None, block_n12=None, stream_k12=None, block_m12=None)
    x = rand(33, 2000, dtype=dtype, device="cuda", seed=_seed("few", "x"))
    w = rand(200, 2000, dtype=dtype, device="cuda", seed=_seed("few", "w"))
    bias = rand(200, dtype=dtype, device="cuda", seed=_seed("few", "bias"))
    mm(torch.full((256, 2000), float("nan"), dtype=dtype, device="cuda"), w.t(), 12)
    out = cuda_kernels.linear(x, w, bias, "relu")
    ref = x.double() @ w.double().t() + bias.double()
    # The product's bound, plus C's rounding of the biased sum; relu moves no value further from its reference.
    bound = matmul_error_bound(x, w.t(), ref) + torch.finfo(dtype).eps * ref.abs()
    ok, message = check_within(out.double(), ref.relu(), bound)
    assert ok, message
