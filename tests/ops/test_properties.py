"""Property tests against torch with hypothesis: random shapes (0, 1, primes, powers of two and their neighbours,
a few larger), strides (permutations, step slices, stride-0 expands), storage offsets (16-byte misalignment) and
dtypes, for both ops.

Profiles (HYPOTHESIS_PROFILE=ci, the default, or gpu):
  ci   2000 examples on each device, split square 55% / matmul 45%, derandomized (the same examples on every
       run), no example database; matmul dims <= 70 except a few larger ones. CPU: well under 90 s on 2 cores.
  gpu  6x the examples, larger dims, and matmul on CUDA cycles through every step of the kernel ladder.
  sanitize  300 examples (the ci profile's shapes), the default under compute-sanitizer (make sanitize sets
       CUDA_KERNELS_SANITIZE), where every kernel launch is instrumented and slow.
A failure prints the smallest example hypothesis found; rerun it with the same profile (derandomized).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import pytest
import torch
from conftest import DEVICES, DTYPES, assert_matmul_close, rand
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cuda_kernels
from cuda_kernels.ops import matmul_cuda_variants

settings.register_profile(
    "ci",
    max_examples=2000,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("gpu", settings.get_profile("ci"), max_examples=12000)
settings.register_profile("sanitize", settings.get_profile("ci"), max_examples=300)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or ("sanitize" if os.environ.get("CUDA_KERNELS_SANITIZE") else "ci")
if PROFILE not in ("ci", "gpu", "sanitize"):
    raise ValueError(f"HYPOTHESIS_PROFILE={PROFILE!r}: use ci, gpu or sanitize")
BASE = settings.get_profile(PROFILE)
BIG = PROFILE == "gpu"


def examples(share: float) -> int:
    return max(1, int(BASE.max_examples * share))


# Sizes that break kernels: empty, 1, primes, around the vector width (4/8) and tile sizes (32, 64, 128).
EDGE_DIMS = [0, 1, 2, 3, 4, 5, 7, 8, 9, 13, 15, 16, 17, 31, 32, 33, 63, 64, 65, 67, 70]
LARGE_DIMS = [127, 128, 129, 257, 511, 1031] if BIG else [127, 129, 257]


def dims(max_dim: int) -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from([d for d in EDGE_DIMS if d <= max_dim]), st.integers(0, max_dim))


@dataclass(frozen=True)
class Layout:
    """How to build a test tensor (printed by hypothesis on failure, so a failing case reads as its layout):
    its dims stored in the order `perm`, each dim a step slice (step, start) or a stride-0 expand, the storage
    starting `offset` elements past a 16-byte boundary, values normal random numbers (`seed`) times `scale`."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    steps: tuple[int, ...]
    starts: tuple[int, ...]
    expand: tuple[bool, ...]
    perm: tuple[int, ...]
    offset: int
    scale: float
    seed: int

    def build(self, device: str) -> torch.Tensor:
        rank = len(self.shape)
        dims_ = list(zip(self.shape, self.steps, self.starts, self.expand, strict=True))
        # base[i]: how many elements dim i needs before slicing (1 when expanded).
        base = [1 if e else (st_ + (n - 1) * sp + 1 if n > 0 else st_) for n, sp, st_, e in dims_]
        stored = [base[p] for p in self.perm]  # the dims in storage order
        flat = (rand(math.prod(stored) + self.offset, seed=self.seed) * self.scale).to(dtype=self.dtype, device=device)
        t = flat[self.offset :].view(stored)
        t = t.permute([self.perm.index(i) for i in range(rank)])  # dim i of t is now dim i of the result
        for i, (n, sp, st_, e) in enumerate(dims_):
            if e:
                t = t.expand(*[n if j == i else -1 for j in range(rank)])
            else:
                index = [slice(None)] * rank
                index[i] = slice(st_, st_ + (n - 1) * sp + 1 if n > 0 else st_, sp)
                t = t[tuple(index)]
        assert t.shape == self.shape, (t.shape, self.shape)
        return t


@st.composite
def layouts(draw, shape: tuple[int, ...], dtype: torch.dtype, scales: tuple[float, ...] = (1.0,)) -> Layout:
    return Layout(
        shape=shape,
        dtype=dtype,
        steps=tuple(draw(st.sampled_from([1, 1, 2, 3])) for _ in shape),
        starts=tuple(draw(st.integers(0, 2)) for _ in shape),
        expand=tuple(draw(st.integers(0, 7)) == 0 for _ in shape),
        perm=tuple(draw(st.permutations(range(len(shape))))),
        offset=draw(st.integers(0, 7)),
        scale=draw(st.sampled_from(scales)),
        seed=draw(st.integers(0, 2**31 - 1)),
    )


# Max dim per rank for square (rank 1 reaches past the CPU grain and the CUDA per-block tile).
SQUARE_MAX_DIM = {0: 1, 1: 100003, 2: 300, 3: 40, 4: 12} if BIG else {0: 1, 1: 4099, 2: 130, 3: 17, 4: 7}


@st.composite
def square_inputs(draw) -> Layout:
    dtype = draw(st.sampled_from(DTYPES))
    rank = draw(st.integers(0, 4))
    max_dim = SQUARE_MAX_DIM[rank]
    shape = tuple(draw(st.one_of(dims(min(max_dim, 70)), st.integers(0, max_dim))) for _ in range(rank))
    # Scales that reach overflow (inf) and underflow (subnormals, 0) in every dtype: square is exact there too.
    return draw(layouts(shape, dtype, scales=(1.0, 1.0, 1e-3, 1e3, 1e-20, 1e20)))


@st.composite
def matmul_inputs(draw) -> tuple[Layout, Layout]:
    dtype = draw(st.sampled_from(DTYPES))
    m, k, n = (draw(dims(70)) for _ in range(3))
    if draw(st.integers(0, 9)) == 0:  # one in ten: one dim larger
        which = draw(st.integers(0, 2))
        big = draw(st.sampled_from(LARGE_DIMS))
        m, k, n = (big if i == which else d for i, d in enumerate((m, k, n)))
    return draw(layouts((m, k), dtype)), draw(layouts((k, n), dtype))


def matmul_variants(device: str, dtype: torch.dtype) -> list[int]:
    """variant 0 and, on CUDA, every ladder step that takes `dtype`."""
    return [0] + matmul_cuda_variants(dtype) if device == "cuda" else [0]


@pytest.mark.parametrize("device", DEVICES)
@settings(BASE, max_examples=examples(0.55))
@given(layout=square_inputs())
def test_square_matches_torch(device: str, layout: Layout) -> None:
    x = layout.build(device)
    out = cuda_kernels.square(x)
    assert out.shape == x.shape and out.dtype == x.dtype and out.device == x.device and out.is_contiguous()
    # Exact: x*x rounded once to the dtype, which is what float32 math (or float64) gives.
    torch.testing.assert_close(out, x.double().square().to(x.dtype), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("device", DEVICES)
@settings(BASE, max_examples=examples(0.45))
@given(layouts_ab=matmul_inputs(), pick=st.integers(0, 15))
def test_matmul_matches_torch(device: str, layouts_ab: tuple[Layout, Layout], pick: int) -> None:
    a, b = (layout.build(device) for layout in layouts_ab)
    variants = matmul_variants(device, a.dtype)
    variant = variants[pick % len(variants)]  # on CUDA: variant 0 and every ladder step that takes the dtype
    out = cuda_kernels.matmul(a, b, variant=variant)
    assert out.is_contiguous()
    assert_matmul_close(out, a, b)
