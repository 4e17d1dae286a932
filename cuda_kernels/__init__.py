"""cuda_kernels: custom C++/CUDA ops for PyTorch.

    import cuda_kernels
    y = cuda_kernels.square(x)          # also torch.ops.cuda_kernels.square(x)
    c = cuda_kernels.matmul(a, b)       # also torch.ops.cuda_kernels.matmul(a, b)

The compiled extension (cuda_kernels._C) registers the ops with PyTorch's dispatcher when it is imported.
With CUDA_KERNELS_JIT=1 the same csrc/ sources are compiled on import instead (cuda_kernels.tools.jit).
With CUDA_KERNELS_DUMP_DIR=DIR (read at import; set_dump_dir() at run time) a failing call saves its arguments to
DIR for `python -m cuda_kernels.replay FILE` (cuda_kernels._dump).

What runs in a user's program is this file, ops.py, _loader.py and _dump.py. The development tools (build config,
JIT, benchmark, op generator, doctor, ...) are in cuda_kernels.tools: imported only where a program opts in (the
JIT build, the edit loop) and by the tools themselves; new.py, dev.py, doctor.py and replay.py here only run them.
"""

from __future__ import annotations

import os
import sys
from typing import Any

# `python -m cuda_kernels.dev` (the edit loop) imports this package first. Where Python may not write bytecode and
# torch has none, the loop caches it outside the tree before torch is imported, as `make dev` does (tools/pycache.py).
_STARTED_AS_DEV = any(
    arg.endswith(("cuda_kernels.dev", "cuda_kernels.tools.dev")) for arg in getattr(sys, "orig_argv", [])
)
if _STARTED_AS_DEV:
    from cuda_kernels.tools import pycache as _pycache

    _pycache.enable(os.environ)

import torch  # noqa: E402, F401  (the extension links against torch: import it first)

from cuda_kernels._loader import decode_arch_tag, load_extension  # noqa: E402

# `python -m cuda_kernels.doctor` imports this package first: a broken extension must not stop the doctor,
# which reports _LOAD_ERROR instead; nor `python -m cuda_kernels.new`, which adds an op before the first build;
# nor the edit loop, which reports a failed build itself. The loop always builds in JIT mode, and first starts a
# thread that imports what the tests will need while the compiler runs. Everyone else gets the ImportError at once.
_RUNS_WITHOUT_EXTENSION = (
    "cuda_kernels.doctor", "cuda_kernels.new", "cuda_kernels.dev",
    "cuda_kernels.tools.doctor", "cuda_kernels.tools.new", "cuda_kernels.tools.dev",
)  # fmt: skip
if _STARTED_AS_DEV:
    from cuda_kernels.tools.dev_prefetch import start_prefetch

    _PREFETCH = start_prefetch()
_LOAD_ERROR: ImportError | None = None
try:
    _C, _C_CUDA, _MODE = load_extension(jit=_STARTED_AS_DEV or os.environ.get("CUDA_KERNELS_JIT", "0") not in ("", "0"))
except ImportError as _err:
    if not any(arg.endswith(_RUNS_WITHOUT_EXTENSION) for arg in getattr(sys, "orig_argv", [])):
        raise
    _C, _C_CUDA, _MODE, _LOAD_ERROR = None, None, "not loaded", _err

if _C is not None:
    # The CPU kernels' build follows torch's choice (ATEN_CPU_CAPABILITY included), which the binary cannot ask for.
    torch.ops.cuda_kernels._cpu_capability(torch.backends.cpu.get_cpu_capability())
    # cuda_kernels.new: adds each new op to the import below (in ruff's order) and to __all__
    from cuda_kernels.ops import Linear, linear, matmul, rms_norm, set_dump_dir, square  # noqa: E402  (ops need the extension loaded)


def build_info() -> dict[str, Any]:
    """How the loaded extension was built.

    Keys: mode ("installed" or "jit"), cuda (bool: the CUDA kernels are loaded; a CUDA build under a CPU-only torch
    leaves them out), archs (the CUDA archs the loaded CUDA kernels were built for, like ["8.0", "9.0a", "9.0+PTX"];
    empty without them), debug
    (bool), torch (the torch whose headers built it), torch_target (the oldest torch it runs under: its stable-ABI
    target, e.g. "2.11"), cuda_version (the toolkit the CUDA kernels were built with, or None), torch_runtime (the
    torch imported now), path (the loaded CPU library), cuda_path (the loaded CUDA library, or None), matmul (what
    variant=0 runs on the current GPU per dtype, and why, e.g. {"bfloat16": "12_hopper_gemm: compute 9.0 (NVIDIA
    H100 ...), bfloat16: the fastest kernel that runs here"}; empty without CUDA kernels, a visible GPU, or a GPU that
    can be queried).
    """
    if _C is None:
        raise _LOAD_ERROR
    raw = dict(item.split("=", 1) for item in torch.ops.cuda_kernels._build_info())
    cuda = _C_CUDA is not None
    return {
        "mode": _MODE,
        "cuda": cuda,
        "archs": decode_arch_tag(torch.ops.cuda_kernels._cuda_archs()) if cuda else [],
        "debug": raw["debug"] == "1",
        "torch": raw["torch_version"],
        "torch_target": raw["torch_target"],
        "cuda_version": torch.ops.cuda_kernels._cuda_build_version() if cuda else None,
        "torch_runtime": torch.__version__,
        "path": getattr(_C, "__file__", None),
        "cuda_path": getattr(_C_CUDA, "__file__", None),
        "matmul": _matmul_paths() if cuda and torch.cuda.is_available() else {},
    }


def _matmul_paths() -> dict[str, str]:
    """{dtype: "kernel_name: why"} for variant 0 on the current CUDA device (the extension's own pick); "float32" as
    TF32 is set now, "float32+tf32" with TF32 allowed; {} when the device cannot be queried (e.g. a driver too old
    for the CUDA runtime: the doctor explains that case)."""
    from cuda_kernels.ops import matmul_default_kernel

    paths = {}
    try:
        for dtype in ("float32", "float32+tf32", "float64", "bfloat16", "float16"):
            _variant, name, reason = matmul_default_kernel(dtype)
            paths[dtype] = f"{name}: {reason}"
    except RuntimeError:  # torch.AcceleratorError is one; build_info() must describe even a binary that cannot run
        return {}
    return paths


__all__ = ["square", "matmul", "rms_norm", "linear", "Linear", "build_info", "set_dump_dir"]
