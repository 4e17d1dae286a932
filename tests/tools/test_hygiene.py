"""Hygiene: the package and its tools load no pickles without weights_only, reach no network, and write only to
their build, cache and dump directories or to output paths the user names.

Static checks (AST) over cuda_kernels/**/*.py, benchmark.py and scripts/*.py (shell scripts in scripts/ by regex):
  - torch.load must pass weights_only=True; no pickle/dill/joblib loads, no numpy allow_pickle=True;
  - no imports of network modules (urllib, requests, socket, http, ...), no curl/wget in scripts;
  - every call that writes to the file system (open(..., "w"), Path.write_text, os.makedirs, shutil.*, torch.save,
    savefig, ...) is listed in ALLOWED_WRITES with where it writes. A new write site fails this test until it is
    reviewed and listed.
Runtime check: in a fresh interpreter with an empty temporary HOME and working directory, importing cuda_kernels
and calling both ops (successfully and failing) creates no file in either.
"""

from __future__ import annotations

import ast
import glob
import os
import re
import subprocess
import sys
import textwrap

import pytest

import cuda_kernels

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def python_files() -> list[str]:
    files = sorted(glob.glob(os.path.join(ROOT, "cuda_kernels", "**", "*.py"), recursive=True))
    files += [os.path.join(ROOT, "benchmark.py")] if os.path.exists(os.path.join(ROOT, "benchmark.py")) else []
    files += sorted(glob.glob(os.path.join(ROOT, "scripts", "*.py")))
    return files


def shell_files() -> list[str]:
    return sorted(glob.glob(os.path.join(ROOT, "scripts", "*.sh")))


NETWORK_MODULES = {
    "urllib", "urllib2", "urllib3", "requests", "httpx", "aiohttp", "http", "socket", "socketserver", "ftplib",
    "smtplib", "telnetlib", "xmlrpc", "websocket", "websockets", "paramiko", "pycurl", "asyncssh",
}  # fmt: skip
PICKLE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "shelve", "marshal"}

# Write sites, by (file relative to the repo, enclosing function): where they write. Review a new one before adding.
ALLOWED_WRITES = {
    ("cuda_kernels/_dump.py", "write_dump"): "a repro dump into CUDA_KERNELS_DUMP_DIR / set_dump_dir(), only if set",
    ("cuda_kernels/tools/jit.py", "load"): "the JIT build cache: CUDA_KERNELS_JIT_DIR or ~/.cache/cuda_kernels/jit",
    (
        "cuda_kernels/tools/new.py",
        "write_plan",
    ): "the new op's files and marked insertions under --root (default: this checkout)",
    ("cuda_kernels/tools/bench/report.py", "write_json"): "--json PATH given by the user",
    ("cuda_kernels/tools/bench/report.py", "write_csv"): "--csv PATH given by the user",
    ("cuda_kernels/tools/bench/report.py", "plot_records"): "--plot PATH given by the user",
    ("scripts/tune_matmul.py", "main"): "--json PATH given by the user",
    ("scripts/sass_diff.py", "main"): "the OUT path of `dump` given on the command line",
    ("scripts/linear_epilogue.py", "main"): "the JSON path given on the command line",
}
# Calls that write, by qualified name (module.function) or by method name on any object.
WRITE_FUNCTIONS = {
    "os.makedirs", "os.mkdir", "os.remove", "os.unlink", "os.rename", "os.replace", "os.rmdir", "os.removedirs",
    "os.symlink", "os.link", "os.truncate", "os.mkfifo", "shutil.copy", "shutil.copy2", "shutil.copyfile",
    "shutil.copytree", "shutil.move", "shutil.rmtree", "torch.save", "np.save", "np.savez", "np.savetxt",
    "numpy.save", "tempfile.mkstemp", "tempfile.mkdtemp", "tempfile.NamedTemporaryFile",
    "tempfile.TemporaryDirectory", "plt.savefig",
}  # fmt: skip
WRITE_METHODS = {"write_text", "write_bytes", "mkdir", "touch", "unlink", "rmdir", "symlink_to", "hardlink_to",
                 "savefig", "to_csv", "to_json"}  # fmt: skip


def dotted(node: ast.AST) -> str:
    """'os.path.join' for the expression os.path.join; '' when it is not a plain dotted name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def is_write_mode(call: ast.Call, position: int) -> bool:
    mode = call.args[position] if len(call.args) > position else None
    for kw in call.keywords:
        if kw.arg == "mode":
            mode = kw.value
    if mode is None:
        return False
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return bool(set(mode.value) & set("wax+"))
    return True  # a computed mode: treat as a write, to be reviewed


class Scanner(ast.NodeVisitor):
    """Collects (line, function, kind, detail) findings of one module."""

    def __init__(self) -> None:
        self.findings: list[tuple[int, str, str, str]] = []
        self.function = "<module>"

    def report(self, node: ast.AST, kind: str, detail: str) -> None:
        self.findings.append((node.lineno, self.function, kind, detail))

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        outer, self.function = self.function, node.name
        self.generic_visit(node)
        self.function = outer

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and node.level == 0:
            self._check_module(node, node.module)

    def _check_module(self, node: ast.AST, name: str) -> None:
        top = name.split(".")[0]
        if top in NETWORK_MODULES:
            self.report(node, "network", f"imports {name}")
        if top in PICKLE_MODULES:
            self.report(node, "pickle", f"imports {name}")

    def visit_Call(self, node: ast.Call) -> None:
        name = dotted(node.func)
        method = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        if name == "torch.load" or name.endswith(".torch.load"):
            weights_only = [kw for kw in node.keywords if kw.arg == "weights_only"]
            if not (
                weights_only and isinstance(weights_only[0].value, ast.Constant) and weights_only[0].value.value is True
            ):
                self.report(node, "pickle", "torch.load without weights_only=True")
        if name in ("np.load", "numpy.load"):
            for kw in node.keywords:
                if kw.arg == "allow_pickle" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                    self.report(node, "pickle", "numpy load with allow_pickle")
        if name in ("open", "io.open", "builtins.open") and is_write_mode(node, 1):
            self.report(node, "write", f"{name}(..., write mode)")
        elif method == "open" and name not in ("open", "os.open") and is_write_mode(node, 0):
            self.report(node, "write", f".open(write mode) on {dotted(node.func.value) or 'an object'}")
        elif name == "os.open":
            self.report(node, "write", "os.open")
        elif name in WRITE_FUNCTIONS or (name.split(".")[0] == "shutil" and name != "shutil.which"):
            self.report(node, "write", name)
        elif method in WRITE_METHODS:
            self.report(node, "write", f".{method}()")
        self.generic_visit(node)


def scan(path: str) -> list[tuple[int, str, str, str]]:
    with open(path) as f:
        tree = ast.parse(f.read(), filename=path)
    scanner = Scanner()
    scanner.visit(tree)
    return scanner.findings


def rel(path: str) -> str:
    return os.path.relpath(path, ROOT).replace(os.sep, "/")


def test_there_is_something_to_scan() -> None:
    names = {rel(p) for p in python_files()}
    assert {"cuda_kernels/__init__.py", "cuda_kernels/ops.py"} <= names, names


@pytest.mark.parametrize("kind", ["pickle", "network"])
def test_no_pickle_loads_or_network(kind: str) -> None:
    bad = [f"{rel(p)}:{line} in {fn}: {detail}" for p in python_files() for line, fn, k, detail in scan(p) if k == kind]
    assert not bad, "\n".join(bad)


def test_no_network_tools_in_shell_scripts() -> None:
    pattern = re.compile(r"(^|[\s;|&(`])(curl|wget|nc|ncat|telnet|ftp|scp|sftp)\s")
    bad = []
    for path in shell_files():
        with open(path) as f:
            for i, line in enumerate(f, 1):
                code = line.split("#", 1)[0]
                if pattern.search(code):
                    bad.append(f"{rel(path)}:{i}: {line.strip()}")
    assert not bad, "\n".join(bad)


def test_writes_only_where_allowed() -> None:
    bad = []
    for path in python_files():
        for line, fn, kind, detail in scan(path):
            if kind == "write" and (rel(path), fn) not in ALLOWED_WRITES:
                bad.append(f"{rel(path)}:{line} in {fn}(): {detail}")
    assert not bad, (
        "file-system writes not reviewed; if one writes only to a build, cache or dump directory or to a path the "
        "user gives, add (file, function) to ALLOWED_WRITES in tests/tools/test_hygiene.py with where it writes:\n"
        + "\n".join(bad)
    )


def test_scanner_finds_what_it_should() -> None:
    """The scanner itself: each forbidden pattern is found, allowed ones are not."""
    src = textwrap.dedent(
        """
        import socket, pickle
        from urllib.request import urlopen
        import torch, numpy as np
        def f(p):
            torch.load(p)
            torch.load(p, weights_only=False)
            torch.load(p, weights_only=True)
            np.load(p, allow_pickle=True)
            open(p, "w"); open(p); open(p, "rb"); open(p, mode="a")
            os.makedirs(p); shutil.rmtree(p); shutil.which("nvcc"); Path(p).write_text("x"); Path(p).open("wb")
        """
    )
    scanner = Scanner()
    scanner.visit(ast.parse(src))
    kinds = [(k, d) for _, _, k, d in scanner.findings]
    assert [d for k, d in kinds if k == "network"] == ["imports socket", "imports urllib.request"]
    assert [d for k, d in kinds if k == "pickle"] == [
        "imports pickle",
        "torch.load without weights_only=True",
        "torch.load without weights_only=True",
        "numpy load with allow_pickle",
    ]
    assert len([d for k, d in kinds if k == "write"]) == 6, kinds


RUNTIME_SCRIPT = """
import torch, cuda_kernels
x = torch.randn(33, 17)
cuda_kernels.square(x); cuda_kernels.matmul(x, x.t())
try:
    cuda_kernels.square(torch.ones(3, dtype=torch.int32))
except RuntimeError:
    pass
if torch.cuda.is_available() and cuda_kernels.build_info()["cuda"]:
    y = x.cuda()
    cuda_kernels.square(y); cuda_kernels.matmul(y, y.t()); torch.cuda.synchronize()
print("ran")
"""


def test_import_and_calls_create_no_files(tmp_path) -> None:
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(cuda_kernels.__file__)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_KERNELS_", "XDG_", "TORCH_HOME"))}
    # CUDA_CACHE_DISABLE: the CUDA driver (not this package) keeps a JIT cache in ~/.nv/ComputeCache; seen on the
    # H100 machine when torch's own kernels were loaded.
    env.update(HOME=str(home), PYTHONPATH=package_root, PYTHONDONTWRITEBYTECODE="1", CUDA_CACHE_DISABLE="1")
    proc = subprocess.run(
        [sys.executable, "-c", RUNTIME_SCRIPT], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0 and "ran" in proc.stdout, proc.stdout + proc.stderr
    created = sorted(rel_path for d in (home, cwd) for rel_path in (str(p.relative_to(tmp_path)) for p in d.rglob("*")))
    assert not created, f"files created by importing/calling cuda_kernels: {created}"
