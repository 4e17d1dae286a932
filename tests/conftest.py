"""Shared test helpers: which devices to test on (and the session check for a GPU host with a CPU-only build),
dtypes, and per-dtype tolerances; and a bytecode cache where the environment says not to write bytecode."""

from __future__ import annotations

import importlib.util
import math
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

# Bytecode, settled before torch is imported: where the environment says not to write it and torch has none
# (PYTHONDONTWRITEBYTECODE=1 in many container images), every Python process compiles torch from source, seconds
# each; this session and the processes its tests start cache it outside the source tree. The helper,
# cuda_kernels/tools/pycache.py, is loaded by path: importing the package would import torch.
# (Tests run from a folder without the checkout's package, against an installed wheel, skip it: CI's second torch.)
_PYCACHE_FILE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cuda_kernels", "tools", "pycache.py"
)
PYCACHE = None
if os.path.exists(_PYCACHE_FILE):
    _spec = importlib.util.spec_from_file_location("_pycache", _PYCACHE_FILE)
    _pycache = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_pycache)
    PYCACHE = _pycache.enable(os.environ)

import torch  # noqa: E402  (after the bytecode settings above)

import cuda_kernels  # noqa: E402
from cuda_kernels.tools.testing import (  # noqa: E402
    ALLOW_CPU_ONLY_ENV,
    check_matmul,
    cpu_only_allowed,
    matmul_error_bound,  # noqa: F401  (tests import it from here)
)

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]

# A GPU host must not pass the suite on a CPU-only build by skipping every CUDA case: the session stops at the start
# (pytest_configure below) unless CUDA_KERNELS_ALLOW_CPU_ONLY=1 says the CPU-only build is deliberate.


def cuda_session_check(
    has_gpu: bool, ext_has_cuda: bool, allow_cpu_only: bool, ext_path: str | None = None
) -> tuple[str, str]:
    """(skip reason for the CUDA cases, "" when they run; error that stops the session, "" when it may run)."""
    if not has_gpu:
        return "no CUDA device visible", ""
    if ext_has_cuda:
        return "", ""
    built_without = "the extension was built without CUDA (WITH_CUDA=0, or no toolkit or no GPU at build time)"
    if allow_cpu_only:
        return f"{built_without}; {ALLOW_CPU_ONLY_ENV}=1 accepts that on this GPU host", ""
    return built_without, (
        f"a CUDA device is visible but {built_without}: every CUDA test would skip. Loaded: {ext_path or '?'}. "
        "Rebuild on this host with the CUDA toolkit visible (nvcc on PATH or CUDA_HOME set), or with WITH_CUDA=1: "
        "pip install --no-build-isolation -e . ; `python -m cuda_kernels.doctor` shows what a build finds. "
        f"For a deliberate CPU-only build, set {ALLOW_CPU_ONLY_ENV}=1 (the CUDA cases then skip)."
    )


HAS_GPU = torch.cuda.is_available()
_BUILD_INFO = cuda_kernels.build_info()
EXT_HAS_CUDA = _BUILD_INFO["cuda"]
ALLOW_CPU_ONLY = cpu_only_allowed()
CUDA_SKIP_REASON, CUDA_SESSION_ERROR = cuda_session_check(HAS_GPU, EXT_HAS_CUDA, ALLOW_CPU_ONLY, _BUILD_INFO["path"])


def pytest_report_header(config: pytest.Config) -> str | None:
    if PYCACHE:
        return f"bytecode: cached under {PYCACHE} (PYTHONDONTWRITEBYTECODE is set and torch has none)"
    return None


def pytest_configure(config: pytest.Config) -> None:
    """Stops the session before collection when a GPU host loaded a CPU-only build (cuda_session_check)."""
    if CUDA_SESSION_ERROR:
        raise pytest.UsageError(CUDA_SESSION_ERROR)


if CUDA_SKIP_REASON:
    TWO_GPU_SKIP_REASON = CUDA_SKIP_REASON
elif torch.cuda.device_count() < 2:
    TWO_GPU_SKIP_REASON = f"needs two GPUs, {torch.cuda.device_count()} visible"
else:
    TWO_GPU_SKIP_REASON = ""

# scripts/sanitize.sh (make sanitize) runs the tests under compute-sanitizer with CUDA_KERNELS_SANITIZE=<tool>.
# racecheck tracks every shared-memory access: one 999^3 float32 matmul with ladder step 1 takes about a minute
# under it instead of a fraction of a millisecond. So under racecheck, initcheck and synccheck the tests marked `heavy` (the same
# kernels on big shapes: 999^3, > 2^31 output elements, > 65535 row tiles) are skipped, with that reason;
# memcheck runs them at full size, since index overflow in big shapes is what it catches.
SANITIZE_TOOL = os.environ.get("CUDA_KERNELS_SANITIZE", "")
HEAVY_SKIP_TOOLS = ("racecheck", "initcheck", "synccheck")


# hypothesis's pytest plugin imports hypothesis in its end-of-session summary whether or not a test used it: about 1 s
# on a 2-core VM and 2 s on the H100 host, the largest share of pytest's own start-up and exit in one op's fast tier
# (docs/debugging.md, "Loop timings"). Test modules are imported during collection, so when hypothesis is not
# imported by then, no collected test is a hypothesis test and the plugin has nothing to report: it is unregistered.
# With a --hypothesis-* option on the command line it stays (xdist's controller prints the workers' statistics).
HYPOTHESIS_PLUGIN = "hypothesispytest"


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if "hypothesis" in sys.modules or any(str(a).startswith("--hypothesis") for a in config.invocation_params.args):
        return
    plugin = config.pluginmanager.get_plugin(HYPOTHESIS_PLUGIN)
    if plugin is not None:
        config.pluginmanager.unregister(plugin)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not SANITIZE_TOOL:
        return
    heavy = pytest.mark.skip(reason=f"heavy: too slow under compute-sanitizer {SANITIZE_TOOL} (memcheck runs it)")
    # Tests that make a CUDA call fail on purpose (a 4 PiB allocation): every tool reports that API error.
    api_error = pytest.mark.skip(reason="fails a CUDA API call on purpose, which compute-sanitizer reports as an error")
    for item in items:
        if item.get_closest_marker("heavy") and SANITIZE_TOOL in HEAVY_SKIP_TOOLS:
            item.add_marker(heavy)
        if item.get_closest_marker("api_error"):
            item.add_marker(api_error)


# CUDA graph capture needs torch's caching allocator: with PYTORCH_NO_CUDA_MEMORY_CACHING=1 (make sanitize sets
# it so memcheck sees each tensor's own bounds) every allocation is a cudaMalloc, which a capturing stream refuses
# ("operation not permitted when stream is capturing"). The same kernels run eagerly in the rest of the suite.
requires_caching_allocator = pytest.mark.skipif(
    os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1",
    reason="CUDA graph capture needs the caching allocator (PYTORCH_NO_CUDA_MEMORY_CACHING=1 is set)",
)

requires_cuda = pytest.mark.skipif(bool(CUDA_SKIP_REASON), reason=CUDA_SKIP_REASON or "n/a")

# Tests that name the kernels a call ran through torch.profiler: its CUDA activity tracing (CUPTI) and
# compute-sanitizer cannot both instrument the process, so under scripts/sanitize.sh the profiler sees no kernel.
requires_profiler = pytest.mark.skipif(
    bool(SANITIZE_TOOL), reason=f"torch.profiler sees no kernels under compute-sanitizer {SANITIZE_TOOL}"
)

# Tests that read the built extension's machine code (x86-64 AT&T syntax, names demangled).
requires_objdump = pytest.mark.skipif(
    platform.machine() != "x86_64" or shutil.which("objdump") is None, reason="needs x86-64 and objdump (binutils)"
)


def disassemble_extension() -> str:
    """`objdump -d` of the installed extension: one "<address>:\\t<instruction>" line per instruction, each function
    opened by a "<address> <demangled name>:" line."""
    return subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", "-C", cuda_kernels._C.__file__],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


DEVICES = ["cpu", pytest.param("cuda", marks=[requires_cuda, pytest.mark.gpu])]

# matmul tolerance: the error model and the check in cuda_kernels/tools/testing.py (shared with the benchmark).


def assert_matmul_close(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """out must equal float64 a @ b within matmul_error_bound (cuda_kernels.tools.testing.check_matmul, as the
    benchmark)."""
    ok, message = check_matmul(a, b, out)
    assert ok, message


def assert_matmul_nd_close(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """assert_matmul_close for any of torch.matmul's shapes: the shape is torch.matmul's, and each matrix of the
    broadcast batch (1-D operands as a row or a column) is checked against its own product."""
    assert out.shape == torch.matmul(torch.empty(a.shape, device="meta"), torch.empty(b.shape, device="meta")).shape
    a2 = a[None] if a.dim() == 1 else a
    b2 = b[:, None] if b.dim() == 1 else b
    batch = torch.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    count = math.prod(batch)
    (m, k), n = a2.shape[-2:], b2.shape[-1]
    a3 = a2.expand(*batch, m, k).reshape(count, m, k)
    b3 = b2.expand(*batch, k, n).reshape(count, k, n)
    out3 = out.reshape(count, m, n)
    for i in range(count):
        assert_matmul_close(out3[i], a3[i], b3[i])


def rand(*shape: int, dtype: torch.dtype = torch.float32, device: str = "cpu", seed: int = 0) -> torch.Tensor:
    """Random normal data (never zeros: zeros hide unwritten outputs), generated on the CPU for reproducibility."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(tuple(shape), generator=g, dtype=torch.float32).to(dtype=dtype, device=device)


@pytest.fixture
def matmul_tuning() -> Iterator[Callable[..., None]]:
    """Sets tuning knobs of the CUDA matmul kernels for one test (csrc/cuda/matmul/tuning.h): matmul_tuning(
    config06="...", matvec_cluster_splits=1); None unsets a knob. Every knob the test set is restored after it."""
    saved: dict[str, str] = {}

    def set_knobs(**knobs: object) -> None:
        for name, value in knobs.items():
            previous = torch.ops.cuda_kernels._matmul_tuning(name, "" if value is None else str(value))
            saved.setdefault(name, previous)

    yield set_knobs
    for name, previous in saved.items():
        torch.ops.cuda_kernels._matmul_tuning(name, previous)
