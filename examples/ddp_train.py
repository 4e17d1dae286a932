"""Train a tiny model built from cuda_kernels ops with DistributedDataParallel, and check it against one process.

The model: h = square(x @ W1), y = h @ W2 (cuda_kernels.matmul and cuda_kernels.square, backward through their
registered autograd formulas), loss = mean((y - target)^2). Each of the `world` processes takes an equal slice of a
fixed global batch; DDP averages the gradients, so every step must equal a single process training on the whole
batch. Rank 0 runs that single-process reference alongside and compares the gradients of every step and the final
parameters (and every rank checks that its parameters equal rank 0's). Exit status 0 and "OK" when they match.

Run it either way:
    torchrun --nproc_per_node=2 examples/ddp_train.py                   # NCCL on GPUs, else gloo on the CPU
    python examples/ddp_train.py --world-size 2 --backend gloo          # spawns the processes itself
    python examples/ddp_train.py --world-size 2 --backend nccl --dtype float32
On GPUs, each process uses the GPU of its local rank. NCCL_NVLS_ENABLE defaults to 0 (NVLink multicast off).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.distributed.nn.functional  # noqa: F401  (imported before init_process_group: see worker())
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import cuda_kernels

# Tolerance on gradients and parameters (relative, absolute) against the single-process run. Only the order of
# additions differs (per-rank partial sums, then the all-reduce), so this is a few ulps of the accumulation dtype.
TOLERANCE = {torch.float64: (1e-10, 1e-12), torch.float32: (2e-4, 1e-6)}


class TinyModel(nn.Module):
    """y = square(x @ W1) @ W2 with x: (batch, d_in), W1: (d_in, hidden), W2: (hidden, d_out)."""

    def __init__(self, d_in: int, hidden: int, d_out: int, dtype: torch.dtype, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w1 = nn.Parameter(torch.randn(d_in, hidden, generator=g, dtype=torch.float64).div(d_in**0.5).to(dtype))
        self.w2 = nn.Parameter(torch.randn(hidden, d_out, generator=g, dtype=torch.float64).div(hidden).to(dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_kernels.matmul(cuda_kernels.square(cuda_kernels.matmul(x, self.w1)), self.w2)


def make_batch(batch: int, d_in: int, d_out: int, dtype: torch.dtype, seed: int = 1) -> tuple[torch.Tensor, ...]:
    """The fixed global batch (x, target), identical in every process."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, d_in, generator=g, dtype=torch.float64).to(dtype)
    target = torch.randn(batch, d_out, generator=g, dtype=torch.float64).to(dtype)
    return x, target


def loss_fn(y: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return cuda_kernels.square(y - target).mean()


def train(model: nn.Module, x: torch.Tensor, target: torch.Tensor, steps: int, lr: float) -> list[list[torch.Tensor]]:
    """Plain SGD for `steps` steps; returns the gradients of every step (copies, on the CPU)."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    grads = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), target).backward()
        grads.append([p.grad.detach().cpu().clone() for p in model.parameters()])
        opt.step()
    return grads


def worker(rank: int, world: int, args: argparse.Namespace, init_method: str) -> None:
    """One DDP process: join the process group, train and check, then leave the group cleanly."""
    use_cuda = args.device == "cuda"
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(args.backend, init_method=init_method, rank=rank, world_size=world)
    try:
        # Every DDP object lives and dies inside train_and_check, so that destroy_process_group below holds the
        # last reference to the process group and really destroys it, joining the gloo worker threads. A group
        # still alive at interpreter exit (also when torch.distributed.nn.functional is first imported after
        # init: it binds group.WORLD as a default argument, hence the early import) keeps threads that release
        # the tensors of finished collectives and need the GIL that finalization no longer hands out:
        # std::terminate, exit code -6 under torchrun (spawned workers leave through os._exit and never see it).
        train_and_check(rank, world, args, device, local_rank)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def train_and_check(rank: int, world: int, args: argparse.Namespace, device: torch.device, local_rank: int) -> None:
    """Train on this rank's slice of the batch; rank 0 also runs the single-process reference and compares."""
    dtype = getattr(torch, args.dtype)
    x, target = make_batch(args.batch, args.d_in, args.d_out, dtype)
    per_rank = args.batch // world
    rows = slice(rank * per_rank, (rank + 1) * per_rank)
    if args.corrupt and rank == world - 1:  # the last rank trains on the wrong rows: the check must fail
        rows = slice(0, per_rank)
    model = TinyModel(args.d_in, args.hidden, args.d_out, dtype).to(device)
    ddp = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
    grads = train(ddp, x[rows].to(device), target[rows].to(device), args.steps, args.lr)

    # Every rank ends with the same parameters as rank 0.
    for p in model.parameters():
        p0 = p.detach().clone()
        dist.broadcast(p0, src=0)
        if not torch.equal(p0, p.detach()):
            raise RuntimeError(f"rank {rank}: parameters differ from rank 0's")

    if rank != 0:
        return
    ref_model = TinyModel(args.d_in, args.hidden, args.d_out, dtype).to(device)
    ref_grads = train(ref_model, x.to(device), target.to(device), args.steps, args.lr)
    rtol, atol = TOLERANCE[dtype]
    worst = 0.0
    for step, (got, want) in enumerate(zip(grads, ref_grads, strict=True)):
        for name, g, w in zip(("w1", "w2"), got, want, strict=True):
            torch.testing.assert_close(
                g, w, rtol=rtol, atol=atol, msg=lambda m, s=step, n=name: f"step {s} grad {n}: {m}"
            )
            worst = max(worst, ((g - w).abs() / (w.abs() + atol)).max().item())
    for name, p, q in zip(("w1", "w2"), model.parameters(), ref_model.parameters(), strict=True):
        torch.testing.assert_close(
            p.detach(), q.detach(), rtol=rtol, atol=atol, msg=lambda m, n=name: f"param {n}: {m}"
        )
    print(
        f"OK: {world} processes ({args.backend}, {device.type}, {args.dtype}) match one process on the full batch "
        f"over {args.steps} steps; worst relative gradient difference {worst:.2e}",
        flush=True,
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world-size", type=int, default=2, help="processes to spawn (ignored under torchrun)")
    p.add_argument("--backend", choices=["nccl", "gloo"], help="default: nccl with GPUs, else gloo")
    p.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda for nccl, cpu for gloo")
    p.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--batch", type=int, default=32, help="global batch; must be divisible by the world size")
    p.add_argument("--d-in", type=int, default=24)
    p.add_argument("--hidden", type=int, default=40)
    p.add_argument("--d-out", type=int, default=6)
    p.add_argument("--corrupt", action="store_true", help="for tests: the last rank uses wrong data; must fail")
    args = p.parse_args(argv)
    if args.backend is None:
        args.backend = "nccl" if torch.cuda.is_available() and torch.cuda.device_count() > 0 else "gloo"
    if args.device is None:
        args.device = "cuda" if args.backend == "nccl" else "cpu"
    if args.backend == "nccl" and args.device != "cuda":
        p.error("nccl needs --device cuda")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast off (required on the GPU hosts)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # launched by torchrun
        world = int(os.environ["WORLD_SIZE"])
        if args.batch % world:
            raise SystemExit(f"--batch {args.batch} is not divisible by the world size {world}")
        worker(int(os.environ["RANK"]), world, args, "env://")
        return 0
    world = args.world_size
    if args.batch % world:
        raise SystemExit(f"--batch {args.batch} is not divisible by --world-size {world}")
    if args.device == "cuda" and torch.cuda.device_count() < world:
        raise SystemExit(f"--world-size {world} needs {world} GPUs, {torch.cuda.device_count()} visible")
    # Rendezvous through a file in a private temporary directory: no port to pick, removed afterwards.
    # CPU runs fork (no second import of torch); CUDA must not be forked once initialized, so GPU runs spawn.
    start_method = "fork" if args.device == "cpu" and sys.platform == "linux" else "spawn"
    with tempfile.TemporaryDirectory(prefix="ddp_train_") as tmp:
        init_method = f"file://{os.path.join(tmp, 'rendezvous')}"
        mp.start_processes(worker, args=(world, args, init_method), nprocs=world, join=True, start_method=start_method)
    return 0


if __name__ == "__main__":
    sys.exit(main())
