#!/usr/bin/env python
"""Benchmark harness for cuda_kernels: our ops beside the torch reference and a roofline, measured in one run.

    python benchmark.py                          # full sweep on the default device (CUDA when there is one)
    python benchmark.py --quick                  # a few sizes per op
    python benchmark.py --op square --size 2^24 --dtype float32
    python benchmark.py --op matmul --size 8192x1024x4096 --dtype bfloat16    # M x N x K
    python benchmark.py --op matmul --ladder     # every step of the CUDA matmul ladder that runs here
    python benchmark.py --op matmul --dtype float32 --size 4096 --tf32       # TF32 allowed, vs cuBLAS TF32
    python benchmark.py -i 1                     # exactly one call of each op and nothing else (for ncu)
    python benchmark.py --json r.json --csv r.csv --plot r.png --compare old.json

How it measures (docs/benchmarks.md explains why):
  * CUDA: a pair of CUDA events around every call; before every call a buffer of twice the L2 size is zeroed,
    so no call finds its inputs in L2; warm-up by time; repetitions until the median is stable; median and
    interquartile range (IQR) are reported; a noisy case takes more samples, until its median is known to
    +-0.5% (95% confidence) or a time cap. --cuda-graph times replays of a graph of GRAPH_CALLS calls instead.
  * CPU: time.perf_counter around every call, with the same warm-up and statistics.
  * Correctness first: every case checks our output against a reference before it is timed. A wrong result gets
    no speed, is reported, and the run exits with code 1.
  * Rooflines, measured in the same run: a device-to-device copy of the same bytes for square (recorded as its
    own "copy" case), torch.mm (cuBLAS, TF32 off) for matmul; plus the datasheet peak of known GPUs. Rows with
    math "tf32" (--tf32, and float32 4096^3 in the default CUDA sweep) ran both sides with TF32 allowed.
  * matmul steps: a ladder step that cannot run a dtype here (wrong dtype, older GPU, not in this binary) is
    skipped with a note. The default CUDA sweep also times every tensor-core step at float16/bfloat16 4096^3 and
    8192^3, so the tensor-core ladder and its targets come from the same run.

Exit codes: 0 ok, 1 a wrong result (or our op raised), 2 bad command line, 3 --compare found a slower case.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

import cuda_kernels
from cuda_kernels.testing import ALLOW_CPU_ONLY_ENV, cpu_only_allowed, matmul_error_bound, tf32_matmul_error_bound

REPO_ROOT = Path(__file__).resolve().parent

# ---------------------------------------------------------------------------------------------------------
# What is measured

OPS = ("square", "matmul", "copy")
DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
}
DTYPE_ALIASES = {"fp32": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp64": "float64"}

# Sweeps. Elementwise sizes are element counts; matmul shapes are (M, N, K): a is (M, K), b is (K, N).
SQUARE_SIZES = [2**k for k in range(10, 29)]
MATMUL_SHAPES = [(n, n, n) for n in (256, 512, 1024, 2048, 4096, 8192)] + [
    (4000, 4000, 4000),  # not a multiple of any tile size
    (8192, 1024, 4096),  # rectangular
    (1, 4096, 4096),  # a single row: matrix-vector, memory-bound
]
# The default sweep (no --size) on CUDA also times, in the same run, the rows issue 12's targets read
# (scripts/check_targets.py): float16 and bfloat16 at these shapes get one row per tensor-core ladder step (besides
# the default variant's), and float32 at these shapes a second case with TF32 allowed for ours and torch.mm. Each
# applies where the sweep has the shape (--quick: 4096^3 only).
TENSOR_CORE_SWEEP_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192)]
TF32_SWEEP_SHAPES = [(4096, 4096, 4096)]
QUICK_SQUARE_SIZES = [2**12, 2**16, 2**20, 2**24, 2**28]
QUICK_MATMUL_SHAPES = [(256, 256, 256), (1024, 1024, 1024), (4096, 4096, 4096), (1, 4096, 4096)]

# The CPU is far slower: cap the sweeps there so a default run stays near a minute on two cores.
CPU_MAX_SQUARE_SIZE = 2**24
CPU_MAX_MATMUL_MACS = 1024**3  # M*N*K: keeps 256..1024 and 1x4096x4096
CPU_QUICK_MATMUL_SHAPES = [(256, 256, 256), (512, 512, 512)]

# -i/--iters without --size runs one representative case per op (what `ncu -k ...` should look at).
ITERS_SQUARE_SIZE = 2**24
ITERS_MATMUL_SHAPE = (4096, 4096, 4096)
ITERS_CPU_MATMUL_SHAPE = (1024, 1024, 1024)  # the CPU kernel needs ~8 s at 4096

# --size for matmul: larger dimensions are surely a typo (2^24 meant for square, say).
MAX_MATMUL_DIM = 65536
# Shapes whose float64 reference may be skipped (with a note) when it does not fit in memory.
MATMUL_MAX_CHECKED_DIM = 8192

# --cuda-graph: calls of the op captured in one graph; a sample is one replay divided by this.
GRAPH_CALLS = 20

# Without the L2 size from the driver, flush with this many bytes (what triton.testing.do_bench uses).
DEFAULT_FLUSH_BYTES = 256 * 1024**2


@dataclass(frozen=True)
class Peaks:
    """Datasheet peaks of one GPU: dense TFLOP/s per math mode and HBM bandwidth in TB/s (None: not listed)."""

    name: str
    fp32: float
    bf16: float
    fp16: float
    hbm_tbps: float
    tf32: float | None = None


# Matched against torch.cuda.get_device_name(): every `match` substring present, no `exclude` substring present.
# First hit wins. Names: "NVIDIA H100 80GB HBM3" (SXM), "NVIDIA H100 PCIe", "NVIDIA L4", "NVIDIA L40S", ...
DATASHEET: list[tuple[tuple[str, ...], tuple[str, ...], Peaks]] = [
    (("H100",), ("PCIe", "NVL"), Peaks("H100 SXM", fp32=66.9, bf16=989, fp16=989, hbm_tbps=3.35, tf32=495)),
    (("H200",), ("NVL", "GH200"), Peaks("H200", fp32=66.9, bf16=989, fp16=989, hbm_tbps=4.8, tf32=495)),
    (("A100", "SXM"), ("40GB",), Peaks("A100 SXM", fp32=19.5, bf16=312, fp16=312, hbm_tbps=2.0)),
    (("NVIDIA L4",), ("L40",), Peaks("L4", fp32=30.3, bf16=121, fp16=121, hbm_tbps=0.3)),
    (("RTX 4090",), ("4090 D",), Peaks("RTX 4090", fp32=82.6, bf16=165, fp16=165, hbm_tbps=1.0)),
]


def lookup_peaks(gpu_name: str | None) -> Peaks | None:
    """The DATASHEET entry for a device name, or None ("unknown")."""
    if not gpu_name:
        return None
    for match, exclude, peaks in DATASHEET:
        if all(m in gpu_name for m in match) and not any(x in gpu_name for x in exclude):
            return peaks
    return None


def describe_peaks(peaks: Peaks | None) -> str:
    if peaks is None:
        return "unknown"
    return (
        f"{peaks.name}: fp32 {peaks.fp32}, bf16 {peaks.bf16}, fp16 {peaks.fp16} TFLOP/s (dense), "
        f"HBM {peaks.hbm_tbps} TB/s"
    )


def peak_tflops(peaks: Peaks | None, dtype: torch.dtype, math: str | None = None) -> float | None:
    """The datasheet matmul peak for a dtype: float32 is plain FP32 unless math is "tf32" (the TF32 tensor-core
    peak, None where the datasheet entry has none); None when unknown."""
    if peaks is None:
        return None
    if math == "tf32" and dtype == torch.float32:
        return peaks.tf32
    return {torch.float32: peaks.fp32, torch.bfloat16: peaks.bf16, torch.float16: peaks.fp16}.get(dtype)


# ---------------------------------------------------------------------------------------------------------
# Statistics (pure functions on lists of times)


def median(xs: list[float]) -> float:
    """The median of a non-empty list."""
    return quantile(xs, 0.5)


def quantile(xs: list[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) with linear interpolation between order statistics, as numpy's default."""
    if not xs:
        raise ValueError("quantile of an empty list")
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def iqr(xs: list[float]) -> float:
    """Interquartile range: 75th minus 25th percentile."""
    return quantile(xs, 0.75) - quantile(xs, 0.25)


def is_stable(samples: list[float], rel_tol: float) -> bool:
    """True when the median of the last half of the samples is within rel_tol of the median of all of them."""
    if len(samples) < 4:
        return False
    whole = median(samples)
    last_half = median(samples[len(samples) // 2 :])
    return abs(last_half - whole) <= rel_tol * abs(whole)


CI_Z = 1.96  # median_ci's normal quantile: a ~95% confidence interval


def median_ci(samples: list[float], z: float = CI_Z) -> tuple[float, float]:
    """A distribution-free confidence interval (lo, hi) of the median, from order statistics.

    The number of samples below the true median is Binomial(n, 1/2), so with 1-based ranks j = floor(n/2 - z sqrt(n)/2)
    and k = ceil(n/2 + z sqrt(n)/2) + 1 (clamped to 1..n), [x_(j), x_(k)] holds the median with probability about
    that of |N(0, 1)| <= z (0.95 for z = 1.96). No assumption about the shape of the distribution (timings are skewed).
    """
    if not samples:
        raise ValueError("median_ci of an empty list")
    s = sorted(samples)
    n = len(s)
    half = z * math.sqrt(n) / 2
    j = max(1, math.floor(n / 2 - half))
    k = min(n, math.ceil(n / 2 + half) + 1)
    return s[j - 1], s[k - 1]


def median_ci_rel(samples: list[float], z: float = CI_Z) -> float:
    """Half the width of median_ci relative to the median: 0.005 means the median is known to about +-0.5%."""
    lo, hi = median_ci(samples, z)
    med = median(samples)
    return (hi - lo) / (2 * abs(med)) if med else math.inf


# ---------------------------------------------------------------------------------------------------------
# Timing


@dataclass(frozen=True)
class TimingConfig:
    """When to stop measuring one function.

    Warm up for warmup_ms, then take samples in batches (check_every, growing with the sample count up to
    MAX_BATCH; fewer when a call is slow) and stop at the first of (stop_reason):
      * max_reps samples;
      * at least min_reps samples, a stable median (is_stable with rel_tol) and, when ci_rel_tol is set, a median
        known to within ci_rel_tol: half the width of its ~95% confidence interval (median_ci_rel) at most
        ci_rel_tol of it. A noisy case (a 4 us kernel whose samples spread by 12%) so takes hundreds of samples
        where a steady one takes min_reps, and a 0.976x vs 0.98x decision between two medians is not noise;
      * max_time_s spent measuring and at least MIN_SAMPLES samples (the cap on what a noisy case may cost).
    """

    warmup_ms: float = 25.0
    min_reps: int = 25
    max_reps: int = 5000
    max_time_s: float = 1.0
    rel_tol: float = 0.01
    check_every: int = 10
    ci_rel_tol: float | None = 0.005
    rounds: int = 1  # time_rounds: the implementations of a case timed this many times, interleaved, samples pooled


MIN_SAMPLES = 3
MAX_BATCH = 100  # samples per batch at most: the batch grows with n (n // 8) so long runs check less often
CUDA_TIMING = TimingConfig(rounds=4)
CUDA_QUICK_TIMING = TimingConfig(min_reps=10, max_reps=1000, max_time_s=0.25, ci_rel_tol=0.01)
# The CPU is not where targets are decided, and its sweep must stay near a minute on two cores: no CI rule there.
CPU_TIMING = TimingConfig(min_reps=5, max_reps=200, max_time_s=0.3, ci_rel_tol=None)
CPU_QUICK_TIMING = TimingConfig(warmup_ms=10.0, min_reps=3, max_reps=50, max_time_s=0.05, ci_rel_tol=None)


def stop_reason(samples: list[float], elapsed_s: float, config: TimingConfig) -> str | None:
    """Why time_fn stops after these samples (TimingConfig's rules): "max_reps", "converged", "time cap"; None:
    take more."""
    n = len(samples)
    if n >= config.max_reps:
        return "max_reps"
    if (
        n >= config.min_reps
        and is_stable(samples, config.rel_tol)
        and (config.ci_rel_tol is None or median_ci_rel(samples) <= config.ci_rel_tol)
    ):
        return "converged"
    if elapsed_s >= config.max_time_s and n >= MIN_SAMPLES:
        return "time cap"
    return None


def describe_timing(config: TimingConfig) -> dict[str, Any]:
    """The timing settings and the stop rule in words, for env.settings.timing in the JSON."""
    ci = (
        f", and half the ~95% confidence interval of the median (order statistics, z = {CI_Z}) <= "
        f"{config.ci_rel_tol:.2%} of it"
        if config.ci_rel_tol is not None
        else ""
    )
    rule = (
        f"warm up {config.warmup_ms:g} ms; sample in batches of {config.check_every} (up to {MAX_BATCH}, n // 8 as n "
        f"grows); stop at {config.max_reps} samples, or at >= {config.min_reps} samples with the median of the last "
        f"half within {config.rel_tol:.1%} of the whole{ci}, or after {config.max_time_s:g} s of sampling "
        f"(>= {MIN_SAMPLES} samples)"
    )
    if config.rounds > 1:
        per = round_config(config)
        rule = (
            f"{config.rounds} rounds per case, its implementations interleaved (ours, torch, torch, ours, ...) and "
            f"each one's samples pooled; a round stops at {per.max_reps} samples, or at >= {per.min_reps} with a "
            f"stable median whose CI is within {per.ci_rel_tol or 0:.2%}, or after {per.max_time_s:g} s (the first "
            f"round warms up, later ones make one warm-up call). With one round the rule is: " + rule
        )
    return {**asdict(config), "ci_z": CI_Z, "max_batch": MAX_BATCH, "rule": rule}


def round_config(config: TimingConfig) -> TimingConfig:
    """The stop rule of one of config.rounds rounds: the budgets split evenly, the CI target widened by
    sqrt(rounds) (the pooled median's interval narrows with the square root of the pooled count)."""
    r = config.rounds
    if r <= 1:
        return config
    return replace(
        config,
        min_reps=max(MIN_SAMPLES, math.ceil(config.min_reps / r)),
        max_reps=max(MIN_SAMPLES, config.max_reps // r),
        max_time_s=config.max_time_s / r,
        ci_rel_tol=None if config.ci_rel_tol is None else config.ci_rel_tol * math.sqrt(r),
        rounds=1,
    )


def time_rounds(
    fns: list[Callable[[], Any]],
    device: torch.device | str,
    config: TimingConfig,
    flush: Tensor | None = None,
    calls_per_sample: int = 1,
) -> list[Timing]:
    """Times each of fns (the implementations of one case) in config.rounds rounds and pools each one's samples.

    Timing one implementation after the other leaves their ratio exposed to whatever drifts between the two
    measurements (measured on the H100: two timings of the same 4 us torch.square, each with its median known to
    +-0.4%, differed by up to 1.5%). Interleaving rounds (forward, then backward order) spreads that drift over every
    implementation alike. Only the first round warms up for config.warmup_ms; later ones make one warm-up call.
    """
    if config.rounds <= 1:
        return [time_fn(fn, device, config, flush, calls_per_sample) for fn in fns]
    first, later = round_config(config), replace(round_config(config), warmup_ms=0.0)
    pooled = [Timing([]) for _ in fns]
    for r in range(config.rounds):
        order = range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))
        for i in order:
            timing = time_fn(fns[i], device, first if r == 0 else later, flush, calls_per_sample)
            pooled[i].samples_ms += timing.samples_ms
            pooled[i].host_bound_batches += timing.host_bound_batches
    return pooled


@dataclass
class Timing:
    """Per-call times of one function, in milliseconds."""

    samples_ms: list[float]
    host_bound_batches: int = 0  # CUDA batches whose enqueue outran the GPU's head start even after retries

    @property
    def median_ms(self) -> float:
        return median(self.samples_ms)

    @property
    def iqr_ms(self) -> float:
        return iqr(self.samples_ms)

    @property
    def n_reps(self) -> int:
        return len(self.samples_ms)


def make_flush_buffer(device: torch.device | str) -> Tensor | None:
    """A buffer of at least twice the device's L2 cache; zeroing it evicts everything else from L2.

    None on the CPU (CPU caches are not flushed; see docs/benchmarks.md).
    """
    device = torch.device(device)
    if device.type != "cuda":
        return None
    l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0
    nbytes = 2 * l2_bytes if l2_bytes > 0 else DEFAULT_FLUSH_BYTES
    return torch.empty(nbytes, dtype=torch.int8, device=device)


def time_fn(
    fn: Callable[[], Any],
    device: torch.device | str,
    config: TimingConfig = CUDA_TIMING,
    flush: Tensor | None = None,
    calls_per_sample: int = 1,
) -> Timing:
    """Times fn() (no arguments; its result is dropped) on device and returns the per-call times.

    CUDA: one event pair around each call, with flush.zero_() before each (outside the events) when flush is
    given. CPU: time.perf_counter around each call. Every sample is divided by calls_per_sample (for a graph
    replay that runs several calls).
    """
    is_cuda = torch.device(device).type == "cuda"
    sync = torch.cuda.synchronize if is_cuda else _no_sync

    # Warm-up by time: at least one call, then until warmup_ms has passed. Also estimates the time per call.
    calls = 0
    start = time.perf_counter()
    while True:
        fn()
        sync()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed * 1e3 >= config.warmup_ms:
            break
    seconds_per_call = elapsed / calls

    samples: list[float] = []
    host_bound = 0
    start = time.perf_counter()
    while True:
        # Enough calls per batch to keep the device busy, but a slow call is not repeated needlessly; a case that
        # needs hundreds of samples (the CI rule) checks every n // 8 of them rather than every check_every.
        per_batch = min(max(config.check_every, len(samples) // 8), MAX_BATCH)
        batch = max(1, min(per_batch, int(0.1 / seconds_per_call), config.max_reps - len(samples)))
        if is_cuda:
            batch_samples, starved = _time_cuda_batch(fn, flush, batch)
            samples += batch_samples
            host_bound += starved
        else:
            samples += _time_cpu_batch(fn, batch)
        if stop_reason(samples, time.perf_counter() - start, config):
            break
    return Timing([s / calls_per_sample for s in samples], host_bound)


def _no_sync() -> None:
    pass


# GPU head start per call in a batch (host time to enqueue flush + events + one call is ~20-50 us), capped.
HEAD_START_US = 100
MAX_HEAD_START_US = 50_000
SLEEP_CYCLES_PER_US = 2_000  # torch.cuda._sleep spins clock cycles; ~2 GHz SM clock (H100 boost is 1.98 GHz)
BATCH_ATTEMPTS = 3  # a batch whose enqueue outran its head start is redone with a longer one, this many times


def _time_cuda_batch(fn: Callable[[], Any], flush: Tensor | None, reps: int) -> tuple[list[float], bool]:
    """Enqueues reps (flush, start event, call, end event) without waiting in between, then reads the events.

    Not synchronizing inside the batch lets the CPU run ahead, so the launch of each call is hidden behind the
    flush before it and the events see only the GPU time of the call. That holds only while the CPU stays ahead:
    an op whose host path (Python wrapper, dispatcher) takes longer than the flush would starve the GPU, and its
    events would time the host instead. So the batch starts with the GPU spinning for HEAD_START_US per call
    (torch.cuda._sleep), long enough for the CPU to enqueue the whole batch behind it.

    If enqueueing still took longer than the head start (a host hiccup: once on the H100 a 4 us square read as
    534 us for a whole batch), the batch is thrown away and redone with a head start of twice the enqueue time.
    Returns (per-call ms, True if even the last attempt outran its head start).
    """
    head_start_us = min(reps * HEAD_START_US, MAX_HEAD_START_US)
    for _attempt in range(BATCH_ATTEMPTS):
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        torch.cuda._sleep(int(head_start_us * SLEEP_CYCLES_PER_US))
        t0 = time.perf_counter()
        for i in range(reps):
            if flush is not None:
                flush.zero_()
            starts[i].record()
            fn()
            ends[i].record()
        enqueue_us = (time.perf_counter() - t0) * 1e6
        torch.cuda.synchronize()
        samples = [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]
        if enqueue_us <= head_start_us:
            return samples, False
        head_start_us = min(2 * enqueue_us, MAX_HEAD_START_US)
    return samples, True


def _time_cpu_batch(fn: Callable[[], Any], reps: int) -> list[float]:
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return samples


def capture_cuda_graph(fn: Callable[[], Any], calls: int) -> torch.cuda.CUDAGraph:
    """Captures `calls` calls of fn in one CUDA graph (there is no L2 flush between the calls inside it)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # torch.cuda.graph wants the work warmed up on a side stream first
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph


def time_fn_cuda_graph(
    fn: Callable[[], Any],
    device: torch.device | str,
    config: TimingConfig = CUDA_TIMING,
    flush: Tensor | None = None,
    calls: int = GRAPH_CALLS,
) -> Timing:
    """Like time_fn, but times replays of a graph of `calls` calls and divides by `calls` (no launch overhead)."""
    graph = capture_cuda_graph(fn, calls)
    return time_fn(graph.replay, device, config, flush, calls_per_sample=calls)


# ---------------------------------------------------------------------------------------------------------
# Cases: inputs, the functions timed, and the correctness checks


@dataclass(frozen=True)
class Case:
    """One op at one dtype and size. shape is (n,) for square/copy and (M, N, K) for matmul."""

    op: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    # None: the dtype's own arithmetic (float32 matmul with TF32 off). "tf32": float32 matmul with
    # torch.backends.cuda.matmul.allow_tf32 = True for ours and torch.mm (cuBLAS may then round inputs to TF32).
    math: str | None = None

    @property
    def dtype_name(self) -> str:
        return str(self.dtype).removeprefix("torch.")

    @property
    def shape_str(self) -> str:
        """'16777216' or '4096x4096x4096' (M x N x K); also the last part of the NVTX path."""
        return "x".join(str(d) for d in self.shape)

    @property
    def nvtx_path(self) -> list[str]:
        """NVTX ranges pushed (nested) around the case: ncu's --nvtx-include "square/float32/16777216/"
        ("matmul/float32+tf32/4096x4096x4096/" for a TF32 case)."""
        return [self.op, self.dtype_name + (f"+{self.math}" if self.math else ""), self.shape_str]


@dataclass(frozen=True)
class Impl:
    """One implementation of a case: impl is "ours", "torch" or "copy"; variant only for our matmul."""

    impl: str
    variant: int | None = None
    variant_name: str | None = None

    @property
    def label(self) -> str:
        if self.variant_name:
            return f"{self.impl}[v{self.variant} {self.variant_name}]"
        if self.variant:
            return f"{self.impl}[v{self.variant}]"
        return self.impl


def make_inputs(case: Case, device: torch.device | str, seed: int = 0) -> list[Tensor]:
    """Random normal inputs (never zeros, which would hide unwritten outputs): [x] or [a (M,K), b (K,N)]."""
    gen = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape: int) -> Tensor:
        return torch.randn(*shape, generator=gen, dtype=case.dtype, device=device)

    if case.op == "matmul":
        m, n, k = case.shape
        return [randn(m, k), randn(k, n)]
    return [randn(case.shape[0])]


def make_fn(case: Case, impl: Impl, inputs: list[Tensor]) -> Callable[[], Tensor]:
    """The call to time, as a closure over the inputs. Ops are looked up at call time (tests patch them)."""
    if impl.impl == "copy" or case.op == "copy":
        (x,) = inputs
        dst = torch.empty_like(x)  # preallocated: the copy moves exactly 2 * x.nbytes
        return lambda: dst.copy_(x)
    if case.op == "square":
        (x,) = inputs
        if impl.impl == "torch":
            return lambda: torch.square(x)
        return lambda: cuda_kernels.square(x)
    if case.op == "matmul":
        a, b = inputs
        if impl.impl == "torch":
            return lambda: torch.mm(a, b)
        variant = impl.variant or 0
        return lambda: cuda_kernels.matmul(a, b, variant=variant)
    raise ValueError(f"unknown op {case.op!r}")


def check_result(op: str, inputs: list[Tensor], out: Tensor, math: str | None = None) -> tuple[bool | None, str]:
    """(correct, note) for op's output: True, False (note says what is wrong) or None (not checked: note why).

    math "tf32" (a float32 matmul with TF32 allowed) checks against the TF32 error bound instead of float32's.
    """
    if op == "matmul":
        return check_matmul(inputs[0], inputs[1], out, tf32=math == "tf32")
    (x,) = inputs
    if op == "copy":
        return check_equal(out, x)
    # square in float64 is exact for every dtype (x*x of a p-bit mantissa needs 2p bits: fits in float32 for
    # half/bfloat16 and in float64 for float32), so rounding it once to the dtype is the correctly rounded result.
    return check_equal(out, x.double().square().to(x.dtype))


def check_equal(out: Tensor, ref: Tensor) -> tuple[bool, str]:
    """Exact equality, with the first differing element in the note."""
    if out.shape != ref.shape or out.dtype != ref.dtype or out.device != ref.device:
        return False, (
            f"got {tuple(out.shape)} {out.dtype} on {out.device}, expected {tuple(ref.shape)} {ref.dtype} "
            f"on {ref.device}"
        )
    if torch.equal(out, ref):
        return True, ""
    bad = (out != ref).flatten()
    first = int(bad.nonzero()[0])
    return False, (
        f"{int(bad.sum())} of {out.numel()} elements differ; first at {first}: got {out.flatten()[first].item()}, "
        f"expected {ref.flatten()[first].item()}"
    )


def check_matmul(a: Tensor, b: Tensor, out: Tensor, tf32: bool = False) -> tuple[bool | None, str]:
    """Elementwise |out - ref| <= matmul_error_bound (tf32_matmul_error_bound with tf32), ref = a.double() @
    b.double() (computed on a's device)."""
    m, k = a.shape
    n = b.shape[1]
    if out.shape != (m, n) or out.dtype != a.dtype or out.device != a.device:
        return False, f"got {tuple(out.shape)} {out.dtype} on {out.device}, expected ({m}, {n}) {a.dtype}"
    try:
        ref, bound = matmul_reference(a, b, tf32)
    except torch.OutOfMemoryError:
        if max(m, n, k) > MATMUL_MAX_CHECKED_DIM:
            return None, "not checked: the float64 reference does not fit in device memory"
        ref, bound = (t.to(a.device) for t in matmul_reference(a.cpu(), b.cpu(), tf32))
    got = out.double()
    err = (got - ref).abs()
    bad = ~(err <= bound)  # NaN compares False, so NaN counts as bad
    if not bad.any():
        return True, ""
    i, j = (int(v) for v in bad.nonzero()[0])
    return False, (
        f"{int(bad.sum())} of {out.numel()} elements out of tolerance; first at ({i}, {j}): got "
        f"{got[i, j].item():.9g}, expected {ref[i, j].item():.9g} (bound {bound[i, j].item():.3g}); "
        f"worst error/bound {(err / bound).nan_to_num(float('inf')).max().item():.3g}"
    )


def matmul_reference(a: Tensor, b: Tensor, tf32: bool = False) -> tuple[Tensor, Tensor]:
    """(ref, bound): float64 a @ b and the elementwise error bound (cuda_kernels.testing, same as the tests):
    tf32_matmul_error_bound for a float32 matmul with TF32 allowed, else matmul_error_bound."""
    ref = a.double() @ b.double()
    return ref, (tf32_matmul_error_bound if tf32 else matmul_error_bound)(a, b, ref)


def matmul_ladder() -> list[tuple[int, str]]:
    """[(variant, name)] of the CUDA matmul ladder; empty for a CPU-only build."""
    variants = getattr(cuda_kernels._C, "_matmul_variants", None)
    return [(int(v), str(name)) for v, name in variants()] if variants else []


def matmul_ladder_on(device: torch.device) -> list[tuple[int, str]]:
    """The CUDA matmul ladder when timing on a CUDA device; [] on the CPU (its matmul has variant 0 only)."""
    return matmul_ladder() if device.type == "cuda" else []


def matmul_step_dtypes() -> dict[int, set[str]]:
    """{variant: names of the dtypes that ladder step takes}. A build from before the tensor-core steps cannot say;
    its steps (the SIMT ladder) all take every dtype."""
    query = getattr(cuda_kernels._C, "_matmul_variant_dtypes", None)
    if query is None:
        return {v: set(DTYPES) for v, _ in matmul_ladder()}
    return {int(v): {str(d) for d in names} for v, names in query()}


def matmul_step_unmet_need(variant: int, dtype_name: str, device: torch.device) -> str:
    """Why ladder step `variant` cannot run dtype_name on this CUDA device, e.g. "supports float16 and bfloat16, got
    float32" or "needs compute capability >= 8.0, ..."; "" when it can (csrc/checks.h words it, as the op's error).
    A build from before the tensor-core steps has no such query and no step with needs: ""."""
    query = getattr(cuda_kernels._C, "_matmul_variant_unmet_need", None)
    if query is None:
        return ""
    return str(query(variant, dtype_name, -1 if device.index is None else device.index))


# The tensor-core steps are the ladder steps that take only these dtypes (the SIMT steps take all four).
TENSOR_CORE_DTYPES = frozenset({"float16", "bfloat16"})


def tensor_core_steps(ladder: list[tuple[int, str]], step_dtypes: dict[int, set[str]]) -> list[tuple[int, str]]:
    """The steps of the ladder that exist for 16-bit inputs only (mma.sync, wgmma, ...), in ladder order."""
    return [(v, name) for v, name in ladder if step_dtypes.get(v) and step_dtypes[v] <= TENSOR_CORE_DTYPES]


@dataclass(frozen=True)
class Skipped:
    """A matmul step not timed for a dtype, and why (from matmul_step_unmet_need)."""

    variant: int
    name: str
    dtype: str
    why: str

    @property
    def note(self) -> str:
        return f"note: matmul step {self.variant} ({self.name}) skipped for {self.dtype}: {self.why}"


# ---------------------------------------------------------------------------------------------------------
# Records and derived metrics

RECORD_FIELDS = [
    "op",
    "dtype",
    "shape",
    "impl",
    "variant",
    "variant_name",
    "math",
    "median_ms",
    "iqr_ms",
    "n_reps",
    "gbps",
    "tflops",
    "pct_roofline",
    "pct_peak",
    "speedup",
    "correct",
    "note",
]


def bytes_moved(op: str, shape: tuple[int, ...] | list[int], itemsize: int) -> int:
    """Minimum bytes read + written: 2n for square/copy; M*K + K*N + M*N for matmul."""
    if op == "matmul":
        m, n, k = shape
        return (m * k + k * n + m * n) * itemsize
    return 2 * shape[0] * itemsize


def flops(op: str, shape: tuple[int, ...] | list[int]) -> int | None:
    """2*M*N*K for matmul; None for the memory-bound ops."""
    if op == "matmul":
        m, n, k = shape
        return 2 * m * n * k
    return None


def make_record(
    case: Case,
    impl: Impl,
    timing: Timing | None,
    correct: bool | None = None,
    note: str = "",
) -> dict[str, Any]:
    """A result row (RECORD_FIELDS). timing None (a wrong result): no speed. Derived fields: add_metrics."""
    record: dict[str, Any] = dict.fromkeys(RECORD_FIELDS)
    record.update(
        op="copy" if impl.impl == "copy" else case.op,
        dtype=case.dtype_name,
        shape=list(case.shape),
        impl="torch" if impl.impl == "copy" else impl.impl,
        variant=impl.variant,
        variant_name=impl.variant_name,
        math=case.math,
        correct=correct,
        note=note,
    )
    if timing is not None:
        record.update(median_ms=timing.median_ms, iqr_ms=timing.iqr_ms, n_reps=timing.n_reps)
        if timing.host_bound_batches:
            host_note = (
                f"{timing.host_bound_batches} batch(es) host-bound: the CPU fell behind the GPU even with a longer "
                "head start, so some events may include host time"
            )
            record["note"] = f"{note}; {host_note}" if note else host_note
    return record


def add_metrics(records: list[dict[str, Any]], peaks: Peaks | None) -> None:
    """Fills gbps, tflops, pct_roofline, pct_peak and speedup in place.

    pct_roofline: square -> GB/s over the copy's GB/s (same dtype and n); matmul -> TFLOP/s over torch.mm's (with
    the same math: a TF32 row against cuBLAS TF32); the roofline rows themselves (copy, torch matmul) get 100.
    pct_peak: of the datasheet's TF32 peak for math "tf32" rows. speedup (ours rows): torch time / our time.
    """
    by_key = {record_key(r): r for r in records}
    for r in records:
        if r["median_ms"] is None:
            continue
        itemsize = DTYPES[r["dtype"]].itemsize
        seconds = r["median_ms"] * 1e-3
        r["gbps"] = bytes_moved(r["op"], r["shape"], itemsize) / seconds / 1e9
        n_flops = flops(r["op"], r["shape"])
        r["tflops"] = n_flops / seconds / 1e12 if n_flops is not None else None

        shape = tuple(r["shape"])
        math_mode = r.get("math")
        if r["op"] == "matmul":
            roof = by_key.get(("matmul", r["dtype"], shape, "torch", None, math_mode))
            if roof and roof["median_ms"] is not None:
                r["pct_roofline"] = 100 * roof["median_ms"] / r["median_ms"]  # same FLOPs: TFLOP/s ratio
            peak = peak_tflops(peaks, DTYPES[r["dtype"]], math_mode)
            r["pct_peak"] = 100 * r["tflops"] / peak if peak else None
        else:
            copy = by_key.get(("copy", r["dtype"], shape, "torch", None, None))
            if copy and copy["median_ms"] is not None:
                r["pct_roofline"] = 100 * copy["median_ms"] / r["median_ms"]  # same bytes: GB/s ratio
            r["pct_peak"] = 100 * r["gbps"] / (peaks.hbm_tbps * 1e3) if peaks else None

        if r["impl"] == "ours":
            ref = by_key.get((r["op"], r["dtype"], shape, "torch", None, math_mode))
            if ref and ref["median_ms"] is not None:
                r["speedup"] = ref["median_ms"] / r["median_ms"]


# ---------------------------------------------------------------------------------------------------------
# Running cases


class Progress:
    """A tiny progress bar on stderr: redrawn in place on a terminal, one line per step otherwise."""

    def __init__(self, total: int, width: int = 30) -> None:
        self.total = total
        self.done = 0
        self.width = width
        self.tty = sys.stderr.isatty()

    def step(self, label: str) -> None:
        """Shows that the step named label starts now."""
        filled = self.width * self.done // max(self.total, 1)
        bar = "#" * filled + "-" * (self.width - filled)
        line = f"[{bar}] {self.done + 1}/{self.total} {label}"
        if self.tty:
            sys.stderr.write("\r\033[K" + line)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
        self.done += 1

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


@dataclass
class RunSettings:
    """Everything run_case needs besides the case."""

    device: torch.device
    timing: TimingConfig
    flush: Tensor | None = None
    cuda_graph: bool = False
    matmul_ours: list[Impl] = field(default_factory=lambda: [Impl("ours")])
    # Our matmul implementations per case where they differ from matmul_ours (plan_matmul: steps that cannot run a
    # dtype left out, tensor-core steps added); a case not listed runs matmul_ours.
    matmul_by_case: dict[Case, list[Impl]] = field(default_factory=dict)


@contextmanager
def matmul_math(case: Case) -> Iterator[None]:
    """TF32 allowed (torch.backends.cuda.matmul.allow_tf32, read by torch.mm and by our matmul) exactly while a case
    with math "tf32" runs; every other case runs with it off. The previous setting is restored on exit."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = case.math == "tf32"
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def case_impls(case: Case, settings: RunSettings) -> list[Impl]:
    """What one case times, in order: the copy (its roofline) and torch for square, torch then ours for matmul."""
    if case.op == "copy":
        return [Impl("copy")]
    if case.op == "square":
        return [Impl("copy"), Impl("torch"), Impl("ours")]
    return [Impl("torch"), *settings.matmul_by_case.get(case, settings.matmul_ours)]


def run_case(case: Case, settings: RunSettings) -> list[dict[str, Any]]:
    """Checks and times one case: its roofline copy (square), torch, then ours; returns the records."""
    device = settings.device
    inputs = make_inputs(case, device)
    impls = case_impls(case, settings)
    results: list[tuple[bool | None, str, Timing | None]] = []
    with matmul_math(case):
        # Correctness first. The torch rows are the definition of right and are not checked.
        fns: dict[int, Callable[[], Any]] = {}  # index in impls -> what to time (the checked ones)
        calls = GRAPH_CALLS if settings.cuda_graph else 1
        for i, impl in enumerate(impls):
            fn = make_fn(case, impl, inputs)
            correct, note = None, ""
            if impl.impl != "torch":
                try:
                    op = "copy" if impl.impl == "copy" else case.op
                    correct, note = check_result(op, inputs, fn(), case.math)
                except Exception as err:  # our op raised: a failure like a wrong result
                    correct, note = False, f"raised {type(err).__name__}: {err}"
            if correct is not False:
                try:
                    fns[i] = capture_cuda_graph(fn, calls).replay if settings.cuda_graph else fn
                except Exception as err:
                    if impl.impl == "torch":
                        raise
                    correct, note = False, f"raised while captured: {type(err).__name__}: {err}"
            results.append((correct, note, None))
        try:
            timed = time_rounds(list(fns.values()), device, settings.timing, settings.flush, calls)
            timings = dict(zip(fns, timed, strict=True))
        except Exception:
            timings = {}  # one of them raised while timed: time each alone to see which
            for i, fn in fns.items():
                try:
                    timings[i] = time_rounds([fn], device, settings.timing, settings.flush, calls)[0]
                except Exception as err:
                    if impls[i].impl == "torch":
                        raise  # the reference itself failed: a problem of this machine or harness
                    results[i] = (False, f"raised while timed: {type(err).__name__}: {err}", None)
    records = []
    for i, (impl, (correct, note, _)) in enumerate(zip(impls, results, strict=True)):
        records.append(make_record(case, impl, timings.get(i) if correct is not False else None, correct, note))
    return records


def run_cases(cases: list[Case], settings: RunSettings, progress: bool = True) -> list[dict[str, Any]]:
    """run_case for every case, inside NVTX ranges op > dtype > shape (CUDA), with a progress bar."""
    bar = Progress(len(cases)) if progress else None
    records: list[dict[str, Any]] = []
    for case in cases:
        if bar:
            bar.step("/".join(case.nvtx_path))
        with nvtx_ranges(case, settings.device):
            records += run_case(case, settings)
        if settings.device.type == "cuda":
            torch.cuda.empty_cache()  # the largest cases need the memory that earlier ones left cached
    if bar:
        bar.close()
    return records


def run_iters(cases: list[Case], settings: RunSettings, iters: int) -> None:
    """Exactly `iters` calls of our op per case and nothing else: no warm-up, reference, check or flush.

    For profilers: `ncu -k square_kernel python benchmark.py -i 1` sees exactly one square_kernel launch.
    """
    device = settings.device
    for case in cases:
        inputs = make_inputs(case, device)
        impls = [i for i in case_impls(case, settings) if i.impl != "torch"] if case.op != "square" else [Impl("ours")]
        for impl in impls:
            fn = make_fn(case, impl, inputs)
            with nvtx_ranges(case, device), matmul_math(case):
                for _ in range(iters):
                    fn()
                if device.type == "cuda":
                    torch.cuda.synchronize()
            dtype = dtype_label(case.dtype_name, case.math)
            print(f"ran {iters} call(s) of {impl.label} {case.op} {dtype} {case.shape_str}")


@contextmanager
def nvtx_ranges(case: Case, device: torch.device) -> Iterator[None]:
    """Pushes the case's NVTX path as nested push/pop ranges on CUDA (nothing on the CPU); pops them on exit."""
    names = case.nvtx_path if device.type == "cuda" else []
    for name in names:
        torch.cuda.nvtx.range_push(name)
    try:
        yield
    finally:
        for _ in names:
            torch.cuda.nvtx.range_pop()


# ---------------------------------------------------------------------------------------------------------
# Output: terminal table, JSON, CSV, plot, comparison


def format_shape(op: str, shape: list[int]) -> str:
    """'2^24' for a power-of-two element count, else the number; 'MxNxK' for matmul."""
    if op != "matmul" and shape[0] > 0 and shape[0] & (shape[0] - 1) == 0:
        return f"2^{shape[0].bit_length() - 1}"
    return "x".join(str(d) for d in shape)


def dtype_label(dtype: str, math: str | None) -> str:
    """'float32', or 'float32+tf32' for a TF32 row (the table, the comparison and the plot's legend)."""
    return f"{dtype}+{math}" if math else dtype


def _fmt(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


def format_table(records: list[dict[str, Any]]) -> str:
    """The terminal table: one row per record, a blank line between ops."""
    header = [
        "op",
        "dtype",
        "shape",
        "impl",
        "median ms",
        "IQR ms",
        "GB/s",
        "TFLOP/s",
        "% roofline",
        "% peak",
        "ours/torch",
    ]
    rows = []
    previous_op = None
    for r in records:
        op = "square" if r["op"] == "copy" else r["op"]
        if previous_op is not None and op != previous_op:
            rows.append(None)
        previous_op = op
        impl = Impl(r["impl"], r["variant"], r["variant_name"]).label
        impl = "copy" if r["op"] == "copy" else impl
        if r["median_ms"] is None:
            reason = "WRONG RESULT" if r["correct"] is False else "not timed"
            timed = [reason, "", "", "", "", "", ""]
        else:
            timed = [
                _fmt(r["median_ms"], ".4g"),
                _fmt(r["iqr_ms"], ".2g"),
                _fmt(r["gbps"], ".1f"),
                _fmt(r["tflops"], ".2f"),
                _fmt(r["pct_roofline"], ".1f"),
                _fmt(r["pct_peak"], ".1f"),
                _fmt(r["speedup"], ".2f") + ("x" if r["speedup"] is not None else ""),
            ]
        rows.append([r["op"], dtype_label(r["dtype"], r.get("math")), format_shape(r["op"], r["shape"]), impl, *timed])
    widths = [max(len(str(row[i])) for row in [header, *[r for r in rows if r]]) for i in range(len(header))]
    left = {0, 1, 2, 3}  # text columns are left-aligned, numbers right-aligned

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    out = [line(header), line(["-" * w for w in widths])]
    out += ["" if row is None else line(row) for row in rows]
    return "\n".join(out)


def write_json(path: str | Path, env: dict[str, Any], records: list[dict[str, Any]]) -> None:
    """{"env": {...}, "records": [...]} (records: RECORD_FIELDS)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        json.dump({"env": env, "records": records}, f, indent=1)
        f.write("\n")


def write_csv(path: str | Path, records: list[dict[str, Any]]) -> None:
    """The same rows as the JSON records; shape as 'n' or 'MxNxK', None as an empty cell."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=RECORD_FIELDS)
        writer.writeheader()
        for r in records:
            writer.writerow({**r, "shape": "x".join(str(d) for d in r["shape"])})


def record_key(r: dict[str, Any]) -> tuple[Any, ...]:
    """What identifies a case across runs: (op, dtype, shape, impl, variant, math). math is None for every row but
    the TF32 ones (and absent from JSON written before it existed), so those rows never match a TF32-off row."""
    return (r["op"], r["dtype"], tuple(r["shape"]), r["impl"], r.get("variant"), r.get("math"))


def compare_records(
    old: list[dict[str, Any]], new: list[dict[str, Any]], threshold: float
) -> tuple[list[dict[str, Any]], bool]:
    """Matches records by record_key; returns (rows with old_ms, new_ms, change, status; any slower).

    change = new / old - 1 (+0.10 = 10% slower). status: "SLOWER" above threshold, "faster" below -threshold.
    """
    old_by_key = {record_key(r): r for r in old if r.get("median_ms")}
    rows = []
    any_slower = False
    for r in new:
        before = old_by_key.get(record_key(r))
        if before is None or not r.get("median_ms"):
            continue
        change = r["median_ms"] / before["median_ms"] - 1
        status = "SLOWER" if change > threshold else "faster" if change < -threshold else ""
        any_slower |= status == "SLOWER"
        rows.append(
            {
                "key": record_key(r),
                "old_ms": before["median_ms"],
                "new_ms": r["median_ms"],
                "change": change,
                "status": status,
            }
        )
    return rows, any_slower


def format_comparison(rows: list[dict[str, Any]], threshold: float) -> str:
    lines = [f"Comparison with the old run (threshold {threshold:.0%}; + is slower):"]
    for row in rows:
        op, dtype, shape, impl, variant, math_mode = row["key"]
        label = Impl(impl, variant).label if op != "copy" else "copy"
        dtype = dtype_label(dtype, math_mode)
        lines.append(
            f"  {op:<7} {dtype:<12} {format_shape(op, list(shape)):<16} {label:<22} "
            f"{row['old_ms']:>10.4g} -> {row['new_ms']:>10.4g} ms  {row['change']:+7.1%}  {row['status']}"
        )
    if not rows:
        lines.append("  (no case in common)")
    return "\n".join(lines)


def plot_records(records: list[dict[str, Any]], path: str | Path, peaks: Peaks | None = None, title: str = "") -> None:
    """Writes a PNG: GB/s against n (square, copy = roofline) and TFLOP/s against size (matmul), per dtype."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = [r for r in records if r["median_ms"] is not None]
    panels = []  # (row kind, dtype)
    for kind, ops in (("bandwidth", ("square", "copy")), ("matmul", ("matmul",))):
        for dtype in DTYPES:
            if any(r["op"] in ops and r["dtype"] == dtype for r in timed):
                panels.append((kind, dtype))
    kinds = sorted({k for k, _ in panels}, key=["bandwidth", "matmul"].index)
    dtypes = [d for d in DTYPES if any(d == pd for _, pd in panels)]
    fig, axes = plt.subplots(
        max(len(kinds), 1),
        max(len(dtypes), 1),
        figsize=(4.8 * max(len(dtypes), 1), 4.0 * max(len(kinds), 1)),
        squeeze=False,
    )
    if not panels:
        axes[0][0].text(0.5, 0.5, "no timed records", ha="center", va="center")
    for kind, dtype in panels:
        ax = axes[kinds.index(kind)][dtypes.index(dtype)]
        rows = [r for r in timed if r["dtype"] == dtype]
        if kind == "bandwidth":
            _plot_bandwidth(ax, [r for r in rows if r["op"] in ("square", "copy")], peaks)
        else:
            _plot_matmul(ax, [r for r in rows if r["op"] == "matmul"], peak_tflops(peaks, DTYPES[dtype]))
        ax.set_title(f"{'square' if kind == 'bandwidth' else 'matmul'} {dtype}")
        ax.set_xscale("log", base=2)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _series(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Rows grouped by the implementation's label ("ours", "torch", "copy", "ours[v1 01_tiled]", ...)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        label = "copy" if r["op"] == "copy" else Impl(r["impl"], r["variant"], r["variant_name"]).label
        label += f" {r['math']}" if r.get("math") else ""
        out.setdefault(label, []).append(r)
    return out


def _plot_bandwidth(ax: Any, rows: list[dict[str, Any]], peaks: Peaks | None) -> None:
    for label, series in _series(rows).items():
        series = sorted(series, key=lambda r: r["shape"][0])
        style = {"linestyle": "--", "color": "gray"} if label == "copy" else {"marker": "o", "markersize": 3}
        name = "copy (roofline)" if label == "copy" else label
        ax.plot([r["shape"][0] for r in series], [r["gbps"] for r in series], label=name, **style)
    if peaks is not None:
        ax.axhline(peaks.hbm_tbps * 1e3, linestyle=":", color="black", label=f"{peaks.name} datasheet")
    ax.set_xlabel("elements")
    ax.set_ylabel("GB/s (read + write)")


def _plot_matmul(ax: Any, rows: list[dict[str, Any]], peak: float | None) -> None:
    """Square shapes as lines against N; other shapes as crosses at (M*N*K)^(1/3)."""
    for label, series in _series(rows).items():
        square = sorted((r for r in series if len(set(r["shape"])) == 1), key=lambda r: r["shape"][0])
        other = [r for r in series if len(set(r["shape"])) > 1]
        (line,) = ax.plot(
            [r["shape"][0] for r in square], [r["tflops"] for r in square], marker="o", markersize=3, label=label
        )
        if other:
            ax.scatter(
                [math.prod(r["shape"]) ** (1 / 3) for r in other],
                [r["tflops"] for r in other],
                marker="x",
                color=line.get_color(),
            )
    if peak is not None:
        ax.axhline(peak, linestyle="--", color="black", label="datasheet peak")
    ax.set_xlabel("N (x: other shapes at (M*N*K)^(1/3))")
    ax.set_ylabel("TFLOP/s")


# ---------------------------------------------------------------------------------------------------------
# Environment


def _run_quiet(cmd: list[str]) -> str | None:
    """stdout of a command, or None if it is missing or fails."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=10, cwd=REPO_ROOT)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def query_gpu_clocks(device: torch.device) -> dict[str, Any]:
    """SM clock now and max (MHz) and driver version from nvidia-smi; None values when it is unavailable."""
    info: dict[str, Any] = {"sm_clock_mhz": None, "sm_clock_max_mhz": None, "driver": None}
    query = ["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm,driver_version", "--format=csv,noheader,nounits"]
    uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
    out = _run_quiet([*query, f"--id=GPU-{uuid}"]) if uuid is not None else None
    out = out or _run_quiet(query)
    if out:
        fields = [f.strip() for f in out.splitlines()[0].split(",")]
        if len(fields) == 3:
            for key, value in zip(("sm_clock_mhz", "sm_clock_max_mhz"), fields[:2], strict=True):
                info[key] = int(value) if value.isdigit() else value
            info["driver"] = fields[2]
    return info


def collect_env(device: torch.device, settings: dict[str, Any]) -> dict[str, Any]:
    """What produced these numbers: device, clocks, versions, git commit, build, host, date, settings."""
    # CUDA_KERNELS_GIT_COMMIT names the commit where git cannot: a copy of the tree whose .git is missing or stale
    # (the GPU machine); the tree's state is then unknown (git_dirty None).
    commit = os.environ.get("CUDA_KERNELS_GIT_COMMIT") or _run_quiet(["git", "rev-parse", "HEAD"])
    status = (
        _run_quiet(["git", "status", "--porcelain"]) if commit and "CUDA_KERNELS_GIT_COMMIT" not in os.environ else None
    )
    env: dict[str, Any] = {
        "device": device.type,
        "gpu": None,
        "sm_clock_mhz": None,
        "sm_clock_max_mhz": None,
        "driver": None,
        "l2_bytes": None,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "git_commit": commit or "unknown",
        "git_dirty": bool(status) if status is not None else None,
        "build_info": cuda_kernels.build_info(),
        "host": platform.node(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_threads": torch.get_num_threads(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "settings": settings,
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(gpu=torch.cuda.get_device_name(device), l2_bytes=getattr(props, "L2_cache_size", None))
        env.update(query_gpu_clocks(device))
        peaks = lookup_peaks(env["gpu"])
        env["datasheet"] = asdict(peaks) if peaks else "unknown"
    return env


# ---------------------------------------------------------------------------------------------------------
# Command line


def parse_size(text: str, op: str) -> tuple[int, ...]:
    """'16777216' or '2^24' -> (n,) for square/copy; '4096' -> (4096, 4096, 4096) or 'MxNxK' for matmul."""
    text = text.strip().lower()

    def number(s: str) -> int:
        if "^" in s:
            base, exp = s.split("^")
            return int(base) ** int(exp)
        return int(s)

    try:
        if op == "matmul":
            dims = [number(d) for d in text.split("x")]
            if len(dims) == 1:
                dims *= 3
            if len(dims) != 3 or min(dims) < 1 or max(dims) > MAX_MATMUL_DIM:
                raise ValueError
            return tuple(dims)
        if "x" in text:
            raise ValueError
        n = number(text)
        if n < 1:
            raise ValueError
        return (n,)
    except ValueError:
        expected = f"N or MxNxK (M x N x K, each <= {MAX_MATMUL_DIM})" if op == "matmul" else "N or 2^N elements"
        raise ValueError(f"--size {text!r} is not valid for {op}: expected {expected}") from None


def parse_dtypes(text: str) -> list[torch.dtype]:
    """'all' or a comma list of float32, float16, bfloat16, float64 (fp32, fp16, bf16, fp64 also)."""
    if text == "all":
        return list(DTYPES.values())
    dtypes = []
    for name in text.split(","):
        name = DTYPE_ALIASES.get(name.strip(), name.strip())
        if name not in DTYPES:
            raise ValueError(f"--dtype {name!r} is not one of {', '.join(DTYPES)}, all")
        dtypes.append(DTYPES[name])
    return dtypes


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Times cuda_kernels ops beside torch and a roofline (see docs/benchmarks.md).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit codes: 0 ok, 1 a wrong result, 2 bad arguments, 3 --compare found a slower case",
    )
    parser.add_argument("--op", choices=[*OPS, "all"], default="all", help="what to run (all: square and matmul)")
    parser.add_argument(
        "--dtype",
        default=None,
        help="float32, float16, bfloat16, float64, all, or a comma list (default: all; float32 with -i)",
    )
    parser.add_argument(
        "--size", default=None, help="comma list; square: N or 2^N, matmul: N or MxNxK (a is MxK, b is KxN)"
    )
    parser.add_argument("--quick", action="store_true", help="fewer sizes and shorter timing")
    parser.add_argument(
        "-i",
        "--iters",
        type=int,
        default=None,
        metavar="N",
        help="run exactly N calls of our op per case and nothing else (for ncu)",
    )
    parser.add_argument("--variant", type=int, default=0, help="matmul: pass variant=V to cuda_kernels.matmul")
    parser.add_argument(
        "--ladder",
        action="store_true",
        help="matmul: time every step of the CUDA kernel ladder that can run the dtype here (the others: a note)",
    )
    parser.add_argument(
        "--tf32",
        action="store_true",
        help="float32 matmul with TF32 allowed (torch.backends.cuda.matmul.allow_tf32) for ours and torch.mm; rows "
        "get math 'tf32' (CUDA only; the default sweep adds a TF32 case at 4096^3 by itself)",
    )
    parser.add_argument(
        "--cuda-graph",
        action="store_true",
        help=f"time replays of a CUDA graph of {GRAPH_CALLS} calls (no launch overhead)",
    )
    parser.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        default=None,
        help="default: cuda if a GPU is visible and the extension was built with CUDA",
    )
    parser.add_argument("--json", metavar="PATH", help="write {env, records} as JSON")
    parser.add_argument("--csv", metavar="PATH", help="write the records as CSV")
    parser.add_argument("--plot", metavar="PATH.png", help="plot GB/s and TFLOP/s against size")
    parser.add_argument("--compare", metavar="OLD.json", help="compare with an earlier --json run")
    parser.add_argument(
        "--threshold", type=float, default=0.10, help="--compare: a case this much slower fails the run (default 0.10)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def cpu_only_build_notice() -> str:
    """The line printed first when a CUDA device is visible but the extension has no CUDA; "" otherwise."""
    if not torch.cuda.is_available() or cuda_kernels.build_info()["cuda"]:
        return ""
    if cpu_only_allowed():
        return f"note: CPU-only build on a host with a CUDA device ({ALLOW_CPU_ONLY_ENV}=1): timing the CPU kernels"
    return (
        "WARNING: a CUDA device is visible but the extension was built without CUDA (WITH_CUDA=0 or no toolkit "
        "found at build time): only the CPU kernels are timed. Rebuild with the CUDA toolkit visible "
        "(`python -m cuda_kernels.doctor` shows what a build finds), or set "
        f"{ALLOW_CPU_ONLY_ENV}=1 for a deliberate CPU-only build."
    )


def pick_device(requested: str | None) -> torch.device:
    """The --device choice, checked; by default CUDA when both a GPU and a CUDA build of the extension exist."""
    has_cuda = torch.cuda.is_available() and cuda_kernels.build_info()["cuda"]
    if requested == "cuda" and not has_cuda:
        why = "no CUDA device is visible" if not torch.cuda.is_available() else "the extension was built without CUDA"
        raise ValueError(f"--device cuda: {why}")
    if requested is None:
        requested = "cuda" if has_cuda else "cpu"
    return torch.device(requested)


def select_cases(args: argparse.Namespace, device: torch.device) -> list[Case]:
    """The cases to run, in order: square (with its copy roofline), copy alone, matmul."""
    ops = ["square", "matmul"] if args.op == "all" else [args.op]
    iters_mode = args.iters is not None
    dtype_text = args.dtype or ("float32" if iters_mode else "all")
    dtypes = parse_dtypes(dtype_text)
    on_cpu = device.type == "cpu"

    cases = []
    for op in ["square", "copy", "matmul"]:
        if op not in ops:
            continue
        if args.size:
            shapes = []
            for text in args.size.split(","):
                try:
                    shapes.append(parse_size(text, op))
                except ValueError:
                    if args.op != "all":
                        raise
                    # --op all: a size like 2^24 (square) or 512x256x128 (matmul) applies to the op it fits.
        elif iters_mode:
            if op == "matmul":
                shapes = [ITERS_CPU_MATMUL_SHAPE if on_cpu else ITERS_MATMUL_SHAPE]
            else:
                shapes = [(ITERS_SQUARE_SIZE,)]
        elif op == "matmul":
            if on_cpu and args.quick:
                shapes = CPU_QUICK_MATMUL_SHAPES
            else:
                shapes = QUICK_MATMUL_SHAPES if args.quick else MATMUL_SHAPES
                if on_cpu:
                    shapes = [s for s in shapes if math.prod(s) <= CPU_MAX_MATMUL_MACS]
        else:
            sizes = QUICK_SQUARE_SIZES if args.quick else SQUARE_SIZES
            shapes = [(n,) for n in sizes if not on_cpu or n <= CPU_MAX_SQUARE_SIZE]
        # --tf32 turns every float32 matmul case into a TF32 one; the default sweep adds TF32 cases beside the others.
        tf32_all = op == "matmul" and args.tf32 and not on_cpu
        tf32_extra = op == "matmul" and not (args.tf32 or args.size or iters_mode or on_cpu)
        for dtype in dtypes:
            fp32 = dtype == torch.float32
            cases += [Case(op, dtype, tuple(shape), "tf32" if tf32_all and fp32 else None) for shape in shapes]
            if tf32_extra and fp32:
                cases += [Case(op, dtype, shape, "tf32") for shape in TF32_SWEEP_SHAPES if shape in shapes]
    if args.size and not cases:
        raise ValueError(f"--size {args.size!r} fits none of the selected ops")
    return cases


def select_ours(args: argparse.Namespace, device: torch.device) -> list[Impl]:
    """Our matmul implementations to time: one (variant --variant), or every CUDA ladder step with --ladder
    (plan_matmul then leaves out, per dtype, the steps that cannot run it here)."""
    if not args.ladder:
        return [Impl("ours", args.variant)]
    ladder = matmul_ladder_on(device)
    if not ladder:
        print("note: --ladder: no CUDA matmul ladder on this device/build; timing variant 0 only", file=sys.stderr)
        return [Impl("ours", 0)]
    return [Impl("ours", v, name) for v, name in ladder]


def plan_matmul(
    cases: list[Case], ours: list[Impl], device: torch.device, tensor_core_shapes: list[tuple[int, ...]]
) -> tuple[dict[Case, list[Impl]], list[Skipped]]:
    """Our matmul implementations per matmul case, and the ladder steps left out (once per step and dtype).

    Each case gets `ours` (--variant's step or, with --ladder, every step), and, when its shape is in
    tensor_core_shapes and its dtype is float16/bfloat16, every tensor-core step as well (each variant once). A CUDA
    ladder step that cannot run the case's dtype on this device (wrong dtype, too old a GPU, not in this binary:
    matmul_step_unmet_need) is left out and reported, not run into an error. Variant 0 always runs; a variant
    the ladder does not know is kept, and fails like any op that raises.
    """
    ladder = matmul_ladder_on(device)
    names = dict(ladder)
    extra = [Impl("ours", v, name) for v, name in tensor_core_steps(ladder, matmul_step_dtypes())] if ladder else []
    by_case: dict[Case, list[Impl]] = {}
    skipped: dict[tuple[int, str], Skipped] = {}
    for case in cases:
        if case.op != "matmul":
            continue
        wanted = list(ours)
        if case.shape in tensor_core_shapes and case.dtype_name in TENSOR_CORE_DTYPES:
            wanted += extra
        impls: list[Impl] = []
        for impl in wanted:
            if any(i.variant == impl.variant for i in impls):
                continue
            if impl.variant in names:
                why = matmul_step_unmet_need(impl.variant, case.dtype_name, device)
                if why:
                    key = (impl.variant, case.dtype_name)
                    skipped.setdefault(key, Skipped(impl.variant, names[impl.variant], case.dtype_name, why))
                    continue
            impls.append(impl)
        by_case[case] = impls
    return by_case, list(skipped.values())


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark; returns the exit code (0 ok, 1 wrong result, 2 bad arguments, 3 regression)."""
    args = build_parser().parse_args(argv)
    notice = cpu_only_build_notice()
    if notice:
        print(notice, flush=True)
    try:
        device = pick_device(args.device)
        cases = select_cases(args, device)
        if args.iters is not None and args.iters < 0:
            raise ValueError("-i/--iters must be >= 0")
    except ValueError as err:
        print(f"benchmark.py: error: {err}", file=sys.stderr)
        return 2
    if args.tf32 and device.type != "cuda":
        print("note: --tf32 applies to CUDA only; the CPU matmul rows are float32 as usual", file=sys.stderr)
    ours = select_ours(args, device)  # our matmul: one variant or the ladder; square has no variants
    default_sweep = not (args.size or args.iters is not None)
    matmul_by_case, skipped = plan_matmul(cases, ours, device, TENSOR_CORE_SWEEP_SHAPES if default_sweep else [])
    for skip in skipped:
        print(skip.note, file=sys.stderr)
    if args.iters is not None:
        iters_settings = RunSettings(device, CUDA_TIMING, matmul_ours=ours, matmul_by_case=matmul_by_case)
        run_iters(cases, iters_settings, args.iters)
        return 0

    if args.cuda_graph and device.type != "cuda":
        print("note: --cuda-graph needs CUDA; timing plain calls", file=sys.stderr)
    if device.type == "cuda":
        timing = CUDA_QUICK_TIMING if args.quick else CUDA_TIMING
    else:
        timing = CPU_QUICK_TIMING if args.quick else CPU_TIMING
    if device.type != "cuda":
        method = "wall-clock"
    else:
        method = "cuda-graph" if args.cuda_graph else "cuda-events"
    settings_json = {
        "argv": sys.argv[1:] if argv is None else list(argv),
        "timing": describe_timing(timing),
        "method": method,
        "graph_calls": GRAPH_CALLS if args.cuda_graph else None,
        "l2_flush": device.type == "cuda",
        # Rows with math "tf32" ran with torch.backends.cuda.matmul.allow_tf32 = True (ours and torch.mm); every
        # other row with it False, so the float32 cuBLAS roofline is true FP32 like our SIMT kernels.
        "tf32": any(c.math == "tf32" for c in cases),
        "matmul_skipped": [asdict(skip) for skip in skipped],
    }

    settings = RunSettings(
        device=device,
        timing=timing,
        flush=make_flush_buffer(device),
        cuda_graph=args.cuda_graph and device.type == "cuda",
        matmul_ours=ours,
        matmul_by_case=matmul_by_case,
    )
    records = run_cases(cases, settings, progress=not args.no_progress)  # matmul_math sets TF32 per case

    env = collect_env(device, settings_json)
    peaks = lookup_peaks(env["gpu"])
    add_metrics(records, peaks)

    print(f"device: {env['gpu'] or 'cpu'} | torch {env['torch']} | CUDA {env['cuda']} | {method}")
    if device.type == "cuda":
        print(f"datasheet peaks: {describe_peaks(peaks)}")
    print(format_table(records))
    if args.json:
        write_json(args.json, env, records)
    if args.csv:
        write_csv(args.csv, records)
    if args.plot:
        plot_records(records, args.plot, peaks, title=f"{env['gpu'] or 'CPU'} ({method})")

    code = 0
    wrong = [r for r in records if r["correct"] is False]
    if wrong:
        print(f"\n{len(wrong)} case(s) gave a WRONG RESULT; no speed is reported for them:")
        for r in wrong:
            label = Impl(r["impl"], r["variant"], r["variant_name"]).label
            dtype = dtype_label(r["dtype"], r.get("math"))
            print(f"  {r['op']} {dtype} {format_shape(r['op'], r['shape'])} {label}: {r['note']}")
        code = 1
    unchecked = [r for r in records if r["correct"] is None and r["impl"] == "ours"]
    for r in unchecked:
        print(f"note: {r['op']} {r['dtype']} {format_shape(r['op'], r['shape'])}: {r['note']}")
    if args.compare:
        with open(args.compare) as f:
            old = json.load(f)["records"]
        rows, slower = compare_records(old, records, args.threshold)
        print()
        print(format_comparison(rows, args.threshold))
        if slower and code == 0:
            code = 3
    return code


if __name__ == "__main__":
    sys.exit(main())
