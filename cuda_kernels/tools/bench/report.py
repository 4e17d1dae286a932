"""Results: the record of each timed row, its derived metrics, and the terminal table, JSON, CSV, plot and
--compare made from the records. Per-op facts (bytes, FLOPs, rooflines, shape formats) come from the table.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

from cuda_kernels.tools.bench.env import Peaks, peak_tflops
from cuda_kernels.tools.bench.table import DTYPES, OPS, Case, Impl, roofline_ops, shape_of
from cuda_kernels.tools.bench.timing import Timing

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
        op=impl.op or case.op,
        dtype=case.dtype_name,
        shape=list(case.shape),
        impl=impl.impl,
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

    pct_roofline: a memory-bound op -> GB/s over its roofline op's (a copy, same dtype and size);
    a compute-bound op -> TFLOP/s over torch's row (cuBLAS for matmul; with the same math: a TF32 row against
    cuBLAS TF32); the roofline rows themselves get 100. pct_peak: of the datasheet's HBM bandwidth for memory-bound
    ops, of its TFLOP/s peak for the dtype (TF32 for math "tf32") otherwise. speedup (ours): torch time / ours.
    """
    by_key = {record_key(r): r for r in records}
    for r in records:
        op = OPS.get(r["op"])
        if r["median_ms"] is None or op is None:
            continue
        shape = tuple(r["shape"])
        seconds = r["median_ms"] * 1e-3
        r["gbps"] = op.bytes_moved(shape, DTYPES[r["dtype"]].itemsize) / seconds / 1e9
        n_flops = op.flops(shape)
        r["tflops"] = n_flops / seconds / 1e12 if n_flops is not None else None
        math_mode = r.get("math")
        if op.roofline_op:
            roof = by_key.get((op.roofline_op, r["dtype"], shape, "torch", None, None))
        else:
            roof = by_key.get((r["op"], r["dtype"], shape, "torch", None, math_mode))
        if roof and roof["median_ms"] is not None:
            # A ratio of rates, each row's bytes over its time: the roofline's bytes may differ from the op's (the
            # copy of one input of a multi_input op); a compute-bound op and its torch row do the same work.
            itemsize = DTYPES[r["dtype"]].itemsize
            rate = op.bytes_moved(shape, itemsize) / r["median_ms"]
            roof_rate = OPS[roof["op"]].bytes_moved(shape, itemsize) / roof["median_ms"]
            if roof_rate > 0:  # an entry that counts no bytes (llama_prefill) has no rate to compare
                r["pct_roofline"] = 100 * rate / roof_rate
        if n_flops is not None:
            peak = peak_tflops(peaks, DTYPES[r["dtype"]], math_mode)
            r["pct_peak"] = 100 * r["tflops"] / peak if peak else None
        else:
            r["pct_peak"] = 100 * r["gbps"] / (peaks.hbm_tbps * 1e3) if peaks else None
        if r["impl"] == "ours":
            ref = by_key.get((r["op"], r["dtype"], shape, "torch", None, math_mode))
            if ref and ref["median_ms"] is not None:
                r["speedup"] = ref["median_ms"] / r["median_ms"]


def row_label(r: dict[str, Any]) -> str:
    """ "ours", "torch", "ours[v1 01_tiled]", or the roofline op's name for its rows ("copy")."""
    if r["op"] in roofline_ops():
        return r["op"]
    return Impl(r["impl"], r["variant"], r.get("variant_name")).label


def case_ops(records: list[dict[str, Any]]) -> list[str]:
    """The op of the case each record belongs to: a roofline op's row (timed first in its case) belongs to the
    next row of another op; on its own (`--op copy`) to itself."""
    rooflines = roofline_ops()
    out: list[str] = []
    following = None
    for r in reversed(records):
        if r["op"] not in rooflines:
            following = r["op"]
        out.append(following if r["op"] in rooflines and following else r["op"])
    return out[::-1]


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
    ops = case_ops(records)
    for r, op, previous in zip(records, ops, [None, *ops], strict=False):
        if previous is not None and op != previous:
            rows.append(None)
        impl = row_label(r)
        if r["median_ms"] is None:
            failed = "WRONG RESULT" if r["impl"] != "torch.compile" else "FAILED (torch's)"
            reason = failed if r["correct"] is False else "not timed"
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
        rows.append([r["op"], dtype_label(r["dtype"], r.get("math")), shape_of(r["op"], r["shape"]), impl, *timed])
    widths = [max(len(str(row[i])) for row in [header, *[r for r in rows if r]]) for i in range(len(header))]
    left = {0, 1, 2, 3}  # text columns are left-aligned, numbers right-aligned

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    out = [line(header), line(["-" * w for w in widths])]
    out += ["" if row is None else line(row) for row in rows]
    return "\n".join(out)


def write_json(path: str | Path, env: dict[str, Any], records: list[dict[str, Any]], key: str = "records") -> None:
    """{"env": {...}, "records": [...]} (records: RECORD_FIELDS; --host writes its rows under "host")."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        json.dump({"env": env, key: records}, f, indent=1)
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
        label = row_label({"op": op, "impl": impl, "variant": variant})
        dtype = dtype_label(dtype, math_mode)
        lines.append(
            f"  {op:<7} {dtype:<12} {shape_of(op, shape):<16} {label:<22} "
            f"{row['old_ms']:>10.4g} -> {row['new_ms']:>10.4g} ms  {row['change']:+7.1%}  {row['status']}"
        )
    if not rows:
        lines.append("  (no case in common)")
    return "\n".join(lines)


def plot_records(records: list[dict[str, Any]], path: str | Path, peaks: Peaks | None = None, title: str = "") -> None:
    """Writes a PNG, one panel per op and dtype: GB/s against elements for memory-bound ops (their roofline op
    dashed) and TFLOP/s against size for compute-bound ones."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = [r for r in records if r["median_ms"] is not None and r["op"] in OPS]
    present = {r["op"] for r in timed}
    # A roofline op's rows go into the panels of the ops they serve; it gets panels of its own only when alone.
    served = {op.roofline_op for op in OPS.values() if op.name in present and op.roofline_op}
    panel_ops = [name for name in OPS if name in present and name not in served]
    panels = [
        (name, d) for name in panel_ops for d in DTYPES if any(r["op"] == name and r["dtype"] == d for r in timed)
    ]
    rows_of_ops = sorted({name for name, _ in panels}, key=panel_ops.index)
    dtypes = [d for d in DTYPES if any(d == pd for _, pd in panels)]
    fig, axes = plt.subplots(
        max(len(rows_of_ops), 1),
        max(len(dtypes), 1),
        figsize=(4.8 * max(len(dtypes), 1), 4.0 * max(len(rows_of_ops), 1)),
        squeeze=False,
    )
    if not panels:
        axes[0][0].text(0.5, 0.5, "no timed records", ha="center", va="center")
    for name, dtype in panels:
        op = OPS[name]
        ax = axes[rows_of_ops.index(name)][dtypes.index(dtype)]
        rows = [r for r in timed if r["dtype"] == dtype and r["op"] in (name, op.roofline_op)]
        if op.flops((1,) * len(rows[0]["shape"])) is None:
            _plot_bandwidth(ax, rows, peaks)
        else:
            _plot_compute(ax, rows, peak_tflops(peaks, DTYPES[dtype]))
        ax.set_title(f"{name} {dtype}")
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
    """Rows grouped by row_label ("ours", "torch", "copy", "ours[v1 01_tiled]", ...), TF32 rows apart."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        label = row_label(r) + (f" {r['math']}" if r.get("math") else "")
        out.setdefault(label, []).append(r)
    return out


def _plot_bandwidth(ax: Any, rows: list[dict[str, Any]], peaks: Peaks | None) -> None:
    rooflines = roofline_ops()
    for label, series in _series(rows).items():
        # Against all the elements of the shape (a row-wise op's rows x n), in that order.
        series = sorted(series, key=lambda r: math.prod(r["shape"]))
        is_roofline = series[0]["op"] in rooflines
        style = {"linestyle": "--", "color": "gray"} if is_roofline else {"marker": "o", "markersize": 3}
        ax.plot(
            [math.prod(r["shape"]) for r in series],
            [r["gbps"] for r in series],
            label=f"{label} (roofline)" if is_roofline else label,
            **style,
        )
    if peaks is not None:
        ax.axhline(peaks.hbm_tbps * 1e3, linestyle=":", color="black", label=f"{peaks.name} datasheet")
    ax.set_xlabel("elements")
    ax.set_ylabel("GB/s (read + write)")


def _plot_compute(ax: Any, rows: list[dict[str, Any]], peak: float | None) -> None:
    """Square shapes as lines against N; other shapes as crosses at (M*N*K)^(1/3)."""
    for label, series in _series(rows).items():
        cubic = sorted((r for r in series if len(set(r["shape"])) == 1), key=lambda r: r["shape"][0])
        other = [r for r in series if len(set(r["shape"])) > 1]
        (line,) = ax.plot(
            [r["shape"][0] for r in cubic], [r["tflops"] for r in cubic], marker="o", markersize=3, label=label
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
