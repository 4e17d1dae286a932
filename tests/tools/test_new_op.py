"""`python -m cuda_kernels.new NAME [--schema ...]`: the op generator, run on temporary copies of the repository.

Fast tests (always): refused names, schemas and missing markers change nothing (file hashes compared), --dry-run
writes nothing, a generation of each kind (elementwise, the default; --kind rowwise; --schema) writes the four new
files and the insertions above each marker (with --schema, in the C++ and Python types of the schema's arguments),
its kernel file includes no ATen header, and its output is ruff- and clang-format-clean (where those tools are on
PATH). Nothing here assumes which ops the checkout has: a checkout with ops added by the generator passes too (CI
checks that).

End to end (marked slow, and run only with CUDA_KERNELS_TEST_NEW_OP=1: the build alone takes 1-2 minutes on 2 cores;
CI does the same with its own copy, which it builds CPU-only and then with CUDA for sm_80 and sm_90a): an
op of each kind generated in a copy; built CPU-only in place (setup.py build_ext --inplace: the installed package
keeps pointing at this checkout), their generated tests pass there and the benchmark runs each once; nvcc compiles
their CUDA kernels for sm_80 and sm_90a and the host
compiler their CUDA host functions (in csrc/cuda/ops.cpp); on a GPU, the copy is built with CUDA and the ops' CUDA
tests pass.
"""

from __future__ import annotations

import ast
import hashlib
import os
import random
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from test_build_config import _heavy_includes

from cuda_kernels.tools import new
from cuda_kernels.tools.op_schema import MAX_ARG_LEN, parse_schema

ROOT = Path(__file__).resolve().parents[2]
# What a generation and a build need from the checkout (no build outputs, caches or docs).
COPIED = ["csrc", "cuda_kernels", "tests", "setup.py", "pyproject.toml", "benchmark.py", ".clang-format"]
COPIED += sorted(p.name for p in ROOT.glob("requirements*.txt"))
HAS_BENCH_TABLE = (ROOT / new.BENCH_TABLE).is_file()
# Until cuda_kernels/tools/bench/table.py exists, copies get this stand-in: the generator needs its marker.
STAND_IN_TABLE = f"OPS_IN_ORDER = (\n    {new.MARKERS['bench_table']}\n)\n"
E2E_ENV = "CUDA_KERNELS_TEST_NEW_OP"
E2E = os.environ.get(E2E_ENV, "") not in ("", "0")
NAME = "probe_twice"  # the ops the end-to-end tests generate: elementwise, row-wise and from a schema
ROWWISE_NAME = "probe_rows"
SCHEMA_NAME = "probe_schema"
E2E_SCHEMA = "(Tensor x, Tensor? w=None, float eps=1e-05, *, int n=2) -> (Tensor, Tensor)"
E2E_OPS = [NAME, ROWWISE_NAME, SCHEMA_NAME]


def copy_repo(dest: Path) -> Path:
    """A copy of what the generator and a build read, under dest; returns dest."""
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.o", ".pytest_cache", "build")
    for item in COPIED:
        src = ROOT / item
        if src.is_dir():
            shutil.copytree(src, dest / item, ignore=ignore)
        elif src.is_file():
            shutil.copy2(src, dest / item)
    table = dest / new.BENCH_TABLE
    if not table.exists():
        table.parent.mkdir(parents=True, exist_ok=True)
        table.write_text(STAND_IN_TABLE)
    return dest


def hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under root (caches excluded), by relative path."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return copy_repo(tmp_path / "repo")


def run_new(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """new.main(args) in this process: (exit code, stdout, stderr)."""
    code = new.main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    "name, why",
    [
        ("Scale", "not a valid op name"),
        ("2x", "not a valid op name"),
        ("scale-add", "not a valid op name"),
        ("", "not a valid op name"),
        ("x" * (new.MAX_NAME_LEN + 1), "characters long"),
        ("class", "Python keyword"),
        ("abs", "Python builtin"),
        ("square", "op 'square' exists"),
        ("matmul", "op 'matmul' exists"),
        ("build_info", "cuda_kernels/__init__.py defines build_info"),
        ("torch", "cuda_kernels/__init__.py defines torch"),
        ("math", "cuda_kernels/ops.py defines math"),
        ("replay", "cuda_kernels.replay is"),
        ("name", "attribute of torch.ops.cuda_kernels"),
        ("bad_input", "tests/ops/test_bad_input.py exists"),
        ("matmul_ladder", "tests/ops/test_matmul_ladder.py exists"),
    ],
)
def test_refused_names_change_nothing(repo, capsys, name, why):
    before = hashes(repo)
    code, out, err = run_new(capsys, name, "--root", str(repo))
    assert code == 2, out + err
    assert why in err and "nothing was written" in err, err
    assert out == ""
    assert hashes(repo) == before


def test_taken_cpp_symbol_refused(repo, capsys):
    """A C++ function the op would define, already in csrc/, refuses the name."""
    (repo / "csrc" / "cpu" / "helper.cpp").write_text("void widen_cpu() {}\n")
    before = hashes(repo)
    code, _, err = run_new(capsys, "widen", "--root", str(repo))
    assert code == 2 and "already has widen_cpu" in err, err
    assert hashes(repo) == before


@pytest.mark.parametrize("key", sorted(new.MARKERS))
def test_missing_marker_refuses_before_writing(repo, capsys, key):
    """Each marker: without it the generator stops, names the file and marker, and leaves every file as it was."""
    marker = new.MARKERS[key]
    holders = [
        p
        for p in repo.rglob("*")
        if p.is_file() and any(line.strip() == marker for line in p.read_text(errors="replace").splitlines())
    ]
    assert len(holders) == 1, f"marker {marker!r} should be one line of exactly one file: {holders}"
    comment = marker.split(" ")[0]  # // or #: the file stays valid C++ or Python
    holders[0].write_text(holders[0].read_text().replace(marker, f"{comment} (marker removed)"))
    before = hashes(repo)
    code, _, err = run_new(capsys, "scale2", "--root", str(repo))
    assert code == 2 and marker in err and "nothing was written" in err, err
    assert hashes(repo) == before


def test_dry_run_writes_nothing(repo, capsys):
    before = hashes(repo)
    code, out, err = run_new(capsys, "scale2", "--root", str(repo), "--dry-run")
    assert code == 0, err
    assert hashes(repo) == before
    for rel in ["csrc/cuda/scale2.cu", "csrc/cuda/scale2.h", "csrc/cpu/scale2.cpp", "tests/ops/test_scale2.py"]:
        assert rel in out
    for rel in [new.API_CPP, new.CUDA_OPS_CPP, new.BENCH_TABLE]:
        assert rel in out
    assert "nothing was written" in out and "pip install" not in out


def test_generates_files_and_insertions(repo, capsys):
    before = hashes(repo)
    code, out, err = run_new(capsys, "scale2", "--root", str(repo))
    assert code == 0, err
    after = hashes(repo)
    new_files = {"csrc/cuda/scale2.cu", "csrc/cuda/scale2.h", "csrc/cpu/scale2.cpp", "tests/ops/test_scale2.py"}
    changed = {new.OPS_H, new.CHECKS_H, new.API_CPP, new.CUDA_OPS_CPP, new.OPS_PY, new.INIT_PY, new.BENCH_TABLE}
    assert set(after) - set(before) == new_files
    assert {rel for rel in before if after[rel] != before[rel]} == changed
    for rel in sorted(new_files | changed):
        assert rel in out
    # The next commands: build, the op's tests, its benchmark, then the whole suite (an op changes shared files).
    assert "pip install --no-build-isolation -e ." in out
    assert "pytest -v -s tests/ops/test_scale2.py" in out
    assert "python benchmark.py --op scale2 --quick" in out
    assert "make test" in out

    def text(rel: str) -> str:
        return (repo / rel).read_text()

    def above(rel: str, key: str) -> str:
        """The lines of rel above MARKERS[key], joined."""
        lines = text(rel).splitlines()
        at = [i for i, line in enumerate(lines) if line.strip() == new.MARKERS[key]]
        assert len(at) == 1, (rel, key)
        return "\n".join(lines[: at[0]])

    assert "Tensor scale2_cuda(const Tensor& x);" in above(new.OPS_H, "declarations").rstrip().splitlines()[-1]
    assert "inline void check_scale2_input(const Tensor& x) {" in above(new.CHECKS_H, "input_checks")
    assert above(new.API_CPP, "schemas").endswith('  m.def("scale2(Tensor x) -> Tensor");')
    assert above(new.API_CPP, "op_names").endswith('constexpr char kScale2[] = "cuda_kernels.scale2";')
    assert above(new.API_CPP, "cpu_registrations").endswith(
        '  m.impl("scale2", TORCH_BOX((named<kScale2, scale2_cpu>)));'
    )
    assert above(new.API_CPP, "cuda_registrations").endswith(
        '  m.impl("scale2", TORCH_BOX((named<kScale2, scale2_cuda>)));'
    )
    # The include joins the sorted block above the marker, wherever its name sorts among the ops already there.
    includes = _trailing_includes(above(new.CUDA_OPS_CPP, "cuda_headers"))
    assert '#include "cuda/scale2.h"' in includes and includes == sorted(includes)
    host = above(new.CUDA_OPS_CPP, "cuda_host").rstrip()
    assert host.endswith("  return elementwise_cuda(x, kernels::kThreads, launch);\n}")
    assert "Tensor scale2_cuda(const Tensor& x) {\n  check_scale2_input(x);" in host
    # The kernel file is light: no ATen, torch or c10 header beyond c10's scalar types (test_build_config's check).
    assert _heavy_includes(str(repo / "csrc" / "cuda" / "scale2.cu"), set(), str(repo / "csrc")) == []
    ops_py = above(new.OPS_PY, "ops_py")
    for piece in [
        "def scale2(x: Tensor) -> Tensor:",
        '@torch.library.register_fake("cuda_kernels::scale2")',
        '_SCALE2 = _Op(\n    "scale2",\n    _scale2_backward,',
    ]:
        assert piece in ops_py
    imported, exported = _init_names(text(new.INIT_PY))
    assert {"matmul", "scale2", "set_dump_dir", "square"} <= set(imported)
    assert imported == sorted(imported, key=new._sort_key)  # ruff's order, whatever ops the checkout has
    before = _init_names((ROOT / new.INIT_PY).read_text())[1]  # the checkout's __all__, whatever ops it has
    assert exported == [*before, "scale2"]
    assert 'elementwise(\n        "scale2",' in above(new.BENCH_TABLE, "bench_table")
    for rel in (new.OPS_PY, new.INIT_PY, new.BENCH_TABLE, "tests/ops/test_scale2.py"):
        compile(text(rel), rel, "exec")  # valid Python
    # Every place to edit is marked, and the output lists each one with its line.
    todo = [f"{rel}:" for rel in ["csrc/cuda/scale2.cu", "csrc/cpu/scale2.cpp", "tests/ops/test_scale2.py"]]
    todo += [f"{new.OPS_PY}:", f"{new.BENCH_TABLE}:"]
    todo_lines = [line for line in out.splitlines() if "TODO(scale2)" in line]
    for place in todo:
        assert any(line.strip().startswith(place) for line in todo_lines), (place, out)
    # The op exists now: a second run refuses and changes nothing.
    again = hashes(repo)
    code, _, err = run_new(capsys, "scale2", "--root", str(repo))
    assert code == 2 and "exists" in err
    assert hashes(repo) == again


def _trailing_includes(text: str) -> list[str]:
    """The #include lines at the end of text (the block right above a marker)."""
    lines = text.splitlines()
    start = len(lines)
    while start > 0 and lines[start - 1].startswith("#include"):
        start -= 1
    return lines[start:]


def _init_names(source: str) -> tuple[list[str], list[str]]:
    """(the names cuda_kernels/__init__.py imports from cuda_kernels.ops, its __all__), in their order."""
    tree = ast.parse(source)
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "cuda_kernels.ops"]
    imported = [a.name for a in max(imports, key=lambda n: len(n.names)).names]  # the ops' (others import one)
    exported = next(
        [e.value for e in n.value.elts]
        for n in tree.body
        if isinstance(n, ast.Assign) and [getattr(t, "id", None) for t in n.targets] == ["__all__"]
    )
    return imported, exported


def test_second_op_goes_after_the_first(repo, capsys):
    """Ops are added in order: each insertion of the second op below the first's, the import kept sorted."""
    assert run_new(capsys, "op2", "--root", str(repo))[0] == 0
    assert run_new(capsys, "op10", "--root", str(repo))[0] == 0
    api = (repo / new.API_CPP).read_text()
    for first, second in [
        ('m.def("op2(', 'm.def("op10('),
        ("constexpr char kOp2[]", "constexpr char kOp10[]"),
        ('m.impl("op2", TORCH_BOX((named<kOp2, op2_cuda>)))', 'm.impl("op10", TORCH_BOX((named<kOp10, op10_cuda>)))'),
    ]:
        assert api.index(first) < api.index(second)
    ops_py = (repo / new.OPS_PY).read_text()
    assert ops_py.index("def op2(") < ops_py.index("def op10(")
    init = (repo / new.INIT_PY).read_text()
    assert init.index("        op2,\n") < init.index("        op10,\n")  # ruff's natural order: 2 before 10


def test_sort_key_is_ruffs_order():
    """The order `ruff check --select I --fix` gave these names (ruff 0.17.6)."""
    ruff_order = ["a", "a1", "a9b", "a10b", "a_1", "a__b", "a_b", "ab", "abc1", "matmul", "op2", "op10"]
    ruff_order += ["set_dump_dir", "square", "z0", "z_", "zz"]
    shuffled = ruff_order[:]
    random.Random(0).shuffle(shuffled)
    assert sorted(shuffled, key=new._sort_key) == ruff_order


# --schema: each schema of the issue, and the C++ declaration it must give (NAME: the op's name).
SCHEMAS = {
    "(Tensor x, Tensor w, float eps) -> Tensor": "Tensor NAME_cpu(const Tensor& x, const Tensor& w, double eps);",
    "(Tensor a, Tensor b) -> Tensor": "Tensor NAME_cpu(const Tensor& a, const Tensor& b);",
    "(Tensor x, Tensor? bias=None, int n=2) -> Tensor": (
        "Tensor NAME_cpu(const Tensor& x, const std::optional<Tensor>& bias, int64_t n);"
    ),
    "(Tensor x) -> (Tensor, Tensor)": "std::tuple<Tensor, Tensor> NAME_cpu(const Tensor& x);",
    "(Tensor x, *, float alpha=1.0, int[2] k=[1, 2]) -> Tensor": (
        "Tensor NAME_cpu(const Tensor& x, double alpha, torch::headeronly::HeaderOnlyArrayRef<int64_t> k);"
    ),
}


@pytest.mark.parametrize("schema", SCHEMAS)
def test_schema_generates_every_place(repo, capsys, schema):
    """--schema: the files and insertions of an elementwise op, written for the schema's arguments and outputs."""
    before = hashes(repo)
    code, out, err = run_new(capsys, "probe", "--schema", schema, "--root", str(repo))
    assert code == 0, err
    after = hashes(repo)
    new_files = {"csrc/cuda/probe.cu", "csrc/cuda/probe.h", "csrc/cpu/probe.cpp", "tests/ops/test_probe.py"}
    changed = {new.OPS_H, new.CHECKS_H, new.API_CPP, new.CUDA_OPS_CPP, new.OPS_PY, new.INIT_PY, new.BENCH_TABLE}
    assert set(after) - set(before) == new_files
    assert {rel for rel in before if after[rel] != before[rel]} == changed
    assert "make test" in out and "python benchmark.py --op probe --quick" in out

    def text(rel: str) -> str:
        return (repo / rel).read_text()

    parsed = parse_schema(schema)
    declaration = SCHEMAS[schema].replace("NAME", "probe")
    assert declaration in text(new.OPS_H)
    assert declaration.replace("_cpu(", "_cuda(") in text(new.OPS_H)
    assert f'm.def("probe{parsed.text}");' in text(new.API_CPP)
    assert 'm.impl("probe", TORCH_BOX((named<kProbe, probe_cuda>)));' in text(new.API_CPP)
    checks = text(new.CHECKS_H)
    for other in parsed.checked_tensors[1:]:  # every tensor against the first: dtype and device
        assert (
            f'check_float_like(op, "{parsed.first.name}", {parsed.first.name}, "{other.name}", {other.name});' in checks
        )
    # The C++ kernels and the host functions are on the stable ABI: no ATen, c10 (but its scalar types) or pybind11.
    for rel in ["csrc/cuda/probe.cu", "csrc/cpu/probe.cpp", new.CUDA_OPS_CPP]:
        code = re.sub(r"//.*", "", text(rel))  # comments may name ATen's counterparts
        assert not re.search(r"\b(at|pybind11)::|<ATen/|<c10/|torch/extension.h", code), rel
    assert _heavy_includes(str(repo / "csrc" / "cuda" / "probe.cu"), set(), str(repo / "csrc")) == []
    ops_py = ast.parse(text(new.OPS_PY))
    functions = {f.name: f for f in ops_py.body if isinstance(f, ast.FunctionDef)}
    wrapper = functions["probe"]
    assert [a.arg for a in wrapper.args.args + wrapper.args.kwonlyargs] == [a.name for a in parsed.args]
    assert [a.arg for a in wrapper.args.kwonlyargs] == [a.name for a in parsed.args if a.kwarg_only]
    # The backward stub: one gradient per positional input (torch.library's contract: keyword-only ones get none).
    returned = next(n for n in ast.walk(functions["_probe_backward"]) if isinstance(n, ast.Return)).value
    n_grads = len(returned.elts) if isinstance(returned, ast.Tuple) else 1
    assert n_grads == len([a for a in parsed.args if not a.kwarg_only])
    setup = [a.arg for a in functions["_probe_setup_context"].args.args]
    keyword_only = any(a.kwarg_only for a in parsed.args)
    assert setup == ["ctx", "inputs", "keyword_only_inputs", "output"] if keyword_only else ["ctx", "inputs", "output"]
    assert 'multi_input(\n        "probe",' in text(new.BENCH_TABLE)
    for rel in (new.OPS_PY, new.INIT_PY, new.BENCH_TABLE, "tests/ops/test_probe.py"):
        compile(text(rel), rel, "exec")
    for place in ["csrc/cuda/probe.cu:", "csrc/cpu/probe.cpp:", "tests/ops/test_probe.py:", f"{new.OPS_PY}:"]:
        assert any(line.strip().startswith(place) and "TODO(probe)" in line for line in out.splitlines()), place


@pytest.mark.parametrize(
    "schema, why",
    [
        ("(Tensor x, Scalar s) -> Tensor", "type 'Scalar'"),
        ("(Tensor x, SymInt n) -> Tensor", "type 'SymInt'"),
        ("(Tensor[] xs) -> Tensor", "type 'Tensor[]'"),
        ("(Tensor x, Dimname d) -> Tensor", "type 'Dimname'"),
        ("(Tensor x, bool[] b) -> Tensor", "type 'bool[]'"),
        ("(Tensor x) -> int", "'int' is not a Tensor"),
        ("(Tensor(a!) x) -> Tensor", "alias annotation 'Tensor(a!)'"),
        ("(float x) -> Tensor", "no Tensor argument"),
        ("(Tensor x, *, Tensor? w=None) -> Tensor", "keyword-only Tensor?"),
        ("(Tensor x, Tensor x) -> Tensor", "appears twice"),
        ("(Tensor x, Tensor out) -> Tensor", "uses that name itself"),
        ("(Tensor x, float eps=abc) -> Tensor", "torch does not accept the schema"),
        ("Tensor x -> Tensor", "must start with '('"),
    ],
)
def test_unsupported_schema_refused_in_one_line(repo, capsys, schema, why):
    before = hashes(repo)
    code, out, err = run_new(capsys, "probe", "--schema", schema, "--root", str(repo))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and why in err and "--schema" in err and "nothing was written" in err, err
    assert hashes(repo) == before


def test_help_documents_schema():
    text = new.build_parser().format_help()
    assert "--schema" in text and "(Tensor x, Tensor w, float eps) -> Tensor" in " ".join(text.split())


def test_rowwise_generates_files_and_insertions(repo, capsys):
    """--kind rowwise: the same four new files and seven changed ones, with two ops (NAME and NAME_backward)."""
    before = hashes(repo)
    code, out, err = run_new(capsys, "rowop", "--root", str(repo), "--kind", "rowwise")
    assert code == 0, err
    after = hashes(repo)
    new_files = {"csrc/cuda/rowop.cu", "csrc/cuda/rowop.h", "csrc/cpu/rowop.cpp", "tests/ops/test_rowop.py"}
    changed = {new.OPS_H, new.CHECKS_H, new.API_CPP, new.CUDA_OPS_CPP, new.OPS_PY, new.INIT_PY, new.BENCH_TABLE}
    assert set(after) - set(before) == new_files
    assert {rel for rel in before if after[rel] != before[rel]} == changed
    text = {rel: (repo / rel).read_text() for rel in new_files | changed}
    api = text[new.API_CPP]
    for piece in [
        'm.def("rowop(Tensor x, Tensor? weight=None) -> Tensor");',
        'm.def("rowop_backward(Tensor grad, Tensor x, Tensor? weight) -> (Tensor, Tensor)");',
        'constexpr char kRowopBackward[] = "cuda_kernels.rowop_backward";',
        'm.impl("rowop_backward", TORCH_BOX((named<kRowopBackward, rowop_backward_cpu>)));',
        'm.impl("rowop_backward", TORCH_BOX((named<kRowopBackward, rowop_backward_cuda>)));',
    ]:
        assert piece in api
    assert "Grads rowop_backward_cuda(const Tensor& grad, const Tensor& x, const OptTensor& weight);" in text[new.OPS_H]
    assert "inline void check_rowop_inputs(const Tensor& x, const OptTensor& weight) {" in text[new.CHECKS_H]
    ops_cpp = text[new.CUDA_OPS_CPP]
    assert '#include "cuda/rowop.h"' in ops_cpp and "return rowwise_backward(grad, x, weight, launch);" in ops_cpp
    ops_py = text[new.OPS_PY]
    for piece in [
        "def rowop(x: Tensor, weight: Tensor | None = None) -> Tensor:",
        '@torch.library.register_fake("cuda_kernels::rowop_backward")',
        "torch.ops.cuda_kernels.rowop_backward.default(grad, x, weight)",
        '_ROWOP = _Op(\n    "rowop",',
    ]:
        assert piece in ops_py
    assert '*rowwise(\n        "rowop",' in text[new.BENCH_TABLE]
    # The kernels sit on the shared row-wise helpers, with no ATen header; the tests cover both CUDA paths.
    cu = text["csrc/cuda/rowop.cu"]
    for helper in ["rowwise::load_row", "rowwise::row_sum", "rowwise::with_vectorized", "rowwise::write_partial_row"]:
        assert helper in cu
    assert _heavy_includes(str(repo / "csrc" / "cuda" / "rowop.cu"), set(), str(repo / "csrc")) == []
    assert "(2, 40000)" in text["tests/ops/test_rowop.py"]
    for rel in (new.OPS_PY, new.INIT_PY, new.BENCH_TABLE, "tests/ops/test_rowop.py"):
        compile(text[rel], rel, "exec")
    for place in ["csrc/cuda/rowop.cu:", "csrc/cpu/rowop.cpp:", "tests/ops/test_rowop.py:", f"{new.OPS_PY}:"]:
        assert any(line.strip().startswith(place) and "TODO(rowop)" in line for line in out.splitlines()), place
    assert "(x - mean(x over the last dim)) * weight" in out


@pytest.mark.parametrize(
    "setup, name, why",
    [
        (None, "rms_norm", "op 'rms_norm' exists"),
        (None, "rms_norm_backward", "op 'rms_norm_backward' exists"),
        ("scale2_backward", "scale2", "op 'scale2_backward' exists"),  # the backward's name, taken by another op
        (None, "rms", None),  # free, its backward too: a prefix of a taken name does not clash
    ],
)
def test_rowwise_refuses_taken_names(repo, capsys, setup, name, why):
    if setup is not None:
        assert run_new(capsys, setup, "--root", str(repo))[0] == 0
    before = hashes(repo)
    code, out, err = run_new(capsys, name, "--root", str(repo), "--kind", "rowwise", "--dry-run")
    if why is None:
        assert code == 0, err
        return
    assert code == 2 and why in err and "nothing was written" in err, err
    assert hashes(repo) == before


def test_kind_choices_in_help(capsys):
    with pytest.raises(SystemExit):
        new.main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--kind {elementwise,rowwise}" in help_text and "default" in help_text


def test_elementwise_is_the_default(repo, tmp_path, capsys):
    """--kind elementwise writes exactly what no --kind writes."""
    other = copy_repo(tmp_path / "other")
    assert run_new(capsys, "scale2", "--root", str(repo))[0] == 0
    assert run_new(capsys, "scale2", "--root", str(other), "--kind", "elementwise")[0] == 0
    assert hashes(repo) == hashes(other)


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not on PATH (pre-commit runs its own copy on the repository's files)")
    return path


# The shortest and the longest name: generated lines must fit the 120 columns either way.
LONGEST_NAME = ("ab_" * new.MAX_NAME_LEN)[: new.MAX_NAME_LEN - 1] + "b"
FORMAT_NAMES = ["a", "op10", LONGEST_NAME]
# The same for --schema, with the longest argument names and every kind of argument: (name, schema) pairs; the
# elementwise kind: a schema of None.
_LONG_ARGS = [f"{c}{'_' * (MAX_ARG_LEN - 2)}{c}" for c in "abcdefgh"]
FORMAT_SCHEMAS = [
    ("a", "(Tensor x) -> Tensor"),
    ("op10", "(Tensor x, Tensor? w=None, float eps=1e-05, *, int n=2, bool flag=False) -> (Tensor, Tensor)"),
    (
        LONGEST_NAME,
        f"(Tensor {_LONG_ARGS[0]}, Tensor {_LONG_ARGS[1]}, Tensor? {_LONG_ARGS[2]}, float {_LONG_ARGS[3]}, "
        f'*, int[2] {_LONG_ARGS[4]}=[1, 2], str {_LONG_ARGS[5]}="mean", float? {_LONG_ARGS[6]}=None, '
        f"int[]? {_LONG_ARGS[7]}=None) -> (Tensor, Tensor, Tensor)",
    ),
]
FORMAT_CASES = [(name, kind, None) for kind in sorted(new.KINDS) for name in FORMAT_NAMES]
FORMAT_CASES += [(name, new.DEFAULT_KIND, schema) for name, schema in FORMAT_SCHEMAS]
FORMAT_IDS = [f"{'schema' if schema else kind}-{len(name)}" for name, kind, schema in FORMAT_CASES]


def _generate(capsys: pytest.CaptureFixture[str], repo: Path, name: str, kind: str, schema: str | None) -> None:
    args = [name, "--root", str(repo), "--kind", kind] + (["--schema", schema] if schema else [])
    code, _, err = run_new(capsys, *args)
    assert code == 0, err


@pytest.mark.parametrize("name, kind, schema", FORMAT_CASES, ids=FORMAT_IDS)
def test_generated_cpp_is_clang_format_clean(repo, capsys, name, kind, schema):
    clang_format = _tool("clang-format")
    _generate(capsys, repo, name, kind, schema)
    files = [
        f"csrc/cuda/{name}.cu",
        f"csrc/cuda/{name}.h",
        f"csrc/cpu/{name}.cpp",
        new.OPS_H,
        new.CHECKS_H,
        new.API_CPP,
    ]
    files.append(new.CUDA_OPS_CPP)
    proc = subprocess.run([clang_format, "--dry-run", "-Werror", *files], cwd=repo, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name, kind, schema", FORMAT_CASES, ids=FORMAT_IDS)
def test_generated_python_is_ruff_clean(repo, capsys, name, kind, schema):
    ruff = _tool("ruff")
    _generate(capsys, repo, name, kind, schema)
    files = [f"tests/ops/test_{name}.py", new.OPS_PY, new.INIT_PY]
    if HAS_BENCH_TABLE:
        files.append(new.BENCH_TABLE)  # the stand-in table's names are undefined: checked only when real
    for args in (["check", "--no-fix"], ["format", "--check", "--diff"]):
        proc = subprocess.run([ruff, *args, *files], cwd=repo, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_command_line(repo):
    """`python -m cuda_kernels.new` itself, from the copy (whose extension is not built: the package must still
    import): a refusal exits 2, a dry run 0."""
    env = dict(os.environ, PYTHONPATH=str(repo))
    cmd = [sys.executable, "-m", "cuda_kernels.new"]
    refused = subprocess.run([*cmd, "square"], cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "op 'square' exists" in refused.stderr
    dry = subprocess.run([*cmd, "scale2", "--dry-run"], cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert f"in {repo.resolve()}" in dry.stdout  # the default root: the checkout the running package is in


# ---------------------------------------------------------------------------------------------------------------
# End to end: build, test and benchmark a generated op; compile its CUDA kernel.

requires_e2e = pytest.mark.skipif(not E2E, reason=f"builds a copy of the repo (minutes): set {E2E_ENV}=1")


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repo with E2E_OPS generated in it, one of each kind (not built)."""
    repo = copy_repo(tmp_path_factory.mktemp("new_op") / "repo")
    assert new.main([NAME, "--root", str(repo)]) == 0
    assert new.main([ROWWISE_NAME, "--root", str(repo), "--kind", "rowwise"]) == 0
    assert new.main([SCHEMA_NAME, "--schema", E2E_SCHEMA, "--root", str(repo)]) == 0
    return repo


def _run(cmd: list[str], repo: Path, timeout: int, **env: str) -> subprocess.CompletedProcess[str]:
    """cmd in the copy, importing the copy's package; fails the test with the output's end when it fails."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("CUDA_KERNELS_JIT", "PYTHONPATH")}
    full_env.update(PYTHONPATH=str(repo), CUDA_KERNELS_ALLOW_CPU_ONLY="1", **env)
    proc = subprocess.run(cmd, cwd=repo, env=full_env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-6000:]}"
    return proc


@pytest.mark.slow
@requires_e2e
def test_end_to_end_cpu(generated):
    repo = generated
    _run([sys.executable, "setup.py", "build_ext", "--inplace"], repo, timeout=1800, WITH_CUDA="0")
    where = _run(
        [sys.executable, "-c", "import cuda_kernels as ck; print(ck.__file__, ck.build_info()['cuda'])"], repo, 300
    )
    assert where.stdout.split() == [str(repo / "cuda_kernels" / "__init__.py"), "False"], where.stdout
    test_files = [f"tests/ops/test_{op}.py" for op in E2E_OPS]
    tests = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *test_files], repo, 900)
    assert " passed" in tests.stdout and "failed" not in tests.stdout, tests.stdout[-3000:]
    if not HAS_BENCH_TABLE:
        pytest.skip(f"built and passed its tests; no benchmark: {new.BENCH_TABLE} does not exist in this checkout")
    for op in E2E_OPS:
        bench = _run([sys.executable, "benchmark.py", "--op", op, "--quick", "--device", "cpu"], repo, 900)
        assert op in bench.stdout, bench.stdout[-3000:]


@pytest.mark.slow
@requires_e2e
def test_end_to_end_cuda(generated, tmp_path):
    """On a GPU: the copy built with CUDA for this GPU's arch alone, its tests (CUDA cases included) and benchmark."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no GPU visible: the CUDA end to end needs one")
    major, minor = torch.cuda.get_device_capability()
    arch = f"{major}.{minor}" + ("a" if major == 9 else "")  # sm_90a: the Hopper-only matmul steps build too
    repo = tmp_path / "repo_cuda"
    shutil.copytree(generated, repo, ignore=shutil.ignore_patterns("build", "*.so", "*.o", "__pycache__"))
    _run([sys.executable, "setup.py", "build_ext", "--inplace"], repo, 1800, WITH_CUDA="1", TORCH_CUDA_ARCH_LIST=arch)
    info = _run([sys.executable, "-c", "import cuda_kernels as ck; print(ck.build_info()['cuda'])"], repo, 300)
    assert info.stdout.split() == ["True"], info.stdout
    for op in E2E_OPS:
        tests = _run(
            [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", f"tests/ops/test_{op}.py"], repo, 900
        )
        cuda_passed = [line for line in tests.stdout.splitlines() if "cuda" in line and " PASSED" in line]
        assert cuda_passed and "FAILED" not in tests.stdout, tests.stdout[-3000:]  # the CUDA cases ran, not skipped
        bench = _run([sys.executable, "benchmark.py", "--op", op, "--quick", "--device", "cuda"], repo, 900)
        assert op in bench.stdout, bench.stdout[-3000:]


@pytest.mark.slow
@requires_e2e
@pytest.mark.parametrize("op", E2E_OPS)
def test_generated_kernel_compiles_with_nvcc(generated, op):
    """nvcc compiles each generated .cu alone for sm_80 and sm_90a (CI's archs), with the include paths and nvcc
    flags of a torch build."""
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS, include_paths

    from cuda_kernels.tools.build_config import find_cuda_home

    cuda_home = find_cuda_home()
    if cuda_home is None:
        pytest.skip("no CUDA toolkit (nvcc) found")
    cmd = [os.path.join(cuda_home, "bin", "nvcc"), "-std=c++20"]
    cmd += ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90a,code=sm_90a"]
    cmd += [*COMMON_NVCC_FLAGS, "-I" + str(generated / "csrc"), "-I" + os.path.join(cuda_home, "include")]
    cmd += [f"-I{p}" for p in include_paths()]
    cmd += ["-c", f"csrc/cuda/{op}.cu", "-o", str(generated / f"{op}.o")]
    _run(cmd, generated, timeout=900)
    assert (generated / f"{op}.o").stat().st_size > 0


@pytest.mark.slow
@requires_e2e
def test_generated_host_function_compiles(generated):
    """The ops' CUDA host functions (each kind), inserted in csrc/cuda/ops.cpp (only CUDA builds compile that file): the
    host
    compiler parses ops.cpp with torch's and CUDA's include paths."""
    from torch.utils.cpp_extension import include_paths

    from cuda_kernels.tools.build_config import CUDA_LIBRARY_DEFINES, STABLE_DEFINES, find_cuda_home

    cuda_home = find_cuda_home()
    if cuda_home is None:
        pytest.skip("no CUDA toolkit found (ops.cpp includes the CUDA runtime's headers)")
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler on PATH")
    cmd = [
        cxx,
        "-std=c++20",
        "-fsyntax-only",
        *STABLE_DEFINES,
        *CUDA_LIBRARY_DEFINES,  # as the CUDA library compiles it
        "-I" + str(generated / "csrc"),
        "-I" + os.path.join(cuda_home, "include"),
    ]
    cmd += [f"-I{p}" for p in include_paths()] + ["-I" + sysconfig.get_paths()["include"]]
    _run([*cmd, "csrc/cuda/ops.cpp"], generated, timeout=900)
