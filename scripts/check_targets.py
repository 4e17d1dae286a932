#!/usr/bin/env python
"""Checks benchmark.py JSONs against the performance targets of the kernels, one line per target.

    python scripts/check_targets.py docs/results/h100.json      # exit status 0: every target met
    python scripts/check_targets.py docs/results/h100.json docs/results/h100_host_time.json   # and the host targets

Each file is a `benchmark.py --json` run (its "records": the kernels' targets below) or a `benchmark.py --host
--json` run (its "host" rows: the host-time targets); the summary counts the targets of every file given.

A target is met only when the ratio of the two medians meets it; the spread of the samples gives no allowance.
Each ratio is between rows of the same run, and is reference median time / our median time (above 1: ours is
faster), or for the copy target that ratio in percent. A row that is missing, has no median or was marked wrong
(correct is False) misses every target it takes part in.

Targets:
  square vs copy    float32 and bfloat16, every size n >= 2^26 in the run (2^26 if there is none): ours at least
                    97% of the device-to-device copy's bandwidth, i.e. copy median / ours median >= 0.97.
  square vs torch   per dtype (float32, float64, float16, bfloat16): every size 2^12, 2^13, ..., 2^28 at least
                    0.98x (torch median / ours median >= 0.98), and the geometric mean of those 17 ratios at least
                    1.00x. Two kernels at the same memory roofline differ by noise, so single sizes may fall a
                    little below 1; on average ours must not be slower.
  matmul vs torch   float32, default variant (0), TF32 off: >= 0.90x at 4096^3 and 8192^3, >= 0.80x at 2048^3,
                    4000^3 and 8192x1024x4096 (M x N x K).
  tensor cores      (H100) bfloat16 and float16, default variant (0) vs torch.mm: >= 1.00x at 4096^3 and
                    8192^3, >= 0.90x at 2048^3, 4000^3 and 8192x1024x4096, >= 0.75x at 1024^3.
                    The best mma.sync step (the rows whose variant_name contains "mma_sync" or "mma_pipeline"; the
                    line names it) at bfloat16 4096^3: >= 0.55x torch.mm.
                    TF32: float32 with TF32 allowed on both sides (rows with math "tf32"), default variant, 4096^3:
                    >= 0.90x cuBLAS TF32.
  skinny matmul     float32, bfloat16 and float16, default variant vs torch.mm, TF32 off: >= 0.90x at 1x4096x4096,
                    16x4096x4096 and 4096x1x4096 (matrix-vector shapes, memory-bound).
  skinny bandwidth  every dtype, default variant at 1x16384x16384 (a matrix-vector product whose call is mostly
                    reading B): its bytes (A, B and C, as benchmark.py counts them) a second at least 85% of the
                    copy's (read + written) a second, the copy being the largest of the same dtype in the run.
  small matmul      float32 (TF32 off) and bfloat16, default variant vs torch.mm: >= 0.80x at 256^3 and 512^3.
  float64 matmul    default variant vs torch.mm (cuBLAS DGEMM): >= 0.80x at 4096^3 and 8192^3.
  rms_norm          bfloat16 and float32 at 8192x4096, 32768x8192, 4096x1024 and 65536x256 (rows x n): the forward's
                    bytes a second (x read, weight read, y written) at least 95% of the copy of x's (op
                    "copy:rms_norm": x read, written), at least 1.00x torch.compile's, and at least 1.25x eager
                    F.rms_norm ("torch") at the three larger shapes (all but 4096x1024); the backward's (x, dy and
                    weight read, dx and dweight written) at least 90% of its copy's ("copy:rms_norm_backward") and at
                    least 1.00x torch.compile's backward.

  linear            (issue 40) bfloat16 and float16, `linear_gelu` (bias and GELU) against `linear` (neither), ours
                    both, at every shape of LINEAR_SHAPES: the epilogue costs at most 3% (linear's time / linear_gelu's
                    >= 1/1.03); and at M >= 1024 ours at least 1.05x torch's F.gelu(F.linear(x, w, b)) (the
                    linear_gelu "torch" row).

  model shapes      (issue 40) `matmul_models` (x @ weight.T, ours linear against F.linear / cuBLAS), over every shape
                    of its corpus (the benchmark table's CORPUS_SHAPES: model layers at 1 to 16384 tokens and the
                    awkward classes): bfloat16 and float16 every shape >= 0.90x and the geometric mean >= 1.00x;
                    float32 (TF32 off) every shape >= 0.90x. One line each, naming the worst shape. The same for
                    `matmul_batched` (its BATCHED_SHAPES: attention's products and a batch of large ones, ours
                    against torch.matmul's batched cuBLAS call).

  host time         (issue 40, a --host run) per call on tiny CUDA tensors, float32 and bfloat16: matmul without
                    grad at most 1.15x torch.mm's, linear with inputs that require grad at most 1.50x
                    F.linear's (ours_us / torch_us of the row).

A run on the CPU (env.device "cpu") has targets of its own:
  matmul vs torch   float32, the CPU kernel vs torch.mm (MKL or OpenBLAS): >= 0.50x at 512^3 and 1024^3.

Rows are matched by (op, dtype, shape, impl, variant, math): a TF32 row (math "tf32") never stands in for a TF32-off
one (math absent or null), nor the reverse.

Beside each ratio the spread of both sides is printed as relative IQRs (interquartile range / median, ours then the
reference), for the reader to judge how close a ratio is to noise; it does not change the verdict.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

SQUARE_COPY_DTYPES = ("float32", "bfloat16")
SQUARE_COPY_MIN_LOG2 = 26
SQUARE_COPY_MIN_PCT = 97.0
SQUARE_TORCH_DTYPES = ("float32", "float64", "float16", "bfloat16")
SQUARE_TORCH_LOG2 = range(12, 29)  # 2^12 .. 2^28
SQUARE_TORCH_MIN_RATIO = 0.98  # every size
SQUARE_TORCH_MIN_GEOMEAN = 1.00  # geometric mean over SQUARE_TORCH_LOG2
MATMUL_MIN_RATIO = {(4096, 4096, 4096): 0.90, (8192, 8192, 8192): 0.90, (2048, 2048, 2048): 0.80,
                    (4000, 4000, 4000): 0.80, (8192, 1024, 4096): 0.80}  # fmt: skip
TENSOR_CORE_DTYPES = ("bfloat16", "float16")
TENSOR_CORE_MIN_RATIO = {(4096, 4096, 4096): 1.00, (8192, 8192, 8192): 1.00, (2048, 2048, 2048): 0.90,
                         (4000, 4000, 4000): 0.90, (8192, 1024, 4096): 0.90, (1024, 1024, 1024): 0.75}  # fmt: skip
MMA_SYNC_NAMES = ("mma_sync", "mma_pipeline")  # variant_name substrings of the sm_80 (mma.sync) steps
MMA_SYNC_DTYPE, MMA_SYNC_SHAPE, MMA_SYNC_MIN_RATIO = "bfloat16", (4096, 4096, 4096), 0.55
TF32_SHAPE, TF32_MIN_RATIO = (4096, 4096, 4096), 0.90
SKINNY_DTYPES = ("float32", "bfloat16", "float16")
SKINNY_MIN_RATIO = {(1, 4096, 4096): 0.90, (16, 4096, 4096): 0.90, (4096, 1, 4096): 0.90}
SKINNY_BANDWIDTH_DTYPES = ("float32", "float64", "float16", "bfloat16")
SKINNY_BANDWIDTH_SHAPE, SKINNY_BANDWIDTH_MIN_PCT = (1, 16384, 16384), 85.0
ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}
SMALL_DTYPES = ("float32", "bfloat16")
SMALL_MIN_RATIO = {(256, 256, 256): 0.80, (512, 512, 512): 0.80}
FLOAT64_MIN_RATIO = {(4096, 4096, 4096): 0.80, (8192, 8192, 8192): 0.80}
RMS_NORM_DTYPES = ("bfloat16", "float32")
RMS_NORM_SHAPES = ((8192, 4096), (32768, 8192), (4096, 1024), (65536, 256))
RMS_NORM_EAGER_SHAPES = ((8192, 4096), (32768, 8192), (65536, 256))  # the three larger
RMS_NORM_FORWARD_MIN_PCT, RMS_NORM_BACKWARD_MIN_PCT = 95.0, 90.0
RMS_NORM_COMPILE_MIN_RATIO, RMS_NORM_EAGER_MIN_RATIO = 1.00, 1.25
CORPUS_MIN_RATIO = 0.90  # every shape, each dtype of CORPUS_DTYPES
CORPUS_MIN_GEOMEAN = {"bfloat16": 1.00, "float16": 1.00}  # the 16-bit dtypes' geometric mean over the corpus
CORPUS_DTYPES = ("bfloat16", "float16", "float32")
LINEAR_DTYPES = ("bfloat16", "float16")
LINEAR_MAX_EPILOGUE_COST = 0.03  # linear_gelu's time at most 1.03x linear's
LINEAR_MIN_RATIO = 1.05  # vs F.gelu(F.linear(x, w, b)) at M >= LINEAR_RATIO_MIN_M
LINEAR_RATIO_MIN_M = 1024
CPU_MATMUL_MIN_RATIO = {(512, 512, 512): 0.50, (1024, 1024, 1024): 0.50}  # float32, a run on the CPU
HOST_DTYPES = ("float32", "bfloat16")
# (op, requires_grad): the most ours_us / torch_us may be, and the reference's name (a --host run's CUDA rows).
HOST_MAX_RATIO = {("matmul", False): (1.15, "torch.mm"), ("linear", True): (1.50, "F.linear")}

Record = dict[str, Any]


def relative_iqr(record: Record) -> float | None:
    """iqr_ms / median_ms of a record, None when either is missing."""
    iqr, med = record.get("iqr_ms"), record.get("median_ms")
    return iqr / med if iqr is not None and med else None


def spread(ours: Record, ref: Record, ref_name: str) -> str:
    """'IQR ours 1.2%, torch 0.8%': both sides' relative IQRs."""

    def pct(record: Record) -> str:
        rel = relative_iqr(record)
        return "n/a" if rel is None else f"{100 * rel:.1f}%"

    return f"IQR ours {pct(ours)}, {ref_name} {pct(ref)}"


def check(records: list[Record], device: str = "cuda") -> list[tuple[bool, str]]:
    """(met, description) per target of a run on `device` ("cuda" or "cpu"), in the module docstring's order (per
    dtype: its sizes, then its geomean)."""
    by = {(r["op"], r["dtype"], tuple(r["shape"]), r["impl"], r.get("variant"), r.get("math")): r for r in records}
    results: list[tuple[bool, str]] = []

    def usable(r: Record | None) -> Record | None:
        return r if r and r.get("median_ms") and r.get("correct") is not False else None

    def row(
        op: str, dtype: str, shape: tuple[int, ...], impl: str, variant: int | None = None, math_mode: str | None = None
    ) -> Record | None:
        return usable(by.get((op, dtype, shape, impl, variant, math_mode)))

    def missing(name: str, **rows: Record | None) -> tuple[bool, str]:
        absent = ", ".join(impl for impl, r in rows.items() if r is None)
        return False, f"{name}: missing ({absent}: no row, no median or a wrong result)"

    def matmul_vs_torch(dtype: str, shape: tuple[int, ...], target: float, math_mode: str | None = None) -> None:
        ours = row("matmul", dtype, shape, "ours", 0, math_mode)
        ref = row("matmul", dtype, shape, "torch", None, math_mode)
        label = f"{dtype}+{math_mode}" if math_mode else dtype
        name = f"matmul {label} {'x'.join(map(str, shape))} vs torch"
        if not (ours and ref):
            results.append(missing(name, ours=ours, torch=ref))
            return
        ratio = ref["median_ms"] / ours["median_ms"]
        results.append(
            (ratio >= target, f"{name}: {ratio:.3f}x (target >= {target:.2f}; {spread(ours, ref, 'torch')})")
        )

    if device == "cpu":
        for shape, target in CPU_MATMUL_MIN_RATIO.items():
            matmul_vs_torch("float32", shape, target)
        return results

    for dtype in SQUARE_COPY_DTYPES:
        sizes = sorted(s[0] for (op, dt, s, impl, _, _) in by if op == "square" and dt == dtype and impl == "ours")
        for n in [s for s in sizes if s >= 2**SQUARE_COPY_MIN_LOG2] or [2**SQUARE_COPY_MIN_LOG2]:
            ours, copy = row("square", dtype, (n,), "ours"), row("copy", dtype, (n,), "torch")
            name = f"square {dtype} 2^{n.bit_length() - 1} vs copy"
            if not (ours and copy):
                results.append(missing(name, ours=ours, copy=copy))
                continue
            pct = 100 * copy["median_ms"] / ours["median_ms"]
            met = pct >= SQUARE_COPY_MIN_PCT
            text = f"{name}: {pct:.1f}% (target >= {SQUARE_COPY_MIN_PCT:.0f}%; {spread(ours, copy, 'copy')})"
            results.append((met, text))

    for dtype in SQUARE_TORCH_DTYPES:
        ratios: list[float] = []
        for p in SQUARE_TORCH_LOG2:
            ours, ref = row("square", dtype, (2**p,), "ours"), row("square", dtype, (2**p,), "torch")
            name = f"square {dtype} 2^{p} vs torch"
            if not (ours and ref):
                results.append(missing(name, ours=ours, torch=ref))
                continue
            ratio = ref["median_ms"] / ours["median_ms"]
            ratios.append(ratio)
            text = f"{name}: {ratio:.3f}x (target >= {SQUARE_TORCH_MIN_RATIO:.2f}; {spread(ours, ref, 'torch')})"
            results.append((ratio >= SQUARE_TORCH_MIN_RATIO, text))
        first, last = SQUARE_TORCH_LOG2[0], SQUARE_TORCH_LOG2[-1]
        name = f"square {dtype} geomean 2^{first}..2^{last} vs torch"
        if len(ratios) < len(SQUARE_TORCH_LOG2):
            results.append((False, f"{name}: missing ({len(SQUARE_TORCH_LOG2) - len(ratios)} size(s) without a ratio)"))
            continue
        geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        text = f"{name}: {geomean:.3f}x (target >= {SQUARE_TORCH_MIN_GEOMEAN:.2f}; min {min(ratios):.3f}x)"
        results.append((geomean >= SQUARE_TORCH_MIN_GEOMEAN, text))

    for shape, target in MATMUL_MIN_RATIO.items():
        matmul_vs_torch("float32", shape, target)
    for dtype in TENSOR_CORE_DTYPES:
        for shape, target in TENSOR_CORE_MIN_RATIO.items():
            matmul_vs_torch(dtype, shape, target)

    # The best mma.sync step: the fastest of the correct, timed rows of the steps MMA_SYNC_NAMES names.
    name = f"matmul {MMA_SYNC_DTYPE} {'x'.join(map(str, MMA_SYNC_SHAPE))} best mma.sync step vs torch"
    ref = row("matmul", MMA_SYNC_DTYPE, MMA_SYNC_SHAPE, "torch")
    case = ("matmul", MMA_SYNC_DTYPE, MMA_SYNC_SHAPE, "ours", None)  # (op, dtype, shape, impl, math)
    steps = [
        r
        for r in records
        if (r["op"], r["dtype"], tuple(r["shape"]), r["impl"], r.get("math")) == case
        and any(part in str(r.get("variant_name") or "") for part in MMA_SYNC_NAMES)
        and usable(r)
    ]
    best = min(steps, key=lambda r: r["median_ms"]) if steps else None
    if not (best and ref):
        results.append(missing(name, **{"mma.sync steps": best, "torch": ref}))
    else:
        ratio = ref["median_ms"] / best["median_ms"]
        text = (
            f"{name}: {ratio:.3f}x (v{best['variant']} {best['variant_name']}; target >= {MMA_SYNC_MIN_RATIO:.2f}; "
            f"{spread(best, ref, 'torch')})"
        )
        results.append((ratio >= MMA_SYNC_MIN_RATIO, text))

    matmul_vs_torch("float32", TF32_SHAPE, TF32_MIN_RATIO, "tf32")
    for dtype in SKINNY_DTYPES:
        for shape, target in SKINNY_MIN_RATIO.items():
            matmul_vs_torch(dtype, shape, target)
    for dtype in SKINNY_BANDWIDTH_DTYPES:
        m, n, k = SKINNY_BANDWIDTH_SHAPE
        ours = row("matmul", dtype, SKINNY_BANDWIDTH_SHAPE, "ours", 0)
        copies = [s[0] for (op, dt, s, impl, _, _) in by if op == "copy" and dt == dtype and impl == "torch"]
        copy = row("copy", dtype, (max(copies),), "torch") if copies else None
        name = f"matmul {dtype} {m}x{n}x{k} bandwidth vs copy"
        if not (ours and copy):
            results.append(missing(name, ours=ours, copy=copy))
            continue
        ours_rate = (m * k + k * n + m * n) * ITEMSIZE[dtype] / ours["median_ms"]
        copy_rate = 2 * copy["shape"][0] * ITEMSIZE[dtype] / copy["median_ms"]
        pct = 100 * ours_rate / copy_rate
        text = (
            f"{name}: {pct:.1f}% (target >= {SKINNY_BANDWIDTH_MIN_PCT:.0f}%; ours {ours_rate / 1e6:.0f} GB/s, copy of "
            f"{copy['shape'][0]} elements {copy_rate / 1e6:.0f} GB/s; {spread(ours, copy, 'copy')})"
        )
        results.append((pct >= SKINNY_BANDWIDTH_MIN_PCT, text))
    for dtype in SMALL_DTYPES:
        for shape, target in SMALL_MIN_RATIO.items():
            matmul_vs_torch(dtype, shape, target)
    for shape, target in FLOAT64_MIN_RATIO.items():
        matmul_vs_torch("float64", shape, target)

    def ratio_vs(op: str, dtype: str, shape: tuple[int, ...], impl: str, target: float) -> None:
        ours, ref = row(op, dtype, shape, "ours"), row(op, dtype, shape, impl)
        name = f"{op} {dtype} {'x'.join(map(str, shape))} vs {impl}"
        if not (ours and ref):
            results.append(missing(name, ours=ours, **{impl: ref}))
            return
        ratio = ref["median_ms"] / ours["median_ms"]
        text = f"{name}: {ratio:.3f}x (target >= {target:.2f}; {spread(ours, ref, impl)})"
        results.append((ratio >= target, text))

    def rms_norm_vs_copy(
        op: str, dtype: str, shape: tuple[int, ...], tensors: int, weights: int, target: float
    ) -> None:
        ours, copy = row(op, dtype, shape, "ours"), row(f"copy:{op}", dtype, shape, "torch")
        name = f"{op} {dtype} {'x'.join(map(str, shape))} vs copy"
        if not (ours and copy):
            results.append(missing(name, ours=ours, copy=copy))
            return
        rows, n = shape
        ours_rate = (tensors * rows * n + weights * n) / ours["median_ms"]
        copy_rate = 2 * rows * n / copy["median_ms"]
        pct = 100 * ours_rate / copy_rate
        text = f"{name}: {pct:.1f}% (target >= {target:.0f}%; {spread(ours, copy, 'copy')})"
        results.append((pct >= target, text))

    for dtype in RMS_NORM_DTYPES:
        for shape in RMS_NORM_SHAPES:
            rms_norm_vs_copy("rms_norm", dtype, shape, 2, 1, RMS_NORM_FORWARD_MIN_PCT)
            ratio_vs("rms_norm", dtype, shape, "torch.compile", RMS_NORM_COMPILE_MIN_RATIO)
            if shape in RMS_NORM_EAGER_SHAPES:
                ratio_vs("rms_norm", dtype, shape, "torch", RMS_NORM_EAGER_MIN_RATIO)
            rms_norm_vs_copy("rms_norm_backward", dtype, shape, 3, 2, RMS_NORM_BACKWARD_MIN_PCT)
            ratio_vs("rms_norm_backward", dtype, shape, "torch.compile", RMS_NORM_COMPILE_MIN_RATIO)

    for dtype in LINEAR_DTYPES:
        for shape in LINEAR_SHAPES:
            label = f"{dtype} {'x'.join(map(str, shape))}"
            fused, plain = row("linear_gelu", dtype, shape, "ours"), row("linear", dtype, shape, "ours")
            name = f"linear {label} epilogue cost"
            if not (fused and plain):
                results.append(missing(name, linear_gelu=fused, linear=plain))
            else:
                cost = fused["median_ms"] / plain["median_ms"] - 1
                text = f"{name}: {100 * cost:+.1f}% (target <= {100 * LINEAR_MAX_EPILOGUE_COST:.0f}%; {spread(fused, plain, 'plain')})"
                results.append((cost <= LINEAR_MAX_EPILOGUE_COST, text))
            if shape[0] >= LINEAR_RATIO_MIN_M:
                ratio_vs("linear_gelu", dtype, shape, "torch", LINEAR_MIN_RATIO)

    for op, shapes in (("matmul_models", corpus_shapes()), ("matmul_batched", batched_shapes())):
        for dtype in CORPUS_DTYPES:
            ratios = {}
            for shape in shapes:
                ours, ref = row(op, dtype, shape, "ours"), row(op, dtype, shape, "torch")
                if ours and ref:
                    ratios[shape] = ref["median_ms"] / ours["median_ms"]
            lacking = len(shapes) - len(ratios)
            absent = f"missing ({lacking} of {len(shapes)} shapes without a ratio)"
            name = f"{op} {dtype} every shape vs torch"
            if lacking:
                results.append((False, f"{name}: {absent}"))
            else:
                worst = min(ratios, key=ratios.get)
                text = f"{name}: min {ratios[worst]:.3f}x at {'x'.join(map(str, worst))} (target >= {CORPUS_MIN_RATIO:.2f})"
                results.append((ratios[worst] >= CORPUS_MIN_RATIO, text))
            if dtype in CORPUS_MIN_GEOMEAN:
                name = f"{op} {dtype} geomean vs torch"
                target = CORPUS_MIN_GEOMEAN[dtype]
                if lacking:
                    results.append((False, f"{name}: {absent}"))
                else:
                    geomean = math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios))
                    results.append((geomean >= target, f"{name}: {geomean:.3f}x (target >= {target:.2f})"))
    return results


def check_host(rows: list[Record]) -> list[tuple[bool, str]]:
    """(met, text) for each host-time target, from a `benchmark.py --host` run's rows (its JSON's "host")."""
    results = []
    for (op, grad), (limit, reference) in HOST_MAX_RATIO.items():
        for dtype in HOST_DTYPES:
            name = f"host time {op} {dtype} {'with' if grad else 'without'} grad vs {reference}"
            match = [
                r
                for r in rows
                if r.get("op") == op and r.get("device") == "cuda" and r.get("dtype") == dtype
                and r.get("requires_grad") == grad
            ]  # fmt: skip
            if not match or not match[0].get("torch_us"):
                results.append((False, f"{name}: missing (no CUDA row of the run)"))
                continue
            row = match[0]
            ratio = row["ours_us"] / row["torch_us"]
            text = (
                f"{name}: {ratio:.2f}x ({row['ours_us']:.1f} against {row['torch_us']:.1f} us; target <= {limit:.2f}x)"
            )
            results.append((ratio <= limit, text))
    return results


def _load_corpus() -> ModuleType:
    """cuda_kernels/tools/bench/corpus.py, by path: importing it through the package would load the extension."""
    path = Path(__file__).resolve().parent.parent / "cuda_kernels" / "tools" / "bench" / "corpus.py"
    spec = importlib.util.spec_from_file_location("_bench_corpus", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_CORPUS = _load_corpus()
LINEAR_SHAPES = [tuple(s) for s in _CORPUS.LINEAR_SHAPES]  # the linear entries' shapes


def corpus_shapes() -> list[tuple[int, ...]]:
    """The matmul_models entry's shapes (CORPUS_SHAPES)."""
    return [tuple(s) for s in _CORPUS.CORPUS_SHAPES]


def batched_shapes() -> list[tuple[int, ...]]:
    """The matmul_batched entry's shapes (BATCHED_SHAPES: batch, M, N, K, k_major_b)."""
    return [tuple(s) for s in _CORPUS.BATCHED_SHAPES]


def main(path: str, *more: str) -> int:
    """Prints each run's header and one line per target, then a summary over every file; returns 0 when every target
    is met, else 1."""
    results: list[tuple[bool, str]] = []
    for file in (path, *more):
        with open(file) as f:
            data = json.load(f)
        env = data["env"]
        print(f"{env.get('gpu') or env.get('cpu')}, SM clock {env.get('sm_clock_mhz')} MHz, torch {env.get('torch')}, "
              f"commit {str(env.get('git_commit'))[:10]}, {env.get('date')}")  # fmt: skip
        found = (check(data["records"], env.get("device") or "cuda") if "records" in data else []) + (
            check_host(data["host"]) if "host" in data else []
        )
        for met, text in found:
            print(f"{'ok  ' if met else 'MISS'} {text}")
        results += found
    missed = sum(not met for met, _ in results)
    print(f"{len(results) - missed} of {len(results)} targets met")
    return 1 if missed else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: check_targets.py RESULTS.json [MORE.json ...] (benchmark.py --json, or --host --json, runs)")
    sys.exit(main(*sys.argv[1:]))
