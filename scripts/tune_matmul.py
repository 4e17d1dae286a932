#!/usr/bin/env python
"""Times every step of the CUDA matmul ladder, and step 6's tile configurations, against torch.mm (TF32 off).

Run it on a tuning build, which compiles more step-6/8/15 configurations than the shipping one (a GPU needed):

    NVCC_APPEND_FLAGS=-DCUDA_KERNELS_MATMUL_TUNING pip install --no-build-isolation -e .
    python scripts/tune_matmul.py                       # default shapes, every variant and step-6 configuration
    python scripts/tune_matmul.py --shapes 4096 8192x1024x4096 --configs none --json out.json
    python scripts/tune_matmul.py --shapes 256x4096x4096 --b-layout linear --variants none \
        --configs auto,128x128x32_w32x64_t8x8_s3_b2 --splits 1,2,4,8    # x @ W.t(), step 6's split-K factors

A plain build works too: it times the configurations that build has (the ones the launcher picks from).

float32 by default (--dtype for others), random normal inputs. Per case: correctness first (every element within
the error bound of cuda_kernels.tools.testing.check_matmul, as the tests and the benchmark; the relative Frobenius
error is reported beside), then the benchmark harness's timing (cuda_kernels.tools.bench.timing.time_fn: warm-up,
CUDA events, an L2 flush before every call) for at least --reps calls, until the median is stable or --max-s is
spent; the median is reported. Shapes are M x N x K. Step 6's configurations are forced with
cuda_kernels.tools.matmul_tuning(config06=NAME), which sets the launcher's override for the calls in its block
("auto": the launcher's own choice), and with --splits each also with every listed split-K factor (splits06).
--b-layout linear makes b the transposed view W.t() of a row-major (N, K) W, as linear and nn.Linear call matmul
(step 6 reads it in place below 2048 rows); rows (the default) makes b a row-major (K, N) matrix.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone

import torch

import cuda_kernels
from cuda_kernels.ops import matmul_cuda_variants
from cuda_kernels.tools import matmul_tuning
from cuda_kernels.tools.bench import timing
from cuda_kernels.tools.testing import check_matmul

DEFAULT_SHAPES = ["1024", "2048", "4096", "8192", "4000", "8192x1024x4096", "1x4096x4096"]
DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16, "bfloat16": torch.bfloat16}


def parse_shape(text: str) -> tuple[int, int, int]:
    """'4096' -> (4096, 4096, 4096); '8192x1024x4096' -> (M, N, K)."""
    parts = [int(p) for p in text.lower().split("x")]
    if len(parts) == 1:
        return parts[0], parts[0], parts[0]
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"shape {text!r}: give N or MxNxK")
    return parts[0], parts[1], parts[2]


def step6_configs() -> list[str]:
    """Names of the compiled step-6 float32 configurations (from the error that an unknown name raises)."""
    a = torch.ones(4, 4, device="cuda")
    try:
        with matmul_tuning(config06="?"):
            cuda_kernels.matmul(a, a, variant=6)
    except RuntimeError as e:
        if "available: " in str(e):
            return [s.strip() for s in str(e).split("available: ")[1].split("\n")[0].split(",")]
        raise
    raise RuntimeError("step 6 accepted an unknown configuration name")


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref).norm() / ref.norm())


def gpu_info() -> dict[str, str]:
    info = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    try:
        q = "driver_version,clocks.sm,clocks.max.sm,power.limit"
        info["nvidia-smi"] = subprocess.run(
            ["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def time_shape(
    shape: tuple[int, int, int],
    variants: list[int],
    names: dict[int, str],
    configs: list[str],
    args: argparse.Namespace,
    flush: torch.Tensor,
) -> tuple[list[dict], bool]:
    """Checks and times torch.mm, each variant and each step-6 configuration at one (M, N, K); prints a table."""
    m, n, k = shape
    dtype = DTYPES[args.dtype]
    gen = torch.Generator(device="cuda").manual_seed(m * 31 + n * 7 + k)
    a = torch.randn(m, k, device="cuda", generator=gen).to(dtype)
    if args.b_layout == "linear":
        b = torch.randn(n, k, device="cuda", generator=gen).to(dtype).t()
    else:
        b = torch.randn(k, n, device="cuda", generator=gen).to(dtype)
    # At least --reps samples, until the median is stable or --max-s is spent (the harness's stop rule).
    config = replace(timing.CUDA_TIMING, min_reps=args.reps, max_time_s=args.max_s, ci_rel_tol=None, rounds=1)
    ref = a.double() @ b.double()
    flops = 2.0 * m * n * k
    # (label, call, config06, splits06): None leaves the launcher its own choice.
    cases: list[tuple[str, Callable[[], torch.Tensor], str | None, int | None]] = [
        ("torch.mm", lambda: torch.mm(a, b), None, None)
    ]
    for v in variants:
        label = "v0 (auto)" if v == 0 else f"v{v} {names.get(v, '?')}"
        cases.append((label, lambda v=v: cuda_kernels.matmul(a, b, variant=v), None, None))
    for cfg in configs:
        for splits in args.splits or [None]:
            label = f"v6[{cfg}]" + (f" splits {splits}" if splits else "")
            forced = None if cfg == "auto" else cfg
            cases.append((label, lambda: cuda_kernels.matmul(a, b, variant=6), forced, splits))
    torch_err = rel_error(torch.mm(a, b), ref)
    all_ok = True
    rows: list[dict] = []
    for label, fn, cfg, splits in cases:
        try:
            with matmul_tuning(config06=cfg, splits06=splits):  # None: the launcher's own choice
                out = fn()
                err = rel_error(out, ref)
                ok, why = check_matmul(a, b, out)
                times = timing.time_fn(fn, "cuda", config, flush).samples_ms if ok else []
        except RuntimeError as e:  # a launch failure: report it, keep timing the others
            print(f"ERROR {label} at {m}x{n}x{k}: {str(e).splitlines()[0]}")
            err, ok, why, times = float("nan"), False, "", []
        if not ok:
            all_ok = False
            print(f"WRONG {label} at {m}x{n}x{k}: {why or 'raised'}")
        med = statistics.median(times) if times else float("nan")
        rows.append(
            {
                "shape": [m, n, k],
                "impl": label,
                "config": cfg,
                "splits": splits,
                "ok": ok,
                "rel_error": err,
                "median_ms": med,
                "min_ms": min(times) if times else None,
                "reps": len(times),
                "tflops": flops / (med * 1e-3) / 1e12 if times else float("nan"),
            }
        )
    base = rows[0]["tflops"]
    print(f"\n{args.dtype} {m}x{n}x{k} (M x N x K): torch.mm {base:.2f} TFLOP/s, rel error {torch_err:.2g}")
    for r in rows:
        print(f"  {r['impl']:<44} {r['tflops']:8.2f} TFLOP/s {100 * r['tflops'] / base:7.1f}% of torch.mm")
    return rows, all_ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", default=DEFAULT_SHAPES, help="N or MxNxK (default: %(default)s)")
    parser.add_argument("--variants", default="all", help="comma-separated ladder variants, 'all' or 'none'")
    parser.add_argument(
        "--configs", default="all", help="comma-separated step-6 configurations ('auto': the launcher's), 'all', 'none'"
    )
    parser.add_argument(
        "--splits",
        type=lambda t: [int(x) for x in t.split(",")],
        default=None,
        help="comma-separated split-K factors to force on each step-6 configuration (default: the launcher's)",
    )
    parser.add_argument(
        "--b-layout", choices=["rows", "linear"], default="rows", help="b row-major (K, N), or W.t() as linear's"
    )
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32", help="(default float32)")
    parser.add_argument("--reps", type=int, default=20, help="timed calls per case, at least (default 20)")
    parser.add_argument("--max-s", type=float, default=0.5, help="time spent per case before stopping at --reps")
    parser.add_argument("--json", help="write every measurement here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("tune_matmul: needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    ladder = [(v, n) for v, n, _ in cuda_kernels.ops.matmul_kernels()]
    if args.variants == "none":
        variants = []
    elif args.variants == "all":
        variants = [0] + matmul_cuda_variants(DTYPES[args.dtype])  # the steps that take the dtype
    else:
        variants = [int(v) for v in args.variants.split(",")]
    names = dict(ladder)
    configs = [] if args.configs == "none" else step6_configs() if args.configs == "all" else args.configs.split(",")
    if args.dtype != "float32":
        configs = []  # the configurations are float32-only
    info = gpu_info()
    print(f"# {info}")
    print(f"# variants: {ladder}; step-6 configurations: {configs}")

    flush = timing.make_flush_buffer("cuda")
    results: list[dict] = []
    failed = False
    for shape_text in args.shapes:
        rows, ok = time_shape(parse_shape(shape_text), variants, names, configs, args, flush)
        results += rows
        failed |= not ok
        torch.cuda.empty_cache()

    # Summary: TFLOP/s of every implementation (rows) at every shape (columns), then % of torch.mm.
    shapes = [list(parse_shape(t)) for t in args.shapes]
    impls = list(dict.fromkeys(r["impl"] for r in results))
    tf = {(r["impl"], tuple(r["shape"])): r["tflops"] for r in results}
    head = "".join(f"{'x'.join(map(str, s)):>16}" for s in shapes)
    for title, scale in (("TFLOP/s", False), ("% of torch.mm", True)):
        print(f"\nsummary, {title}\n{'':<40}{head}")
        for impl in impls:
            cells = []
            for s in shapes:
                v, base = tf.get((impl, tuple(s)), float("nan")), tf.get(("torch.mm", tuple(s)), float("nan"))
                cells.append(f"{100 * v / base if scale else v:16.1f}")
            print(f"{impl[:40]:<40}{''.join(cells)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"info": info, "dtype": args.dtype, "b_layout": args.b_layout, "results": results}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
