"""Markdown tables for docs/ from a benchmark.py JSON:  python scripts/results_table.py docs/results/h100.json"""

from __future__ import annotations

import json
import sys


def main(path: str) -> None:
    data = json.load(open(path))
    env = data["env"]
    rows = data["records"]
    print(
        f"{env.get('gpu')}, SM clock {env.get('sm_clock_mhz')}/{env.get('sm_clock_max_mhz')} MHz, driver "
        f"{env.get('driver')}, CUDA {env.get('cuda')}, torch {env.get('torch')}, commit {str(env.get('git_commit'))[:10]}, "
        f"{env.get('date')}\n"
    )
    # A record's identity includes `math` ("tf32" for float32 rows timed with TF32 allowed on both sides, else None).
    by = {(r["op"], r["dtype"], tuple(r["shape"]), r["impl"], r.get("variant"), r.get("math")): r for r in rows}

    print("| square | n | ours GB/s | torch GB/s | copy GB/s | ours / copy | ours / torch (time) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for dtype in ("float32", "bfloat16", "float16", "float64"):
        for p in (12, 16, 20, 24, 26, 28):
            key = ("square", dtype, (2**p,))
            ours, torch_, copy = (
                by.get((*key, "ours", None, None)),
                by.get((*key, "torch", None, None)),
                by.get(("copy", dtype, (2**p,), "torch", None, None)),
            )
            if not (ours and torch_ and copy):
                continue
            print(
                f"| {dtype} | 2^{p} | {ours['gbps']:.0f} | {torch_['gbps']:.0f} | {copy['gbps']:.0f} | "
                f"{ours['gbps'] / copy['gbps']:.3f} | {torch_['median_ms'] / ours['median_ms']:.3f} |"
            )
    print("\n| matmul | M x N x K | ours TFLOP/s | cuBLAS TFLOP/s | ours / cuBLAS |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        if r["op"] == "matmul" and r["impl"] == "ours" and r.get("variant") in (None, 0) and r.get("tflops"):
            t = by.get(("matmul", r["dtype"], tuple(r["shape"]), "torch", None, r.get("math")))
            if t:
                m, n, k = r["shape"]
                dtype = r["dtype"] + (" (TF32)" if r.get("math") == "tf32" else "")
                print(
                    f"| {dtype} | {m}x{n}x{k} | {r['tflops']:.1f} | {t['tflops']:.1f} | {r['tflops'] / t['tflops']:.3f} |"
                )
    ladder = [r for r in rows if r["op"] == "matmul" and r["impl"] == "ours" and r.get("variant") and r.get("tflops")]
    if ladder:
        print("\n| matmul step | dtype | M x N x K | TFLOP/s | cuBLAS TFLOP/s | % of cuBLAS |")
        print("| --- | --- | --- | --- | --- | --- |")
        for r in sorted(ladder, key=lambda r: (r["dtype"], r["shape"], r["variant"])):
            t = by.get(("matmul", r["dtype"], tuple(r["shape"]), "torch", None, r.get("math")))
            if t:
                m, n, k = r["shape"]
                print(
                    f"| {r['variant']} `{r.get('variant_name', '')}` | {r['dtype']} | {m}x{n}x{k} | {r['tflops']:.1f} | "
                    f"{t['tflops']:.1f} | {100 * r['tflops'] / t['tflops']:.1f}% |"
                )


if __name__ == "__main__":
    main(sys.argv[1])
