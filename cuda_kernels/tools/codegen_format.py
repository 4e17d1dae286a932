"""Line breaking for generated code, so that `python -m cuda_kernels.new` writes files that clang-format and ruff
format leave as they are, whatever the op's name and signature (tests/tools/test_new_op.py runs both on them).

C++ (.clang-format: Google style, 120 columns): a parameter or argument list that does not fit on its line is
bin-packed, each continuation line aligned under the first item after the '('; where not even one item fits there,
the list starts on a new line indented 4 past the statement. Python (ruff format, 120 columns): a call or def that
does not fit is exploded, one item a line, with a trailing comma (the "magic trailing comma" ruff keeps as it is).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence

COLUMN_LIMIT = 120  # .clang-format's and pyproject.toml's


def cpp_list(head: str, items: Sequence[str], tail: str, indent: str = "", call: bool = False) -> str:
    """indent + head + items joined by ", " + tail, broken as clang-format breaks it: e.g.
    cpp_list("Tensor f(", ["const Tensor& x", "double eps"], ");"). head ends with the opening '('; tail is what
    follows the closing ')' and belongs on its line; call: a call's arguments (else a declaration's parameters). No
    trailing newline."""
    one_line = f"{indent}{head}{', '.join(items)}{tail}"
    if len(one_line) <= COLUMN_LIMIT or not items:
        return one_line
    pieces = [f"{item}," for item in items[:-1]] + [f"{items[-1]}{tail}"]
    aligned = _pack(f"{indent}{head}", " " * len(indent + head), pieces)
    inner = indent + " " * 4
    packed = _pack(inner, inner, pieces)
    broken = f"{indent}{head}\n" + (packed if packed is not None else "\n".join(inner + p for p in pieces))
    # clang-format weighs each line break against the break after '(' (PenaltyBreakBeforeFirstCallParameter, 1 in
    # Google style, and more for a declaration's parameters): measured on clang-format 23 over hundreds of random
    # lists, it breaks after '(' when that saves a call at least one line and a declaration at least three.
    saves = 1 if call else 3
    if aligned is not None and aligned.count("\n") - broken.count("\n") < saves:
        return aligned
    return broken


def _pack(first_prefix: str, prefix: str, pieces: list[str]) -> str | None:
    """pieces packed greedily on lines (the first after first_prefix, the rest after prefix); None when one piece does
    not fit on a line of its own."""
    lines, current, fresh = [], first_prefix, True
    for piece in pieces:
        if len(prefix) + len(piece) > COLUMN_LIMIT:
            return None
        candidate = current + piece if fresh else f"{current} {piece}"
        if len(candidate) <= COLUMN_LIMIT:
            current, fresh = candidate, False
        else:
            lines.append(current)
            current, fresh = prefix + piece, False
    lines.append(current)
    return "\n".join(lines)


def py_call(head: str, items: Sequence[str], tail: str, indent: str = "") -> str:
    """indent + head + items joined by ", " + tail on one line when it fits in 120 columns; else exploded as ruff format
    leaves it: one item a line, indented 4 more, each with a trailing comma, and the closing bracket (first character
    of tail) back at indent. Leading spaces of head count as indent. No trailing newline."""
    indent += head[: len(head) - len(head.lstrip())]
    head = head.lstrip()
    one_line = f"{indent}{head}{', '.join(items)}{tail}"
    if len(one_line) <= COLUMN_LIMIT:
        return one_line
    inner = indent + " " * 4
    return f"{indent}{head}\n" + "".join(f"{inner}{item},\n" for item in items) + f"{indent}{tail}"


_COMMENT_RE = re.compile(r"( *// ?)(.*)")


def fit_comments(text: str) -> str:
    """C++ text whose // comment paragraphs (runs of comment lines at one indent, split at bare `//` lines) that
    overflow 120 columns are refilled within them, as clang-format would reflow them (it leaves lines that fit as
    they are); paragraphs that fit are kept as written. A name substituted into a template's prose can overflow."""
    out: list[str] = []
    paragraph: list[str] = []
    prefix = ""

    def flush() -> None:
        if any(len(line) > COLUMN_LIMIT for line in paragraph):
            words = " ".join(_COMMENT_RE.match(line).group(2) for line in paragraph)
            out.extend(textwrap.wrap(words, COLUMN_LIMIT, initial_indent=prefix, subsequent_indent=prefix))
        else:
            out.extend(paragraph)
        paragraph.clear()

    for line in text.split("\n"):
        match = _COMMENT_RE.fullmatch(line)
        if match and match.group(2).strip() and (not paragraph or match.group(1) == prefix):
            prefix = match.group(1)
            paragraph.append(line)
            continue
        flush()
        if match and match.group(2).strip():  # a comment at another indent starts a paragraph
            prefix = match.group(1)
            paragraph.append(line)
        else:
            out.append(line)
    flush()
    return "\n".join(out)


def wrap_comment(text: str, prefix: str) -> str:
    """text as comment lines of at most 120 columns (clang-format reflows only longer ones; ruff leaves comments)."""
    return "\n".join(textwrap.wrap(text, COLUMN_LIMIT, initial_indent=prefix, subsequent_indent=prefix))


def py_return(items: list[str], indent: str) -> str:
    """`return a, b` as ruff format writes it: on one line when it fits, else in parentheses, one item a line."""
    one_line = f"{indent}return {', '.join(items)}"
    if len(one_line) <= COLUMN_LIMIT or len(items) == 1:
        return one_line
    return py_call("return (", items, ")", indent)


def py_tuple(head: str, items: list[str]) -> str:
    """head + a tuple of items, as ruff format writes it (a one-item tuple keeps its comma)."""
    if len(items) == 1:
        return f"{head}({items[0]},)"
    return py_call(f"{head}(", items, ")")


def py_lambda(head: str, params: list[str], call_head: str, items: list[str] | None, call_tail: str, tail: str) -> str:
    """`head` + `lambda params: body` + `tail`, as ruff format writes it: on one line when it fits in 120 columns,
    else the body in parentheses on the lines below, a call in it exploded one argument a line (ruff keeps that form:
    the trailing comma). body is call_head + items + call_tail, or call_head alone when items is None."""
    indent = head[: len(head) - len(head.lstrip())]
    body = call_head if items is None else f"{call_head}{', '.join(items)}{call_tail}"
    one_line = f"{head}lambda {', '.join(params)}: {body}{tail}"
    if len(one_line.split("  #")[0]) <= COLUMN_LIMIT:
        return one_line
    inner = indent + " " * 4
    if items is None:
        body_lines = f"{inner}{body}"
    else:
        body_lines = (
            f"{inner}{call_head}\n" + "".join(f"{inner}    {item},\n" for item in items) + f"{inner}{call_tail}"
        )
    return f"{head}lambda {', '.join(params)}: (\n{body_lines}\n{indent}){tail}"
