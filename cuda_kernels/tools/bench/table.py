"""The benchmark's one table: every op it times, with everything the harness needs to know about it.

An entry (BenchOp) says how to make inputs for a size and dtype, our call and torch's, how to check our output,
the bytes moved and FLOPs, the sweeps, how to read --size, and the op's roofline. Adding an op to the benchmark is
adding one entry to OPS_IN_ORDER (`python -m cuda_kernels.new NAME` writes it: elementwise() for an op of one
tensor, multi_input() for one generated from a schema); nothing else in the harness names an op.

Sizes: an elementwise op's shape is (n,) elements (each input of a multi_input op is (n,)); matmul's is (M, N, K):
a is (M, K), b is (K, N).
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

import cuda_kernels
from cuda_kernels.tools.bench.corpus import AWKWARD_SHAPES, BATCHED_SHAPES, CORPUS_SHAPES, LINEAR_SHAPES
from cuda_kernels.tools.testing import check_matmul, check_within, matmul_error_bound, tf32_matmul_error_bound

Shape = tuple[int, ...]
DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
}


@dataclass(frozen=True)
class Case:
    """One op at one dtype and size."""

    op: str
    dtype: torch.dtype
    shape: Shape
    # None: the dtype's own arithmetic (float32 matmul with TF32 off). "tf32": float32 matmul with
    # torch.backends.cuda.matmul.allow_tf32 = True for ours and torch's (cuBLAS may then round inputs to TF32).
    math: str | None = None

    @property
    def dtype_name(self) -> str:
        return str(self.dtype).removeprefix("torch.")

    @property
    def shape_str(self) -> str:
        """'16777216' or '4096x4096x4096' (M x N x K); also the last part of the NVTX path."""
        return "x".join(str(d) for d in self.shape)

    @property
    def nvtx_path(self) -> list[str]:
        """NVTX ranges pushed (nested) around the case: ncu's --nvtx-include "square/float32/16777216/"
        ("matmul/float32+tf32/4096x4096x4096/" for a TF32 case)."""
        return [self.op, self.dtype_name + (f"+{self.math}" if self.math else ""), self.shape_str]


@dataclass(frozen=True)
class Impl:
    """One implementation timed for a case: "ours" (with a variant for ops that have them) or "torch".

    op, when set, records the row under another table entry: an elementwise case times its roofline op (a copy
    of the same bytes) on the same inputs, recorded as that op's torch row.
    """

    impl: str
    variant: int | None = None
    variant_name: str | None = None
    op: str | None = None

    @property
    def label(self) -> str:
        if self.variant_name:
            return f"{self.impl}[v{self.variant} {self.variant_name}]"
        if self.variant:
            return f"{self.impl}[v{self.variant}]"
        return self.impl


@dataclass(frozen=True)
class Sweep:
    """The sizes an op runs at: the default sweep, --quick, the CPU's (capped: a CPU run stays near a minute on
    two cores), and the one representative size that -i/--iters runs (what `ncu -k ...` should look at)."""

    default: list[Shape]
    quick: list[Shape]
    cpu: list[Shape]
    cpu_quick: list[Shape]
    iters: Shape
    cpu_iters: Shape

    def shapes(self, quick: bool, on_cpu: bool) -> list[Shape]:
        if on_cpu:
            return self.cpu_quick if quick else self.cpu
        return self.quick if quick else self.default


@dataclass(frozen=True)
class Skipped:
    """A variant of our op not timed for a dtype on this device, and why."""

    op: str
    variant: int
    name: str
    dtype: str
    why: str

    @property
    def note(self) -> str:
        return f"note: {self.op} step {self.variant} ({self.name}) skipped for {self.dtype}: {self.why}"


# plan(cases, ours, device, default_sweep) -> (our implementations per case, variants left out): see MATMUL.
Planner = Callable[[list[Case], list[Impl], torch.device, bool], tuple[dict[Case, list[Impl]], list[Skipped]]]


@dataclass(frozen=True)
class BenchOp:
    """One op of the benchmark. The callables receive the inputs that make_inputs made."""

    name: str
    make_inputs: Callable[[Shape, torch.dtype, torch.device, torch.Generator], list[Tensor]]
    ours: Callable[[list[Tensor], int], Callable[[], Tensor]] | None  # (inputs, variant) -> the call to time
    torch: Callable[[list[Tensor]], Callable[[], Tensor]]  # torch's call: the reference timing
    # (inputs, our output, math) -> (True, "") | (False, what is wrong) | (None, why not checked)
    check: Callable[[list[Tensor], Tensor, str | None], tuple[bool | None, str]]
    bytes_moved: Callable[[Shape, int], int]  # (shape, itemsize) -> the minimum bytes read + written
    flops: Callable[[Shape], int | None]  # None: a memory-bound op (its speed is GB/s)
    parse_size: Callable[[str], Shape]  # --size text -> shape; ValueError with the expected form
    format_shape: Callable[[Shape], str]  # for tables: "2^24", "4096x4096x4096"
    sweep: Sweep
    # The roofline of a memory-bound op: the torch row of this entry (a copy), timed on the same inputs in the same
    # case; report.py compares the two rows' rates (GB/s). None: the roofline is the op's own torch row (cuBLAS for
    # matmul).
    roofline_op: str | None = None
    in_all: bool = True  # `--op all` runs it
    tf32_shapes: list[Shape] = field(default_factory=list)  # the default CUDA sweep adds a TF32 case at these
    ladder: Callable[[torch.device], list[tuple[int, str]]] | None = None  # --ladder: [(variant, name)] here
    plan: Planner | None = None  # which variants each case times (None: the requested ones)
    # torch.compile's version of torch's call, timed beside it on CUDA as the "torch.compile" row (None: none).
    compiled: Callable[[list[Tensor]], Callable[[], Any]] | None = None


# ---------------------------------------------------------------------------------------------------------
# Elementwise ops (square, and those `python -m cuda_kernels.new` adds: elementwise(), multi_input())


def _number(text: str) -> int:
    if "^" in text:
        base, exp = text.split("^")
        return int(base) ** int(exp)
    return int(text)


def parse_elements(text: str) -> Shape:
    """'16777216' or '2^24' -> (n,)."""
    try:
        if "x" in text:
            raise ValueError
        n = _number(text.strip().lower())
        if n < 1:
            raise ValueError
        return (n,)
    except ValueError:
        raise ValueError(f"--size {text!r}: expected N or 2^N elements") from None


def format_elements(shape: Shape) -> str:
    """'2^24' for a power-of-two element count, else the number."""
    n = shape[0]
    return f"2^{n.bit_length() - 1}" if n > 0 and n & (n - 1) == 0 else str(n)


def random_vector(shape: Shape, dtype: torch.dtype, device: torch.device, gen: torch.Generator) -> list[Tensor]:
    """[x]: random normal (never zeros, which would hide unwritten outputs)."""
    return [torch.randn(shape[0], generator=gen, dtype=dtype, device=device)]


def check_equal(out: Tensor, ref: Tensor) -> tuple[bool, str]:
    """Exact equality, with the first differing element in the note."""
    if out.shape != ref.shape or out.dtype != ref.dtype or out.device != ref.device:
        return False, (
            f"got {tuple(out.shape)} {out.dtype} on {out.device}, expected {tuple(ref.shape)} {ref.dtype} "
            f"on {ref.device}"
        )
    if torch.equal(out, ref):
        return True, ""
    bad = (out != ref).flatten()
    first = int(bad.nonzero()[0])
    return False, (
        f"{int(bad.sum())} of {out.numel()} elements differ; first at {first}: got {out.flatten()[first].item()}, "
        f"expected {ref.flatten()[first].item()}"
    )


def check_close(out: Tensor, ref: Tensor) -> tuple[bool, str]:
    """Within torch.testing.assert_close's default tolerance for the dtype."""
    try:
        torch.testing.assert_close(out, ref)
    except AssertionError as err:
        return False, str(err).replace("\n", " ")
    return True, ""


ELEMENTWISE_SIZES = [2**k for k in range(10, 29)]
ELEMENTWISE_QUICK_SIZES = [2**12, 2**16, 2**20, 2**24, 2**28]
CPU_MAX_ELEMENTS = 2**24
ITERS_ELEMENTS = 2**24


def elementwise_sweep() -> Sweep:
    return Sweep(
        default=[(n,) for n in ELEMENTWISE_SIZES],
        quick=[(n,) for n in ELEMENTWISE_QUICK_SIZES],
        cpu=[(n,) for n in ELEMENTWISE_SIZES if n <= CPU_MAX_ELEMENTS],
        cpu_quick=[(n,) for n in ELEMENTWISE_QUICK_SIZES if n <= CPU_MAX_ELEMENTS],
        iters=(ITERS_ELEMENTS,),
        cpu_iters=(ITERS_ELEMENTS,),
    )


def elementwise(
    name: str,
    ours: Callable[[Tensor], Tensor],
    reference: Callable[[Tensor], Tensor],
    exact: Callable[[Tensor], Tensor] | None = None,
) -> BenchOp:
    """An entry for an op y = f(x) of one tensor, of x's shape and dtype: memory-bound, its roofline a copy.

    ours(x) calls our op, reference(x) is torch's way to compute it (timed beside ours). Our output must equal
    exact(x) exactly when exact is given, else be within assert_close's default tolerance of reference(x).
    """

    def check(inputs: list[Tensor], out: Tensor, math_mode: str | None) -> tuple[bool | None, str]:
        (x,) = inputs
        return check_equal(out, exact(x)) if exact is not None else check_close(out, reference(x))

    return BenchOp(
        name=name,
        make_inputs=random_vector,
        ours=lambda inputs, variant: lambda: ours(inputs[0]),
        torch=lambda inputs: lambda: reference(inputs[0]),
        check=check,
        bytes_moved=lambda shape, itemsize: 2 * shape[0] * itemsize,
        flops=lambda shape: None,
        parse_size=parse_elements,
        format_shape=format_elements,
        sweep=elementwise_sweep(),
        roofline_op="copy",
    )


def multi_input(
    name: str,
    ours: Callable[..., Tensor | tuple[Tensor, ...]],
    reference: Callable[..., Tensor | tuple[Tensor, ...]],
    outputs: int = 1,
) -> BenchOp:
    """An entry for an op of several tensors of one shape (n,), as many as reference takes, and `outputs` outputs
    of that shape (what `python -m cuda_kernels.new NAME --schema ...` writes): memory-bound, each input read and
    each output written once, its roofline a copy.

    ours(*tensors) calls our op, reference(*tensors) is torch's way to compute it (timed beside ours); each of our
    outputs must be within assert_close's default tolerance of reference's.
    """
    inputs = len(inspect.signature(reference).parameters)

    def make_inputs(shape: Shape, dtype: torch.dtype, device: torch.device, gen: torch.Generator) -> list[Tensor]:
        return [x for _ in range(inputs) for x in random_vector(shape, dtype, device, gen)]

    def check(tensors: list[Tensor], out: Tensor | tuple[Tensor, ...], math_mode: str | None) -> tuple[bool, str]:
        want = reference(*tensors)
        got, want = (out, want) if outputs > 1 else ((out,), (want,))
        if len(got) != outputs:
            return False, f"got {len(got)} outputs, expected {outputs}"
        for i, (o, r) in enumerate(zip(got, want, strict=True)):
            ok, note = check_close(o, r)
            if not ok:
                return False, f"output {i}: {note}"
        return True, ""

    return BenchOp(
        name=name,
        make_inputs=make_inputs,
        ours=lambda tensors, variant: lambda: ours(*tensors),
        torch=lambda tensors: lambda: reference(*tensors),
        check=check,
        bytes_moved=lambda shape, itemsize: (inputs + outputs) * shape[0] * itemsize,
        flops=lambda shape: None,
        parse_size=parse_elements,
        format_shape=format_elements,
        sweep=elementwise_sweep(),
        roofline_op="copy",
    )


def _copy_call(inputs: list[Tensor]) -> Callable[[], Tensor]:
    x = inputs[0]  # an op of several inputs (multi_input): a copy of the first, whose rate is the roofline
    dst = torch.empty_like(x)  # preallocated: the copy moves exactly 2 * x.nbytes
    return lambda: dst.copy_(x)


# The bandwidth roofline of the elementwise ops: a device-to-device copy of their (first) input (torch's row only).
COPY = BenchOp(
    name="copy",
    make_inputs=random_vector,
    ours=None,
    torch=_copy_call,
    check=lambda inputs, out, math_mode: check_equal(out, inputs[0]),
    bytes_moved=lambda shape, itemsize: 2 * shape[0] * itemsize,
    flops=lambda shape: None,
    parse_size=parse_elements,
    format_shape=format_elements,
    sweep=elementwise_sweep(),
    in_all=False,
)

# square in float64 is exact for every dtype (x*x of a p-bit mantissa needs 2p bits: fits in float32 for
# half/bfloat16 and in float64 for float32), so rounding it once to the dtype is the correctly rounded result.
SQUARE = elementwise(
    "square",
    ours=lambda x: cuda_kernels.square(x),  # looked up at call time: tests patch the ops
    reference=lambda x: torch.square(x),
    exact=lambda x: x.double().square().to(x.dtype),
)


# ---------------------------------------------------------------------------------------------------------
# matmul: a (M, K) @ b (K, N), with the CUDA ladder's steps as variants

# A matrix-vector product whose one call is mostly reading (512 MiB of B in bfloat16): the skinny kernel's read
# rate against the copy's, which the 4096-wide shapes, a few microseconds of fixed cost a call, cannot show.
MATMUL_BANDWIDTH_SHAPE: Shape = (1, 16384, 16384)
MATMUL_SHAPES: list[Shape] = [(n, n, n) for n in (256, 512, 1024, 2048, 4096, 8192)] + [
    (4000, 4000, 4000),  # not a multiple of any tile size
    (8192, 1024, 4096),  # rectangular
    (1, 4096, 4096),  # a single row: matrix-vector, memory-bound
    (16, 4096, 4096),  # a few rows (a decode step's batch): still memory-bound
    (4096, 1, 4096),  # a single column: A's rows against one vector
    MATMUL_BANDWIDTH_SHAPE,
]
MATMUL_QUICK_SHAPES: list[Shape] = [(256, 256, 256), (1024, 1024, 1024), (4096, 4096, 4096), (1, 4096, 4096)]
CPU_MAX_MATMUL_MACS = 1024**3  # M*N*K: keeps 256..1024 and 1x4096x4096 (MATMUL_BANDWIDTH_SHAPE is left out)
CPU_QUICK_MATMUL_SHAPES: list[Shape] = [(256, 256, 256), (512, 512, 512)]
ITERS_MATMUL_SHAPE: Shape = (4096, 4096, 4096)
ITERS_CPU_MATMUL_SHAPE: Shape = (1024, 1024, 1024)  # the CPU kernel takes seconds at 4096
# The default CUDA sweep also times, in the same run, the rows the tensor-core targets read
# (scripts/check_targets.py): float16 and bfloat16 at these shapes get one row per tensor-core ladder step
# (besides the default variant's), and float32 at TF32 shapes a second case with TF32 allowed for ours and torch.
TENSOR_CORE_SWEEP_SHAPES: list[Shape] = [(4096, 4096, 4096), (8192, 8192, 8192)]
# ... and at this shape every other kernel forced in its own dtype (the CUDA-core steps in float32, tf32_wgmma,
# fp64_dmma), so one sweep holds docs/matmul.md's table of every kernel (scripts/results_table.py --ladder).
LADDER_SWEEP_SHAPE: Shape = (4096, 4096, 4096)
TF32_SWEEP_SHAPES: list[Shape] = [(4096, 4096, 4096)]
MAX_MATMUL_DIM = 2**20  # --size: the corpus's longest K (a million); larger is surely a typo (2^24 meant for square)
# The tensor-core steps are the ladder steps that take only these dtypes (the SIMT steps take all four).
TENSOR_CORE_DTYPES = frozenset({"float16", "bfloat16"})


def parse_matmul_size(text: str) -> Shape:
    """'4096' -> (4096, 4096, 4096); 'MxNxK' (a is MxK, b is KxN); each dimension 2^k or a number."""
    try:
        dims = [_number(d) for d in text.strip().lower().split("x")]
        if len(dims) == 1:
            dims *= 3
        if len(dims) != 3 or min(dims) < 1 or max(dims) > MAX_MATMUL_DIM:
            raise ValueError
        return tuple(dims)
    except ValueError:
        raise ValueError(f"--size {text!r}: expected N or MxNxK (M x N x K, each <= {MAX_MATMUL_DIM})") from None


def matmul_inputs(shape: Shape, dtype: torch.dtype, device: torch.device, gen: torch.Generator) -> list[Tensor]:
    """[a (M, K), b (K, N)], random normal."""
    m, n, k = shape
    return [
        torch.randn(m, k, generator=gen, dtype=dtype, device=device),
        torch.randn(k, n, generator=gen, dtype=dtype, device=device),
    ]


def matmul_ladder() -> list[tuple[int, str]]:
    """[(variant, name)] of the CUDA matmul kernels; empty for a CPU-only build."""
    return [(v, name) for v, name, _ in cuda_kernels.ops.matmul_kernels()]


def matmul_ladder_on(device: torch.device) -> list[tuple[int, str]]:
    """The CUDA matmul kernels when timing on a CUDA device; [] on the CPU (its matmul has variant 0 only)."""
    return matmul_ladder() if device.type == "cuda" else []


def matmul_step_dtypes() -> dict[int, set[str]]:
    """{variant: names of the dtypes that kernel takes}."""
    return {v: set(dtypes) for v, _, dtypes in cuda_kernels.ops.matmul_kernels()}


def matmul_step_unmet_need(variant: int, dtype_name: str, device: torch.device, tf32: bool = False) -> str:
    """Why CUDA kernel `variant` cannot run dtype_name on this CUDA device, e.g. "supports float16 and bfloat16, got
    float32" or "needs compute capability >= 8.0, ..."; "" when it can (worded as the op's error).
    tf32: asked with TF32 allowed (a case of math "tf32"), else with it off, as run.math_mode runs the case."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        return cuda_kernels.ops.matmul_unmet_need(variant, dtype_name, -1 if device.index is None else device.index)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def tensor_core_steps(ladder: list[tuple[int, str]], step_dtypes: dict[int, set[str]]) -> list[tuple[int, str]]:
    """The steps of the ladder that exist for 16-bit inputs only (mma.sync, wgmma, ...), in ladder order."""
    return [(v, name) for v, name in ladder if step_dtypes.get(v) and step_dtypes[v] <= TENSOR_CORE_DTYPES]


def own_dtype_kernels(
    ladder: list[tuple[int, str]], step_dtypes: dict[int, set[str]], dtype_name: str, math_mode: str | None
) -> list[tuple[int, str]]:
    """The kernels the default sweep forces at LADDER_SWEEP_SHAPE for a case besides the tensor-core steps: for
    float32 with TF32 off the CUDA-core rungs (numbered steps that take every dtype); for float32 with TF32 allowed
    and for float64 the special cases made for that dtype alone (tf32_wgmma, fp64_dmma)."""
    rung = {v: name[:2].isdigit() for v, name in ladder}
    if dtype_name == "float32" and math_mode is None:
        return [(v, n) for v, n in ladder if rung[v] and step_dtypes.get(v, set()) >= {"float32", "float64"}]
    if (dtype_name, math_mode) in (("float32", "tf32"), ("float64", None)):
        return [(v, n) for v, n in ladder if not rung[v] and step_dtypes.get(v) == {dtype_name}]
    return []


def plan_matmul(
    cases: list[Case], ours: list[Impl], device: torch.device, default_sweep: bool
) -> tuple[dict[Case, list[Impl]], list[Skipped]]:
    """Our matmul implementations per matmul case, and the ladder steps left out (once per step and dtype).

    Each case gets `ours` (--variant's step or, with --ladder, every step), and, in the default sweep when its
    shape is in TENSOR_CORE_SWEEP_SHAPES and its dtype is float16/bfloat16, every tensor-core step as well (each
    variant once), and at LADDER_SWEEP_SHAPE the kernels of own_dtype_kernels. A CUDA ladder step that cannot run the case's dtype on this device (wrong dtype, too old a GPU,
    not in this binary: matmul_step_unmet_need) is left out and reported, not run into an error. Variant 0 always
    runs; a variant the ladder does not know is kept, and fails like any op that raises.
    """
    ladder = matmul_ladder_on(device)
    names = dict(ladder)
    step_dtypes = matmul_step_dtypes() if ladder else {}
    extra = [Impl("ours", v, name) for v, name in tensor_core_steps(ladder, step_dtypes)] if ladder else []
    tensor_core_shapes = TENSOR_CORE_SWEEP_SHAPES if default_sweep else []
    by_case: dict[Case, list[Impl]] = {}
    skipped: dict[tuple[int, str], Skipped] = {}
    for case in cases:
        wanted = list(ours)
        if case.shape in tensor_core_shapes and case.dtype_name in TENSOR_CORE_DTYPES:
            wanted += extra
        if default_sweep and ladder and case.shape == LADDER_SWEEP_SHAPE:
            own = own_dtype_kernels(ladder, step_dtypes, case.dtype_name, case.math)
            wanted += [Impl("ours", v, name) for v, name in own]
        impls: list[Impl] = []
        for impl in wanted:
            if any(i.variant == impl.variant for i in impls):
                continue
            if impl.variant in names:
                why = matmul_step_unmet_need(impl.variant, case.dtype_name, device, tf32=case.math == "tf32")
                if why:
                    key = (impl.variant, case.dtype_name)
                    skipped.setdefault(key, Skipped(case.op, impl.variant, names[impl.variant], case.dtype_name, why))
                    continue
            impls.append(impl)
        by_case[case] = impls
    return by_case, list(skipped.values())


def _matmul_ours(inputs: list[Tensor], variant: int) -> Callable[[], Tensor]:
    a, b = inputs
    return lambda: cuda_kernels.matmul(a, b, variant=variant)


def _matmul_torch(inputs: list[Tensor]) -> Callable[[], Tensor]:
    a, b = inputs
    return lambda: torch.mm(a, b)


MATMUL = BenchOp(
    name="matmul",
    make_inputs=matmul_inputs,
    ours=_matmul_ours,
    torch=_matmul_torch,
    check=lambda inputs, out, math_mode: check_matmul(inputs[0], inputs[1], out, tf32=math_mode == "tf32"),
    bytes_moved=lambda shape, itemsize: (shape[0] * shape[2] + shape[2] * shape[1] + shape[0] * shape[1]) * itemsize,
    flops=lambda shape: 2 * math.prod(shape),
    parse_size=parse_matmul_size,
    format_shape=lambda shape: "x".join(str(d) for d in shape),
    sweep=Sweep(
        default=MATMUL_SHAPES,
        quick=MATMUL_QUICK_SHAPES,
        cpu=[s for s in MATMUL_SHAPES if math.prod(s) <= CPU_MAX_MATMUL_MACS and s != MATMUL_BANDWIDTH_SHAPE],
        cpu_quick=CPU_QUICK_MATMUL_SHAPES,
        iters=ITERS_MATMUL_SHAPE,
        cpu_iters=ITERS_CPU_MATMUL_SHAPE,
    ),
    tf32_shapes=TF32_SWEEP_SHAPES,
    ladder=lambda device: matmul_ladder_on(device),  # looked up at call time: tests fake the ladder
    plan=plan_matmul,
)


# ---------------------------------------------------------------------------------------------------------
# linear: x (M, K) @ weight (N, K).T + bias, then an activation, as nn.Linear layers call it. Two entries at the
# same shapes: linear_gelu (bias and GELU: ours fused, torch's F.gelu(F.linear(...)) and its torch.compile) and
# linear (no bias or activation, against F.linear), so that one run gives the epilogue's cost (ours across the two).

LINEAR_QUICK_SHAPES: list[Shape] = [(1024, 4096, 4096), (4096, 4096, 4096)]
LINEAR_CPU_SHAPES: list[Shape] = [(256, 512, 512), (64, 1024, 1024)]


def linear_inputs(shape: Shape, dtype: torch.dtype, device: torch.device, gen: torch.Generator) -> list[Tensor]:
    """x (M, K), weight (N, K) scaled by 1 / sqrt(K) (outputs of order 1, where GELU is not linear), bias (N,)."""
    m, n, k = shape
    x = torch.randn(m, k, generator=gen, device=device).to(dtype)
    w = (torch.randn(n, k, generator=gen, device=device) / math.sqrt(k)).to(dtype)
    b = torch.randn(n, generator=gen, device=device).to(dtype)
    return [x, w, b]


def _check_linear(inputs: list[Tensor], out: Tensor, gelu: bool, tf32: bool) -> tuple[bool | None, str]:
    """out against float64 gelu(x @ w.T + b) (or x @ w.T): matmul's bound on z, plus one more rounding, of x @ w.T
    before the bias (the paths without a fused epilogue) or of z after it (torch's chain), times GELU's largest slope
    (1.13), and the output's own rounding."""
    x, w, b = inputs
    if not gelu:
        return check_matmul(x, w.t(), out, tf32=tf32)
    product = x.double() @ w.double().t()
    z = product + b.double()
    eps = torch.finfo(x.dtype).eps
    rounding = eps * torch.maximum(product.abs(), z.abs())
    bound = 1.13 * ((tf32_matmul_error_bound if tf32 else matmul_error_bound)(x, w.t(), z) + rounding)
    ref = F.gelu(z)
    return check_within(out, ref, bound + eps * ref.abs())


def linear_entry(
    name: str, gelu: bool, sweep: Sweep | None = None, in_all: bool = True, compiled: bool = True
) -> BenchOp:
    def ours(inputs: list[Tensor], variant: int) -> Callable[[], Tensor]:
        x, w, b = inputs
        if gelu:
            return lambda: cuda_kernels.linear(x, w, b, "gelu")
        return lambda: cuda_kernels.linear(x, w)

    def reference(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
        return F.gelu(F.linear(x, w, b)) if gelu else F.linear(x, w)

    return BenchOp(
        name=name,
        make_inputs=linear_inputs,
        ours=ours,
        torch=lambda inputs: lambda: reference(*inputs),
        check=lambda inputs, out, math_mode: _check_linear(inputs, out, gelu, math_mode == "tf32"),
        bytes_moved=lambda shape, itemsize: (
            (shape[0] * shape[2] + shape[1] * shape[2] + shape[0] * shape[1]) * itemsize
        ),
        flops=lambda shape: 2 * math.prod(shape),
        parse_size=parse_matmul_size,
        format_shape=lambda shape: "x".join(str(d) for d in shape),
        sweep=sweep
        or Sweep(
            default=LINEAR_SHAPES,
            quick=LINEAR_QUICK_SHAPES,
            cpu=LINEAR_CPU_SHAPES,
            cpu_quick=LINEAR_CPU_SHAPES[:1],
            iters=(4096, 4096, 4096),
            cpu_iters=LINEAR_CPU_SHAPES[0],
        ),
        in_all=in_all,
        compiled=(lambda inputs: functools.partial(_compiled(reference), *inputs)) if compiled else None,
    )


LINEAR_GELU = linear_entry("linear_gelu", gelu=True)
LINEAR = linear_entry("linear", gelu=False)
# The corpus, x @ weight.T without bias against F.linear (cuBLAS), every shape: `--op matmul_models` (not in all: 143
# shapes). --quick takes the 2048-token rows of the models and the awkward shapes; the CPU, a few small shapes.
MATMUL_MODELS = linear_entry(
    "matmul_models",
    gelu=False,
    sweep=Sweep(
        default=CORPUS_SHAPES,
        quick=[s for s in CORPUS_SHAPES if s[0] == 2048] + AWKWARD_SHAPES,
        cpu=[(m, n, k) for (m, n, k) in CORPUS_SHAPES if n == 768 and k == 768 and m <= 256],
        cpu_quick=[(16, 768, 768)],
        iters=(2048, 4096, 4096),
        cpu_iters=(16, 768, 768),
    ),
    in_all=False,
    compiled=False,
)


# ---------------------------------------------------------------------------------------------------------
# Batched matmul: a (batch, M, K) @ b (batch, K, N), torch.bmm's shapes, against torch.matmul (cuBLAS's batched
# GEMM): `--op matmul_batched` (not in all). A shape is (batch, M, N, K, k_major_b); k_major_b = 1 gives b as the
# transposed view of a (batch, N, K) tensor, as attention's Q @ K^T reads K.


def parse_batched_size(text: str) -> Shape:
    """'32x2048x2048x128' -> (32, 2048, 2048, 128, 0): batch x M x N x K; a trailing 't' (…x128t) takes b K-major."""
    try:
        body = text.strip().lower()
        k_major = body.endswith("t")
        dims = [_number(d) for d in body.removesuffix("t").split("x")]
        if len(dims) != 4 or min(dims) < 1 or max(dims[1:]) > MAX_MATMUL_DIM:
            raise ValueError
        return (*dims, int(k_major))
    except ValueError:
        raise ValueError(f"--size {text!r}: expected BxMxNxK, or BxMxNxKt for b K-major") from None


def batched_inputs(shape: Shape, dtype: torch.dtype, device: torch.device, gen: torch.Generator) -> list[Tensor]:
    """[a (batch, M, K), b (batch, K, N)], random normal scaled by 1 / sqrt(K); b a transposed (batch, N, K) tensor
    when k_major_b."""
    batch, m, n, k, k_major = shape
    a = (torch.randn(batch, m, k, generator=gen, device=device) / math.sqrt(k)).to(dtype)
    if k_major:
        b = torch.randn(batch, n, k, generator=gen, device=device).to(dtype).transpose(1, 2)
    else:
        b = torch.randn(batch, k, n, generator=gen, device=device).to(dtype)
    return [a, b]


def _check_batched(inputs: list[Tensor], out: Tensor, math_mode: str | None) -> tuple[bool | None, str]:
    """Each matrix of out against its float64 product (check_matmul's bound)."""
    a, b = inputs
    for i in range(a.shape[0]):
        ok, message = check_matmul(a[i], b[i], out[i], tf32=math_mode == "tf32")
        if not ok:
            return ok, f"matrix {i}: {message}"
    return True, ""


MATMUL_BATCHED = BenchOp(
    name="matmul_batched",
    make_inputs=batched_inputs,
    ours=lambda inputs, variant: lambda: cuda_kernels.matmul(*inputs),
    torch=lambda inputs: lambda: torch.matmul(*inputs),
    check=_check_batched,
    bytes_moved=lambda shape, itemsize: shape[0] * (shape[1] * shape[3] + shape[3] * shape[2] + shape[1] * shape[2]) * itemsize,
    flops=lambda shape: 2 * math.prod(shape[:4]),
    parse_size=parse_batched_size,
    format_shape=lambda shape: "x".join(str(d) for d in shape[:4]) + ("t" if shape[4] else ""),
    sweep=Sweep(
        default=BATCHED_SHAPES,
        quick=BATCHED_SHAPES[:2] + BATCHED_SHAPES[4:6],
        cpu=[(4, 64, 64, 32, 1), (4, 64, 32, 64, 0)],
        cpu_quick=[(4, 64, 64, 32, 1)],
        iters=BATCHED_SHAPES[0],
        cpu_iters=(4, 64, 64, 32, 1),
    ),
    in_all=False,
)  # fmt: skip


# ---------------------------------------------------------------------------------------------------------
# Row-wise ops (rms_norm, and those `python -m cuda_kernels.new NAME --kind rowwise` adds): x of (rows, n), reduced
# over each row, forward and backward. Each is memory-bound: its roofline is a copy of x in the same case (a row
# "copy:<op>" of its own, so the forward's and backward's copies at one shape stay two records), compared by
# bytes a second, and it is timed beside torch eager and torch.compile.

# The shapes of docs/rowwise.md's targets (rows x n), then longer rows (the two-pass CUDA path).
ROWWISE_SHAPES: list[Shape] = [(8192, 4096), (32768, 8192), (4096, 1024), (65536, 256), (4096, 16384), (256, 2**18)]
ROWWISE_QUICK_SHAPES: list[Shape] = [(8192, 4096), (4096, 1024)]
ROWWISE_CPU_SHAPES: list[Shape] = [(256, 1024), (64, 4096)]
ROWWISE_CPU_QUICK_SHAPES: list[Shape] = [(256, 1024)]
MAX_ROWWISE_ELEMENTS = 2**31  # --size: larger is surely a typo


def parse_rows(text: str) -> Shape:
    """'8192x4096' -> (8192, 4096): rows x row length, each 2^k or a number."""
    try:
        dims = tuple(_number(d) for d in text.strip().lower().split("x"))
        if len(dims) != 2 or min(dims) < 1 or math.prod(dims) > MAX_ROWWISE_ELEMENTS:
            raise ValueError
        return dims
    except ValueError:
        raise ValueError(f"--size {text!r}: expected ROWSxN (rows x row length)") from None


def format_rows(shape: Shape) -> str:
    """'8192x4096', '256x2^18'."""
    return "x".join(format_elements((d,)) if d > 1024 and d & (d - 1) == 0 else str(d) for d in shape)


def rowwise_sweep() -> Sweep:
    return Sweep(
        default=ROWWISE_SHAPES,
        quick=ROWWISE_QUICK_SHAPES,
        cpu=ROWWISE_CPU_SHAPES,
        cpu_quick=ROWWISE_CPU_QUICK_SHAPES,
        iters=(8192, 4096),
        cpu_iters=(256, 1024),
    )


def row_inputs(shape: Shape, dtype: torch.dtype, device: torch.device, gen: torch.Generator) -> list[Tensor]:
    """[x (rows, n), w (n,), dy (rows, n)]: random normal. The forward reads x and w; the backward all three."""
    rows, n = shape
    return [
        torch.randn(rows, n, generator=gen, dtype=dtype, device=device),
        torch.randn(n, generator=gen, dtype=dtype, device=device),
        torch.randn(rows, n, generator=gen, dtype=dtype, device=device),
    ]


# (rtol, atol) of a row-wise op's result against torch's in float64: a few units of the dtype's last place (float32
# adds a float32 sum over the row and rsqrtf's 2 ulp). A backward's dw sums over rows: its atol grows with them.
ROW_TOL = {torch.float32: (2e-5, 2e-5), torch.float64: (1e-10, 1e-10), torch.float16: (2e-3, 2e-3),
           torch.bfloat16: (1.6e-2, 1.6e-2)}  # fmt: skip


def check_rows(outs: Sequence[Tensor], refs: Sequence[Tensor], scales: Sequence[float]) -> tuple[bool, str]:
    """Each output within ROW_TOL (atol times its scale) of its float64 reference."""
    for i, (out, ref, scale) in enumerate(zip(outs, refs, scales, strict=True)):
        rtol, atol = ROW_TOL[out.dtype]
        try:
            torch.testing.assert_close(out.double(), ref.double(), rtol=rtol, atol=atol * scale)
        except AssertionError as err:
            return False, f"output {i}: " + str(err).replace("\n", " ")
    return True, ""


def row_copy(name: str) -> BenchOp:
    """The roofline of row-wise op `name`: a copy of its x into a preallocated tensor (2 x.nbytes), torch's row only."""

    def copy_x(inputs: list[Tensor]) -> Callable[[], Tensor]:
        dst = torch.empty_like(inputs[0])
        return lambda: dst.copy_(inputs[0])

    return BenchOp(
        name=f"copy:{name}",
        make_inputs=row_inputs,
        ours=None,
        torch=copy_x,
        check=lambda inputs, out, math_mode: check_equal(out, inputs[0]),
        bytes_moved=lambda shape, itemsize: 2 * math.prod(shape) * itemsize,
        flops=lambda shape: None,
        parse_size=parse_rows,
        format_shape=format_rows,
        sweep=rowwise_sweep(),
        in_all=False,
    )


def _compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """torch.compile(fn) for one case's shapes (dynamic=False: kernels specialized to them, as for a model), with
    dynamo's caches emptied first, so that many cases never reach its recompile limit and fall back to eager."""
    torch._dynamo.reset()
    return torch.compile(fn, dynamic=False)


def _forward_call(fn: Callable[[Tensor, Tensor], Tensor], inputs: list[Tensor]) -> Callable[[], Tensor]:
    return lambda: fn(inputs[0], inputs[1])


def _grad_call(fn: Callable[[Tensor, Tensor], Tensor], inputs: list[Tensor]) -> Callable[[], Any]:
    """The backward of y = fn(x, w) for the gradient dy, as a call to time: the graph is built once here, and each
    call runs only its backward (retain_graph keeps it for the next)."""
    x, w, dy = inputs
    xr, wr = x.detach().requires_grad_(), w.detach().requires_grad_()
    y = fn(xr, wr)
    return lambda: torch.autograd.grad(y, (xr, wr), dy, retain_graph=True)


def rowwise(
    name: str,
    forward: Callable[[Tensor, Tensor], Tensor],
    backward: Callable[[Tensor, Tensor, Tensor], tuple[Tensor, Tensor]],
    reference: Callable[[Tensor, Tensor], Tensor],
) -> tuple[BenchOp, BenchOp, BenchOp, BenchOp]:
    """The entries of a row-wise op y = f(x, w) (x (rows, n), w (n,)): (forward, its copy, backward, its copy).

    forward(x, w) calls our op; backward(dy, x, w) our backward, giving (dx, dw); reference(x, w) is torch's way to
    compute the forward (timed eagerly and compiled, and differentiated by autograd for the backward's rows).
    Results are checked against reference in float64. Bytes: the forward reads x and w and writes y; the backward
    reads x, dy and w and writes dx and dw.
    """

    def reference_grads(inputs: list[Tensor]) -> tuple[Tensor, Tensor]:
        x, w, dy = inputs
        xd, wd = x.double().requires_grad_(), w.double().requires_grad_()
        return torch.autograd.grad(reference(xd, wd), (xd, wd), dy.double())

    def check_forward(inputs: list[Tensor], out: Tensor, math_mode: str | None) -> tuple[bool, str]:
        x, w, _ = inputs
        return check_rows([out], [reference(x.double(), w.double())], [1.0])

    def check_backward(inputs: list[Tensor], out: Any, math_mode: str | None) -> tuple[bool, str]:
        rows = inputs[0].shape[0]
        return check_rows(list(out), list(reference_grads(inputs)), [4.0, 4.0 * rows**0.5])

    forward_op = BenchOp(
        name=name,
        make_inputs=row_inputs,
        ours=lambda inputs, variant: lambda: forward(inputs[0], inputs[1]),
        torch=lambda inputs: lambda: reference(inputs[0], inputs[1]),
        check=check_forward,
        bytes_moved=lambda shape, itemsize: (2 * math.prod(shape) + shape[1]) * itemsize,
        flops=lambda shape: None,
        parse_size=parse_rows,
        format_shape=format_rows,
        sweep=rowwise_sweep(),
        roofline_op=f"copy:{name}",
        compiled=lambda inputs: _forward_call(_compiled(reference), inputs),
    )
    backward_op = BenchOp(
        name=f"{name}_backward",
        make_inputs=row_inputs,
        ours=lambda inputs, variant: lambda: backward(inputs[2], inputs[0], inputs[1]),
        torch=lambda inputs: _grad_call(reference, inputs),
        check=check_backward,
        bytes_moved=lambda shape, itemsize: (3 * math.prod(shape) + 2 * shape[1]) * itemsize,
        flops=lambda shape: None,
        parse_size=parse_rows,
        format_shape=format_rows,
        sweep=rowwise_sweep(),
        roofline_op=f"copy:{name}_backward",
        compiled=lambda inputs: _grad_call(_compiled(reference), inputs),
    )
    return forward_op, row_copy(name), backward_op, row_copy(f"{name}_backward")


RMS_NORM_OPS = rowwise(
    "rms_norm",
    forward=lambda x, w: cuda_kernels.rms_norm(x, w),  # looked up at call time: tests patch the ops
    backward=lambda dy, x, w: torch.ops.cuda_kernels.rms_norm_backward(dy, x, w, None),
    reference=lambda x, w: F.rms_norm(x, (x.shape[-1],), w),
)


# ---------------------------------------------------------------------------------------------------------
# End to end: examples/llama.py's prefill (a Llama-style decoder), torch's layers ("torch") against ours
# (cuda_kernels.Linear with swiglu, cuda_kernels.rms_norm; "ours"), the same weights. Shape: batch x tokens. The
# example's default config on CUDA, its tiny one on the CPU. Run it with --op llama_prefill (not in --op all: it
# builds two models per dtype); it needs a checkout (examples/ is not part of the package).

_LLAMA_MODELS: dict[tuple[torch.dtype, str], tuple[Any, Any, Any]] = {}  # (dtype, device) -> (example, torch, ours)


def _llama(dtype: torch.dtype, device: torch.device) -> tuple[Any, Any, Any]:
    """examples/llama.py (loaded by path) and its two models for dtype on device, built once per process."""
    key = (dtype, str(device))
    if key not in _LLAMA_MODELS:
        import importlib.util
        import pathlib
        import sys

        path = pathlib.Path(cuda_kernels.__file__).resolve().parent.parent / "examples" / "llama.py"
        if not path.exists():
            raise RuntimeError(f"llama_prefill needs examples/llama.py from a checkout; {path} does not exist")
        module = sys.modules.get("examples_llama")
        if module is None:
            spec = importlib.util.spec_from_file_location("examples_llama", path)
            module = importlib.util.module_from_spec(spec)
            sys.modules["examples_llama"] = module  # dataclasses look their module up there
            spec.loader.exec_module(module)
        config = module.LlamaConfig.tiny() if device.type == "cpu" else module.LlamaConfig()
        torch_model = module.build_model(config, "torch", device, dtype).eval()
        ours = module.build_model(config, "ours", device, dtype).eval()
        ours.load_state_dict(torch_model.state_dict())
        _LLAMA_MODELS[key] = (module, torch_model, ours)
    return _LLAMA_MODELS[key]


def llama_inputs(shape: Shape, dtype: torch.dtype, device: torch.device, gen: torch.Generator) -> list[Tensor]:
    """[tokens (batch, seq), an empty tensor of the case's dtype on its device (which models the calls use)]."""
    _, torch_model, _ = _llama(dtype, device)
    batch, seq = shape
    tokens = torch.randint(0, torch_model.config.vocab_size, (batch, seq), generator=gen, device=device)
    return [tokens, torch.empty(0, dtype=dtype, device=device)]


def _llama_forward(inputs: list[Tensor], which: int) -> Callable[[], Tensor]:
    """The prefill of model `which` (1: torch's layers, 2: ours) on the case's tokens, without autograd."""
    tokens, like = inputs
    model = _llama(like.dtype, like.device)[which]

    def call() -> Tensor:
        with torch.no_grad():
            return model(tokens)

    return call


def _check_llama(inputs: list[Tensor], out: Tensor, math_mode: str | None) -> tuple[bool, str]:
    """Our logits against torch's layers' on the same weights, as the norm of the difference relative to theirs:
    float32 differs in the order of additions only; 16-bit types round differently (ours once per fused op)."""
    theirs = _llama_forward(inputs, 1)().double()
    rel = ((out.double() - theirs).norm() / theirs.norm()).item()
    bound = 1e-4 if out.dtype in (torch.float32, torch.float64) else 3e-2
    return (
        rel <= bound,
        "" if rel <= bound else f"logits differ from torch's layers' by {rel:.3g} (norm; bound {bound})",
    )


LLAMA_PREFILL = BenchOp(
    name="llama_prefill",
    make_inputs=llama_inputs,
    ours=lambda inputs, variant: _llama_forward(inputs, 2),
    torch=lambda inputs: _llama_forward(inputs, 1),
    check=_check_llama,
    bytes_moved=lambda shape, itemsize: 0,
    flops=lambda shape: None,
    parse_size=parse_rows,
    format_shape=lambda shape: f"{shape[0]}x{shape[1]}",
    sweep=Sweep(
        default=[(8, 1024)], quick=[(8, 1024)], cpu=[(2, 32)], cpu_quick=[(2, 32)], iters=(8, 1024), cpu_iters=(2, 32)
    ),  # fmt: skip
    in_all=False,
)


# ---------------------------------------------------------------------------------------------------------
# The table, in the order a run goes through it

OPS_IN_ORDER: tuple[BenchOp, ...] = (
    SQUARE,
    COPY,
    MATMUL,
    LINEAR_GELU,
    LINEAR,
    MATMUL_MODELS,
    MATMUL_BATCHED,
    *RMS_NORM_OPS,
    LLAMA_PREFILL,
    # python -m cuda_kernels.new adds new ops above this line
)
OPS: dict[str, BenchOp] = {op.name: op for op in OPS_IN_ORDER}


def roofline_ops() -> set[str]:
    """The ops that serve as another op's roofline (their rows belong to that op's cases in tables and plots)."""
    return {op.roofline_op for op in OPS_IN_ORDER if op.roofline_op}


def shape_of(name: str, shape: Sequence[int]) -> str:
    """An op's shape as the tables print it; a JSON op the table no longer has: 'AxB'."""
    op = OPS.get(name)
    return op.format_shape(tuple(shape)) if op else "x".join(str(d) for d in shape)
