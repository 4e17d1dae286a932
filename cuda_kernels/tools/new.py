"""Adds a new op to the repository in one command, in every place an op lives:

    python -m cuda_kernels.new NAME              # an elementwise op NAME(x), from square's pattern
    python -m cuda_kernels.new NAME --kind rowwise   # NAME(x, weight) reduced over x's last dim, from rms_norm's
    python -m cuda_kernels.new NAME --schema "(Tensor x, Tensor w, float eps) -> Tensor"   # any signature
    python -m cuda_kernels.new NAME --dry-run    # prints the plan, writes nothing
    python -m cuda_kernels.new NAME --root PATH  # a checkout other than the one this package lives in

The elementwise kind (the default): csrc/cuda/NAME.cu (vector, unaligned and strided kernel paths and their
launcher, with no ATen header: an edit to it recompiles in seconds), csrc/cuda/NAME.h (the launcher's declaration), csrc/cpu/NAME.cpp (a
torch::stable::parallel_for kernel), tests/ops/test_NAME.py (devices x dtypes against a torch reference, opcheck,
gradcheck, torch.compile, bad input). Insertions, each above a marker line (MARKERS): the input check both devices
run in csrc/checks.h; the declarations in csrc/ops.h; the op's name constant, the schema and the CPU and CUDA
registrations in csrc/api.cpp; the CUDA host function (the input check, then square's elementwise_cuda: guard,
output, layout, dtype switch) and the kernel header's include in csrc/cuda/ops.cpp; the Python wrapper, fake kernel
and autograd formula in cuda_kernels/ops.py; the export in cuda_kernels/__init__.py; the benchmark entry in
cuda_kernels/tools/bench/table.py. The op computes the placeholder x * 2 (backward: 2 * grad) for
float32/float64/float16/bfloat16 tensors of any shape and strides, on the CPU and CUDA.

With --kind rowwise: NAME(x, weight=None) and NAME_backward, reducing over x's last dimension, on the row-wise
helpers rms_norm uses (cuda_kernels/tools/new_rowwise.py has its files and blocks).

With --schema (a torch.library schema without the name; op_schema.py says which types it takes): the same files and
places, with the C++ types the stable ABI unboxes the schema's types to, and a placeholder each output of which is a
contiguous copy of the first Tensor input, on contiguous kernels that take every tensor and number (schema_op.py).

Every place to edit for the real math is marked TODO(NAME). A name is refused (exit code 2, nothing written) when it
is not lowercase snake_case of at most MAX_NAME_LEN characters, is a Python keyword or builtin, or is taken: an op
in csrc/api.cpp, a name in the package or its ops module, a file the op would create, a C++ function it would
define; so is a schema the generator cannot write (op_schema.py). Every file is computed in memory first and
written only once all checks and markers are found.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import keyword
import os
import re
import string
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cuda_kernels.tools import new_rowwise, schema_op
from cuda_kernels.tools.op_schema import SchemaError, parse_schema

# Lowercase snake_case, as the existing ops (square, matmul): the name is used in C++ and Python identifiers, file
# names and the schema. The length cap keeps every generated line within the 120-column format (clang-format, ruff).
NAME_RE = re.compile(r"[a-z][a-z0-9_]*\Z")
MAX_NAME_LEN = 32

TEMPLATES = schema_op.TEMPLATES  # the templates folder, defined where both generators can import it

# The files an op adds, relative to the root, as format strings of the name.
NEW_FILES = {
    "csrc/cuda/{name}.cu": "cuda.cu.tmpl",
    "csrc/cuda/{name}.h": "cuda.h.tmpl",
    "csrc/cpu/{name}.cpp": "cpu.cpp.tmpl",
    "tests/ops/test_{name}.py": "test.py.tmpl",
}
OPS_H = "csrc/ops.h"
CHECKS_H = "csrc/checks.h"
API_CPP = "csrc/api.cpp"
CUDA_OPS_CPP = "csrc/cuda/ops.cpp"
OPS_PY = "cuda_kernels/ops.py"
INIT_PY = "cuda_kernels/__init__.py"
BENCH_TABLE = "cuda_kernels/tools/bench/table.py"

# Marker lines (compared after stripping whitespace): each insertion goes right above its marker, except in
# __init__.py, where the import right below the marker (and __all__) is rewritten with the new name.
MARKERS = {
    "declarations": "// cuda_kernels.new: declarations above this line",
    "input_checks": "// cuda_kernels.new: input checks above this line",
    "schemas": "// cuda_kernels.new: schemas above this line",
    "op_names": "// cuda_kernels.new: op names above this line",
    "cpu_registrations": "// cuda_kernels.new: CPU registrations above this line",
    "cuda_registrations": "// cuda_kernels.new: CUDA registrations above this line",
    "cuda_headers": "// cuda_kernels.new: kernel headers above this line",
    "cuda_host": "// cuda_kernels.new: CUDA host functions above this line",
    "ops_py": "# cuda_kernels.new: ops above this line",
    "init_py": "# cuda_kernels.new: adds each new op to the import below (in ruff's order) and to __all__",
    "bench_table": "# python -m cuda_kernels.new adds new ops above this line",
}

# What goes above each marker. ${name} is the op's name.
OPS_H_DECLARATIONS = """\
// ${name}(x): elementwise, any shape, float32/float64/float16/bfloat16; result contiguous.
// CPU: csrc/cpu/${name}.cpp. CUDA: csrc/cuda/ops.cpp, kernels in
// csrc/cuda/${name}.cu.
Tensor ${name}_cpu(const Tensor& x);
Tensor ${name}_cuda(const Tensor& x);

"""
# csrc/checks.h: the input check both devices run (a header: the CPU and the CUDA library each compile it).
CHECKS_H_INPUT = """\
// Errors start with the op's name. An op with other needs (a shape, a second input) checks them here, and in its
// fake kernel (cuda_kernels/ops.py), so that torch.compile reports the same error.
inline void check_${name}_input(const Tensor& x) {
  check_float_input("cuda_kernels.${name}", "x", x);
  check_output_fits("cuda_kernels.${name}", x.sizes(), static_cast<int64_t>(x.element_size()));
}

"""
API_SCHEMA = """\
  m.def("${name}(Tensor x) -> Tensor");
"""
# The op's name as its errors say it, for named<> (csrc/checks.h) in the registrations.
API_OP_NAME = """\
constexpr char k${Name}[] = "cuda_kernels.${name}";
"""
# csrc/cuda/ops.cpp: the kernel header (kept in clang-format's order among the others above the marker) and the
# host function, square_cuda's twin.
CUDA_HEADER_INCLUDE = '#include "cuda/${name}.h"'
CUDA_HOST_FUNCTION = """\
Tensor ${name}_cuda(const Tensor& x) {
  check_${name}_input(x);
  namespace kernels = ${name}_launch;  // csrc/cuda/${name}.h
  const auto launch = [](const auto* in, auto* out, auto... rest) { return kernels::launch(in, out, rest...); };
  return elementwise_cuda(x, kernels::kThreads, launch);
}

"""
API_CPU_REGISTRATION = """\
  m.impl("${name}", TORCH_BOX((named<k${Name}, ${name}_cpu>)));
"""
API_CUDA_REGISTRATION = """\
  m.impl("${name}", TORCH_BOX((named<k${Name}, ${name}_cuda>)));
"""
COLUMN_LIMIT = 120  # .clang-format's


def registration(template: str, name: str) -> str:
    """A registration line; where it runs past the column limit, broken after the op's name as clang-format breaks
    it (the rest aligned under the first argument), so the generated file is format-clean whatever the name."""
    line = render(template, name)
    if len(line.rstrip("\n")) <= COLUMN_LIMIT:
        return line
    head, rest = line.rstrip("\n").split(", ", 1)
    return f"{head},\n{' ' * len('  m.impl(')}{rest}\n"


OPS_PY_BLOCK = '''\
# ---------------------------------------------------------------------------------------------------------
# ${name} (python -m cuda_kernels.new)


def ${name}(x: Tensor) -> Tensor:
    """Elementwise x * 2. TODO(${name}): what the op computes.

    Args:
        x: any shape (0-d and empty included), float32/float64/float16/bfloat16, CPU or CUDA, any strides.
    Returns:
        A contiguous tensor of x's shape, dtype and device. float16/bfloat16 are computed in float32.
    """
    if _DUMP_DIR is None:
        return _${NAME}(x)
    return _dump.call_and_dump(_DUMP_DIR, "${name}", _${NAME}.op, x)


@torch.library.register_fake("cuda_kernels::${name}")
def _${name}_fake(x: Tensor) -> Tensor:
    _check_float("cuda_kernels.${name}", "x", x)
    _check_output_fits("cuda_kernels.${name}", tuple(x.shape), x.dtype)
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def _${name}_setup_context(ctx, inputs, output) -> None:
    (x,) = inputs
    ctx.save_for_backward(x)


def _${name}_backward(ctx, grad: Tensor) -> Tensor:
    # The gradient with respect to x, from grad and the saved x (ctx.saved_tensors[0]), in torch ops so that
    # double backward works. TODO(${name}): the derivative of the op; d(2x)/dx = 2.
    return grad * 2


_${NAME} = _Op(
    "${name}",
    _${name}_backward,
    _${name}_setup_context,
)


'''
# The benchmark table's entry. Calls and lists are written exploded, with a trailing comma, which ruff keeps
# whatever the name's length.
BENCH_ENTRY = """\
    elementwise(
        "${name}",
        ours=lambda x: cuda_kernels.${name}(x),
        reference=lambda x: x * 2,  # TODO(${name}): the same math as the kernels
    ),
"""


@dataclass(frozen=True)
class Kind:
    """What one kind of op writes: its new files (path pattern -> template in TEMPLATES), the block inserted above
    each marker (MARKERS' keys; cuda_headers is the include line), the ops (schemas) it defines and the C++ and
    Python names it adds, as format strings of the name (a name is refused when any is taken), and the placeholder
    math it computes. A new kind is one more entry of KINDS."""

    new_files: dict[str, str]
    blocks: dict[str, str]
    ops: tuple[str, ...]
    cpp_symbols: tuple[str, ...]
    py_names: tuple[str, ...]
    placeholder: str


KINDS = {
    "elementwise": Kind(
        new_files=NEW_FILES,
        blocks={
            "declarations": OPS_H_DECLARATIONS,
            "input_checks": CHECKS_H_INPUT,
            "op_names": API_OP_NAME,
            "schemas": API_SCHEMA,
            "cpu_registrations": API_CPU_REGISTRATION,
            "cuda_registrations": API_CUDA_REGISTRATION,
            "cuda_headers": CUDA_HEADER_INCLUDE,
            "cuda_host": CUDA_HOST_FUNCTION,
            "ops_py": OPS_PY_BLOCK,
            "bench_table": BENCH_ENTRY,
        },
        ops=("{name}",),
        cpp_symbols=(
            "{name}_cpu",
            "{name}_cuda",
            "check_{name}_input",
            "check_{name}_inputs",  # a --schema op's check
            "{name}_one",
            "{name}_kernel",
            "{name}_launch",
        ),
        py_names=("{name}", "_{name}_fake", "_{name}_setup_context", "_{name}_backward"),
        placeholder="x * 2",
    ),
    "rowwise": Kind(
        new_files=new_rowwise.NEW_FILES,
        blocks=new_rowwise.BLOCKS,
        ops=new_rowwise.OPS,
        cpp_symbols=new_rowwise.CPP_SYMBOLS,
        py_names=new_rowwise.PY_NAMES,
        placeholder=new_rowwise.PLACEHOLDER,
    ),
}
DEFAULT_KIND = "elementwise"


class Refusal(Exception):
    """The op cannot be added as asked; the message says why. Nothing has been written."""


@dataclass
class Plan:
    """Everything one generation writes: new files and the new contents of changed files, paths relative to root."""

    name: str
    root: Path
    kind: str = DEFAULT_KIND
    placeholder: str = "x * 2"  # what the op computes until its author edits it, in words
    new_files: dict[str, str] = field(default_factory=dict)
    changed_files: dict[str, str] = field(default_factory=dict)

    def todo_lines(self) -> list[str]:
        """'path:line: text' of every line marked TODO(name), in the order of the files."""
        tag = f"TODO({self.name})"
        out = []
        for rel, text in [*self.new_files.items(), *self.changed_files.items()]:
            for number, line in enumerate(text.splitlines(), 1):
                if tag in line:
                    out.append(f"{rel}:{number}: {line.strip()}")
        return out


def default_root() -> Path:
    """The checkout this package lives in: the folder above cuda_kernels/, which must hold csrc/."""
    return Path(__file__).resolve().parents[2]


def render(template: str, name: str) -> str:
    """template with ${name} replaced by the op's name, ${Name} by its CamelCase (scale_shift: ScaleShift), as
    C++ constants are named, and ${NAME} by its upper case, as ops.py names an op's _Op (string.Template: a stray $
    raises)."""
    camel = "".join(part.capitalize() for part in name.split("_"))
    return string.Template(template).substitute(name=name, Name=camel, NAME=name.upper())


def check_name(name: str) -> None:
    """Raises Refusal unless `name` can name an op: lowercase snake_case, at most MAX_NAME_LEN characters, no
    Python keyword or builtin (the wrapper is a module-level function in cuda_kernels/ops.py)."""
    if not NAME_RE.match(name):
        raise Refusal(
            f"'{name}' is not a valid op name: use lowercase letters, digits and underscores, starting with a letter "
            "(an identifier in Python and C++, like square or matmul)"
        )
    if len(name) > MAX_NAME_LEN:
        raise Refusal(f"'{name}' is {len(name)} characters long; at most {MAX_NAME_LEN}, so generated lines fit")
    if keyword.iskeyword(name):
        raise Refusal(f"'{name}' is a Python keyword")
    if hasattr(builtins, name):
        raise Refusal(f"'{name}' is a Python builtin: defining it in cuda_kernels/ops.py would shadow it there")


def _read(root: Path, rel: str) -> str:
    path = root / rel
    if not path.is_file():
        raise Refusal(f"{path} is missing: --root must be the repository root (the folder with csrc/ and setup.py)")
    return path.read_text()


def _module_names(source: str) -> set[str]:
    """Names bound at the top level of a Python module (defs, classes, assignments, imports) and in __all__,
    including those bound inside top-level if/try blocks."""
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
                    if isinstance(target, ast.Name) and target.id == "__all__" and isinstance(node.value, ast.List):
                        names.update(e.value for e in node.value.elts if isinstance(e, ast.Constant))
            elif isinstance(node, ast.If | ast.Try):
                visit(node.body)
                visit(node.orelse)
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
                visit(getattr(node, "finalbody", []))

    visit(ast.parse(source).body)
    return names


def _op_namespace_attributes() -> set[str]:
    """Attributes of torch.ops.cuda_kernels that are not ops (e.g. `name`): an op named so would be hidden."""
    import torch

    namespace = torch.ops.cuda_kernels
    return set(vars(namespace)) | set(dir(type(namespace)))


def check_not_taken(name: str, root: Path, kind: str = DEFAULT_KIND) -> None:
    """Raises Refusal when the op (any of the ops its kind defines), or a file or symbol it would add, exists
    already under root."""
    spec = KINDS[kind]
    api = _read(root, API_CPP)
    for op in (pattern.format(name=name) for pattern in spec.ops):
        if re.search(rf'm\.def\("{op}\(', api):
            raise Refusal(f"op '{op}' exists: {API_CPP} defines its schema")
    for rel in (INIT_PY, OPS_PY):
        taken = {pattern.format(name=name) for pattern in spec.py_names} & _module_names(_read(root, rel))
        if taken:
            raise Refusal(f"'{name}' is taken: {rel} defines {', '.join(sorted(taken))}")
    table = root / BENCH_TABLE
    if table.is_file() and f'"{name}"' in table.read_text():
        raise Refusal(f"'{name}' is taken: {BENCH_TABLE} has an entry named \"{name}\"")
    package = root / "cuda_kernels"
    for path in (package / f"{name}.py", package / name):
        if path.exists():
            raise Refusal(f"'{name}' is taken: cuda_kernels.{name} is {path}")
    for op in (pattern.format(name=name) for pattern in spec.ops):
        if op in _op_namespace_attributes():
            raise Refusal(
                f"'{op}' is an attribute of torch.ops.cuda_kernels itself: an op of that name would be hidden"
            )
    for pattern in spec.new_files:
        path = root / pattern.format(name=name)
        if path.exists():
            raise Refusal(f"'{name}' is taken: {path} exists")
    # C++ functions the op defines in namespace cuda_kernels or in its own files' anonymous namespaces.
    symbols = [pattern.format(name=name) for pattern in spec.cpp_symbols]
    pattern = re.compile(r"\b(" + "|".join(symbols) + r")\b")
    for path in sorted((root / "csrc").rglob("*")):
        if path.suffix in (".h", ".cuh", ".cpp", ".cu") and path.is_file():
            found = pattern.search(path.read_text(errors="replace"))
            if found:
                raise Refusal(f"'{name}' is taken: {path} already has {found.group(1)}")


def marker_index(lines: list[str], marker_key: str, rel: str, restore: str = "(one line) where new ops go") -> int:
    """The index in `lines` of the line MARKERS[marker_key]; Refusal (saying to restore it `restore`) unless exactly
    one line is that marker."""
    marker = MARKERS[marker_key]
    at = [i for i, line in enumerate(lines) if line.strip() == marker]
    if len(at) != 1:
        found = "not found" if not at else f"found {len(at)} times"
        raise Refusal(f"{rel}: the marker line '{marker}' is {found}; restore it {restore}")
    return at[0]


def insert_above(text: str, marker_key: str, block: str, rel: str) -> str:
    """text with `block` inserted right above the line MARKERS[marker_key]; Refusal unless exactly one such line."""
    lines = text.splitlines(keepends=True)
    at = marker_index(lines, marker_key, rel)
    return "".join(lines[:at]) + block + "".join(lines[at:])


def insert_include(text: str, marker_key: str, include: str, rel: str) -> str:
    """text with the line `include` added to the #include lines right above the line MARKERS[marker_key], all of
    them sorted as clang-format sorts an include block; Refusal unless exactly one such marker line."""
    lines = text.splitlines(keepends=True)
    at = start = marker_index(lines, marker_key, rel)
    while start > 0 and lines[start - 1].startswith("#include"):
        start -= 1
    block = sorted([*lines[start:at], include + "\n"])
    return "".join(lines[:start]) + "".join(block) + "".join(lines[at:])


def _sort_key(name: str) -> tuple[tuple[int, int], ...]:
    """ruff's (isort's) order of imported names: natural order, digit runs compared as numbers ('op2' < 'op10')."""
    return tuple((0, int(part)) if part.isdigit() else (1, ord(part)) for part in re.findall(r"\d+|.", name))


def add_to_init(text: str, name: str) -> str:
    """cuda_kernels/__init__.py with `name` added to the `from cuda_kernels.ops import ...` right below the marker
    (names in ruff's order) and appended to __all__."""
    lines = text.splitlines(keepends=True)
    marker_line = marker_index(lines, "init_py", INIT_PY, restore="above the ops import") + 1  # 1-based line number
    tree = ast.parse(text)
    nodes = [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and n.lineno == marker_line + 1]
    imports = [n for n in nodes if isinstance(n, ast.ImportFrom) and n.module == "cuda_kernels.ops"]
    all_nodes = [
        n
        for n in tree.body
        if isinstance(n, ast.Assign) and [t.id for t in n.targets if isinstance(t, ast.Name)] == ["__all__"]
    ]
    if len(imports) != 1 or len(all_nodes) != 1 or not isinstance(all_nodes[0].value, ast.List):
        raise Refusal(
            f"{INIT_PY}: expected `from cuda_kernels.ops import ...` right below the marker line and one "
            "`__all__ = [...]` list"
        )
    imp, all_node = imports[0], all_nodes[0]
    # Both rewritten exploded, one name per line (ruff keeps that form); the import's comment (noqa) is kept.
    first = lines[imp.lineno - 1]
    comment = "  " + first[first.index("#") :].rstrip("\n") if "#" in first else ""
    indent = first[: len(first) - len(first.lstrip())]
    names = sorted([a.name for a in imp.names] + [name], key=_sort_key)
    new_import = f"{indent}from cuda_kernels.ops import ({comment}\n"
    new_import += "".join(f"{indent}    {n},\n" for n in names) + f"{indent})\n"
    entries = [e.value for e in all_node.value.elts if isinstance(e, ast.Constant)] + [name]
    new_all = "__all__ = [\n" + "".join(f'    "{e}",\n' for e in entries) + "]\n"
    # Replace the later statement first so that the earlier one's line numbers still hold.
    spans = sorted([(imp.lineno, imp.end_lineno, new_import), (all_node.lineno, all_node.end_lineno, new_all)])
    for start, end, replacement in reversed(spans):
        lines[start - 1 : end] = [replacement]
    return "".join(lines)


def ensure_imported(text: str, module: str, name: str, rel: str) -> str:
    """text with `name` added to its top-level one-line `from module import ...` (names in ruff's order: constants,
    classes, then the rest); unchanged when it imports name already; Refusal when there is no such line."""
    tree = ast.parse(text)
    imports = [
        n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == module and n.lineno == n.end_lineno
    ]
    if not imports:
        raise Refusal(f"{rel}: expected a one-line `from {module} import ...` at the top level")
    node = imports[0]
    names = [a.name for a in node.names]
    if name in names:
        return text
    if any(a.asname for a in node.names):
        raise Refusal(f"{rel}: the line `from {module} import ...` renames what it imports; import {name} there")
    lines = text.splitlines(keepends=True)
    kind = lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, _sort_key(n))  # noqa: E731
    lines[node.lineno - 1] = f"from {module} import {', '.join(sorted([*names, name], key=kind))}\n"
    return "".join(lines)


def make_plan(name: str, root: Path, kind: str = DEFAULT_KIND, schema: str | None = None) -> Plan:
    """Checks the name (and the schema, if any) and computes every new and changed file in memory; raises Refusal,
    having written nothing. kind: a key of KINDS. schema: a torch.library schema without the name, e.g.
    "(Tensor x, float eps) -> Tensor", for an op of that signature on the elementwise kind's files (schema_op.py);
    None: the kind's own signature."""
    check_name(name)
    op = None
    if schema is not None:
        try:
            op = schema_op.SchemaOp(name, parse_schema(schema, name))
        except SchemaError as err:
            raise Refusal(f"--schema: {err}") from None
    root = root.resolve()
    if not (root / "csrc").is_dir():
        raise Refusal(f"{root} has no csrc/: --root must be the repository root")
    if op is not None and kind != DEFAULT_KIND:
        raise Refusal(
            f"--schema writes an op of the schema's signature on the {DEFAULT_KIND} pattern; drop --kind {kind}"
        )
    check_not_taken(name, root, kind)
    spec = KINDS[kind]
    if op is None:
        plan = Plan(name=name, root=root, kind=kind, placeholder=spec.placeholder)
        for pattern, template in spec.new_files.items():
            plan.new_files[pattern.format(name=name)] = render((TEMPLATES / template).read_text(), name)
        own_blocks: dict[str, str] = {}
    else:
        plan = Plan(name=name, root=root, kind=kind, placeholder=op.placeholder, new_files=op.new_files())
        own_blocks = {
            "declarations": op.ops_h_declarations(),
            "input_checks": op.checks_h_input(),
            "schemas": op.api_schema(),
            "cuda_host": op.cuda_host_function(),
            "ops_py": op.ops_py_block(),
            "bench_table": op.bench_entry(),
        }

    def block(key: str) -> str:
        if key in own_blocks:
            return own_blocks[key]
        if key.endswith("_registrations"):  # each line broken as clang-format breaks it, where too long
            return "".join(registration(line, name) for line in spec.blocks[key].splitlines(keepends=True))
        return render(spec.blocks[key], name)

    ops_h = insert_above(_read(root, OPS_H), "declarations", block("declarations"), OPS_H)
    plan.changed_files[OPS_H] = ops_h
    checks = insert_above(_read(root, CHECKS_H), "input_checks", block("input_checks"), CHECKS_H)
    plan.changed_files[CHECKS_H] = checks
    api = _read(root, API_CPP)
    for key in ("op_names", "schemas", "cpu_registrations", "cuda_registrations"):
        api = insert_above(api, key, block(key), API_CPP)
    plan.changed_files[API_CPP] = api
    ops_cpp = _read(root, CUDA_OPS_CPP)
    ops_cpp = insert_include(ops_cpp, "cuda_headers", block("cuda_headers"), CUDA_OPS_CPP)
    ops_cpp = insert_above(ops_cpp, "cuda_host", block("cuda_host"), CUDA_OPS_CPP)
    plan.changed_files[CUDA_OPS_CPP] = ops_cpp
    ops_py = _read(root, OPS_PY)
    if op is not None and op.schema.uses_sequence:  # int[] and float[] arguments are typed Sequence[...]
        ops_py = ensure_imported(ops_py, "collections.abc", "Sequence", OPS_PY)
    plan.changed_files[OPS_PY] = insert_above(ops_py, "ops_py", block("ops_py"), OPS_PY)
    plan.changed_files[INIT_PY] = add_to_init(_read(root, INIT_PY), name)
    if not (root / BENCH_TABLE).is_file():
        raise Refusal(f"{root / BENCH_TABLE} is missing: the benchmark table the new op's entry goes into")
    plan.changed_files[BENCH_TABLE] = insert_above(
        _read(root, BENCH_TABLE), "bench_table", block("bench_table"), BENCH_TABLE
    )
    return plan


def write_plan(plan: Plan) -> None:
    """Writes the plan's files under plan.root. Each file goes to a temporary name first and is renamed into place
    once every file is written, so a failure while writing (disk full) leaves no file half-written."""
    staged = []
    try:
        for rel, text in [*plan.new_files.items(), *plan.changed_files.items()]:
            path = plan.root / rel
            temp = path.with_name(f".{path.name}.cuda_kernels_new.tmp")
            with open(temp, "w") as f:
                f.write(text)
            staged.append((temp, path))
    except OSError:
        for temp, _ in staged:
            os.remove(temp)
        raise
    for temp, path in staged:
        os.replace(temp, path)


def next_commands(name: str) -> list[str]:
    """Build, test and benchmark commands for the new op, as the README gives them: its own tests while editing,
    then the whole suite, since an op adds to files other tests read (the benchmark table, ops.py, the registry)."""
    return [
        "pip install --no-build-isolation -e .",
        f"python -m pytest -v -s tests/ops/test_{name}.py",
        f"python benchmark.py --op {name} --quick",
        "make test",
    ]


def describe(plan: Plan, dry_run: bool) -> str:
    """What was (or, with dry_run, would be) written, the TODO places, and the next commands."""
    verb = "would add" if dry_run else "added"
    out = [f"cuda_kernels.new: {verb} op '{plan.name}' in {plan.root}"]
    out += [f"  new      {rel}" for rel in plan.new_files]
    out += [f"  changed  {rel}" for rel in plan.changed_files]
    out.append(
        f"It computes a placeholder: {plan.placeholder}. The places to edit for the real math, marked "
        f"TODO({plan.name}):"
    )
    out += [f"  {line}" for line in plan.todo_lines()]
    if dry_run:
        out.append("Dry run: nothing was written.")
    else:
        out.append("Next: build, then the op's tests and benchmark, then the whole suite:")
        out += [f"  {command}" for command in next_commands(plan.name)]
    return "\n".join(out)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m cuda_kernels.new",
        description="Add a new op (CUDA and CPU kernels, registrations, Python wrapper, tests, benchmark entry) "
        "computing a placeholder, with TODO(NAME) at each place to edit.",
    )
    parser.add_argument("name", help="the op's name: lowercase snake_case, e.g. scale_shift")
    parser.add_argument(
        "--kind",
        choices=list(KINDS),
        default=DEFAULT_KIND,
        help="elementwise (default): NAME(x), from square's pattern, computing x * 2; rowwise: NAME(x, weight=None) "
        "reducing over x's last dimension with a per-column weight, and NAME_backward, from rms_norm's pattern, "
        f"computing {new_rowwise.PLACEHOLDER}",
    )
    parser.add_argument(
        "--schema",
        default=None,
        help='the op\'s torch.library schema without the name, e.g. "(Tensor x, Tensor w, float eps) -> Tensor": '
        "an op of that signature whose outputs are copies of its first Tensor input, on the elementwise kind's files "
        "(default: the kind's own signature)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print what would be written; write nothing")
    parser.add_argument("--root", type=Path, default=None, help="repository root (default: this package's checkout)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Exit code 0 on success, 2 on a refused name or schema or a missing marker (nothing written)."""
    args = build_parser().parse_args(argv)
    root = args.root if args.root is not None else default_root()
    try:
        plan = make_plan(args.name, root, args.kind, args.schema)
    except Refusal as err:
        print(f"cuda_kernels.new: {err}; nothing was written", file=sys.stderr)
        return 2
    if not args.dry_run:
        write_plan(plan)
    print(describe(plan, args.dry_run))
    return 0


if __name__ == "__main__":
    sys.exit(main())
