"""The binary is built on the LibTorch stable ABI and Python's limited API, so one build runs under every torch from
its target on: it references no torch C++ symbol (only the C shim), no pybind11 and no Python outside the limited
API; the CPU library needs none of torch's CUDA libraries (so a CUDA build loads under a CPU-only torch); and a
torch older than the target stops the import with one line naming both versions."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import cuda_kernels
from cuda_kernels import _loader

LIBRARIES = [path for path in (cuda_kernels.build_info()["path"], cuda_kernels.build_info()["cuda_path"]) if path]
# Symbol names that mean the binary calls torch's C++ API, or pybind11, not the stable C shim.
FORBIDDEN = ("at::", "c10::", "torch::", "pybind11")


def undefined_symbols(path: str) -> list[str]:
    """The binary's undefined dynamic symbols, demangled (nm -D -C)."""
    out = subprocess.run(["nm", "-D", "-C", "--undefined-only", path], capture_output=True, text=True, check=True)
    return [line.split(maxsplit=1)[-1] for line in out.stdout.splitlines() if line.strip()]


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs nm (binutils)")
@pytest.mark.parametrize("path", LIBRARIES, ids=os.path.basename)
def test_no_torch_cpp_or_pybind11_symbols(path):
    if cuda_kernels.build_info()["mode"] == "jit":
        pytest.skip("the JIT build links what torch.utils.cpp_extension.load links; the installed build is checked")
    symbols = undefined_symbols(path)
    bad = [s for s in symbols if any(f in s for f in FORBIDDEN)]
    assert not bad, f"{path} calls torch's C++ API (not the stable ABI): {bad[:20]}"
    # Python: only the limited API's functions (the module's init); nothing of CPython's internals.
    python = [s for s in symbols if s.startswith(("Py", "_Py"))]
    assert all(s.startswith("Py") for s in python), python
    assert any(s.startswith("aoti_torch_") for s in symbols), "the stable ABI's C shim should be what it calls"


@pytest.mark.parametrize("path", LIBRARIES, ids=os.path.basename)
def test_libraries_are_abi3_modules(path):
    if cuda_kernels.build_info()["mode"] == "jit":
        pytest.skip("a JIT module is named by torch.utils.cpp_extension.load")
    assert path.endswith(".abi3.so"), path


def test_cpu_library_needs_no_cuda_library():
    """cuda_kernels._C loads under a CPU-only torch: it needs none of the CUDA libraries (those are the CUDA
    library's, which the package loads only where torch has CUDA), nor libtorch_python."""
    needed = _loader.elf_needed(cuda_kernels.build_info()["path"]) or []
    bad = [lib for lib in needed if lib.startswith(("libcudart", "libc10_cuda", "libtorch_cuda", "libtorch_python"))]
    assert not bad, needed


@pytest.mark.parametrize(
    "version, refused",
    [("2.10.2+cu128", True), ("1.13.1", True), ("2.11.0", False), ("2.11.0+cu130", False), ("2.15.0", False)],
)
def test_torch_older_than_the_target_is_one_line(version, refused):
    line = _loader.torch_too_old(version, (2, 11))
    if not refused:
        assert line is None
        return
    assert line is not None and "\n" not in line
    assert "torch >= 2.11" in line and version in line


def test_import_under_an_older_torch_stops_with_that_line():
    """A faked older torch: importing the package stops before loading the binary, with the one line."""
    code = textwrap.dedent(
        """
        import torch
        torch.__version__ = "2.10.0+cpu"
        try:
            import cuda_kernels
        except ImportError as err:
            print("REFUSED", err)
        else:
            print("LOADED")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    target = ".".join(map(str, _loader.TORCH_TARGET))
    assert proc.stdout.strip() == (
        f"REFUSED cuda_kernels: this build needs torch >= {target} (its stable-ABI target), but torch 2.10.0+cpu is "
        "imported; upgrade torch"
    ), proc.stdout + proc.stderr[-2000:]
