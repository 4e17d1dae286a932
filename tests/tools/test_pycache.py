"""The bytecode cache (cuda_kernels/tools/pycache.py): where PYTHONDONTWRITEBYTECODE is set and torch has no bytecode,
tests/conftest.py and the Makefile cache bytecode in a folder of their own instead of compiling torch from source in
every process."""

from __future__ import annotations

import importlib.util
import os
import py_compile
import shutil
import subprocess
import sys

import pytest

from cuda_kernels.tools import pycache as _pycache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def torch_bytecode(monkeypatch: pytest.MonkeyPatch, present: bool) -> None:
    monkeypatch.setattr(_pycache, "has_bytecode", lambda module: present)


def test_nothing_changes_unless_bytecode_is_forbidden_and_torch_has_none(monkeypatch: pytest.MonkeyPatch) -> None:
    home = {"HOME": "/h"}
    forbidden = {**home, "PYTHONDONTWRITEBYTECODE": "1"}
    torch_bytecode(monkeypatch, present=False)
    assert _pycache.bytecode_cache(home) is None
    assert _pycache.bytecode_cache({**home, "PYTHONDONTWRITEBYTECODE": ""}) is None
    assert _pycache.bytecode_cache({**forbidden, "CUDA_KERNELS_PYCACHE": "0"}) is None
    torch_bytecode(monkeypatch, present=True)
    assert _pycache.bytecode_cache(forbidden) is None


def test_the_folder_is_the_users_prefix_or_a_cache_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/h")
    torch_bytecode(monkeypatch, present=False)
    forbidden = {"PYTHONDONTWRITEBYTECODE": "1"}
    assert _pycache.bytecode_cache(forbidden) == "/h/.cache/cuda_kernels/pycache"
    xdg = {**forbidden, "XDG_CACHE_HOME": "/x"}
    assert _pycache.bytecode_cache(xdg) == "/x/cuda_kernels/pycache"
    own = {**xdg, "PYTHONPYCACHEPREFIX": "/mine"}
    assert _pycache.bytecode_cache(own) == "/mine"


def _package_without_bytecode(folder: str, name: str) -> str:
    os.makedirs(os.path.join(folder, name))
    init = os.path.join(folder, name, "__init__.py")
    with open(init, "w") as f:
        f.write("")
    return init


def test_has_bytecode_looks_where_this_interpreter_looks(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    init = _package_without_bytecode(str(tmp_path), "pkg_without_pyc")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert not _pycache.has_bytecode("pkg_without_pyc")
    py_compile.compile(init, cfile=importlib.util.cache_from_source(init))
    assert _pycache.has_bytecode("pkg_without_pyc")
    assert _pycache.has_bytecode("no_such_module_here")  # nothing to gain


def test_enable_sets_this_interpreter_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    torch_bytecode(monkeypatch, present=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    env = {"PYTHONDONTWRITEBYTECODE": "1", "XDG_CACHE_HOME": "/x"}
    assert _pycache.enable(env) == "/x/cuda_kernels/pycache"
    assert env == {"XDG_CACHE_HOME": "/x", "PYTHONPYCACHEPREFIX": "/x/cuda_kernels/pycache"}
    assert not sys.dont_write_bytecode and sys.pycache_prefix == "/x/cuda_kernels/pycache"


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_targets_cache_bytecode_when_torch_has_none(tmp_path) -> None:
    # A torch without bytecode first on the path (as in an image that set PYTHONDONTWRITEBYTECODE=1 before installing
    # it), and a PYTHON that runs cuda_kernels/tools/pycache.py for real but otherwise prints what a target's recipe
    # gets.
    fake = str(tmp_path / "site")
    _package_without_bytecode(fake, "torch")
    python = tmp_path / "python"
    python.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = cuda_kernels/tools/pycache.py ]; then exec {sys.executable} "$@"; fi\n'
        f"exec {sys.executable} -c 'import os; "
        'print(os.environ.get("PYTHONPYCACHEPREFIX"), os.environ.get("PYTHONDONTWRITEBYTECODE"))\'\n'
    )
    python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "CUDA_KERNELS_", "MAKE"))}
    env.update(PYTHONPATH=fake, XDG_CACHE_HOME="/x", PYTHONDONTWRITEBYTECODE="1")

    def recipe_env(**extra: str) -> list[str]:
        run = subprocess.run(
            ["make", "-s", "test", f"PYTHON={python}"], cwd=ROOT, env={**env, **extra}, capture_output=True, text=True
        )
        assert run.returncode == 0, run.stdout + run.stderr
        return run.stdout.split()

    assert recipe_env() == ["/x/cuda_kernels/pycache", "None"]
    assert recipe_env(CUDA_KERNELS_PYCACHE="0") == ["None", "1"]
    assert recipe_env(PYTHONDONTWRITEBYTECODE="") == ["None"]
