"""Builds and runs the planted out-of-bounds kernel (oob.cu) for tests/tools/test_sanitize.py. Test-only code.

    python tests/planted/oob_loader.py build DIR          # compile oob.cu into DIR, print the library's path
    python tests/planted/oob_loader.py run LIB [--bug]    # fill a 1024-float CUDA tensor; --bug writes y[1024]

Run `run` under `compute-sanitizer --tool memcheck` with PYTORCH_NO_CUDA_MEMORY_CACHING=1: torch's caching
allocator carves tensors out of larger cudaMalloc blocks, so without it a write just past a tensor lands inside
the block and memcheck cannot see it.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
N = 1024  # 4096 bytes: a multiple of any allocation granularity, so y[N] is outside the allocation


def build(build_dir: str) -> str:
    """Compiles oob.cu with torch.utils.cpp_extension.load into build_dir; returns the shared library's path."""
    # By path: importing the cuda_kernels package would load its extension.
    spec = importlib.util.spec_from_file_location(
        "build_config", os.path.join(ROOT, "cuda_kernels", "tools", "build_config.py")
    )
    build_config = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = build_config  # dataclasses look the module up while it executes
    spec.loader.exec_module(build_config)

    home = build_config.find_cuda_home()
    if home and not os.environ.get("CUDA_HOME"):
        os.environ["CUDA_HOME"] = home  # torch.utils.cpp_extension reads it at import
    import torch
    from torch.utils.cpp_extension import load

    if not os.environ.get("TORCH_CUDA_ARCH_LIST") and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"
    os.makedirs(build_dir, exist_ok=True)
    return load(
        name="planted_oob",
        sources=[os.path.join(HERE, "oob.cu")],
        build_directory=build_dir,
        is_python_module=False,  # a plain shared library, called through ctypes
        with_cuda=True,
    )


def run(lib_path: str, planted_bug: bool) -> int:
    import torch

    lib = ctypes.CDLL(lib_path)
    lib.planted_oob_fill.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int]
    lib.planted_oob_fill.restype = ctypes.c_int
    y = torch.empty(N, device="cuda")
    err = lib.planted_oob_fill(ctypes.c_void_p(y.data_ptr()), N, int(planted_bug))
    torch.cuda.synchronize()
    if err != 0:
        print(f"planted: launch failed with cudaError {err}")
        return 1
    ok = torch.equal(y.cpu(), torch.arange(N, dtype=torch.float32))
    print(f"planted: filled {N} floats, values {'correct' if ok else 'WRONG'}, planted_bug={planted_bug}")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("dir")
    r = sub.add_parser("run")
    r.add_argument("lib")
    r.add_argument("--bug", action="store_true")
    opts = parser.parse_args()
    if opts.cmd == "build":
        print(build(opts.dir))
        return 0
    return run(opts.lib, opts.bug)


if __name__ == "__main__":
    sys.exit(main())
