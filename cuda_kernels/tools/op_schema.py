"""An op's signature as `python -m cuda_kernels.new NAME --schema "(Tensor x, Tensor w, float eps) -> Tensor"` takes
it: a torch.library schema without the name, parsed into the arguments and outputs the generator writes code for.

Only the types whose C++ form the LibTorch stable ABI of torch 2.11 (the build's target, TORCH_TARGET) can hand a
kernel registered through TORCH_BOX are accepted (torch/csrc/stable/stableivalue_conversions.h, library.h), and of
those only the ones the generated checks, fake kernel and tests know how to feed: TYPES below. Everything else is
refused with a message that names the type, before anything is written: a schema torch would reject, aliasing or
mutation annotations (the generated kernels allocate their outputs and write no input), outputs other than tensors,
and a schema without a Tensor input (nothing to dispatch on, nothing to copy for the placeholder).
"""

from __future__ import annotations

import keyword
import math
import re
from dataclasses import dataclass


class SchemaError(ValueError):
    """The schema cannot be generated; the message says why."""


@dataclass(frozen=True)
class ArgType:
    """How one schema type appears in the generated code.

    cpp: the parameter type of the C++ functions (csrc/ops.h): what TORCH_BOX unboxes the type to, taken by const
    reference where it is a class. py: the Python annotation of the wrapper. sample: a test value when the schema
    gives no default (None: pass None). kernel: the type the CPU and CUDA kernels take it as; None: it stays on the
    host (optional numbers, strings and lists cannot travel to a CUDA kernel as they are).
    """

    cpp: str
    py: str
    sample: object = None
    kernel: str | None = None


ARRAY_REF = "torch::headeronly::HeaderOnlyArrayRef"
# Schema type (spaces removed) -> its code. TORCH_BOX in 2.11 unboxes: Tensor (as torch::stable::Tensor),
# std::optional<T> of each type, double, int64_t, bool, std::string (2.10+), and lists as std::vector<T> (2.10+), which
# a HeaderOnlyArrayRef<T> parameter views without a copy (library.h maps it to std::vector<T> for unboxing: the
# stable ABI's spelling of at::IntArrayRef). bool[] is left out: std::vector<bool> has no contiguous data to view.
TYPES: dict[str, ArgType] = {
    "Tensor": ArgType("const Tensor&", "Tensor", kernel="const scalar_t*"),
    "Tensor?": ArgType("const std::optional<Tensor>&", "Tensor | None", kernel="const scalar_t*"),
    "float": ArgType("double", "float", 0.5, kernel="double"),
    "float?": ArgType("std::optional<double>", "float | None"),
    "int": ArgType("int64_t", "int", 2, kernel="int64_t"),
    "int?": ArgType("std::optional<int64_t>", "int | None"),
    "bool": ArgType("bool", "bool", True, kernel="bool"),
    "bool?": ArgType("std::optional<bool>", "bool | None"),
    "str": ArgType("const std::string&", "str", "mean"),
    "str?": ArgType("const std::optional<std::string>&", "str | None"),
    "int[]": ArgType(f"{ARRAY_REF}<int64_t>", "Sequence[int]", [1]),
    "int[]?": ArgType(f"std::optional<{ARRAY_REF}<int64_t>>", "Sequence[int] | None"),
    "float[]": ArgType(f"{ARRAY_REF}<double>", "Sequence[float]", [0.5]),
    "float[]?": ArgType(f"std::optional<{ARRAY_REF}<double>>", "Sequence[float] | None"),
}
# Why some types torch knows are refused, where the reason is not just "the generator does not know it".
REFUSED_WHY = {
    "SymInt": "the stable ABI of torch 2.11 has no symbolic integers; use int",
    "Scalar": "the stable ABI of torch 2.11 cannot unbox a Scalar; use float (or int)",
    "Tensor[]": "a list of tensors: the generated checks, fake kernel and tests handle single tensors; take the "
    "tensors one by one, or generate with one and change the signature by hand",
    "Tensor?[]": "a list of tensors: the generated code handles single tensors",
    "bool[]": "std::vector<bool> has no data a HeaderOnlyArrayRef can view; use int[]",
}

# Names the generated code gives its own variables, or that would shadow what it uses: an argument of that name
# would break the generated C++ or Python. (Each tensor argument `a` also makes `a_c` in the host functions.)
RESERVED_NAMES = frozenset(
    {"out", "grad", "grads", "ctx", "inputs", "output", "op", "numel", "i", "t", "begin", "end", "stream", "guard"}
    | {"device", "grid", "stride", "scalar_t", "opmath_t", "kernels", "launch", "cpu", "torch", "Tensor", "tuple"}
    | {"math", "os", "functools", "self", "cls", "std", "new_output", "data_or_null", "current_stream"}
    | {"cuda_kernels", "pytest", "rand", "DEVICES", "DTYPES", "OP", "SHAPE", "TOLERANCE", "reference", "check"}
)
# C++ keywords and a few names that may not name a parameter (alternative tokens included).
CPP_KEYWORDS = frozenset(
    """alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class
    compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype default
    delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline int long
    mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public register
    reinterpret_cast requires return short signed sizeof static static_assert static_cast struct switch template this
    thread_local throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t while xor
    xor_eq int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t size_t""".split()
)
OUTPUT_NAME_RE = re.compile(r"out\d+\Z")  # the outputs of an op of several: out0, out1, ...
IDENT_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
MAX_ARG_LEN = 24  # keeps every generated line that names an argument within the 120 columns
LIST_TYPE_RE = re.compile(r"(int|float)\[(\d*)\](\?)?\Z")


@dataclass(frozen=True)
class Arg:
    """One argument: its schema spelling, its name, its default as written (None: none) and as a Python value."""

    type: str  # normalized: "Tensor", "float?", "int[]" (an int[N] is "int[]" with size N)
    name: str
    default_text: str | None = None
    default: object = None
    kwarg_only: bool = False
    size: int | None = None  # N of int[N] / float[N]
    spelled: str = ""  # the type as written (int[2]), for the schema line

    @property
    def code(self) -> ArgType:
        return TYPES[self.type]

    @property
    def is_tensor(self) -> bool:
        return self.type in ("Tensor", "Tensor?")

    @property
    def optional(self) -> bool:
        return self.type.endswith("?")

    @property
    def schema_text(self) -> str:
        text = f"{self.spelled or self.type} {self.name}"
        return text if self.default_text is None else f"{text}={self.default_text}"


@dataclass(frozen=True)
class Schema:
    """A parsed schema: its arguments in order, the number of Tensor outputs, and its text as csrc/api.cpp writes
    it (normalized spacing; defaults as written)."""

    args: tuple[Arg, ...]
    n_outputs: int
    text: str

    @property
    def tensors(self) -> list[Arg]:
        return [a for a in self.args if a.is_tensor]

    @property
    def first(self) -> Arg:
        """The first (non-optional) Tensor argument: the placeholder copies it, the checks compare against it."""
        return next(a for a in self.args if a.type == "Tensor")

    @property
    def checked_tensors(self) -> list[Arg]:
        """The tensors in the order the input check goes through them: the first Tensor, then the others."""
        return [self.first] + [a for a in self.tensors if a is not self.first]

    @property
    def kernel_args(self) -> list[Arg]:
        """The arguments the CPU and CUDA kernels take, in schema order: tensors and plain numbers."""
        return [a for a in self.args if a.code.kernel is not None]

    @property
    def host_only_args(self) -> list[Arg]:
        return [a for a in self.args if a.code.kernel is None]

    @property
    def outputs(self) -> list[str]:
        """The outputs' names in the generated code: out, or out0, out1, ..."""
        return ["out"] if self.n_outputs == 1 else [f"out{i}" for i in range(self.n_outputs)]

    @property
    def uses_sequence(self) -> bool:
        return any("Sequence" in a.code.py for a in self.args)


def _split_top_level(text: str, what: str) -> list[str]:
    """text split at the commas outside brackets and string literals; SchemaError on unbalanced brackets."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth < 0:
                raise SchemaError(f"unbalanced brackets in {what} '{text}'")
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if depth or quote:
        raise SchemaError(f"unbalanced brackets or quotes in {what} '{text}'")
    parts.append(text[start:].strip())
    return parts


def _closing_paren(text: str) -> int:
    """Index of the ')' that closes the '(' at text[0], outside string literals; -1 when there is none."""
    depth, quote = 0, ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def supported_types() -> str:
    return ", ".join(TYPES) + " (and int[N], float[N])"


def _arg_type(spelled: str, name: str) -> tuple[str, int | None]:
    """(normalized type, list size or None) of an argument's type as written; SchemaError for what is refused."""
    if "(" in spelled:
        raise SchemaError(
            f"argument '{name}' has the alias annotation '{spelled}': the generator writes ops that allocate their "
            "outputs and modify no input (no '(a!)' or '(a)'); write the schema without it"
        )
    match = LIST_TYPE_RE.match(spelled)
    if match:
        base, size, opt = match.groups()
        return f"{base}[]{opt or ''}", int(size) if size else None
    if spelled in TYPES:
        return spelled, None
    base = spelled.rstrip("?")
    why = REFUSED_WHY.get(spelled) or REFUSED_WHY.get(base)
    reason = f": {why}" if why else f"; the types it can generate are {supported_types()}"
    raise SchemaError(f"argument '{name}' has type '{spelled}', which the generator does not support{reason}")


def _check_arg_name(name: str, seen: set[str]) -> None:
    if not IDENT_RE.match(name):
        raise SchemaError(f"'{name}' is not a valid argument name (letters, digits and underscores, from a letter)")
    if keyword.iskeyword(name) or name in CPP_KEYWORDS:
        raise SchemaError(f"argument '{name}' is a Python or C++ keyword: the generated code could not name it")
    if name in RESERVED_NAMES or OUTPUT_NAME_RE.match(name):
        raise SchemaError(f"argument '{name}': the generated code uses that name itself; choose another")
    if len(name) > MAX_ARG_LEN:
        raise SchemaError(f"argument '{name}' is {len(name)} characters long; at most {MAX_ARG_LEN}")
    if name in seen:
        raise SchemaError(f"argument '{name}' appears twice")
    seen.add(name)


def _parse_returns(text: str) -> int:
    """The number of Tensor outputs of a returns clause: 'Tensor', '(Tensor, Tensor)', '(Tensor a, Tensor b)'."""
    if text.startswith("(") and text.endswith(")"):
        items = [] if not text[1:-1].strip() else _split_top_level(text[1:-1], "the outputs")
    else:
        items = [text]
    if not items:
        raise SchemaError("the op returns nothing ('-> ()'): it must return a Tensor or a tuple of Tensors")
    for item in items:
        words = item.split()
        if not words or words[0] != "Tensor" or len(words) > 2 or (len(words) == 2 and not IDENT_RE.match(words[1])):
            if "(" in item:
                raise SchemaError(f"the output '{item}' has an alias annotation: outputs must be new tensors")
            raise SchemaError(f"the output '{item}' is not a Tensor: outputs must be Tensor or a tuple of Tensors")
    return len(items)


def _torch_schema(name: str, text: str):  # noqa: ANN202  (torch._C.FunctionSchema)
    """torch's own parse of the schema (what m.def would say), for its defaults and keyword-only flags."""
    import torch

    try:
        return torch._C.parse_schema(f"{name}{text}")
    except RuntimeError as err:
        message = " ".join(str(err).split())
        raise SchemaError(f"torch does not accept the schema: {message}") from None


def parse_schema(text: str, op_name: str = "op") -> Schema:
    """Parses a schema without the op's name, e.g. "(Tensor x, Tensor? w=None, *, float eps=1e-05) -> Tensor";
    SchemaError says what is wrong or unsupported."""
    text = " ".join(text.split())
    if not text.startswith("("):
        raise SchemaError(f"the schema must start with '(' (the arguments, without the op's name): got '{text}'")
    close = _closing_paren(text)
    if close < 0:
        raise SchemaError(f"the argument list of '{text}' is not closed")
    rest = text[close + 1 :].strip()
    if not rest.startswith("->"):
        raise SchemaError(f"the schema must end with '-> Tensor' or '-> (Tensor, ...)': got '{text}'")
    returns = rest[2:].strip()
    inner = text[1:close].strip()
    items = _split_top_level(inner, "the arguments") if inner else []
    parsed: list[tuple[str, str, str | None]] = []  # (type as written, name, default text)
    seen: set[str] = set()
    for item in items:
        if item == "*":
            parsed.append(("*", "*", None))
            continue
        decl, _, default = item.partition("=")
        words = decl.split()
        if len(words) < 2:
            raise SchemaError(f"'{item}' is not 'TYPE NAME' or 'TYPE NAME=DEFAULT'")
        name, spelled = words[-1], "".join(words[:-1])
        _check_arg_name(name, seen)
        parsed.append((spelled, name, default.strip() if default else None))
    n_outputs = _parse_returns(returns)
    # Our checks first (they name the type); torch's parse then catches the rest (a bad default, a misplaced *).
    for spelled, name, _ in parsed:
        if spelled != "*":
            _arg_type(spelled, name)
    torch_schema = _torch_schema(op_name, text)
    torch_args = {a.name: a for a in torch_schema.arguments}
    args = []
    for spelled, name, default_text in parsed:
        if spelled == "*":
            continue
        normalized, size = _arg_type(spelled, name)
        theirs = torch_args[name]
        default = theirs.default_value if theirs.has_default_value() else None
        if isinstance(default, float) and not math.isfinite(default):
            raise SchemaError(f"argument '{name}': a default of {default_text} cannot be written as a Python literal")
        args.append(Arg(normalized, name, default_text, default, theirs.kwarg_only, size, spelled))
    names = {a.name for a in args}
    for a in args:
        if a.is_tensor and a.kwarg_only:
            raise SchemaError(
                f"argument '{a.name}' is a keyword-only {a.type} (after '*'), which torch.library.register_autograd "
                "refuses; put it before the '*'"
            )
        if a.is_tensor and f"{a.name}_c" in names:
            raise SchemaError(f"argument '{a.name}_c': the generated code names the contiguous {a.name} so")
    if not any(a.type == "Tensor" for a in args):
        raise SchemaError(
            "the schema has no Tensor argument: an op needs one (not optional) to dispatch on, and the generated "
            "placeholder copies the first"
        )
    pieces = [("*" if spelled == "*" else None) for spelled, _, _ in parsed]
    arg_texts, it = [], iter(args)
    for piece in pieces:
        arg_texts.append(piece if piece else next(it).schema_text)
    return Schema(tuple(args), n_outputs, f"({', '.join(arg_texts)}) -> {returns}")
