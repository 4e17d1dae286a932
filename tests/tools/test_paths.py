"""Docs and code comments name only repository paths that exist: a renamed or deleted file fails here, with the
file and line of every stale mention.

What is read: the whole text of the Markdown files (README.md, docs/, scripts/README.md) and of the op generator's
templates; in code, the comments (C++ and CUDA // and /* */; Python and shell #) and Python's docstrings. String
literals in code are left out: tests name made-up files there (the ops they generate), and what a message names is
checked by the tests of the code that prints it.

A path is a token that starts with one of the repository's top-level folders (csrc/, cuda_kernels/, tests/,
scripts/, docs/, examples/, .ci/) or is a top-level file name (setup.py, Makefile, ...), and is not part of a longer
path (/tmp/tests/x, ~/.cache/cuda_kernels, a URL). Placeholders are skipped: tokens with <, >, {, }, *, $, ...
or NAME / OP / NN_ in them (tests/ops/test_<op>.py, csrc/cuda/{name}.cu, csrc/cuda/matmul/NN_name.cu), and the files
of the README's example op (EXAMPLE_OPS), which the op generator writes. A Markdown link's #section is not checked.
"""

from __future__ import annotations

import io
import os
import re
import tokenize

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FOLDERS = ("csrc", "cuda_kernels", "tests", "scripts", "docs", "examples", ".ci")
TOP_LEVEL_FILES = ("setup.py", "benchmark.py", "Makefile", "pyproject.toml", "README.md", "requirements.txt",
                   "requirements-dev.txt", ".pre-commit-config.yaml", ".clang-format")  # fmt: skip
# A path ends at white space, a quote, a bracket or punctuation that cannot be in this repository's file names.
PATH = re.compile(
    r"(?<![\w./~-])("
    + "|".join(re.escape(f) + r"/[^\s`'\"()\[\],;:|=]*" for f in FOLDERS)
    + "|"
    + "|".join(re.escape(f) + r"(?![\w.-])" for f in TOP_LEVEL_FILES)
    + ")"
)
PLACEHOLDERS = ("<", ">", "{", "}", "*", "$", "...", "NAME", "OP", "NN_")
# The op of the README's `python -m cuda_kernels.new scale_shift` example: the files it writes are named as such.
EXAMPLE_OPS = ("scale_shift",)

WHOLE_TEXT = (".md", ".tmpl")
CPP = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")
HASH_COMMENTS = (".sh", ".toml", ".yaml", ".yml", ".cfg")
HASH_COMMENT_FILES = ("Makefile", "run")  # .ci/run


def scanned_files() -> list[str]:
    """The files whose docs and comments are read, relative to ROOT."""
    files = ["README.md", "Makefile", "setup.py", "benchmark.py", "pyproject.toml", ".ci/run"]
    for folder in ("docs", "csrc", "cuda_kernels", "tests", "scripts", "examples"):
        for parent, dirs, names in os.walk(os.path.join(ROOT, folder)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(names):
                if folder != "docs" or name.endswith(".md"):
                    files.append(os.path.relpath(os.path.join(parent, name), ROOT).replace(os.sep, "/"))
    return [f for f in files if os.path.isfile(os.path.join(ROOT, f))]


def python_docs(text: str) -> list[tuple[int, str]]:
    """(line, text) of a Python file's comments and of its strings that stand alone as statements (docstrings)."""
    out: list[tuple[int, str]] = []
    statement_start = True  # the next token starts a statement
    pending: tokenize.TokenInfo | None = None  # a string that started a statement, kept if the statement ends there
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.string))
            continue
        if tok.type in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING):
            continue
        if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
            if pending is not None:
                out += [(pending.start[0] + i, line) for i, line in enumerate(pending.string.splitlines())]
            pending, statement_start = None, True
            continue
        pending = tok if statement_start and tok.type == tokenize.STRING else None
        statement_start = False
    return out


def cpp_comments(text: str) -> list[tuple[int, str]]:
    """(line, text) of the // and /* */ comments of C++ or CUDA source."""
    out: list[tuple[int, str]] = []
    for match in re.finditer(r"//[^\n]*|/\*.*?\*/", text, re.DOTALL):
        first = text.count("\n", 0, match.start()) + 1
        out += [(first + i, line) for i, line in enumerate(match.group().splitlines())]
    return out


def hash_comments(text: str) -> list[tuple[int, str]]:
    """(line, text) after the first # of each line (shell, Makefile, TOML)."""
    return [(i, line.split("#", 1)[1]) for i, line in enumerate(text.splitlines(), 1) if "#" in line]


def docs_of(rel: str, text: str) -> list[tuple[int, str]]:
    """The (line, text) pieces of one file that are read for paths; none for a kind of file not read."""
    name = os.path.basename(rel)
    if name.endswith(WHOLE_TEXT):
        return list(enumerate(text.splitlines(), 1))
    if name.endswith(".py"):
        return python_docs(text)
    if name.endswith(CPP):
        return cpp_comments(text)
    if name.endswith(HASH_COMMENTS) or name in HASH_COMMENT_FILES:
        return hash_comments(text)
    return []


def paths_in(line: str) -> list[str]:
    """The repository paths a piece of text names, placeholders left out."""
    found = []
    for match in PATH.finditer(line):
        path = match.group(1).split("#")[0].rstrip(".")  # a Markdown link's #section is not part of the path
        if not any(p in path for p in PLACEHOLDERS + EXAMPLE_OPS):
            found.append(path)
    return found


def stale_paths(root: str, files: list[str]) -> list[str]:
    """'file:line: path' for every path named in the docs and comments of files that does not exist under root."""
    stale = []
    for rel in files:
        try:
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                text = f.read()
        except UnicodeDecodeError:  # not text (an image under docs/ is not read anyway)
            continue
        for line_no, line in docs_of(rel, text):
            stale += [f"{rel}:{line_no}: {p}" for p in paths_in(line) if not os.path.exists(os.path.join(root, p))]
    return stale


def test_every_path_named_in_docs_and_comments_exists() -> None:
    files = scanned_files()
    assert {"README.md", "csrc/api.cpp", "cuda_kernels/ops.py", "tests/conftest.py"} <= set(files)
    stale = stale_paths(ROOT, files)
    assert not stale, "docs or comments name paths that do not exist (file:line: path):\n" + "\n".join(stale)


def test_the_rule_finds_stale_paths_and_skips_what_is_not_one(tmp_path) -> None:
    """The scanner itself, on made-up files: each stale mention is found once, with its line; the rest is not."""
    gone = "csrc/" + "gone.cpp"  # spelled in two parts: this file's own docs must not name it
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "here.h").write_text(
        f'// see {gone}, csrc/here.h and csrc/\n/* a block\n   naming {gone}. */\nconst char* s = "{gone}";\n'
    )
    (tmp_path / "a.py").write_text(
        f'"""Module doc: {gone}."""\n\nx = "{gone}"  # a comment: {gone}\n\n\ndef f():\n    """{gone}"""\n'
        f'    return ["{gone}"]\n'
    )
    (tmp_path / "README.md").write_text(
        f"Run `python {gone}`; not /tmp/{gone}, ~/.cache/{gone}, https://example.com/{gone},\n"
        "tests/test_<op>.py, csrc/cuda/{name}.cu, csrc/cuda/matmul/NN_name.cu, tests/test_NAME.py, tests/test_OP.py,\n"
        "csrc/**/*.cu\n"
        f"[a section]({gone}#section), csrc/here.h#section\n"
    )
    (tmp_path / "Makefile").write_text(f"all:  # builds {gone}\n\tcc {gone}\n")
    files = ["csrc/here.h", "a.py", "README.md", "Makefile"]
    assert stale_paths(str(tmp_path), files) == [
        f"csrc/here.h:1: {gone}",
        f"csrc/here.h:3: {gone}",
        f"a.py:1: {gone}",
        f"a.py:3: {gone}",
        f"a.py:7: {gone}",
        f"README.md:1: {gone}",
        f"README.md:4: {gone}",
        f"Makefile:1: {gone}",
    ]
