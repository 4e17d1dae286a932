"""A bytecode cache for environments that say not to write bytecode, used by the tests and the Makefile.

Container images often set PYTHONDONTWRITEBYTECODE=1 over a torch installed without .pyc files. Every Python
process then compiles torch's ~2,100 modules from source: on the H100 machine `import torch` took 5-6 s instead of
2 s, and the first torch.library.opcheck of a process 10 s instead of 3, in every test run and every test that
starts a Python subprocess. What the variable keeps clean is the source tree and site-packages, so the bytecode goes
to a cache folder instead (PYTHONPYCACHEPREFIX):

    tests/conftest.py    for the pytest session and the Python processes its tests start
    Makefile             for every target (`python cuda_kernels/tools/pycache.py` prints the folder, or nothing)
    cuda_kernels/__init__.py   for `python -m cuda_kernels.dev` (the edit loop), before it imports torch

CUDA_KERNELS_PYCACHE=0 leaves the environment as it is. Standard library only, and run or loaded by path: importing
the cuda_kernels package imports torch, which is what this must come before.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping

OPT_OUT_ENV = "CUDA_KERNELS_PYCACHE"


def has_bytecode(module: str) -> bool:
    """Whether `module` (a package: its __init__) has cached bytecode where this interpreter looks for it; True when
    it is not installed (nothing to gain then)."""
    spec = importlib.util.find_spec(module)  # finds without importing
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return True
    return os.path.exists(importlib.util.cache_from_source(spec.origin))


def cache_home(env: Mapping[str, str]) -> str:
    """The folder this project keeps its caches in: $XDG_CACHE_HOME (or ~/.cache)/cuda_kernels (the JIT's too)."""
    return os.path.join(env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "cuda_kernels")


def bytecode_cache(env: Mapping[str, str]) -> str | None:
    """The folder to cache bytecode in, or None to change nothing.

    None unless env sets PYTHONDONTWRITEBYTECODE and torch has no cached bytecode (a torch that pip compiled loads
    fast as it is; a new prefix would only make this interpreter compile it once more). The folder: env's
    PYTHONPYCACHEPREFIX when set, else cache_home()/pycache."""
    if not env.get("PYTHONDONTWRITEBYTECODE") or env.get(OPT_OUT_ENV) == "0" or has_bytecode("torch"):
        return None
    return env.get("PYTHONPYCACHEPREFIX") or os.path.join(cache_home(env), "pycache")


def enable(env: dict[str, str] | os._Environ = os.environ) -> str | None:
    """Applies bytecode_cache(env) to this interpreter and to env (which the processes it starts inherit); returns
    the folder, or None when nothing changed."""
    folder = bytecode_cache(env)
    if folder:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = folder
        sys.dont_write_bytecode = False
        sys.pycache_prefix = folder
    return folder


if __name__ == "__main__":
    print(bytecode_cache(os.environ) or "")
