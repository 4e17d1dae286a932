"""Finds and loads the compiled extension, and turns the usual load failures into one-line advice."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from cuda_kernels._build_config import cxx_runtime_problem

REBUILD = "pip install --no-build-isolation -e ."


def explain_import_error(err: BaseException) -> str:
    """One line of advice for a failed import of cuda_kernels._C (also used by cuda_kernels.doctor)."""
    msg = str(err)
    if "static copy of the C++ runtime" in msg:  # cxx_runtime_problem's line already says what to do
        return msg
    if "undefined symbol" in msg:
        return (
            f"cuda_kernels: the extension was built against another torch than the one imported now "
            f"(undefined symbol); rebuild it: {REBUILD}"
        )
    if "No module named" in msg and "_C" in msg:
        return f"cuda_kernels: the extension is not built; run: {REBUILD} (or set CUDA_KERNELS_JIT=1)"
    if "libcudart" in msg or "libc10_cuda" in msg or "libtorch_cuda" in msg:
        return (
            "cuda_kernels: the extension was built for CUDA but the torch imported now is CPU-only or a "
            f"different CUDA build; rebuild it: {REBUILD} (WITH_CUDA=0 for a CPU-only build)"
        )
    return f"cuda_kernels: could not load the extension ({msg}); try rebuilding: {REBUILD}"


def load_extension(jit: bool) -> tuple[ModuleType, str]:
    """Returns (module, mode): the JIT-built module when jit, else the installed cuda_kernels._C."""
    if jit:
        from cuda_kernels._jit import load as load_jit

        return load_jit(), "jit"
    # A binary with its own static C++ runtime (built before setup.py checked for it) loads, then crashes on the
    # first error message that formats a number: refuse it before loading, with the fix.
    spec = importlib.util.find_spec("cuda_kernels._C")
    problem = cxx_runtime_problem(spec.origin) if spec is not None and spec.origin else None
    if problem:
        raise ImportError(problem)
    try:
        return importlib.import_module("cuda_kernels._C"), "installed"
    except ImportError as err:
        raise ImportError(explain_import_error(err)) from err
