"""What linear's epilogue costs on the GPU: cuda_kernels.linear at Llama-sized shapes (bf16) with each bias and
activation form, against the plain product and torch's unfused chains, in one process. Prints one line per shape
(each form's median and its cost over the plain product) and writes JSON for docs/results/.

    python scripts/linear_epilogue.py docs/results/h100_linear_epilogue.json

Medians by triton.testing.do_bench (L2 flushed before each call, 300 ms of calls per form).
"""

from __future__ import annotations

import json
import sys

import torch
import torch.nn.functional as F
from triton.testing import do_bench

import cuda_kernels as ck
from cuda_kernels.tools.bench.env import collect_env

SHAPES = [(1024, 4096, 4096), (4096, 4096, 4096), (2048, 2048, 2048), (8192, 11008, 4096)]  # M, N, K


def forms(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> dict:
    n = w.shape[0]
    return {
        "plain": lambda: ck.linear(x, w),
        "bias": lambda: ck.linear(x, w, b),
        "relu": lambda: ck.linear(x, w, None, "relu"),
        "gelu": lambda: ck.linear(x, w, None, "gelu"),
        "bias+gelu": lambda: ck.linear(x, w, b, "gelu"),
        "gelu_tanh": lambda: ck.linear(x, w, None, "gelu_tanh"),
        "silu": lambda: ck.linear(x, w, None, "silu"),
        "swiglu": lambda: ck.linear(x, w, None, "swiglu"),
        "torch F.linear": lambda: F.linear(x, w),
        "torch gelu(linear+b)": lambda: F.gelu(F.linear(x, w, b)),
        "torch swiglu": lambda: (lambda z: F.silu(z[:, : n // 2]) * z[:, n // 2 :])(F.linear(x, w)),
    }


def main(path: str) -> None:
    results = {}
    for m, n, k in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(m, k, device="cuda", generator=g).bfloat16()
        w = (torch.randn(n, k, device="cuda", generator=g) / k**0.5).bfloat16()
        b = torch.randn(n, device="cuda", generator=g).bfloat16()
        ms = {name: do_bench(f, warmup=50, rep=300) for name, f in forms(x, w, b).items()}
        results[f"{m}x{n}x{k}"] = ms
        print(
            f"{m}x{n}x{k}: " + ", ".join(f"{k_} {v * 1e3:.1f}us ({v / ms['plain'] - 1:+.1%})" for k_, v in ms.items())
        )
    env = collect_env(torch.device("cuda"), {"argv": sys.argv, "dtype": "bfloat16"})  # the benchmark's own record
    with open(path, "w") as f:
        json.dump({"env": env, "median_ms": results}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "linear_epilogue.json")
