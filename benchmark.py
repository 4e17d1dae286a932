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
  * CUDA: a pair of CUDA events around every call; before every call a buffer of twice the L2 size is read,
    so no call finds its inputs in L2 (nor pays for writing back dirty lines); warm-up by time; repetitions until
    the median is stable; median and interquartile range (IQR) are reported; a noisy case takes more samples,
    until its median is known to +-0.5% (95% confidence) or a time cap. --cuda-graph times replays of a graph
    of GRAPH_CALLS calls instead.
  * CPU: time.perf_counter around every call, with the same warm-up and statistics.
  * Correctness first: every case checks our output against a reference before it is timed. A wrong result gets
    no speed, is reported, and the run exits with code 1.
  * Rooflines, measured in the same run: a device-to-device copy of the same bytes for square (recorded as its
    own "copy" case), torch.mm (cuBLAS, TF32 off) for matmul; plus the datasheet peak of known GPUs. Rows with
    math "tf32" (--tf32, and float32 4096^3 in the default CUDA sweep) ran both sides with TF32 allowed.
  * matmul steps: a ladder step that cannot run a dtype here (wrong dtype, older GPU, not in this binary) is
    skipped with a note. The default CUDA sweep also times every tensor-core step at float16/bfloat16 4096^3 and
    8192^3, so the tensor-core ladder and its targets come from the same run.

The harness lives in cuda_kernels/tools/bench/ (its one op table: cuda_kernels/tools/bench/table.py); this file is
its entry point, so `ncu -k square_kernel python benchmark.py -i 1` and every command above work from the repo root.
Exit codes: 0 ok, 1 a wrong result (or our op raised), 2 bad command line, 3 --compare found a slower case.
"""

import sys

from cuda_kernels.tools.bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
