"""Runs torch.square and cuda_kernels.square a few times at one dtype and size (for ncu: compare launch shapes).

    ncu --section LaunchStats --section SpeedOfLight -k regex:"elementwise|square_kernel" \
        python scripts/square_probe.py float64 2^21
"""

import sys

import torch

import cuda_kernels

dtype = getattr(torch, sys.argv[1])
n = eval(sys.argv[2].replace("^", "**"))
x = torch.arange(n, device="cuda", dtype=dtype)  # not a vectorized_elementwise kernel: the ncu filter skips it
for _ in range(3):
    torch.square(x)
    cuda_kernels.square(x)
torch.cuda.synchronize()
