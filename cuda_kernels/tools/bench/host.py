"""Host time per call: what an op costs the calling thread on tiny inputs, where the kernel is negligible.

    python benchmark.py --host [--json PATH]

For each op, device (CPU, and CUDA when there is a GPU), dtype and requires_grad (off, on): `calls` back-to-back calls
of ours and of the torch reference on a tiny input, timed with the host clock (CUDA: synchronized before and after
the loop, not inside it, so a GPU that keeps up leaves the launch path as the cost), in interleaved rounds; the
median per call of each, and ours / torch. With requires_grad the output is dropped each call, so the autograd graph
is built and freed as a training step's would be. It uses nothing but torch and the package's public ops, so the same
file times an older build too.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

import cuda_kernels

# (op, reference, input builder): tiny inputs, so the call's host path is what is timed.
TINY = 16


@dataclass
class HostRow:
    op: str
    device: str
    dtype: str
    requires_grad: bool
    ours_us: float
    torch_us: float

    @property
    def ratio(self) -> float:
        return self.ours_us / self.torch_us


def _cases(device: str, dtype: torch.dtype, grad: bool) -> list[tuple[str, Callable[[], object], Callable[[], object]]]:
    x = torch.randn(TINY, TINY, device=device, dtype=dtype, requires_grad=grad)
    y = torch.randn(TINY, TINY, device=device, dtype=dtype, requires_grad=grad)
    return [
        ("square", lambda: cuda_kernels.square(x), lambda: torch.square(x)),
        ("matmul", lambda: cuda_kernels.matmul(x, y), lambda: torch.mm(x, y)),
        ("linear", lambda: cuda_kernels.linear(x, y), lambda: torch.nn.functional.linear(x, y)),
    ]


def _per_call_us(fn: Callable[[], object], calls: int, sync: Callable[[], None]) -> float:
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - start) / calls * 1e6


def host_times(rounds: int = 9, calls: int = 2000) -> list[HostRow]:
    """Every (op, device, dtype, requires_grad) row; CUDA rows only where a GPU and the CUDA kernels are there."""
    devices = ["cpu"]
    if torch.cuda.is_available() and cuda_kernels.build_info()["cuda"]:
        devices.append("cuda")
    rows = []
    for device in devices:
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        dtypes = [torch.float32] + ([torch.bfloat16] if device == "cuda" else [])
        for dtype in dtypes:
            for grad in (False, True):
                for op, ours, ref in _cases(device, dtype, grad):
                    for fn in (ours, ref):  # warm up: first calls load kernels, build caches
                        _per_call_us(fn, 200, sync)
                    samples: dict[str, list[float]] = {"ours": [], "torch": []}
                    for r in range(rounds):  # interleaved, alternating which goes first
                        order = [("ours", ours), ("torch", ref)] if r % 2 == 0 else [("torch", ref), ("ours", ours)]
                        for name, fn in order:
                            samples[name].append(_per_call_us(fn, calls, sync))
                    rows.append(
                        HostRow(
                            op,
                            device,
                            str(dtype).removeprefix("torch."),
                            grad,
                            statistics.median(samples["ours"]),
                            statistics.median(samples["torch"]),
                        )  # fmt: skip
                    )
    return rows


def format_rows(rows: list[HostRow]) -> list[str]:
    lines = [f"{'op':8} {'device':6} {'dtype':9} {'grad':5} {'ours us':>8} {'torch us':>9} {'ours/torch':>10}"]
    for r in rows:
        lines.append(
            f"{r.op:8} {r.device:6} {r.dtype:9} {str(r.requires_grad):5} {r.ours_us:8.2f} {r.torch_us:9.2f} "
            f"{r.ratio:10.3f}"
        )
    return lines


def as_records(rows: list[HostRow]) -> list[dict]:
    return [dict(asdict(r), ratio=r.ratio) for r in rows]


if __name__ == "__main__":
    for line in format_rows(host_times()):
        print(line)
