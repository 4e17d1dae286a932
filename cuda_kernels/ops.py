"""The ops' Python layer: typed wrappers, fake (meta) kernels for torch.compile, and autograd formulas.

The C++ side (csrc/api.cpp) defines the schemas, the CPU/CUDA kernels and square's autograd kernel; this file
adds what the dispatcher needs from Python: fake kernels for every op and matmul's autograd formula. Keep one
block per op, in the same order as csrc/api.cpp.

Repro dumps: each wrapper calls the op directly while _DUMP_DIR is None (the default; torch.compile traces that
branch), else through _dump.call_and_dump, which saves the arguments of a call that raises (cuda_kernels._dump).
"""

from __future__ import annotations

import math
import os

import torch
from torch import Tensor

from cuda_kernels import _dump

FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)

# Where failing calls are dumped: CUDA_KERNELS_DUMP_DIR, read once at import; None = off (no per-call cost).
_DUMP_DIR: str | None = _dump.dir_from_env()


def set_dump_dir(path: str | os.PathLike | None) -> None:
    """Dump the arguments of every failing op call into `path` from now on; None switches dumping off."""
    global _DUMP_DIR
    _DUMP_DIR = None if path is None else os.fspath(path)


def _check_float(op: str, name: str, t: Tensor) -> None:
    torch._check(
        t.dtype in FLOAT_DTYPES,
        lambda: f"{op}: {name} must be float32, float64, float16 or bfloat16, got {t.dtype}",
    )


def _check_output_fits(op: str, shape: tuple, dtype: torch.dtype) -> None:
    """As check_output_fits in csrc/checks.h: the output's byte count must fit in int64 (concrete shapes only)."""
    if all(isinstance(s, int) for s in shape):
        itemsize = torch.empty((), dtype=dtype, device="meta").element_size()
        torch._check(
            math.prod(shape) * itemsize <= 2**63 - 1,
            lambda: (
                f"{op}: the output would have shape {list(shape)} ({itemsize} bytes per element): "
                "more bytes than a tensor can hold (2^63 - 1)"
            ),
        )


# ---------------------------------------------------------------------------------------------------------
# square


def square(x: Tensor) -> Tensor:
    """Elementwise x * x.

    Args:
        x: any shape (0-d and empty included), float32/float64/float16/bfloat16, CPU or CUDA, any strides.
    Returns:
        A contiguous tensor of x's shape, dtype and device. float16/bfloat16 are squared in float32.
    """
    if _DUMP_DIR is None:
        return torch.ops.cuda_kernels.square.default(x)
    return _dump.call_and_dump(_DUMP_DIR, "square", torch.ops.cuda_kernels.square.default, x)


@torch.library.register_fake("cuda_kernels::square")
def _square_fake(x: Tensor) -> Tensor:
    _check_float("cuda_kernels.square", "x", x)
    _check_output_fits("cuda_kernels.square", tuple(x.shape), x.dtype)
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


# square's autograd formula (grad * 2 * x) is registered in C++, csrc/api.cpp (SquareFunction): a Python one,
# as matmul's below, costs a few microseconds on every call, 28% of a 2^20-element CPU square on a 16-core host.


# ---------------------------------------------------------------------------------------------------------
# matmul


def matmul(a: Tensor, b: Tensor, *, variant: int = 0) -> Tensor:
    """Matrix product a @ b.

    Args:
        a: (M, K) and b: (K, N), both float32/float64/float16/bfloat16, same dtype and device, any strides.
            On CUDA, ladder step 1 reads any strides directly; every other step (and so variant 0) needs row-major
            inputs and first copies an input that is not contiguous (a transposed view, a slice with a row pitch
            other than its width, an expanded tensor) into a contiguous temporary. The CPU kernel reads any strides.
        variant: 0 picks the CUDA kernel for the shape, dtype and GPU (M or N <= 16: step 14, the skinny kernel;
            otherwise float16/bfloat16: the tensor-core step; float32/float64: step 6;
            ``cuda_kernels._C._matmul_default_step(dtype_name, device_index)`` says which);
            N >= 1 forces step N of the kernel ladder (csrc/cuda/matmul/), which must take the dtype (steps 7-12:
            float16/bfloat16 only; step 13: float32 as TF32, only while torch.backends.cuda.matmul.allow_tf32 is
            on) and run on the GPU (steps 7-8: compute capability >= 8.0; 9-13: an sm_90a build on compute 9.0),
            else RuntimeError.
            CPU tensors accept only 0.
    Returns:
        (M, N) contiguous, dtype of the inputs; accumulated in float32 (float64 for float64). K = 0 gives zeros.
    """
    if _DUMP_DIR is None:
        return torch.ops.cuda_kernels.matmul.default(a, b, variant)
    return _dump.call_and_dump(_DUMP_DIR, "matmul", torch.ops.cuda_kernels.matmul.default, a, b, variant=variant)


@torch.library.register_fake("cuda_kernels::matmul")
def _matmul_fake(a: Tensor, b: Tensor, variant: int = 0) -> Tensor:
    op = "cuda_kernels.matmul"
    _check_float(op, "a", a)
    _check_float(op, "b", b)
    torch._check(a.dim() == 2, lambda: f"{op}: a must be 2-D (M, K), got {a.dim()}-D with shape {tuple(a.shape)}")
    torch._check(b.dim() == 2, lambda: f"{op}: b must be 2-D (K, N), got {b.dim()}-D with shape {tuple(b.shape)}")
    torch._check(a.dtype == b.dtype, lambda: f"{op}: a and b must have the same dtype, got {a.dtype} and {b.dtype}")
    torch._check(
        a.device == b.device,
        lambda: f"{op}: a and b must be on the same device, got {a.device} and {b.device}",
    )
    torch._check(
        a.shape[1] == b.shape[0],
        lambda: f"{op}: inner dimensions differ: a is {tuple(a.shape)} and b is {tuple(b.shape)}",
    )
    # The variant rules of the real kernels: never negative; only 0 on the CPU; on CUDA a step of the ladder.
    torch._check(variant >= 0, lambda: f"{op}: unknown variant {variant}; use 0 (auto) or a ladder step (>= 1)")
    if a.device.type == "cpu":
        torch._check(
            variant == 0, lambda: f"{op}: variant {variant} is a CUDA kernel; the CPU has a single kernel (variant=0)"
        )
    elif a.device.type == "cuda":
        from cuda_kernels import _C

        steps = len(_C._matmul_variants())
        torch._check(variant <= steps, lambda: f"{op}: unknown variant {variant}; use 0 (auto) or 1..{steps}")
        # The dtypes a forced step takes (its compute-capability needs can only be checked on the device).
        if variant > 0:
            takes = dict(_C._matmul_variant_dtypes())[variant]
            name = dict(_C._matmul_variants())[variant]
            got = str(a.dtype).removeprefix("torch.")
            torch._check(
                got in takes,
                lambda: f"{op}: variant {variant} ({name}) supports {_and_list(takes)}, got {got}",
            )
    _check_output_fits(op, (a.shape[0], b.shape[1]), a.dtype)
    return a.new_empty((a.shape[0], b.shape[1]))


def _and_list(names: list[str]) -> str:
    """["a", "b", "c"] -> "a, b and c", as csrc/checks.h words a step's dtypes."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def matmul_cuda_variants(dtype: torch.dtype, device: int = -1) -> list[int]:
    """The CUDA ladder steps that can run `dtype` on CUDA device `device` (-1: the current one), e.g. [1, ..., 8]
    for bfloat16 on a compute-8.0+ GPU, [1, ..., 6] for float32; [] in a CPU-only build. For tests and tools that
    cover every step: forcing any other variant raises."""
    from cuda_kernels import _C

    name = str(dtype).removeprefix("torch.")
    return [v for v, _ in _C._matmul_variants() if not _C._matmul_variant_unmet_need(v, name, device)]


def _matmul_setup_context(ctx, inputs, output) -> None:
    a, b, _variant = inputs
    ctx.save_for_backward(a, b)


def _matmul_backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
    a, b = ctx.saved_tensors
    # Both gradients go through the op itself with variant 0, whatever variant the forward used: the forced step
    # may not take every input (and the gradients need not come from the same step). b.t() and a.t() are
    # column-major views: on CUDA, variant 0's steps copy them to row-major first (see matmul's docstring).
    grad_a = torch.ops.cuda_kernels.matmul.default(grad, b.t(), 0) if ctx.needs_input_grad[0] else None
    grad_b = torch.ops.cuda_kernels.matmul.default(a.t(), grad, 0) if ctx.needs_input_grad[1] else None
    return grad_a, grad_b, None


torch.library.register_autograd("cuda_kernels::matmul", _matmul_backward, setup_context=_matmul_setup_context)


# cuda_kernels.new: ops above this line
