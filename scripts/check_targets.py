#!/usr/bin/env python
"""Checks a benchmark.py JSON against the performance targets of the kernels (issue 4), one line per row.

    python scripts/check_targets.py docs/results/h100.json      # exit status 0: every target met

Targets (each ratio is between rows of the same run):
  square vs copy    float32 and bfloat16, n >= 2^26: ours at least 97% of the device-to-device copy's bandwidth.
  square vs torch   all four dtypes, 2^12 <= n <= 2^28: median time ratio torch / ours >= 1.0 within the run's
                    noise, taken as half the relative IQR of each side, added: ratio >= 1 - (iqr_o/med_o +
                    iqr_t/med_t) / 2. Rows under about 10 us have IQRs of 5-15% (event resolution, launch
                    jitter); large rows 0.1-2%.
  matmul vs torch   float32, default variant, TF32 off: >= 0.90 at 4096^3 and 8192^3, >= 0.80 at 2048^3, 4000^3
                    and 8192x1024x4096 (M x N x K).
"""

from __future__ import annotations

import json
import sys
from typing import Any

SQUARE_COPY_DTYPES = ("float32", "bfloat16")
SQUARE_COPY_MIN_LOG2 = 26
SQUARE_COPY_MIN_PCT = 97.0
SQUARE_TORCH_DTYPES = ("float32", "float64", "float16", "bfloat16")
SQUARE_TORCH_LOG2 = range(12, 29)
MATMUL_MIN_RATIO = {(4096, 4096, 4096): 0.90, (8192, 8192, 8192): 0.90, (2048, 2048, 2048): 0.80,
                    (4000, 4000, 4000): 0.80, (8192, 1024, 4096): 0.80}  # fmt: skip


def check(records: list[dict[str, Any]]) -> list[tuple[bool, str]]:
    """(met, description) per target row; a row missing from the JSON counts as not met."""
    by = {(r["op"], r["dtype"], tuple(r["shape"]), r["impl"], r.get("variant")): r for r in records}
    results: list[tuple[bool, str]] = []

    def row(op: str, dtype: str, shape: tuple[int, ...], impl: str, variant: int | None = None):
        r = by.get((op, dtype, shape, impl, variant))
        return r if r and r.get("median_ms") and r.get("correct") is not False else None

    for dtype in SQUARE_COPY_DTYPES:
        sizes = sorted(s[0] for (op, dt, s, impl, _) in by if op == "square" and dt == dtype and impl == "ours")
        for n in [s for s in sizes if s >= 2**SQUARE_COPY_MIN_LOG2] or [2**SQUARE_COPY_MIN_LOG2]:
            ours, copy = row("square", dtype, (n,), "ours"), row("copy", dtype, (n,), "torch")
            name = f"square {dtype} 2^{n.bit_length() - 1} vs copy"
            if not (ours and copy):
                results.append((False, f"{name}: missing"))
                continue
            pct = 100 * copy["median_ms"] / ours["median_ms"]
            results.append((pct >= SQUARE_COPY_MIN_PCT, f"{name}: {pct:.1f}% (target >= {SQUARE_COPY_MIN_PCT:.0f}%)"))

    for dtype in SQUARE_TORCH_DTYPES:
        for p in SQUARE_TORCH_LOG2:
            ours, ref = row("square", dtype, (2**p,), "ours"), row("square", dtype, (2**p,), "torch")
            name = f"square {dtype} 2^{p} vs torch"
            if not (ours and ref):
                results.append((False, f"{name}: missing"))
                continue
            ratio = ref["median_ms"] / ours["median_ms"]
            noise = (ours["iqr_ms"] / ours["median_ms"] + ref["iqr_ms"] / ref["median_ms"]) / 2
            met = ratio >= 1.0 - noise
            results.append((met, f"{name}: {ratio:.3f}x (noise {noise:.3f}, target >= {1 - noise:.3f})"))

    for shape, target in MATMUL_MIN_RATIO.items():
        ours, ref = row("matmul", "float32", shape, "ours", 0), row("matmul", "float32", shape, "torch")
        name = f"matmul float32 {'x'.join(map(str, shape))} vs torch"
        if not (ours and ref):
            results.append((False, f"{name}: missing"))
            continue
        ratio = ref["median_ms"] / ours["median_ms"]
        results.append((ratio >= target, f"{name}: {ratio:.3f}x (target >= {target:.2f})"))
    return results


def main(path: str) -> int:
    data = json.load(open(path))
    env = data["env"]
    print(f"{env.get('gpu')}, SM clock {env.get('sm_clock_mhz')} MHz, torch {env.get('torch')}, "
          f"commit {str(env.get('git_commit'))[:10]}, {env.get('date')}")  # fmt: skip
    results = check(data["records"])
    for met, text in results:
        print(f"{'ok  ' if met else 'MISS'} {text}")
    missed = sum(not met for met, _ in results)
    print(f"{len(results) - missed} of {len(results)} targets met")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
