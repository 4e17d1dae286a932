"""A table of bad or unusual input for both ops on both devices: each row gives the right result or a clear error.

Every row says what it expects:
  OK               the call succeeds; square is compared exactly with x.double().square().to(dtype) (exact for all
                   four dtypes), matmul with conftest.assert_matmul_close; the inputs must be left unchanged, the
                   output contiguous, on the input's device. On CUDA every matmul row runs variant 0 and each step of
                   the kernel ladder.
  Err(type, regex) the call raises `type` and the message matches `regex`, which names the op
                   ("cuda_kernels.square" / "cuda_kernels.matmul", or the dispatcher's "cuda_kernels::square")
                   and the problem.
After every row on CUDA the device is synchronized and must still work (no sticky error, no crash).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from conftest import CUDA_SKIP_REASON, DEVICES, DTYPES, assert_matmul_close, assert_matmul_nd_close, rand

import cuda_kernels
from cuda_kernels.ops import matmul_cuda_variants

SQ = "cuda_kernels.square"
MM = "cuda_kernels.matmul"
FLOATS = "must be float32, float64, float16 or bfloat16, got"


@dataclass(frozen=True)
class Err:
    """The call must raise `exc` with a message that matches `regex` (re.search, DOTALL)."""

    exc: type[BaseException]
    regex: str


OK = "ok"


@dataclass(frozen=True)
class Case:
    """One row: `make(device)` builds the positional arguments of `op` (the public cuda_kernels.<op>).

    expect: OK, an Err, or {device: OK | Err} where the devices differ. `only`: the devices the row runs on;
    device-independent rows (meta tensors, cpu+cuda pairs built by the row itself) run once. `extra(args, out)`
    adds row-specific checks to an OK row. `heavy`: a big kernel, skipped under the slow sanitizer tools
    (tests/conftest.py).
    """

    id: str
    op: str  # "square" | "matmul"
    make: Callable[[str], tuple]
    expect: object
    variant: int = 0
    only: tuple[str, ...] = ("cpu", "cuda")
    needs_cuda: bool = False
    extra: Callable | None = None
    heavy: bool = False
    api_error: bool = False  # the row makes a CUDA API call fail on purpose (skipped under make sanitize)


def _special_values(dtype: torch.dtype, device: str) -> torch.Tensor:
    """0, -0, +-1, +-inf, nan, +-max (overflows to inf when squared), smallest normal and subnormal, odd values."""
    fi = torch.finfo(dtype)
    vals = [0.0, -0.0, 1.0, -1.0, float("inf"), -float("inf"), float("nan"), fi.max, -fi.max, fi.smallest_normal,
            fi.smallest_normal * fi.eps, -fi.tiny * 3, 1 + fi.eps, 3.0, 1e-3, -7.5, 255.0, 65504.0]  # fmt: skip
    return torch.tensor(vals, dtype=torch.float64).to(dtype=dtype, device=device)


def _misaligned(n: int, offset: int, dtype: torch.dtype, device: str, seed: int = 0) -> torch.Tensor:
    """A contiguous 1-D tensor of n elements whose data pointer is `offset` elements past a 16-byte boundary."""
    x = rand(n + offset, dtype=dtype, device=device, seed=seed)[offset:]
    assert x.is_contiguous() and offset * x.element_size() % 16 != 0
    return x


def _sq_grad_check(args: tuple, out: torch.Tensor) -> None:
    """Backward of sum(square(x)) is 2x (exact: doubling and multiplying by 1 do not round)."""
    (x,) = args
    assert out.requires_grad
    out.sum().backward()
    torch.testing.assert_close(x.grad, 2 * x.detach(), rtol=0, atol=0)


def _mm_grad_check(args: tuple, out: torch.Tensor) -> None:
    """Backward of sum(a @ b): grad_a = 1 @ b^T, grad_b = a^T @ 1, checked like any matmul result."""
    a, b = args
    out.sum().backward()
    ones = torch.ones_like(out)
    assert_matmul_close(a.grad, ones, b.detach().t())
    assert_matmul_close(b.grad, a.detach().t(), ones)


def _all_zero(args: tuple, out: torch.Tensor) -> None:
    assert (out == 0).all() and not out.isnan().any()


def _build_cases() -> list[Case]:
    cases: list[Case] = []
    add = cases.append

    # --- dtypes the ops do not take, each separately -------------------------------------------------------------
    for dt, name in [(torch.bool, "Bool"), (torch.uint8, "Byte"), (torch.int8, "Char"), (torch.int16, "Short"),
                     (torch.int32, "Int"), (torch.int64, "Long"), (torch.complex64, "ComplexFloat"),
                     (torch.complex128, "ComplexDouble"), (torch.float8_e4m3fn, "Float8_e4m3fn")]:  # fmt: skip

        def make_sq(d, dt=dt):
            return (torch.ones(3, 4, device=d).to(dt),)

        add(Case(f"sq-dtype-{name}", "square", make_sq, Err(RuntimeError, rf"{SQ}: x {FLOATS} {name}")))
    for dt, name, which in [(torch.int64, "Long", "a"), (torch.int32, "Int", "b"), (torch.bool, "Bool", "a"),
                            (torch.complex64, "ComplexFloat", "b"), (torch.uint8, "Byte", "a")]:  # fmt: skip

        def make_mm(d, dt=dt, which=which):
            bad, good = torch.ones(3, 3, device=d).to(dt), torch.ones(3, 3, device=d)
            return (bad, good) if which == "a" else (good, bad)

        add(Case(f"mm-dtype-{name}-{which}", "matmul", make_mm, Err(RuntimeError, rf"{MM}: {which} {FLOATS} {name}")))
    add(Case("mm-dtype-both-int", "matmul", lambda d: (torch.ones(2, 2, dtype=torch.int32, device=d),) * 2,
             Err(RuntimeError, rf"{MM}: a {FLOATS} Int")))  # fmt: skip

    # --- mixed dtypes ---------------------------------------------------------------------------------------------
    for da, db in [(torch.float32, torch.float64), (torch.float16, torch.bfloat16), (torch.float64, torch.float16)]:
        add(Case(f"mm-mixed-{da}-{db}".replace("torch.", ""), "matmul",
                 lambda d, da=da, db=db: (rand(3, 4, dtype=da, device=d), rand(4, 2, dtype=db, device=d)),
                 Err(RuntimeError, rf"{MM}: a and b must have the same dtype, got \w+ and \w+")))  # fmt: skip

    # --- mixed devices (the row's device is where `a` lives; `b` is on the other one) -----------------------------
    def mixed(d):
        other = "cpu" if d == "cuda" else "cuda"
        return rand(3, 4, device=d), rand(4, 2, device=other)

    add(Case("mm-mixed-devices", "matmul", mixed,
             Err(RuntimeError, rf"{MM}: a and b must be on the same device, got (cpu|cuda:0) and (cpu|cuda:0)"),
             needs_cuda=True))  # fmt: skip

    # --- wrong ranks and shapes -----------------------------------------------------------------------------------
    rank_rows = [
        ("a-0d", lambda d: (torch.tensor(2.0, device=d), rand(2, 2, device=d)),
         r"a and b must have at least 1 dimension each, got 0-D and 2-D"),
        ("b-0d", lambda d: (rand(2, 2, device=d), torch.tensor(2.0, device=d)),
         r"a and b must have at least 1 dimension each, got 2-D and 0-D"),
        ("batch-mismatch", lambda d: (rand(2, 3, 4, device=d), rand(3, 4, 2, device=d)),
         r"the batch dimensions of a \[2, 3, 4\] and b \[3, 4, 2\] do not broadcast \(\[2\] and \[3\]\)"),
        ("batched-inner-mismatch", lambda d: (rand(2, 3, 4, device=d), rand(2, 5, 2, device=d)),
         r"inner dimensions differ: a is \[2, 3, 4\] and b is \[2, 5, 2\]"),
        ("inner-mismatch", lambda d: (rand(3, 4, device=d), rand(5, 2, device=d)),
         r"inner dimensions differ: a is \[3, 4\] and b is \[5, 2\]"),
        ("inner-mismatch-transposed", lambda d: (rand(3, 4, device=d), rand(4, 3, device=d).t()),
         r"inner dimensions differ"),
        ("inner-mismatch-empty", lambda d: (rand(3, 0, device=d), rand(1, 2, device=d)), r"inner dimensions differ"),
    ]  # fmt: skip
    for name, make, msg in rank_rows:
        add(Case(f"mm-{name}", "matmul", make, Err(RuntimeError, rf"{MM}: {msg}")))
    # torch.matmul's other ranks: a 1-D operand, a batched a (its batch dims fold into the rows).
    for name, make in [("a-1d", lambda d: (rand(4, device=d), rand(4, 2, device=d))),
                       ("b-1d", lambda d: (rand(2, 4, device=d), rand(4, device=d))),
                       ("both-1d", lambda d: (rand(4, device=d), rand(4, device=d))),
                       ("a-3d", lambda d: (rand(2, 3, 4, device=d), rand(4, 2, device=d))),
                       ("b-3d", lambda d: (rand(3, 4, device=d), rand(2, 4, 2, device=d))),
                       ("both-3d-broadcast", lambda d: (rand(2, 1, 3, 4, device=d), rand(5, 4, 2, device=d)))]:  # fmt: skip
        add(Case(f"mm-{name}", "matmul", make, OK))

    # --- undefined (None) arguments and bad variants --------------------------------------------------------------
    # square(None): no tensor to dispatch on; the Python wrapper says so (cuda_kernels/ops.py).
    add(Case("sq-none", "square", lambda d: (None,),
             Err(RuntimeError, rf"{SQ}: x is an undefined tensor"), only=("cpu",)))  # fmt: skip
    add(Case("mm-none-a", "matmul", lambda d: (None, rand(2, 2, device=d)),
             Err(RuntimeError, rf"{MM}: a is an undefined tensor")))  # fmt: skip
    add(Case("mm-none-b", "matmul", lambda d: (rand(2, 2, device=d), None),
             Err(RuntimeError, rf"{MM}: b is an undefined tensor")))  # fmt: skip
    two = lambda d: (rand(3, 4, device=d), rand(4, 5, device=d))  # noqa: E731
    add(Case("mm-variant-negative", "matmul", two, Err(RuntimeError, rf"{MM}: unknown variant -1"), variant=-1))
    add(Case("mm-variant-too-large", "matmul", two, {
        "cpu": Err(RuntimeError, rf"{MM}: variant 1000000 is a CUDA kernel; the CPU has a single kernel"),
        "cuda": Err(RuntimeError, rf"{MM}: unknown variant 1000000; use 0 \(auto\) or one of 1 "),
    }, variant=10**6))  # fmt: skip
    add(Case("mm-variant-1-on-cpu", "matmul", two,
             Err(RuntimeError, rf"{MM}: variant 1 is a CUDA kernel; the CPU has a single kernel \(variant=0\)"),
             variant=1, only=("cpu",)))  # fmt: skip
    # Not an int: the dispatcher's schema check, naming the op and the argument.
    add(Case("mm-variant-float", "matmul", two,
             Err(RuntimeError, r"cuda_kernels::matmul\(\) Expected a value of type 'int' for argument 'variant'"),
             variant=1.5, only=("cpu",)))  # fmt: skip

    # --- meta tensors: the fake kernels give shape/dtype and the same errors --------------------------------------
    meta = ("cpu",)  # device-independent: run once
    for dt in DTYPES:
        add(
            Case(
                f"sq-meta-{dt}".replace("torch.", ""),
                "square",
                lambda d, dt=dt: (torch.empty(3, 0, 5, dtype=dt, device="meta").expand(2, 3, 0, 5),),
                OK,
                only=meta,
            )
        )
        add(Case(f"mm-meta-{dt}".replace("torch.", ""), "matmul",
                 lambda d, dt=dt: (torch.empty(7, 5, dtype=dt, device="meta"),
                                   torch.empty(5, 3, dtype=dt, device="meta").t().contiguous().t()), OK, only=meta))  # fmt: skip
    add(Case("sq-meta-int", "square", lambda d: (torch.empty(3, dtype=torch.int32, device="meta"),),
             Err(RuntimeError, rf"{SQ}: x {FLOATS} torch.int32"), only=meta))  # fmt: skip
    add(Case("mm-meta-inner-mismatch", "matmul",
             lambda d: (torch.empty(3, 4, device="meta"), torch.empty(5, 2, device="meta")),
             Err(RuntimeError, rf"{MM}: inner dimensions differ"), only=meta))  # fmt: skip
    add(Case("mm-meta-rank", "matmul", lambda d: (torch.empty((), device="meta"), torch.empty(3, 2, device="meta")),
             Err(RuntimeError, rf"{MM}: a and b must have at least 1 dimension"), only=meta))  # fmt: skip
    add(Case("mm-meta-variant-negative", "matmul",
             lambda d: (torch.empty(3, 4, device="meta"), torch.empty(4, 2, device="meta")),
             Err(RuntimeError, rf"{MM}: unknown variant -2"), variant=-2, only=meta))  # fmt: skip
    add(Case("mm-meta-output-too-big", "matmul",
             lambda d: (torch.empty(2**40, 1, device="meta"), torch.empty(1, 2**40, device="meta")),
             Err(RuntimeError, rf"{MM}: the output would have shape \[1099511627776, 1099511627776\]"), only=meta))  # fmt: skip

    # --- zero-size and 0-d ----------------------------------------------------------------------------------------
    for dt in DTYPES:
        add(Case(f"sq-0d-{dt}".replace("torch.", ""), "square",
                 lambda d, dt=dt: (torch.tensor(-3.25, dtype=dt, device=d),), OK))  # fmt: skip
    for shape in [(0,), (3, 0, 5), (0, 0), (1, 0)]:
        add(Case(f"sq-empty-{shape}", "square", lambda d, s=shape: (torch.empty(s, device=d),), OK))
    for m, k, n in [(0, 5, 3), (4, 5, 0), (0, 5, 0), (0, 0, 0), (1, 1, 1)]:
        add(Case(f"mm-size-{m}x{k}x{n}", "matmul",
                 lambda d, m=m, k=k, n=n: (rand(m, k, device=d), rand(k, n, device=d, seed=1)), OK))  # fmt: skip
    for dt in DTYPES:
        add(Case(f"mm-K0-zeros-{dt}".replace("torch.", ""), "matmul",
                 lambda d, dt=dt: (torch.empty(6, 0, dtype=dt, device=d), torch.empty(0, 4, dtype=dt, device=d)),
                 OK, extra=_all_zero))  # fmt: skip
    # K = 0 from views of non-empty storage (a must not read past its end).
    add(Case("mm-K0-view", "matmul", lambda d: (rand(6, 5, device=d)[:, 5:], rand(5, 4, device=d)[5:]), OK,
             extra=_all_zero))  # fmt: skip

    # --- non-contiguous, overlapping, stride-0 views --------------------------------------------------------------
    view_rows = [
        ("transposed", lambda d: (rand(37, 53, device=d).t(),)),
        ("step-slice", lambda d: (rand(40, 60, device=d)[1::3, ::2],)),
        ("expanded-stride0", lambda d: (rand(1, 33, device=d).expand(17, 33),)),
        ("expanded-scalar", lambda d: (torch.tensor(1.5, device=d).expand(4, 5, 6),)),
        ("overlapping-as-strided", lambda d: (rand(100, device=d).as_strided((20, 9), (3, 2), 1),)),
        ("channels-last-4d", lambda d: (rand(2, 3, 5, 7, device=d).contiguous(memory_format=torch.channels_last),)),
        ("permuted-4d", lambda d: (rand(2, 3, 5, 7, device=d).permute(3, 1, 0, 2),)),
        ("transposed-4d", lambda d: (rand(4, 6, 8, 10, device=d).transpose(1, 3),)),
        # 9 dims that cannot merge (more than the CUDA strided kernel carries: it copies first).
        ("9d-strided", lambda d: (rand(*([3] * 9), device=d)[(slice(None, None, 2),) * 9],)),
        ("negative-step-flip", lambda d: (rand(9, 10, device=d).flip(0),)),
        ("diagonal", lambda d: (rand(50, 50, device=d).diagonal(),)),
        ("unfold-overlapping-windows", lambda d: (rand(100, device=d).unfold(0, 10, 3),)),
    ]
    for name, make in view_rows:
        add(Case(f"sq-{name}", "square", make, OK))
    mm_view_rows = [
        ("a-transposed", lambda d: (rand(40, 30, device=d).t(), rand(40, 20, device=d, seed=1))),
        ("b-transposed", lambda d: (rand(30, 40, device=d), rand(20, 40, device=d, seed=1).t())),
        ("both-step-slices", lambda d: (rand(60, 90, device=d)[::2, 1::3], rand(90, 50, device=d, seed=1)[::3, ::2])),
        ("a-expanded-row", lambda d: (rand(1, 33, device=d).expand(45, 33), rand(33, 17, device=d, seed=1))),
        ("b-expanded-col", lambda d: (rand(45, 33, device=d), rand(33, 1, device=d, seed=1).expand(33, 17))),
        ("both-expanded-scalar", lambda d: (torch.tensor(0.5, device=d).expand(9, 7),
                                            torch.tensor(-2.0, device=d).expand(7, 11))),
        ("overlapping-as-strided", lambda d: (rand(500, device=d).as_strided((20, 30), (7, 3), 2),
                                              rand(500, device=d, seed=1).as_strided((30, 10), (1, 5), 1))),
        ("same-tensor-twice", lambda d: (lambda x: (x, x))(rand(31, 31, device=d))),
        ("b-is-a-transposed", lambda d: (lambda x: (x, x.t()))(rand(19, 23, device=d))),
    ]  # fmt: skip
    for name, make in mm_view_rows:
        add(Case(f"mm-{name}", "matmul", make, OK))

    # --- storage offsets that break 16-byte alignment, every dtype ------------------------------------------------
    for dt in DTYPES:
        size = torch.empty((), dtype=dt).element_size()
        for off in sorted({1, 16 // size - 1} - {0}):
            add(Case(f"sq-misaligned-{dt}-off{off}".replace("torch.", ""), "square",
                     lambda d, dt=dt, off=off: (_misaligned(1031, off, dt, d),), OK))  # fmt: skip
            # contiguous 2-D view whose rows are misaligned too: x[1:] of a (R, odd C) tensor
            add(Case(f"sq-misaligned-2d-{dt}-off{off}".replace("torch.", ""), "square",
                     lambda d, dt=dt, off=off: (_misaligned(33 * 19, off, dt, d).view(33, 19)[1:],), OK))  # fmt: skip
            add(Case(f"mm-misaligned-{dt}-off{off}".replace("torch.", ""), "matmul",
                     lambda d, dt=dt, off=off: (_misaligned(37 * 41, off, dt, d).view(37, 41),
                                                _misaligned(41 * 29, off, dt, d, seed=1).view(41, 29)), OK))  # fmt: skip
            # rows of a pitch that is not a multiple of 4 elements, starting one row in
            add(Case(f"mm-row-offset-{dt}-off{off}".replace("torch.", ""), "matmul",
                     lambda d, dt=dt, off=off: (rand(38, 43, dtype=dt, device=d)[off:, off:],
                                                rand(44, 21, dtype=dt, device=d, seed=1)[off + 1 :, 1:]), OK))  # fmt: skip

    # --- special values (exact for square: inf, nan, -0, subnormals, overflow to inf) -----------------------------
    for dt in DTYPES:
        add(Case(f"sq-special-values-{dt}".replace("torch.", ""), "square",
                 lambda d, dt=dt: (_special_values(dt, d),), OK))  # fmt: skip

    # --- autograd, inference mode, parameters ---------------------------------------------------------------------
    add(Case("sq-requires-grad", "square", lambda d: (rand(5, 7, device=d).requires_grad_(),), OK,
             extra=_sq_grad_check))  # fmt: skip
    add(Case("mm-requires-grad", "matmul",
             lambda d: (rand(6, 5, device=d).requires_grad_(), rand(5, 4, device=d, seed=1).requires_grad_()), OK,
             extra=_mm_grad_check))  # fmt: skip
    add(Case("mm-requires-grad-only-b", "matmul",
             lambda d: (rand(6, 5, device=d), rand(5, 4, device=d, seed=1).requires_grad_()), OK,
             extra=lambda args, out: out.sum().backward()))  # fmt: skip
    add(Case("sq-parameter", "square", lambda d: (torch.nn.Parameter(rand(4, 4, device=d)),), OK))

    def inference(d):
        with torch.inference_mode():
            return (rand(8, 9, device=d), rand(9, 3, device=d, seed=1))

    add(Case("mm-inference-mode-tensors", "matmul", inference, OK))

    # --- sizes past the kernels' grid limits and past 2^31 (cheap: expanded inputs, early errors) -----------------
    # M > 65535 * 128: more row tiles than gridDim.y allows for every step of the ladder.
    add(Case("mm-tall-M-past-gridDim.y", "matmul",
             lambda d: (rand(65535 * 128 + 5, 2, device=d), rand(2, 3, device=d, seed=1)), OK,
             heavy=True))  # fmt: skip
    add(Case("sq-output-bytes-overflow", "square", lambda d: (torch.ones(1, 1, device=d).expand(2**31, 2**31),),
             Err(RuntimeError, rf"{SQ}: the output would have shape \[2147483648, 2147483648\] \(4 bytes per "
                               r"element\): more bytes than a tensor can hold")))  # fmt: skip
    add(Case("mm-output-bytes-overflow", "matmul",
             lambda d: (torch.ones(1, 1, device=d).expand(2**40, 1), torch.ones(1, 1, device=d).expand(1, 2**40)),
             Err(RuntimeError, rf"{MM}: the output would have shape \[1099511627776, 1099511627776\]")))  # fmt: skip
    # Representable but not allocatable (4 PiB): the allocator's error, with the op named.
    add(Case("sq-output-alloc-fails", "square", lambda d: (torch.ones(1, device=d).expand(2**50),),
             Err(RuntimeError, rf"(?i)(memory|allocate).*raised inside {SQ}"), api_error=True))  # fmt: skip
    add(Case("mm-output-alloc-fails", "matmul",
             lambda d: (torch.ones(1, 1, device=d).expand(2**25, 1), torch.ones(1, 1, device=d).expand(1, 2**25)),
             Err(RuntimeError, rf"(?i)(memory|allocate).*raised inside {MM}"), api_error=True))  # fmt: skip

    # --- layouts without a kernel: the dispatcher's error names the op and the backend ----------------------------
    add(Case("sq-sparse", "square", lambda d: (rand(4, 4, device=d).to_sparse(),),
             Err(NotImplementedError, r"Could not run 'cuda_kernels::square' with arguments from the 'Sparse(CPU|CUDA)'")))  # fmt: skip
    add(Case("mm-sparse-a", "matmul", lambda d: (rand(4, 4, device=d).to_sparse(), rand(4, 4, device=d)),
             Err(NotImplementedError, r"Could not run 'cuda_kernels::matmul' with arguments from the 'Sparse(CPU|CUDA)'")))  # fmt: skip
    return cases


CASES = _build_cases()


def _variants(device: str, dtype: torch.dtype) -> list[int]:
    """variant 0 and, on CUDA, every step of the ladder that takes `dtype` on this GPU."""
    if device != "cuda":
        return [0]
    return [0] + matmul_cuda_variants(dtype)


def _snapshot(args: tuple) -> list:
    return [a.detach().clone() if isinstance(a, torch.Tensor) and a.device.type != "meta" else None for a in args]


def _check_ok(case: Case, device: str, args: tuple) -> None:
    for variant in _variants(device, args[0].dtype) if case.op == "matmul" else [None]:
        before = _snapshot(args)
        if case.op == "square":
            out = cuda_kernels.square(*args)
        else:
            out = cuda_kernels.matmul(*args, variant=variant)
        if device == "cuda":
            torch.cuda.synchronize()
        x = args[0]
        if case.op == "square":
            assert out.shape == x.shape and out.dtype == x.dtype and out.device == x.device
            if x.device.type != "meta":
                ref = x.detach().double().square().to(x.dtype)
                torch.testing.assert_close(out.detach(), ref, rtol=0, atol=0, equal_nan=True)
        else:
            a, b = args
            assert out.dtype == a.dtype and out.device == a.device
            if a.device.type != "meta":
                assert_matmul_nd_close(out.detach(), a.detach(), b.detach())
            else:
                assert (
                    out.shape
                    == torch.matmul(torch.empty(a.shape, device="meta"), torch.empty(b.shape, device="meta")).shape
                )
        assert out.is_contiguous()
        for arg, old in zip(args, before, strict=True):
            if old is not None:
                torch.testing.assert_close(arg.detach(), old, rtol=0, atol=0, equal_nan=True, msg="input modified")
        if case.extra is not None and variant in (None, 0):
            case.extra(args, out)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            c,
            id=c.id,
            marks=[m for m, on in ((pytest.mark.heavy, c.heavy), (pytest.mark.api_error, c.api_error)) if on],
        )
        for c in CASES
    ],
)
def test_bad_input(case: Case, device: str) -> None:
    if device not in case.only:
        pytest.skip(f"row runs once, on {case.only[0]} (device-independent)")
    if case.needs_cuda and CUDA_SKIP_REASON:
        pytest.skip(f"needs CUDA: {CUDA_SKIP_REASON}")
    expect = case.expect[device] if isinstance(case.expect, dict) else case.expect
    args = case.make(device)
    if expect == OK:
        _check_ok(case, device, args)
    else:
        assert isinstance(expect, Err) and "cuda_kernels" in expect.regex, "an error row must name the op"
        with pytest.raises(expect.exc) as info:
            if case.op == "square":
                cuda_kernels.square(*args)
            else:
                cuda_kernels.matmul(*args, variant=case.variant)
        message = str(info.value)
        assert re.search(expect.regex, message, re.DOTALL), f"message {message!r} does not match {expect.regex!r}"
    if device == "cuda" or case.needs_cuda:
        # The device must still work: no sticky error left behind by the call.
        torch.cuda.synchronize()
        y = cuda_kernels.square(torch.full((5,), 3.0, device="cuda"))
        assert y.tolist() == [9.0] * 5


def test_table_size() -> None:
    """The issue asks for at least 25 kinds of bad or unusual input."""
    kinds = {re.sub(r"-(float(16|32|64)|bfloat16|off\d+)", "", c.id) for c in CASES}
    assert len(kinds) >= 25, sorted(kinds)
