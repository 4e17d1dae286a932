"""Runs torch.square and cuda_kernels.square a few times at one dtype and size (for ncu: compare launch shapes).

    ncu --section LaunchStats --section SpeedOfLight -k regex:"vectorized_elementwise|square_kernel" \
        python scripts/square_probe.py float64 2^21
"""

import sys
from pathlib import Path

import torch

import cuda_kernels

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmark.py lives at the repo root
from benchmark import parse_size  # noqa: E402

dtype = getattr(torch, sys.argv[1])
(n,) = parse_size(sys.argv[2], "square")  # "2^21" or "2097152"
x = torch.arange(n, device="cuda", dtype=dtype)  # not a vectorized_elementwise kernel: the ncu filter skips it
for _ in range(3):
    torch.square(x)
    cuda_kernels.square(x)
torch.cuda.synchronize()
