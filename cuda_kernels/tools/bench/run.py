"""Running cases: correctness first, then every implementation of a case timed in interleaved rounds.

What a case times comes from its table entry (cuda_kernels/tools/bench/table.py): the roofline op's row (a copy of the
same bytes, for memory-bound ops), torch's call, then ours (one variant, or several for ops with a ladder).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor
from tqdm import tqdm

from cuda_kernels.tools.bench.report import dtype_label, make_record
from cuda_kernels.tools.bench.table import OPS, Case, Impl
from cuda_kernels.tools.bench.timing import GRAPH_CALLS, Timing, TimingConfig, capture_cuda_graph, time_rounds


def make_inputs(case: Case, device: torch.device | str, seed: int = 0) -> list[Tensor]:
    """The case's inputs (its table entry's make_inputs), the same for every seed-equal call."""
    gen = torch.Generator(device=device).manual_seed(seed)
    return OPS[case.op].make_inputs(case.shape, case.dtype, torch.device(device), gen)


def make_fn(case: Case, impl: Impl, inputs: list[Tensor]) -> Callable[[], Any]:
    """The call to time, as a closure over the inputs: torch's call of impl.op (or the case's op), or ours."""
    op = OPS[impl.op or case.op]
    if impl.impl == "torch":
        return op.torch(inputs)
    if impl.impl == "torch.compile":
        return op.compiled(inputs)
    if op.ours is None:
        raise ValueError(f"{op.name} has no implementation of ours (only torch's)")
    return op.ours(inputs, impl.variant or 0)


def check_result(case: Case, impl: Impl, inputs: list[Tensor], out: Tensor) -> tuple[bool | None, str]:
    """(correct, note) for an output: True, False (note says what is wrong) or None (not checked: note why)."""
    return OPS[impl.op or case.op].check(inputs, out, case.math)


@dataclass
class RunSettings:
    """Everything run_case needs besides the case."""

    device: torch.device
    timing: TimingConfig
    flush: Tensor | None = None
    cuda_graph: bool = False
    ours: list[Impl] = field(default_factory=lambda: [Impl("ours")])
    # Our implementations per case where they differ from `ours` (an op's plan: variants that cannot run a dtype
    # left out, others added); a case not listed runs `ours`.
    ours_by_case: dict[Case, list[Impl]] = field(default_factory=dict)


@contextmanager
def math_mode(case: Case) -> Iterator[None]:
    """TF32 allowed (torch.backends.cuda.matmul.allow_tf32, read by torch.mm and by our matmul) exactly while a case
    with math "tf32" runs; every other case runs with it off. The previous setting is restored on exit."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = case.math == "tf32"
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def case_impls(case: Case, settings: RunSettings) -> list[Impl]:
    """What one case times, in order: its roofline op's row (memory-bound ops), torch's call, then ours."""
    op = OPS[case.op]
    impls = [Impl("torch", op=op.roofline_op)] if op.roofline_op else []
    impls.append(Impl("torch"))
    if op.compiled is not None and settings.device.type == "cuda":  # inductor's CPU code takes minutes to build
        impls.append(Impl("torch.compile"))
    if op.ours is not None:
        impls += settings.ours_by_case.get(case, settings.ours)
    return impls


def run_case(case: Case, settings: RunSettings) -> list[dict[str, Any]]:
    """Checks and times one case (case_impls); returns the records."""
    device = settings.device
    inputs = make_inputs(case, device)
    impls = case_impls(case, settings)
    results: list[tuple[bool | None, str, Timing | None]] = []
    with math_mode(case):
        # Correctness first.
        fns: dict[int, Callable[[], Any]] = {}  # index in impls -> what to time (the checked ones)
        calls = GRAPH_CALLS if settings.cuda_graph else 1
        for i, impl in enumerate(impls):
            fn = make_fn(case, impl, inputs)
            correct, note = None, ""
            # torch's call is the definition of right for the case's op; a roofline op's row (and an op that has no
            # implementation of ours) is checked against that op's own check.
            if impl.impl != "torch" or impl.op or OPS[case.op].ours is None:
                try:
                    correct, note = check_result(case, impl, inputs, fn())
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
    """run_case for every case, inside NVTX ranges op > dtype > shape (CUDA), with a progress bar on stderr."""
    records: list[dict[str, Any]] = []
    with tqdm(total=len(cases), unit="case", file=sys.stderr, disable=not progress, leave=False) as bar:
        for case in cases:
            bar.set_postfix_str("/".join(case.nvtx_path))
            with nvtx_ranges(case, settings.device):
                records += run_case(case, settings)
            if settings.device.type == "cuda":
                torch.cuda.empty_cache()  # the largest cases need the memory that earlier ones left cached
            bar.update()
    return records


def run_iters(cases: list[Case], settings: RunSettings, iters: int) -> None:
    """Exactly `iters` calls of our op per case and nothing else: no warm-up, reference, check or flush.

    For profilers: `ncu -k square_kernel python benchmark.py -i 1` sees exactly one square_kernel launch.
    """
    device = settings.device
    for case in cases:
        inputs = make_inputs(case, device)
        impls = [i for i in case_impls(case, settings) if i.impl == "ours"] or [Impl("torch")]
        for impl in impls:
            fn = make_fn(case, impl, inputs)
            with nvtx_ranges(case, device), math_mode(case):
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
