"""Markdown tables for the docs from a benchmark.py JSON (the baseline sweep, docs/results/h100.json):

python scripts/results_table.py docs/results/h100.json            # every square and matmul row
python scripts/results_table.py --readme docs/results/h100.json   # the README's results table
python scripts/results_table.py --ladder docs/results/h100.json   # docs/matmul.md's table of the kernels at 4096^3
"""

from __future__ import annotations

import argparse
import json
import math

Key = tuple  # (op, dtype, shape, impl, variant, math)


def index(rows: list[dict]) -> dict[Key, dict]:
    """Records by identity; `math` is "tf32" for float32 rows timed with TF32 allowed on both sides, else None."""
    return {(r["op"], r["dtype"], tuple(r["shape"]), r["impl"], r.get("variant"), r.get("math")): r for r in rows}


def env_line(env: dict) -> str:
    return (
        f"{env.get('gpu')}, SM clock {env.get('sm_clock_mhz')}/{env.get('sm_clock_max_mhz')} MHz, driver "
        f"{env.get('driver')}, CUDA {env.get('cuda')}, torch {env.get('torch')}, commit {str(env.get('git_commit'))[:10]}, "
        f"{env.get('date')}"
    )


def joined(values: list[float], fmt: str, unit: str = "") -> str:
    """[1.0, 2.5] -> "1.0 / 2.5": several shapes' figures in one cell."""
    return " / ".join(f"{v:{fmt}}{unit}" for v in values)


DTYPE_SHORT = {"float32": "fp32", "float64": "fp64", "float16": "fp16", "bfloat16": "bf16"}


def readme(rows: list[dict]) -> None:
    """The README's table: one line per kind of result, several shapes per line where they belong together."""
    by = index(rows)

    def mm(dtype: str, shapes: list[tuple[int, int, int]], label: str, math_: str | None = None, ref: str = "cuBLAS"):
        ours = [by.get(("matmul", dtype, s, "ours", 0, math_)) for s in shapes]
        torch_ = [by.get(("matmul", dtype, s, "torch", None, math_)) for s in shapes]
        if not all(ours) or not all(torch_):
            return
        ratios = [t["median_ms"] / o["median_ms"] for o, t in zip(ours, torch_, strict=True)]
        print(
            f"| {label} | {joined([o['tflops'] for o in ours], '.1f')} TFLOP/s | {ref} "
            f"{joined([t['tflops'] for t in torch_], '.1f')} | {joined(ratios, '.3f')} |"
        )

    def cube(n: int) -> tuple[int, int, int]:
        return (n, n, n)

    print("| case | ours | reference | ratio |")
    print("| --- | --- | --- | --- |")
    for dtype, p in (("float32", 28), ("bfloat16", 26)):
        ours, copy = (
            by.get(("square", dtype, (2**p,), "ours", None, None)),
            by.get(("copy", dtype, (2**p,), "torch", None, None)),
        )
        if ours and copy:
            print(
                f"| square {DTYPE_SHORT[dtype]}, 2^{p} elements | {ours['gbps']:.0f} GB/s | device-to-device copy "
                f"{copy['gbps']:.0f} GB/s | {ours['gbps'] / copy['gbps']:.3f} of copy |"
            )
    ratios: dict[str, list[float]] = {}
    for r in rows:
        t = by.get(("square", r["dtype"], tuple(r["shape"]), "torch", None, None))
        if r["op"] == "square" and r["impl"] == "ours" and t:
            ratios.setdefault(r["dtype"], []).append(t["median_ms"] / r["median_ms"])
    if ratios:
        every = [x for v in ratios.values() for x in v]
        means = [math.exp(sum(map(math.log, v)) / len(v)) for v in ratios.values()]
        print(
            f"| square, every size, {len(ratios)} dtypes | | torch.square | {min(every):.3f}-{max(every):.3f}x (time); "
            f"geometric mean {min(means):.3f}-{max(means):.3f}x per dtype |"
        )

    # rms_norm, forward and backward: per dtype, the range over issue 39's four shapes of ours' and torch.compile's
    # bytes a second in % of the copy's (pct_roofline), and of the time ratio torch.compile / ours.
    def span(values: list[float], fmt: str) -> str:
        return f"{min(values):{fmt}}-{max(values):{fmt}}"

    for op, label in (("rms_norm", "rms_norm"), ("rms_norm_backward", "rms_norm backward")):
        dtypes = ("bfloat16", "float32")
        shapes = [(8192, 4096), (32768, 8192), (4096, 1024), (65536, 256)]
        ours = {d: [by.get((op, d, s, "ours", None, None)) for s in shapes] for d in dtypes}
        compiled = {d: [by.get((op, d, s, "torch.compile", None, None)) for s in shapes] for d in dtypes}
        if not all(r for d in dtypes for r in ours[d] + compiled[d]):
            continue
        print(
            f"| {label} {' / '.join(DTYPE_SHORT[d] for d in dtypes)}, 8192x4096, 32768x8192, 4096x1024, 65536x256 | "
            + " / ".join(span([o["pct_roofline"] for o in ours[d]], ".1f") + "%" for d in dtypes)
            + " of copy | torch.compile "
            + " / ".join(span([c["pct_roofline"] for c in compiled[d]], ".1f") + "%" for d in dtypes)
            + " | "
            + " / ".join(
                span([c["median_ms"] / o["median_ms"] for o, c in zip(ours[d], compiled[d], strict=True)], ".2f")
                for d in dtypes
            )
            + "x |"
        )
    mm("bfloat16", [cube(4096), cube(8192)], "matmul bf16 4096³ / 8192³")
    mm("float16", [cube(4096), cube(8192)], "matmul fp16 4096³ / 8192³")
    mm("bfloat16", [cube(2048), cube(4000), (8192, 1024, 4096)], "matmul bf16 2048³ / 4000³ / 8192x1024x4096")
    mm("bfloat16", [cube(256), cube(512), cube(1024)], "matmul bf16 256³ / 512³ / 1024³")
    mm("float32", [cube(4096), cube(8192)], "matmul fp32 4096³ / 8192³, TF32 off (`06_async_pipeline`)")
    mm("float32", [cube(4096)], "matmul fp32 4096³, TF32 allowed (`tf32_wgmma`)", "tf32", "cuBLAS TF32")
    mm("float64", [cube(4096), cube(8192)], "matmul fp64 4096³ / 8192³ (`fp64_dmma`)")
    mm("float32", [cube(256), cube(512)], "matmul fp32 256³ / 512³")
    vec = [("bfloat16", by.get(("matmul", "bfloat16", (1, 16384, 16384), "ours", 0, None)))]
    vec += [(d, by.get(("matmul", d, (1, 16384, 16384), "ours", 0, None))) for d in ("float32", "float64")]
    copies = {
        d: max((r for r in rows if r["op"] == "copy" and r["dtype"] == d), key=lambda r: r["shape"][0], default=None)
        for d, _ in vec
    }
    if all(o for _, o in vec) and all(copies.values()):
        print(
            f"| matmul 1x16384x16384 {' / '.join(DTYPE_SHORT[d] for d, _ in vec)} (`matvec`) | "
            f"{joined([o['gbps'] for _, o in vec], '.0f')} GB/s | copy {joined([copies[d]['gbps'] for d, _ in vec], '.0f')} "
            f"GB/s | {joined([100 * o['gbps'] / copies[d]['gbps'] for d, o in vec], '.1f', '%')} of copy |"
        )


def ladder(rows: list[dict]) -> None:
    """Every kernel forced at 4096³ (its own dtype: float32 for the CUDA-core steps, bfloat16 for the tensor-core
    ones, float32 with TF32 allowed, float64), against cuBLAS in the same sweep."""
    by = index(rows)
    forced = [
        r
        for r in rows
        if r["op"] == "matmul" and r["impl"] == "ours" and r.get("variant") and tuple(r["shape"]) == (4096, 4096, 4096)
    ]
    print("| variant | kernel | dtype | TFLOP/s | cuBLAS TFLOP/s | % of cuBLAS |")
    print("| --- | --- | --- | --- | --- | --- |")
    seen = set()
    for r in sorted(forced, key=lambda r: (r["variant"], r["dtype"] != "bfloat16")):
        if r["variant"] in seen:
            continue  # one dtype per kernel: bfloat16 for the 16-bit ones
        seen.add(r["variant"])
        t = by.get(("matmul", r["dtype"], (4096, 4096, 4096), "torch", None, r.get("math")))
        if t:
            dtype = r["dtype"] + (" (TF32)" if r.get("math") == "tf32" else "")
            print(
                f"| {r['variant']} | `{r.get('variant_name', '')}` | {dtype} | {r['tflops']:.1f} | {t['tflops']:.1f} | "
                f"{100 * t['median_ms'] / r['median_ms']:.1f}% |"
            )


def everything(rows: list[dict]) -> None:
    by = index(rows)

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
    forced = [r for r in rows if r["op"] == "matmul" and r["impl"] == "ours" and r.get("variant") and r.get("tflops")]
    if forced:
        print("\n| matmul step | dtype | M x N x K | TFLOP/s | cuBLAS TFLOP/s | % of cuBLAS |")
        print("| --- | --- | --- | --- | --- | --- |")
        for r in sorted(forced, key=lambda r: (r["dtype"], r["shape"], r["variant"])):
            t = by.get(("matmul", r["dtype"], tuple(r["shape"]), "torch", None, r.get("math")))
            if t:
                m, n, k = r["shape"]
                print(
                    f"| {r['variant']} `{r.get('variant_name', '')}` | {r['dtype']} | {m}x{n}x{k} | {r['tflops']:.1f} | "
                    f"{t['tflops']:.1f} | {100 * r['tflops'] / t['tflops']:.1f}% |"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", help="a benchmark.py --json file")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--readme", action="store_true", help="the README's results table")
    which.add_argument("--ladder", action="store_true", help="every kernel forced at 4096^3 (docs/matmul.md)")
    args = parser.parse_args()
    with open(args.json) as f:
        data = json.load(f)
    print(env_line(data["env"]) + "\n")
    (readme if args.readme else ladder if args.ladder else everything)(data["records"])


if __name__ == "__main__":
    main()
