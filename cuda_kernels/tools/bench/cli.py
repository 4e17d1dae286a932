"""The command line: `python benchmark.py ...` and `python -m cuda_kernels.tools.bench ...` both run main().

Exit codes: 0 ok, 1 a wrong result (or our op raised), 2 bad command line, 3 --compare found a slower case.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

import torch

import cuda_kernels
from cuda_kernels.tools.bench.env import collect_env, describe_peaks, lookup_peaks
from cuda_kernels.tools.bench.report import (
    add_metrics,
    compare_records,
    dtype_label,
    format_comparison,
    format_table,
    plot_records,
    row_label,
    write_csv,
    write_json,
)
from cuda_kernels.tools.bench.run import RunSettings, run_cases, run_iters
from cuda_kernels.tools.bench.table import DTYPES, OPS, OPS_IN_ORDER, Case, Impl, Skipped, shape_of
from cuda_kernels.tools.bench.timing import (
    CPU_QUICK_TIMING,
    CPU_TIMING,
    CUDA_QUICK_TIMING,
    CUDA_TIMING,
    GRAPH_CALLS,
    L2_FLUSH_METHOD,
    describe_timing,
    make_flush_buffer,
    with_rounds,
)
from cuda_kernels.tools.testing import ALLOW_CPU_ONLY_ENV, cpu_only_allowed

DTYPE_ALIASES = {"fp32": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp64": "float64"}


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


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (a bad one exits with code 2 and says why)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Times cuda_kernels ops beside torch and a roofline (see docs/benchmarks.md).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit codes: 0 ok, 1 a wrong result, 2 bad arguments, 3 --compare found a slower case",
    )
    in_all = ", ".join(op.name for op in OPS_IN_ORDER if op.in_all)
    parser.add_argument("--op", choices=[*OPS, "all"], default="all", help=f"what to run (all: {in_all})")
    parser.add_argument(
        "--dtype",
        default=None,
        help="float32, float16, bfloat16, float64, all, or a comma list (default: all; float32 with -i)",
    )
    parser.add_argument(
        "--size", default=None, help="comma list; elementwise ops: N or 2^N, matmul: N or MxNxK (a is MxK, b is KxN)"
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
    parser.add_argument(
        "--rounds",
        type=positive_int,
        default=None,
        metavar="N",
        help="time each case in N interleaved rounds, each as long as one of the default's (CUDA: 4 rounds of "
        "0.25 s at most, --quick 2 of 0.125 s; the CPU: 1 round): for a case too noisy to decide, measure it longer",
    )
    parser.add_argument("--variant", type=int, default=0, help="ops with variants (matmul): pass variant=V to ours")
    parser.add_argument(
        "--ladder",
        action="store_true",
        help="ops with a ladder (matmul): time every step that can run the dtype here (the others: a note)",
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
    parser.add_argument(
        "--host",
        action="store_true",
        help="time the host cost per call on tiny inputs instead (square, matmul and linear against torch, CPU and CUDA, "
        "with and without requires_grad; cuda_kernels/tools/bench/host.py); --json writes {env, host}",
    )
    return parser


def run_host(args: argparse.Namespace, argv: list[str] | None) -> int:
    """--host: the host-time table, and with --json {env, host: rows}."""
    from cuda_kernels.tools.bench import host

    rows = host.host_times()
    print("\n".join(host.format_rows(rows)))
    if args.json:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        env = collect_env(device, {"argv": sys.argv[1:] if argv is None else list(argv), "method": "host clock"})
        write_json(args.json, env, host.as_records(rows), key="host")
    return 0


def cpu_only_build_notice() -> str:
    """The line printed first when a CUDA device is visible but the extension has no CUDA; "" otherwise."""
    if not torch.cuda.is_available() or cuda_kernels.build_info()["cuda"]:
        return ""
    if cpu_only_allowed():
        return f"note: CPU-only build on a host with a CUDA device ({ALLOW_CPU_ONLY_ENV}=1): timing the CPU kernels"
    return (
        "WARNING: a CUDA device is visible but the extension was built without CUDA (WITH_CUDA=0, or no toolkit "
        "or no GPU at build time): only the CPU kernels are timed. Rebuild here with the CUDA toolkit visible "
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
    """The cases to run, in table order, each op's sizes from --size, -i or its sweep."""
    ops = [op for op in OPS_IN_ORDER if (op.in_all if args.op == "all" else op.name == args.op)]
    iters_mode = args.iters is not None
    dtypes = parse_dtypes(args.dtype or ("float32" if iters_mode else "all"))
    on_cpu = device.type == "cpu"
    cases = []
    for op in ops:
        if args.size:
            shapes = []
            for text in args.size.split(","):
                try:
                    shapes.append(op.parse_size(text))
                except ValueError:
                    if args.op != "all":
                        raise
                    # --op all: a size like 2^24 (elementwise) or 512x256x128 (matmul) applies to the op it fits.
        elif iters_mode:
            shapes = [op.sweep.cpu_iters if on_cpu else op.sweep.iters]
        else:
            shapes = op.sweep.shapes(args.quick, on_cpu)
        # --tf32 turns every float32 case of an op with TF32 into a TF32 one; the default CUDA sweep adds TF32 cases
        # at the op's tf32_shapes beside the others.
        tf32_all = bool(op.tf32_shapes) and args.tf32 and not on_cpu
        tf32_extra = not (args.tf32 or args.size or iters_mode or on_cpu)
        for dtype in dtypes:
            fp32 = dtype == torch.float32
            cases += [Case(op.name, dtype, tuple(shape), "tf32" if tf32_all and fp32 else None) for shape in shapes]
            if tf32_extra and fp32:
                cases += [Case(op.name, dtype, shape, "tf32") for shape in op.tf32_shapes if shape in shapes]
    if args.size and not cases:
        raise ValueError(f"--size {args.size!r} fits none of the selected ops")
    return cases


def select_ours(args: argparse.Namespace, device: torch.device) -> list[Impl]:
    """Our implementations to time: one (variant --variant), or with --ladder every step of the ladder of the
    selected op(s) that has one here (its plan then leaves out, per dtype, the steps that cannot run it)."""
    if not args.ladder:
        return [Impl("ours", args.variant)]
    ladders = [op.ladder(device) for op in OPS_IN_ORDER if op.ladder and (args.op in ("all", op.name))]
    ladder = next((steps for steps in ladders if steps), [])
    if not ladder:
        print("note: --ladder: no kernel ladder on this device/build; timing variant 0 only", file=sys.stderr)
        return [Impl("ours", 0)]
    return [Impl("ours", v, name) for v, name in ladder]


def plan_cases(
    cases: list[Case], ours: list[Impl], device: torch.device, default_sweep: bool
) -> tuple[dict[Case, list[Impl]], list[Skipped]]:
    """Our implementations per case for the ops whose table entry plans them (the others time `ours`, variant 0
    for an op without variants), and the variants left out."""
    by_case: dict[Case, list[Impl]] = {}
    skipped: list[Skipped] = []
    for op in OPS_IN_ORDER:
        op_cases = [c for c in cases if c.op == op.name]
        if not op_cases:
            continue
        if op.plan is not None:
            planned, left_out = op.plan(op_cases, ours, device, default_sweep)
            by_case.update(planned)
            skipped += left_out
        elif op.ours is not None:
            by_case.update({c: [Impl("ours")] for c in op_cases})
    return by_case, skipped


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark; returns the exit code (0 ok, 1 wrong result, 2 bad arguments, 3 regression)."""
    args = build_parser().parse_args(argv)
    notice = cpu_only_build_notice()
    if notice:
        print(notice, flush=True)
    if args.host:
        return run_host(args, argv)
    try:
        device = pick_device(args.device)
        cases = select_cases(args, device)
        if args.iters is not None and args.iters < 0:
            raise ValueError("-i/--iters must be >= 0")
    except ValueError as err:
        print(f"benchmark.py: error: {err}", file=sys.stderr)
        return 2
    if args.tf32 and device.type != "cuda":
        print("note: --tf32 applies to CUDA only; the CPU rows are float32 as usual", file=sys.stderr)
    ours = select_ours(args, device)  # one variant or a ladder, for the ops that have variants
    default_sweep = not (args.size or args.iters is not None)
    ours_by_case, skipped = plan_cases(cases, ours, device, default_sweep)
    for skip in skipped:
        print(skip.note, file=sys.stderr)
    if args.iters is not None:
        iters_settings = RunSettings(device, CUDA_TIMING, ours=ours, ours_by_case=ours_by_case)
        run_iters(cases, iters_settings, args.iters)
        return 0

    if args.cuda_graph and device.type != "cuda":
        print("note: --cuda-graph needs CUDA; timing plain calls", file=sys.stderr)
    if device.type == "cuda":
        timing = CUDA_QUICK_TIMING if args.quick else CUDA_TIMING
    else:
        timing = CPU_QUICK_TIMING if args.quick else CPU_TIMING
    if args.rounds is not None:
        timing = with_rounds(timing, args.rounds)
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
        # How (timing.flush_l2). JSON without this key zeroed the buffer, which charged the write-back of its dirty
        # lines to the timed call (docs/benchmarks.md).
        "l2_flush_method": L2_FLUSH_METHOD if device.type == "cuda" else None,
        # Rows with math "tf32" ran with torch.backends.cuda.matmul.allow_tf32 = True (ours and torch.mm); every
        # other row with it False, so the float32 cuBLAS roofline is true FP32 like our SIMT kernels.
        "tf32": any(c.math == "tf32" for c in cases),
        "skipped": [asdict(skip) for skip in skipped],
    }

    settings = RunSettings(
        device=device,
        timing=timing,
        flush=make_flush_buffer(device),
        cuda_graph=args.cuda_graph and device.type == "cuda",
        ours=ours,
        ours_by_case=ours_by_case,
    )
    records = run_cases(cases, settings, progress=not args.no_progress)  # math_mode sets TF32 per case

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
    # torch.compile's row is a reference of torch's making: when inductor fails on a case (it did on the float64
    # rms_norm backward, torch 2.11), the row says so and the run goes on; our rows' failures decide the exit code.
    wrong = [r for r in records if r["correct"] is False and r["impl"] != "torch.compile"]
    for r in records:
        if r["correct"] is False and r["impl"] == "torch.compile":
            print(
                f"note: {r['op']} {r['dtype']} {shape_of(r['op'], r['shape'])}: torch.compile failed, not timed: "
                f"{r['note'].splitlines()[0] if r['note'] else ''}"
            )
    if wrong:
        print(f"\n{len(wrong)} case(s) gave a WRONG RESULT; no speed is reported for them:")
        for r in wrong:
            label = row_label(r)
            dtype = dtype_label(r["dtype"], r.get("math"))
            print(f"  {r['op']} {dtype} {shape_of(r['op'], r['shape'])} {label}: {r['note']}")
        code = 1
    unchecked = [r for r in records if r["correct"] is None and r["impl"] == "ours"]
    for r in unchecked:
        print(f"note: {r['op']} {r['dtype']} {shape_of(r['op'], r['shape'])}: {r['note']}")
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
