"""Timing: warm-up, repetitions until the median is known, CUDA events with an L2 flush and a GPU head start,
CUDA graphs, and the statistics on the samples. Nothing here knows an op: it times callables.

docs/benchmarks.md explains the method (why events, why the flush, the stop rule).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
from torch import Tensor

# --cuda-graph: calls of the op captured in one graph; a sample is one replay divided by this.
GRAPH_CALLS = 20

# Without the L2 size from the driver, flush with this many bytes (what triton.testing.do_bench uses).
DEFAULT_FLUSH_BYTES = 256 * 1024**2

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
# Two rounds even when quick: with one, the implementation timed first always had the GPU's clock before it settled
# to the case's load, which biased power-capped cases by order alone (docs/benchmarks.md has the figures).
CUDA_QUICK_TIMING = TimingConfig(min_reps=10, max_reps=1000, max_time_s=0.25, ci_rel_tol=0.01, rounds=2)
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


def with_rounds(config: TimingConfig, rounds: int) -> TimingConfig:
    """config timed in `rounds` interleaved rounds, each round with the budget and stop rule one of config's own
    rounds has (round_config): more rounds measure longer (rounds / config.rounds times the samples and time
    caps) and pool to a proportionally tighter confidence interval, instead of splitting the same budget thinner.
    For a case too noisy to decide in the default run (benchmark.py --rounds N)."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    per = round_config(config)
    return replace(
        config,
        rounds=rounds,
        min_reps=per.min_reps * rounds,
        max_reps=per.max_reps * rounds,
        max_time_s=per.max_time_s * rounds,
        ci_rel_tol=None if per.ci_rel_tol is None else per.ci_rel_tol / math.sqrt(rounds),
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
    measurements (two timings of the same few-microsecond kernel, each with its median known to a fraction of a
    percent, can differ by more than that: docs/benchmarks.md). Interleaving rounds (forward, then backward order) spreads that drift over every
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
    """A float32 buffer of at least twice the device's L2 cache, for flush_l2.

    None on the CPU (CPU caches are not flushed; see docs/benchmarks.md).
    """
    device = torch.device(device)
    if device.type != "cuda":
        return None
    l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0
    nbytes = 2 * l2_bytes if l2_bytes > 0 else DEFAULT_FLUSH_BYTES
    return torch.zeros(nbytes // 4, dtype=torch.float32, device=device)


# What flush_l2 does to its buffer, as benchmark.py's JSON records it (env.settings.l2_flush_method).
L2_FLUSH_METHOD = "read"


def flush_l2(flush: Tensor) -> None:
    """Evicts everything else from L2 by reading `flush` (make_flush_buffer), on the current stream.

    A read, not a write: zeroing the buffer (as triton.testing.do_bench does) leaves L2 full of dirty lines, and the
    timed call that follows pays for writing them back to DRAM as it evicts them, 3-11 us on the H100 for a
    32-64 MB read (docs/benchmarks.md). Read, the lines are clean and the call starts from a cold L2 only.
    """
    torch.sum(flush)


def time_fn(
    fn: Callable[[], Any],
    device: torch.device | str,
    config: TimingConfig = CUDA_TIMING,
    flush: Tensor | None = None,
    calls_per_sample: int = 1,
) -> Timing:
    """Times fn() (no arguments; its result is dropped) on device and returns the per-call times.

    CUDA: one event pair around each call, with flush_l2(flush) before each (outside the events) when flush is
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

    If enqueueing still took longer than the head start (a host hiccup, which can make a few-microsecond kernel read
    as hundreds), the batch is thrown away and redone with a head start of twice the enqueue time.
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
                flush_l2(flush)
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
