"""The ops' Python layer: typed wrappers, fake (meta) kernels for torch.compile, and autograd formulas.

The C++ side (csrc/api.cpp) defines the schemas and the CPU/CUDA kernels; this file adds what the dispatcher needs
from Python: fake kernels for every op and the autograd formulas. Keep one
block per op, in the same order as csrc/api.cpp.

Repro dumps: each wrapper calls the op directly while _DUMP_DIR is None (the default; torch.compile traces that
branch), else through _dump.call_and_dump, which saves the arguments of a call that raises (cuda_kernels._dump).
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch.autograd import forward_ad as _forward_ad

from cuda_kernels import _dump

FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)

# Where failing calls are dumped: CUDA_KERNELS_DUMP_DIR, read once at import; None = off (no per-call cost).
_DUMP_DIR: str | None = _dump.dir_from_env()


def set_dump_dir(path: str | os.PathLike | None) -> None:
    """Dump the arguments of every failing op call into `path` from now on; None switches dumping off."""
    global _DUMP_DIR
    _DUMP_DIR = None if path is None else os.fspath(path)


# The autograd formulas are registered from Python (the stable ABI has no C++ autograd), twice over: with torch
# (torch.library.register_autograd), for direct torch.ops.cuda_kernels.<op> calls and torch.compile; and as a
# torch.autograd.Function, which the wrappers call in eager mode because it costs the calling thread less than
# half the registered kernel's host time. Without gradients to record the wrappers skip the
# autograd layer altogether, as torch's own C++ autograd kernels do (docs/benchmarks.md, "Host time per call").
_BELOW_AUTOGRAD = torch._C._AutoDispatchBelowAutograd

# Whether torch allows TF32 for float32 matmul now: the function torch.backends.cuda.matmul.allow_tf32 returns, called
# without that module object's attribute lookups, which cost every matmul and linear call several times what the
# call does (torch.compile traces either). The property where a torch lacks the function.
_tf32_allowed: Callable[[], bool] = getattr(
    torch._C, "_get_cublas_allow_tf32", lambda: torch.backends.cuda.matmul.allow_tf32
)


# torch.autograd.Function.apply: torch 2.14 and later make it the C++ apply itself; before that it is a Python
# classmethod that, for a Function without setup_context and outside functorch transforms (vmap, grad, ...), only
# unwraps dead functorch wrappers before it calls the C++ apply, and that Python costs a training step's every call
# more than the rest of the wrapper. _fast_apply does the same steps without it where the C++ apply is separate.
_C_APPLY = torch._C._FunctionBase.__dict__["apply"]

# Whether any of the arguments is a tensor that requires grad, in C++ (every torch the wheel supports, 2.11 on, has
# it; it also looks inside lists of tensors, which no schema here takes).
_any_requires_grad: Callable[..., bool] = torch._C._any_requires_grad


def _fast_apply(function: type[torch.autograd.Function]) -> Callable[..., Any]:
    if torch.autograd.Function.__dict__.get("apply") is _C_APPLY:
        return function.apply
    return _c_apply(function)


def _c_apply(function: type[torch.autograd.Function]) -> Callable[..., Any]:
    """function.apply as torch < 2.14 runs it, without its Python: positional arguments only, and only for a
    Function without setup_context (torch would bind default arguments for one)."""
    if function.setup_context is not torch.autograd.Function.setup_context:
        raise TypeError(f"{function.__name__}: _c_apply takes a Function whose forward takes ctx")
    c_apply = _C_APPLY.__get__(None, function)
    transforms_active = torch._C._are_functorch_transforms_active
    unwrap_if_dead = torch._C._functorch.unwrap_if_dead

    def apply(*args: Any) -> Any:
        if transforms_active():
            return function.apply(*args)
        return c_apply(*[unwrap_if_dead(a) if isinstance(a, Tensor) else a for a in args])

    return apply


class _Op:
    """An op as its wrapper calls it: `_Op("square", backward, setup_context)` registers the formula (backward and
    setup_context as torch.library.register_autograd takes them), and `_Op(...)(*args)` (all the schema's arguments,
    positional) runs the op with the cheapest autograd layer that is correct for the call."""

    def __init__(self, name: str, backward: Callable[..., Any], setup_context: Callable[..., None]) -> None:
        self.name = f"cuda_kernels.{name}"
        self.op = getattr(torch.ops.cuda_kernels, name).default
        torch.library.register_autograd(f"cuda_kernels::{name}", backward, setup_context=setup_context)
        # The op takes keyword-only arguments (after `*` in its schema) only by name, while torch.autograd.Function
        # passes everything positionally: call_op takes all of them positionally and names those, and the formula
        # sees them as torch's register_autograd shows them (setup_context's keyword_only_inputs; backward returns
        # one gradient per positional input, none for the keyword-only ones, which torch does not let be tensors).
        # Ops without any call the op and the formula as they are (no extra Python frame per call).
        arguments = self.op._schema.arguments
        keyword_only = tuple(a.name for a in arguments if a.kwarg_only)
        if keyword_only:
            n_positional = len(arguments) - len(keyword_only)
            op_by_name = self.op
            no_grads = (None,) * len(keyword_only)

            def call_op(*args: Any) -> Any:
                return op_by_name(*args[:n_positional], **dict(zip(keyword_only, args[n_positional:], strict=True)))

            def run_setup_context(ctx: Any, args: tuple, output: Any) -> None:
                named = dict(zip(keyword_only, args[n_positional:], strict=True))
                setup_context(ctx=ctx, inputs=args[:n_positional], keyword_only_inputs=named, output=output)

            def run_backward(ctx: Any, *grads: Any) -> Any:
                positional_grads = backward(ctx, *grads)
                if not isinstance(positional_grads, tuple):
                    positional_grads = (positional_grads,)
                return (*positional_grads, *no_grads)

            self.call_op: Callable[..., Any] = call_op
        else:
            self.call_op, run_setup_context, run_backward = self.op, setup_context, backward
        op = self.call_op

        class Function(torch.autograd.Function):
            # forward takes ctx (no separate setup_context staticmethod): that form is the cheaper one to apply.
            @staticmethod
            def forward(ctx: Any, *args: Any) -> Any:
                with _BELOW_AUTOGRAD():
                    output = op(*args)
                run_setup_context(ctx, args, output)
                return output

            @staticmethod
            def backward(ctx: Any, *grads: Any) -> Any:
                return run_backward(ctx, *grads)

        self.function = Function
        self.apply = _fast_apply(Function)

    def __call__(self, *args: Any) -> Any:
        if torch.compiler.is_compiling():  # traced as the registered op: compile's autograd uses the formula
            return self.call_op(*args)
        # Dual tensors (forward-mode AD) exist only inside a forward_ad.dual_level(), which sets the current level.
        # Neither autograd layer has a forward-mode formula: refuse a tangent rather than drop it without a word.
        if _forward_ad._current_level >= 0:
            for t in args:
                if isinstance(t, Tensor):
                    torch._check(
                        _forward_ad.unpack_dual(t).tangent is None,
                        lambda: f"{self.name}: forward-mode AD (a dual tensor) is not supported; use reverse mode",
                    )
            return self.call_op(*args)
        if torch.is_grad_enabled() and _any_requires_grad(*args):
            return self.apply(*args)
        with _BELOW_AUTOGRAD():
            return self.call_op(*args)


def _check_float(op: str, name: str, t: Tensor) -> None:
    torch._check(
        t.dtype in FLOAT_DTYPES,
        lambda: f"{op}: {name} must be float32, float64, float16 or bfloat16, got {t.dtype}",
    )


def _check_float_like(op: str, first_name: str, first: Tensor, name: str, t: Tensor) -> None:
    """As check_float_like in csrc/checks.h: t a float tensor with first's dtype and device."""
    _check_float(op, name, t)
    torch._check(
        t.dtype == first.dtype,
        lambda: f"{op}: {first_name} and {name} must have the same dtype, got {first.dtype} and {t.dtype}",
    )
    torch._check(
        t.device == first.device,
        lambda: f"{op}: {first_name} and {name} must be on the same device, got {first.device} and {t.device}",
    )


def _check_float_inputs(op: str, /, **tensors: Tensor | None) -> None:
    """The input check of the fake kernel of an op generated from a schema, as its check_<op>_inputs in
    csrc/checks.h: each tensor (None: an optional input not given) float, with the first one's dtype and device."""
    given = [(name, t) for name, t in tensors.items() if t is not None]
    first_name, first = given[0]
    _check_float(op, first_name, first)
    for name, t in given[1:]:
        _check_float_like(op, first_name, first, name, t)


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
    if x is None:  # no tensor to dispatch on: the dispatcher's own error would not name the op
        raise RuntimeError("cuda_kernels.square: x is an undefined tensor")
    if _DUMP_DIR is None:
        return _SQUARE(x)
    return _dump.call_and_dump(_DUMP_DIR, "square", _SQUARE.op, x)


@torch.library.register_fake("cuda_kernels::square")
def _square_fake(x: Tensor) -> Tensor:
    _check_float("cuda_kernels.square", "x", x)
    _check_output_fits("cuda_kernels.square", tuple(x.shape), x.dtype)
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def _square_setup_context(ctx, inputs, output) -> None:
    (x,) = inputs
    ctx.save_for_backward(x)


def _square_backward(ctx, grad: Tensor) -> Tensor:
    # d(x^2)/dx = 2x, in torch ops so that double backward works (gradgradcheck).
    (x,) = ctx.saved_tensors
    return grad * 2 * x


_SQUARE = _Op("square", _square_backward, _square_setup_context)


# ---------------------------------------------------------------------------------------------------------
# matmul


def matmul(a: Tensor, b: Tensor, *, variant: int = 0) -> Tensor:
    """Matrix product a @ b.

    Args:
        a: (M, K) and b: (K, N), both float32/float64/float16/bfloat16, same dtype and device, any strides. Also
            every other shape torch.matmul takes: 1-D operands (a row, a column: dropped from the result), a batched
            a (..., M, K) with a 2-D b (the batch dimensions fold into M: one product), and batches on both sides,
            (..., M, K) @ (..., K, N) with the batch dimensions broadcast as torch.matmul does: one launch on the
            kernels that take a batch (01_tiled, 06_async_pipeline, 12_hopper_gemm, matvec, fp64_dmma: every
            default pick on the H100 but tf32_wgmma's), which read a broadcast operand once; the others (so also
            08_mma_pipeline, the 16-bit default before Hopper) run once per matrix.
            On CUDA, kernels 2-8 and 15 need row-major inputs and first copy an input that is not contiguous (a
            transposed view, a slice with a row pitch other than its width, an expanded tensor) into a contiguous
            temporary, but 06_async_pipeline reads a transposed b (``x @ W.t()``, K and N > 1) as it is when M <
            2048; 01_tiled, the Hopper kernels (9-13) and matvec read transposed views as they are. The CPU kernel
            reads any strides.
        variant: 0 picks the CUDA kernel for the shape, dtype and GPU (M or N <= 16: matvec, but float32 with 8-16 rows
            and a b of fewer than 2^25 elements: 06_async_pipeline; otherwise
            float16/bfloat16: the tensor-core kernel, 12_hopper_gemm on the H100; float32: 06_async_pipeline, or
            tf32_wgmma while TF32 is allowed; float64: fp64_dmma; ``matmul_default_kernel(dtype)`` says which);
            N >= 1 forces kernel N of the table in csrc/cuda/matmul/dispatch.cpp (``matmul_kernels()``), which
            must take the dtype (7-12: float16/bfloat16 only; 13: float32 as TF32, only while
            torch.backends.cuda.matmul.allow_tf32 is on; 15: float64) and run on the GPU (7-8 and 15: compute
            capability >= 8.0; 9-13: an sm_90a build on compute 9.0), else RuntimeError.
            CPU tensors accept only 0.
    Returns:
        (M, N) contiguous (torch.matmul's shape for the other cases), dtype of the inputs; accumulated in float32
        (float64 for float64). K = 0 gives zeros.
    """
    # TF32 as torch allows it now (torch.backends.cuda.matmul.allow_tf32, set_float32_matmul_precision): the
    # binary cannot ask torch itself (the stable ABI has no such call), so the op takes it as an argument.
    tf32 = _tf32_allowed()
    if isinstance(a, Tensor) and isinstance(b, Tensor) and (a.dim() != 2 or b.dim() != 2):
        return _matmul_nd(a, b, variant, tf32)
    if _DUMP_DIR is None:
        return _MATMUL(a, b, variant, tf32)
    return _dump.call_and_dump(_DUMP_DIR, "matmul", _MATMUL.op, a, b, variant=variant, allow_tf32=tf32)


def _matmul_nd(a: Tensor, b: Tensor, variant: int, tf32: bool) -> Tensor:
    """torch.matmul's other shapes: a 1-D a is a row (dropped from the result), a 1-D b a column (dropped); with a
    2-D b, a's leading (batch) dimensions fold into its rows (a view when they can: one 2-D product); with a batched
    b, the batch dimensions of both broadcast and flatten into one, and the op runs a (batch, M, K) @ (batch, K, N)
    product (a broadcast operand keeps stride 0 along the batch: it is not copied per matrix)."""
    op = "cuda_kernels.matmul"
    if a.dim() < 1 or b.dim() < 1:
        raise RuntimeError(f"{op}: a and b must have at least 1 dimension each, got {a.dim()}-D and {b.dim()}-D")
    a2 = a.unsqueeze(0) if a.dim() == 1 else a
    b2 = b.unsqueeze(-1) if b.dim() == 1 else b
    k = a2.shape[-1]
    if b2.shape[-2] != k:
        raise RuntimeError(
            f"{op}: inner dimensions differ: a is {list(a.shape)} and b is {list(b.shape)} (a.shape[-1] must equal "
            "b.shape[-2], or b.shape[0] for a 1-D b)"
        )
    m, n = a2.shape[-2], b2.shape[-1]
    if b2.dim() == 2:
        rows = math.prod(a2.shape[:-1])  # not reshape(-1, k): K = 0 leaves the rows ambiguous
        out = _MATMUL(a2.reshape(rows, k), b2, variant, tf32).reshape(*a2.shape[:-1], n)
    else:
        try:
            batch = torch.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
        except RuntimeError:
            raise RuntimeError(
                f"{op}: the batch dimensions of a {list(a.shape)} and b {list(b.shape)} do not broadcast "
                f"({list(a2.shape[:-2])} and {list(b2.shape[:-2])})"
            ) from None
        count = math.prod(batch)
        a3 = a2.expand(*batch, m, k).reshape(count, m, k)
        b3 = b2.expand(*batch, k, n).reshape(count, k, n)
        out = _MATMUL(a3, b3, variant, tf32).reshape(*batch, m, n)
    if a.dim() == 1:
        out = out.squeeze(-2)
    if b.dim() == 1:
        out = out.squeeze(-1)
    return out


@torch.library.register_fake("cuda_kernels::matmul")
def _matmul_fake(a: Tensor, b: Tensor, variant: int = 0, allow_tf32: bool = False) -> Tensor:
    op = "cuda_kernels.matmul"
    _check_float(op, "a", a)
    _check_float(op, "b", b)
    torch._check(
        a.dim() in (2, 3),
        lambda: f"{op}: a must be 2-D (M, K) or 3-D (batch, M, K), got {a.dim()}-D with shape {tuple(a.shape)}",
    )
    torch._check(
        b.dim() == a.dim(),
        lambda: (
            f"{op}: b must be {'2-D (K, N)' if a.dim() == 2 else '3-D (batch, K, N)'} as a is {a.dim()}-D, got "
            f"{b.dim()}-D with shape {tuple(b.shape)}"
        ),
    )
    torch._check(a.dtype == b.dtype, lambda: f"{op}: a and b must have the same dtype, got {a.dtype} and {b.dtype}")
    torch._check(
        a.device == b.device,
        lambda: f"{op}: a and b must be on the same device, got {a.device} and {b.device}",
    )
    torch._check(
        a.dim() == 2 or a.shape[0] == b.shape[0],
        lambda: f"{op}: a and b must have the same batch size, got {tuple(a.shape)} and {tuple(b.shape)}",
    )
    torch._check(
        a.shape[-1] == b.shape[-2],
        lambda: f"{op}: inner dimensions differ: a is {tuple(a.shape)} and b is {tuple(b.shape)}",
    )
    # The variant rules of the real kernels: never negative; only 0 on the CPU; on CUDA a kernel of the table.
    torch._check(variant >= 0, lambda: f"{op}: unknown variant {variant}; use 0 (auto) or a kernel (>= 1)")
    if a.device.type == "cpu":
        torch._check(
            variant == 0, lambda: f"{op}: variant {variant} is a CUDA kernel; the CPU has a single kernel (variant=0)"
        )
    elif a.device.type == "cuda":
        kernels = matmul_kernels()
        torch._check(
            variant <= len(kernels), lambda: f"{op}: unknown variant {variant}; use 0 (auto) or 1..{len(kernels)}"
        )
        # The dtypes a forced kernel takes (its compute-capability needs can only be checked on the device).
        if variant > 0:
            _, name, takes = kernels[variant - 1]
            got = str(a.dtype).removeprefix("torch.")
            torch._check(
                got in takes,
                lambda: f"{op}: variant {variant} ({name}) supports {_and_list(takes)}, got {got}",
            )
    shape = (*a.shape[:-1], b.shape[-1])
    _check_output_fits(op, shape, a.dtype)
    return a.new_empty(shape)


def _and_list(names: list[str]) -> str:
    """["a", "b", "c"] -> "a, b and c", as csrc/cuda/matmul/dispatch.cpp words a kernel's dtypes."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _has_cuda_kernels() -> bool:
    """Whether the CUDA library is loaded: it registers the CUDA kernels and the _matmul_* queries."""
    return hasattr(torch.ops.cuda_kernels, "_matmul_kernels")


@functools.cache
def matmul_kernels() -> list[tuple[int, str, tuple[str, ...]]]:
    """The CUDA matmul kernels as [(variant, name, dtypes)], in the order of the table in
    csrc/cuda/matmul/dispatch.cpp: [(1, "01_tiled", ("float32", "float64", "float16", "bfloat16")), ...,
    (12, "12_hopper_gemm", ("float16", "bfloat16")), (13, "tf32_wgmma", ("float32",)), ...]; [] without CUDA
    kernels (a CPU-only build, or a CPU-only torch)."""
    if not _has_cuda_kernels():
        return []
    variants, names, dtypes = torch.ops.cuda_kernels._matmul_kernels()
    return [(v, n, tuple(d.split(","))) for v, n, d in zip(variants, names, dtypes, strict=True)]


def matmul_default_kernel(dtype: torch.dtype | str, device: int = -1) -> tuple[int, str, str]:
    """The CUDA kernel that variant 0 runs for large outputs of `dtype` on CUDA device `device` (-1: the current
    one), and why: (12, "12_hopper_gemm", "compute 9.0 (NVIDIA H100 ...), bfloat16: the fastest kernel that runs
    here; ..."). `dtype` may also be a name: "float32" (TF32 as torch allows it now), "float32+tf32" (allowed).
    (0, "", why) without CUDA kernels."""
    if not _has_cuda_kernels():
        return (0, "", "the extension has no CUDA kernels loaded (a CPU-only build, or a CPU-only torch)")
    return tuple(torch.ops.cuda_kernels._matmul_default_kernel(_dtype_name(dtype), device))


def matmul_unmet_need(variant: int, dtype: torch.dtype | str, device: int = -1) -> str:
    """Why CUDA kernel `variant` cannot run `dtype` on CUDA device `device` (-1: the current one), e.g. "supports
    float16 and bfloat16, got float32"; "" when it can. RuntimeError for an unknown variant or without CUDA kernels."""
    if not _has_cuda_kernels():
        raise RuntimeError(f"cuda_kernels.matmul: variant {variant} is a CUDA kernel; this build has none loaded")
    return torch.ops.cuda_kernels._matmul_unmet_need(variant, _dtype_name(dtype), device)


def matmul_cuda_variants(dtype: torch.dtype | str, device: int = -1) -> list[int]:
    """The CUDA kernels that can run `dtype` on CUDA device `device` (-1: the current one), e.g. [1, ..., 8]
    for bfloat16 on a compute-8.0+ GPU, [1, ..., 6, 14] for float32; [] in a CPU-only build. For tests and tools
    that cover every kernel: forcing any other variant raises."""
    return [v for v, _, _ in matmul_kernels() if not matmul_unmet_need(v, dtype, device)]


def _dtype_name(dtype: torch.dtype | str) -> str:
    """The binary's name of a dtype: "float32" with TF32 as torch allows it now is "float32+tf32" where allowed (the
    binary cannot ask torch)."""
    name = dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")
    if name.removeprefix("torch.") in ("float32", "float") and torch.backends.cuda.matmul.allow_tf32:
        return "float32+tf32"
    return name


def _matmul_setup_context(ctx, inputs, output) -> None:
    a, b, _variant, allow_tf32 = inputs
    ctx.allow_tf32 = allow_tf32
    ctx.save_for_backward(a, b)


def _matmul_backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None, None]:
    a, b = ctx.saved_tensors
    tf32 = ctx.allow_tf32
    # Both gradients go through the op itself with variant 0, whatever variant the forward used: the forced kernel
    # may not take every input (and the gradients need not come from the same kernel). The transposes are
    # column-major views, read as they are or copied to row-major first (see matmul's docstring); in a batch, a
    # broadcast operand's gradient is summed over the batch by the expand that made it (matmul's wrapper).
    mm = torch.ops.cuda_kernels.matmul.default
    grad_a = mm(grad, b.transpose(-1, -2), 0, tf32) if ctx.needs_input_grad[0] else None
    grad_b = mm(a.transpose(-1, -2), grad, 0, tf32) if ctx.needs_input_grad[1] else None
    return grad_a, grad_b, None, None


_MATMUL = _Op("matmul", _matmul_backward, _matmul_setup_context)


# ---------------------------------------------------------------------------------------------------------
# rms_norm (the row-wise pattern: docs/rowwise.md)


def rms_norm(x: Tensor, weight: Tensor | None = None, eps: float | None = None) -> Tensor:
    """Root-mean-square normalization over the last dimension, as
    ``torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)``: ``x * rsqrt(mean(x**2, -1) + eps) * weight``.

    Args:
        x: any shape with at least one dimension, any strides, float32/float64/float16/bfloat16, CPU or CUDA.
        weight: None, or (x.shape[-1],) of x's dtype and device.
        eps: added to the mean of squares; None: torch.finfo(x.dtype).eps, as torch.
    Returns:
        A contiguous tensor of x's shape and dtype, computed in float32 (float64 for float64) and rounded once.
        Differentiable in x and weight (first order); the backward is one fused kernel (rms_norm_backward).
    """
    if x is None:  # no tensor to dispatch on: the dispatcher's own error would not name the op
        raise RuntimeError("cuda_kernels.rms_norm: x is an undefined tensor")
    if _DUMP_DIR is None:
        return _RMS_NORM(x, weight, eps)
    return _dump.call_and_dump(_DUMP_DIR, "rms_norm", _RMS_NORM.op, x, weight=weight, eps=eps)


def _check_rowwise(op: str, x: Tensor, weight: Tensor | None, what: str = "normalizes") -> None:
    """As check_rowwise_inputs in csrc/checks.h: a row-wise op's x and weight (rms_norm's, and the --kind rowwise
    ops of python -m cuda_kernels.new)."""
    _check_float(op, "x", x)
    torch._check(
        x.dim() >= 1, lambda: f"{op}: x must have at least 1 dimension (it {what} over the last), got a 0-d tensor"
    )
    if weight is not None:
        _check_float(op, "weight", weight)
        torch._check(
            weight.dtype == x.dtype,
            lambda: f"{op}: weight must have x's dtype ({_dtype_str(x.dtype)}), got {_dtype_str(weight.dtype)}",
        )
        torch._check(
            weight.device == x.device, lambda: f"{op}: weight must be on x's device ({x.device}), got {weight.device}"
        )
        torch._check(
            weight.dim() == 1 and weight.shape[0] == x.shape[-1],
            lambda: (
                f"{op}: weight must be 1-D with x.shape[-1] = {x.shape[-1]} elements, got shape {list(weight.shape)}"
            ),
        )
    _check_output_fits(op, tuple(x.shape), x.dtype)


def _check_rowwise_grad(op: str, grad: Tensor, x: Tensor) -> None:
    """The shape part of check_rowwise_grad in csrc/checks.h (`op`: the backward's name)."""
    torch._check(
        grad.shape == x.shape, lambda: f"{op}: grad must have x's shape {list(x.shape)}, got {list(grad.shape)}"
    )


def _dtype_str(dtype: torch.dtype) -> str:
    """A dtype as the C++ checks print it: "Float", "BFloat16", ... (c10's ScalarType names)."""
    return {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16"}.get(
        dtype, str(dtype).removeprefix("torch.")
    )


@torch.library.register_fake("cuda_kernels::rms_norm")
def _rms_norm_fake(x: Tensor, weight: Tensor | None = None, eps: float | None = None) -> Tensor:
    _check_rowwise("cuda_kernels.rms_norm", x, weight)
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


@torch.library.register_fake("cuda_kernels::rms_norm_backward")
def _rms_norm_backward_fake(grad: Tensor, x: Tensor, weight: Tensor | None, eps: float | None) -> tuple[Tensor, Tensor]:
    _check_rowwise("cuda_kernels.rms_norm", x, weight)
    _check_rowwise_grad("cuda_kernels.rms_norm_backward", grad, x)
    dw_shape = (x.shape[-1],) if weight is not None else (0,)
    return torch.empty(x.shape, dtype=x.dtype, device=x.device), x.new_empty(dw_shape)


def _rms_norm_setup_context(ctx, inputs, output) -> None:
    x, weight, eps = inputs
    ctx.eps = eps
    ctx.save_for_backward(x, weight)


def _rms_norm_backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
    # One fused kernel for both gradients (csrc/cuda/rms_norm.cu); it is not itself differentiable, so double
    # backward through rms_norm is not supported.
    x, weight = ctx.saved_tensors
    dx, dw = torch.ops.cuda_kernels.rms_norm_backward.default(grad, x, weight, ctx.eps)
    return (
        dx if ctx.needs_input_grad[0] else None,
        dw if weight is not None and ctx.needs_input_grad[1] else None,
        None,
    )


_RMS_NORM = _Op("rms_norm", _rms_norm_backward, _rms_norm_setup_context)


# ---------------------------------------------------------------------------------------------------------
# linear (matmul with a fused epilogue)

ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu", "swiglu")


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None, activation: str | None = None) -> Tensor:
    """``activation(x @ weight.T + bias)``: ``torch.nn.functional.linear`` and an activation in one call.

    Args:
        x: (..., K), any leading shape (1-D: one row) and strides, float32/float64/float16/bfloat16, CPU or CUDA.
        weight: (N, K), as ``torch.nn.Linear`` stores it; x's dtype and device.
        bias: None or (N,).
        activation: None, "relu", "gelu" (erf), "gelu_tanh" (``F.gelu(approximate="tanh")``), "silu", or
            "swiglu": weight holds the gate rows then the up rows (N even) and the result's N / 2 columns are
            ``silu(x @ gate.T + b_gate) * (x @ up.T + b_up)``.
    Returns:
        (..., N), or (..., N / 2) for swiglu; x's dtype, contiguous. Computed in float32 (float64 for float64) and
        rounded once on the CPU and where CUDA fuses the epilogue: the tensor-core kernel (12_hopper_gemm) applies
        bias and activation as it stores its tiles. Other CUDA kernels (M or N <= 16, GPUs before Hopper) and
        swiglu's gating take a pass of their own, which reads z rounded to a 16-bit dtype first, as torch's chain
        does. float32 runs as TF32 where torch allows it (torch.backends.cuda.matmul.allow_tf32), as F.linear does.
        Differentiable in x, weight and bias. When gradients are recorded with an activation, the activation runs as
        torch ops on the saved pre-activation (so the backward needs no second matmul): only the bias is fused then.
    """
    if x is None:  # no tensor to dispatch on: the dispatcher's own error would not name the op
        raise RuntimeError("cuda_kernels.linear: x is an undefined tensor")
    tf32 = _tf32_allowed()
    if (
        activation is not None
        and torch.is_grad_enabled()
        and any(t is not None and t.requires_grad for t in (x, weight, bias))
    ):
        _check_activation(activation)
        if activation == "swiglu":  # the halves are split below, after the op's own checks: check N here
            n = weight.shape[0] if weight is not None and weight.dim() == 2 else 0
            if n % 2 != 0:
                raise RuntimeError(_odd_swiglu(n))
        return _activation_forward(_LINEAR(x, weight, bias, None, tf32), activation)
    if _DUMP_DIR is None:
        return _LINEAR(x, weight, bias, activation, tf32)
    return _dump.call_and_dump(
        _DUMP_DIR, "linear", _LINEAR.op, x, weight, bias=bias, activation=activation, allow_tf32=tf32
    )


class Linear(torch.nn.Linear):
    """``torch.nn.Linear`` with an activation fused into its matmul: ``activation(x @ weight.T + bias)`` by
    ``cuda_kernels.linear``. Same parameters and state dict as ``torch.nn.Linear``, so either loads the other's.

    activation: None, "relu", "gelu", "gelu_tanh", "silu", or "swiglu" (out_features even: the weight's first half
    of rows is the gate, the second the up projection, and the module returns out_features / 2 features).
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        activation: str | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        if activation is not None:
            _check_activation(activation)
        if activation == "swiglu" and out_features % 2 != 0:
            raise ValueError(_odd_swiglu(out_features))
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.activation = activation

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias, self.activation)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, activation={self.activation!r}"


def _check_activation(activation: str | None) -> None:
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(_unknown_activation(activation))


# linear's error messages, as csrc/checks.h words them (parse_activation, check_linear_inputs).
def _unknown_activation(activation: str) -> str:
    return (
        f"cuda_kernels.linear: unknown activation {activation!r}; use None, 'relu', 'gelu', 'gelu_tanh', 'silu' or "
        "'swiglu'"
    )


def _odd_swiglu(n: int) -> str:
    return (
        f"cuda_kernels.linear: swiglu needs an even out_features (the gate rows, then the up rows of weight), got {n}"
    )


def _activation_forward(z: Tensor, activation: str) -> Tensor:
    """The activation as torch computes it, on z = x @ weight.T + bias (autograd records it)."""
    if activation == "relu":
        return torch.relu(z)
    if activation in ("gelu", "gelu_tanh"):
        return torch.nn.functional.gelu(z, approximate="tanh" if activation == "gelu_tanh" else "none")
    if activation == "silu":
        return torch.nn.functional.silu(z)
    gate, up = z.chunk(2, dim=-1)
    return torch.nn.functional.silu(gate) * up


def _activation_backward(grad: Tensor, z: Tensor, activation: str | None) -> Tensor:
    """The gradient with respect to z = x @ weight.T + bias of activation(z), given the output's gradient."""
    if activation is None:
        return grad
    if activation == "relu":
        return grad * (z > 0).to(grad.dtype)
    if activation in ("gelu", "gelu_tanh"):
        return torch.ops.aten.gelu_backward(grad, z, approximate="tanh" if activation == "gelu_tanh" else "none")
    if activation == "silu":
        return torch.ops.aten.silu_backward(grad, z)
    gate, up = z.chunk(2, dim=-1)
    return torch.cat([torch.ops.aten.silu_backward(grad * up, gate), grad * torch.nn.functional.silu(gate)], dim=-1)


@torch.library.register_fake("cuda_kernels::linear")
def _linear_fake(
    x: Tensor, weight: Tensor, bias: Tensor | None = None, activation: str | None = None, allow_tf32: bool = False
) -> Tensor:
    op = "cuda_kernels.linear"
    torch._check(
        activation is None or activation in ACTIVATIONS,
        lambda: _unknown_activation(activation),
    )
    _check_float(op, "x", x)
    torch._check(x.dim() >= 1, lambda: f"{op}: x must have at least 1 dimension (..., in_features), got a 0-d tensor")
    _check_float_like(op, "x", x, "weight", weight)
    torch._check(
        weight.dim() == 2,
        lambda: (
            f"{op}: weight must be 2-D (out_features, in_features), got {weight.dim()}-D with shape "
            f"{list(weight.shape)}"
        ),
    )
    torch._check(
        weight.shape[1] == x.shape[-1],
        lambda: (
            f"{op}: x's last dim ({x.shape[-1]}) must equal weight's in_features (weight.shape[1] = "
            f"{weight.shape[1]}); x is {list(x.shape)}, weight {list(weight.shape)}"
        ),
    )
    n = weight.shape[0]
    if bias is not None:
        _check_float_like(op, "x", x, "bias", bias)
        torch._check(
            bias.dim() == 1 and bias.shape[0] == n,
            lambda: f"{op}: bias must have shape [{n}] (weight's out_features), got {list(bias.shape)}",
        )
    if activation == "swiglu":
        torch._check(
            n % 2 == 0,
            lambda: _odd_swiglu(n),
        )
        n = n // 2
    shape = (*x.shape[:-1], n)
    _check_output_fits(op, tuple(shape), x.dtype)
    return x.new_empty(shape)


def _linear_setup_context(ctx, inputs, output) -> None:
    x, weight, bias, activation, allow_tf32 = inputs
    ctx.activation = activation
    ctx.allow_tf32 = allow_tf32
    ctx.save_for_backward(x, weight, bias)


def _linear_backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None, None, None]:
    # With an activation, z = x @ weight.T + bias is recomputed (one more matmul): the wrapper avoids that path
    # when it records gradients, but direct torch.ops calls and torch.compile come here.
    x, weight, bias = ctx.saved_tensors
    tf32 = ctx.allow_tf32
    g = grad
    if ctx.activation is not None:
        z = torch.ops.cuda_kernels.linear.default(x, weight, bias, None, tf32)
        g = _activation_backward(grad, z, ctx.activation)
    k, n = weight.shape[1], weight.shape[0]
    g2 = g.reshape(math.prod(g.shape[:-1]), n)  # reshape(-1, n) cannot tell the rows when N = 0
    matmul = torch.ops.cuda_kernels.matmul.default
    dx = matmul(g2, weight, 0, tf32).reshape(x.shape) if ctx.needs_input_grad[0] else None
    dw = matmul(g2.t(), x.reshape(g2.shape[0], k), 0, tf32) if ctx.needs_input_grad[1] else None
    db = (
        g2.sum(0, dtype=torch.float64 if g2.dtype == torch.float64 else torch.float32).to(g2.dtype)
        if (bias is not None and ctx.needs_input_grad[2])
        else None
    )
    return dx, dw, db, None, None


_LINEAR = _Op("linear", _linear_backward, _linear_setup_context)


# cuda_kernels.new: ops above this line
