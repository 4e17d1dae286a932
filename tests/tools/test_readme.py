"""The README is short, its structure tree names only paths that exist, and every top-level file and folder of the
repository that a user meets is in it: the tree must not drift from the checkout it describes."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Tracked top-level entries the tree leaves out on purpose (tool settings; requirements.txt's line names the dev file).
NOT_IN_TREE = {".gitignore", ".clang-format", "requirements-dev.txt"}


def tree_paths() -> list[str]:
    """Paths of the README's "## Structure" block: '├── name  # comment' lines, nested by 4 columns a level."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    block = text.split("## Structure", 1)[1].split("```", 2)[1]
    paths: list[str] = []
    parents: list[str] = []
    for line in block.splitlines():
        match = re.match(r"^((?:│   |    )*)[├└]── (.+?)(?:\s{2,}#.*)?$", line)
        if not match:
            continue
        depth = len(match.group(1)) // 4
        names = [n.strip() for n in match.group(2).split(",")]
        parents = parents[:depth]
        for name in names:
            paths.append(os.path.join(*parents, name.rstrip("/")))
        parents.append(names[0].rstrip("/"))
    return paths


def test_every_path_in_the_tree_exists() -> None:
    paths = tree_paths()
    assert len(paths) > 20, paths  # the block was found and read
    missing = [p for p in paths if not os.path.exists(os.path.join(ROOT, p))]
    assert not missing, f"README's structure tree names paths that do not exist: {missing}"


def test_every_tracked_top_level_entry_is_in_the_tree() -> None:
    """Top-level files and folders git tracks (a user's own untracked files, a venv say, are theirs to keep)."""
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        pytest.skip("git is not available")
    if out.returncode != 0 or not out.stdout.strip():
        pytest.skip("not a git checkout (a copy of the tree without .git)")
    tracked = {line.split("/")[0] for line in out.stdout.splitlines()}
    listed = {p.split(os.sep)[0] for p in tree_paths()}
    missing = tracked - NOT_IN_TREE - listed
    assert not missing, f"top-level entries missing from README's tree: {sorted(missing)}"


# A README a newcomer reads in ten minutes: what it is, the quick start, where things are, one results table; the
# rest is in docs/. NOTE: this fails until the README rewrite of issue 37 (branch docs) is merged.
README_MAX_LINES = 150


def test_readme_is_at_most_150_lines() -> None:
    with open(os.path.join(ROOT, "README.md")) as f:
        lines = len(f.read().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; at most {README_MAX_LINES} (move detail to docs/)"
