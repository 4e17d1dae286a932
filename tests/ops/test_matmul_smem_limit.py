"""The default float32 matmul (ladder step 6) runs on every GPU: it picks its tile configuration from the device's
shared memory per block (opt-in limit; sm_75 allows 64 KiB, sm_70 96 KiB, sm_86/89 99 KiB, the H100 227 KiB).

The smem_limit_bytes tuning knob (csrc/cuda/matmul/tuning.h) caps the limit the launcher believes, so one GPU
checks the choices made on smaller ones. Under each cap matmul must be correct, and the kernel that ran (its name,
from the profiler, carries the tile configuration as Config<BM, BN, BK, WM, WN, TM, TN, stages, min blocks>) must be
the expected configuration."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import requires_cuda

import cuda_kernels
from cuda_kernels.tools.testing import matmul_error_bound

# The launcher's float32 configurations, by the names the config06 tuning knob takes, in its order of
# preference (06_async_pipeline.cu: kSkinnyPreference for M <= 16, kSmallProblemPreference for M <= 64 or when
# 128 x 128 tiles, K split, would not give every SM a block, else kGeneralPreference).
BIG = "128x128x32_w32x64_t8x8_s3_b2"
MID = "128x128x16_w32x64_t8x8_s3_b1"
SMALL = "128x128x16_w32x64_t8x8_s2_b2"
SKINNY = "16x128x16_w16x32_t4x4_s4_b4"
SMALL_PROBLEM = "32x64x16_w16x32_t4x4_s3_b4"
GENERAL_PREFERENCE = [BIG, MID, SMALL]
SKINNY_PREFERENCE = [SKINNY]
SMALL_PROBLEM_PREFERENCE = [SMALL_PROBLEM]
SMALL_PROBLEM_MAX_M = 64  # kSmallProblemMaxM
MIN_SLABS_PER_SPLIT = 4  # kMinSlabsPerSplit
BIG_BK = 32  # BigConfig's slab depth
A_PAD = 4  # kAPad: words of padding per transposed-A row in shared memory
KIB = 1024
# On a GPU that allows at least 99 KiB (sm_80 and later), these caps pick (the sm_75, sm_70 and sm_86 choices):
CAPPED_CHOICE = {48 * KIB: SMALL, 64 * KIB: MID, 96 * KIB: MID, 99 * KIB: BIG}


def smem_bytes(name: str, b_k_major: bool = False) -> int:
    """Dynamic shared memory of a float32 configuration: stages x (BK x (BM + pad) A words + BK x BN B words) x 4;
    a K-major B's slab rows are padded as A's."""
    bm, bn, bk, _wm, _wn, _tm, _tn, stages, _blocks = (int(x) for x in re.findall(r"\d+", name))
    return stages * bk * ((bm + A_PAD) + bn + (A_PAD if b_k_major else 0)) * 4


def config_name(kernel: str) -> str | None:
    """'...matmul_kernel_06_async_pipeline<...Config<128, 128, 32, 32, 64, 8, 8, 3, 2>, float, true>(...)' ->
    '128x128x32_w32x64_t8x8_s3_b2'; None for other kernels."""
    match = re.search(r"matmul_kernel_06_async_pipeline<[^<>]*Config<([^<>]*)>", kernel)
    # The same name not demangled: ...matmul_kernel_06_async_pipelineINS1_6ConfigILi128ELi128E...ELi2EEEfLb1EEE...
    match = match or re.search(r"matmul_kernel_06_async_pipelineI.*?ConfigI((?:Li\d+E){9})", kernel)
    if not match:
        return None
    bm, bn, bk, wm, wn, tm, tn, stages, blocks = re.findall(r"\d+", match.group(1))
    return f"{bm}x{bn}x{bk}_w{wm}x{wn}_t{tm}x{tn}_s{stages}_b{blocks}"


def expected_choice(preference: list[str], limit: int) -> str:
    return next(name for name in preference if smem_bytes(name) <= limit)


def test_names_and_sizes():
    """The table above agrees with the kernel's sizes (no GPU needed, but kept beside the GPU tests)."""
    assert [smem_bytes(n) for n in (BIG, MID, SMALL, SKINNY, SMALL_PROBLEM)] == [99840, 49920, 33280, 37888, 19200]
    assert smem_bytes(BIG, b_k_major=True) == 101376 <= 99 * KIB  # static_assert'ed in the kernel's file too
    for name in (SMALL, SKINNY, SMALL_PROBLEM):
        assert smem_bytes(name) <= 48 * KIB  # fits any device without opt-in
    for cap, name in CAPPED_CHOICE.items():
        assert expected_choice(GENERAL_PREFERENCE, cap) == name
    kernel = (
        "void cuda_kernels::matmul_ladder::(anonymous namespace)::matmul_kernel_06_async_pipeline<cuda_kernels::"
        "matmul_ladder::(anonymous namespace)::Config<128, 128, 32, 32, 64, 8, 8, 3, 2>, float, true, false>(float "
        "const*, float const*, float*, long, long, long, long, long, long, long)"
    )
    assert config_name(kernel) == BIG and config_name("void matmul_kernel_06_splitk_reduce(float const*)") is None
    mangled = (
        "_ZN12cuda_kernels13matmul_ladder53_GLOBAL__N__f257024b_20_06_async_pipeline_cu_a874866631matmul_kernel_06_"
        "async_pipelineINS1_6ConfigILi16ELi128ELi16ELi16ELi32ELi4ELi4ELi4ELi4EEEfLb1ELb1EEEvPKT0_S7_PS5_lllllll"
    )
    assert config_name(mangled) == SKINNY


# (M, N, K, dtype, variant). float32 on the default path (variant 0, which is step 6 for float32 outputs with
# M and N > 16): small problems (32 x 64 tiles: whole tiles; tails and split K) and a larger one (the general
# preference, tails). M <= 16 with step 6 forced (variant 0 takes step 14 there): its
# skinny tiles. Step 6 forced for float16 and float64: its scalar configuration (16.5 / 33 KiB), which must run
# under every cap without the opt-in.
SHAPES = [
    (512, 512, 512, "float32", 0),
    (257, 132, 1000, "float32", 0),
    (1100, 600, 1000, "float32", 0),
    (8, 256, 2048, "float32", 6),
    (100, 72, 90, "float16", 6),
    (100, 72, 90, "float64", 6),
]


def run_capped(matmul_tuning, cap: int | str | None, forced: str = "") -> dict:
    """Under the smem_limit_bytes cap (None: uncapped): float32 matmuls of each of SHAPES under the profiler, checked
    against float64; then, if `forced` names a configuration, one call forcing it. Per shape: the step-6 kernels that
    ran and the count of elements out of tolerance (or the error); and the forced call's error."""
    from torch.profiler import ProfilerActivity, profile

    matmul_tuning(smem_limit_bytes=cap)
    report: dict = {"runs": [], "forced_error": None}
    gen = torch.Generator().manual_seed(0)
    for m, n, k, dtype_name, variant in SHAPES:
        dtype = getattr(torch, dtype_name)
        a = torch.randn(m, k, generator=gen).to(dtype).cuda()
        b = torch.randn(k, n, generator=gen).to(dtype).cuda()
        run: dict = {"shape": [m, n, k], "dtype": str(dtype), "variant": variant}
        try:
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                out = cuda_kernels.matmul(a, b, variant=variant)
                torch.cuda.synchronize()
        except RuntimeError as err:
            run["error"] = str(err).splitlines()[0]
        else:
            run["kernels"] = sorted({e.name for e in prof.events() if "matmul_kernel_06" in e.name})
            ref = a.double() @ b.double()
            run["bad"] = int(((out.double() - ref).abs() > matmul_error_bound(a, b, ref)).sum())
        report["runs"].append(run)
    if forced:
        matmul_tuning(config06=forced)
        try:
            cuda_kernels.matmul(torch.ones(256, 256, device="cuda"), torch.ones(256, 256, device="cuda"))
            torch.cuda.synchronize()
        except RuntimeError as err:
            report["forced_error"] = str(err).splitlines()[0]
        matmul_tuning(config06=None)
    return report


def optin_limit() -> int:
    return torch.cuda.get_device_properties(torch.cuda.current_device()).shared_memory_per_block_optin


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize(
    "cap", [48 * KIB, 64 * KIB, 96 * KIB, 99 * KIB, None], ids=lambda c: f"{c // KIB}KiB" if c else "uncapped"
)
def test_default_matmul_fits_the_shared_memory_limit(matmul_tuning, cap):
    limit = min(cap, optin_limit()) if cap else optin_limit()
    general, skinny = expected_choice(GENERAL_PREFERENCE, limit), expected_choice(SKINNY_PREFERENCE, limit)
    small_problem = expected_choice(SMALL_PROBLEM_PREFERENCE, limit)
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    if optin_limit() >= 99 * KIB:  # every GPU from sm_80 on: the caps are the binding limit
        assert general == (CAPPED_CHOICE[cap] if cap else BIG)
    # Forcing BigConfig is refused with a clear error where it does not fit, and runs where it does.
    report = run_capped(matmul_tuning, cap, forced=BIG)
    for run in report["runs"]:
        m, n, k = run["shape"]
        assert "error" not in run, run
        assert run["bad"] == 0, run
        if run["dtype"] != "torch.float32":
            continue  # the scalar configuration: one kernel, fits without the opt-in
        big_tiles = -(-m // 128) * -(-n // 128)
        max_splits = max(1, k // (MIN_SLABS_PER_SPLIT * BIG_BK))
        small = m <= SMALL_PROBLEM_MAX_M or big_tiles * max_splits < sms
        want = skinny if m <= 16 else (small_problem if small else general)
        ran = {config_name(kernel) for kernel in run["kernels"]} - {None}
        assert ran == {want}, f"limit {limit}: {m}x{n}x{k} ran {sorted(run['kernels'])}, expected {want}"
    if smem_bytes(BIG) <= limit:
        assert report["forced_error"] is None, report
    else:
        assert (report["forced_error"] or "").startswith(
            f"cuda_kernels.matmul: tuning knob config06={BIG} needs {smem_bytes(BIG)} bytes of shared memory per "
            f"block; device {torch.cuda.current_device()} allows {limit} (the device's opt-in limit, capped by the "
            "smem_limit_bytes knob"
        ), report


@requires_cuda
@pytest.mark.gpu
def test_k_major_b_fits_its_own_shared_memory(matmul_tuning):
    """A K-major b (x @ W.t()) takes padded B slabs: under a cap between the big tile's two sizes the row-major
    product keeps the big tile and the K-major one falls back to the next that fits, both correct."""
    from torch.profiler import ProfilerActivity, profile

    cap = (smem_bytes(BIG) + smem_bytes(BIG, b_k_major=True)) // 2
    if optin_limit() < cap:
        pytest.skip("the GPU allows a block less shared memory than the big tile takes")
    matmul_tuning(smem_limit_bytes=cap)
    m, n, k = 1100, 600, 1000
    a = torch.randn(m, k, device="cuda")
    w = torch.randn(n, k, device="cuda")
    for b, want in ((w.t().contiguous(), BIG), (w.t(), expected_choice(GENERAL_PREFERENCE[1:], cap))):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            out = cuda_kernels.matmul(a, b)
            torch.cuda.synchronize()
        ran = {config_name(e.name) for e in prof.events()} - {None}
        assert ran == {want}, (b.stride(), sorted(ran))
        ref = a.double() @ b.double()
        assert int(((out.double() - ref).abs() > matmul_error_bound(a, b, ref)).sum()) == 0


@requires_cuda
@pytest.mark.gpu
def test_bad_or_too_small_cap_is_a_clear_error(matmul_tuning):
    for cap in ("abc", "0"):
        with pytest.raises(RuntimeError, match=f"cuda_kernels.matmul_tuning: smem_limit_bytes={cap} is not a positive"):
            matmul_tuning(smem_limit_bytes=cap)
    report = run_capped(matmul_tuning, 1000)
    message = "cuda_kernels.matmul: no float32 configuration fits in 1000 bytes of shared memory per block"
    float32_runs = [run for run in report["runs"] if run["dtype"] == "torch.float32"]
    assert float32_runs and all(run.get("error", "").startswith(message) for run in float32_runs), report
