"""`python -m cuda_kernels.doctor`: what a bug report needs, a tiny call of each op, and known mismatches explained.

Prints the Python, OS, GPUs (compute capability), driver, CUDA runtime and toolkit, torch and its CUDA, and how the
extension was built (archs against the GPU's, debug, installed or JIT; a binary with its own static C++ runtime);
runs square and matmul once on every device against torch; then one line per problem found, with the fix.
Exit status 0: no problem; 1: problems.

The checks are pure functions of the facts (check_archs, check_nvcc, ...), so tests feed them made-up mismatches.
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

REBUILD = "pip install --no-build-isolation -e ."


# ---------------------------------------------------------------------------------------------------------
# Pure checks: facts in, one line of advice (a problem) or None out.


@dataclass(frozen=True)
class Arch:
    """One entry of an arch list: '9.0a+PTX' -> Arch(9, 0, 'a', True)."""

    major: int
    minor: int
    suffix: str  # "" (portable), "a" (arch-specific: this exact GPU), "f" (family: same major)
    ptx: bool

    @staticmethod
    def parse(text: str) -> Arch:
        """One numeric entry ('8.0', '9.0a+PTX'); ValueError otherwise (expand_archs takes torch's names)."""
        text = text.strip()
        ptx = text.endswith("+PTX")
        text = text.removesuffix("+PTX")
        suffix = text[-1] if text[-1:] in ("a", "f") else ""
        major, minor = text[: len(text) - len(suffix)].split(".")
        return Arch(int(major), int(minor), suffix, ptx)


def expand_archs(built: list[str]) -> list[Arch] | None:
    """build_info()'s archs as Arch entries, torch's names ('Hopper') expanded; None when an entry cannot be read
    (then nobody can say what runs: the op calls will tell). 'native' and 'none' are left out."""
    from cuda_kernels.tools import build_config

    entries = [a for a in built if a not in ("native", "none")]
    try:
        return [Arch.parse(a) for a in build_config.normalize_arch_list(";".join(entries)).split(";") if a]
    except ValueError:
        return None


def arch_coverage(built: list[str], gpu_cc: tuple[int, int]) -> str | None:
    """How a GPU of capability gpu_cc runs this build: 'sm_90a SASS', 'compute_80 PTX (JIT-compiled at load)', None.

    CUDA's rules: SASS for sm_XY runs on X.Z with Z >= Y (same major); sm_XYa only on exactly X.Y; sm_XYf on the
    same major. PTX for compute_XY can be JIT-compiled for any GPU >= X.Y; compute_XYa only for exactly X.Y.
    """
    archs = expand_archs(built) or []
    for a in archs:
        if _runs_sass(a, gpu_cc):
            return f"sm_{a.major}{a.minor}{a.suffix} SASS"
    for a in archs:
        if a.ptx and _runs_ptx(a, gpu_cc):
            return f"compute_{a.major}{a.minor}{a.suffix} PTX (JIT-compiled by the driver on first use)"
    return None


def _runs_sass(a: Arch, cc: tuple[int, int]) -> bool:
    if a.suffix == "a":
        return (a.major, a.minor) == cc
    return a.major == cc[0] and cc[1] >= a.minor


def _runs_ptx(a: Arch, cc: tuple[int, int]) -> bool:
    if a.suffix == "a":
        return (a.major, a.minor) == cc
    return (a.major, a.minor) <= cc


def check_archs(built: list[str], gpu_cc: tuple[int, int], gpu_name: str = "this GPU") -> str | None:
    """A problem line when no arch in `built` runs on a GPU of capability gpu_cc (CUDA builds only).

    built == ["native"] (built for the GPU visible at build time) or an entry that cannot be read cannot be checked
    here: the op calls will tell.
    """
    if built in ([], ["none"]) or "native" in built or expand_archs(built) is None:
        return None
    if arch_coverage(built, gpu_cc) is not None:
        return None
    cc = f"{gpu_cc[0]}{gpu_cc[1]}"
    return (
        f"no kernel image for {gpu_name} (sm_{cc}): the extension holds {', '.join(built)}; "
        f"rebuild with COMPUTE_CAPABILITY={cc} {REBUILD}"
    )


def _major(version: str | None) -> str | None:
    return None if not version else version.split(".")[0]


def check_nvcc(nvcc: str | None, torch_cuda: str | None) -> str | None:
    """A problem line when nvcc's major CUDA version differs from the one torch was built with."""
    if nvcc is None or torch_cuda is None or _major(nvcc) == _major(torch_cuda):
        return None
    return (
        f"nvcc {nvcc} and torch's CUDA {torch_cuda} differ in major version: builds may fail or not load; "
        f"point CUDA_HOME at a CUDA {_major(torch_cuda)}.x toolkit (or install torch built for CUDA {_major(nvcc)})"
    )


def check_driver(driver_cuda: str | None, torch_cuda: str | None) -> str | None:
    """A problem line when the driver supports an older CUDA major version than torch's runtime needs."""
    if driver_cuda is None or torch_cuda is None:
        return None
    if int(_major(driver_cuda)) >= int(_major(torch_cuda)):
        return None
    return (
        f"the NVIDIA driver supports CUDA up to {driver_cuda} but torch uses CUDA {torch_cuda}: update the driver, "
        f"or install a torch built for CUDA {_major(driver_cuda)}.x"
    )


def check_torch_target(target: str, runtime_torch: str) -> str | None:
    """A problem line when the imported torch is older than the extension's stable-ABI target (the oldest torch it
    runs under); any later torch runs the same binary."""
    try:
        older = tuple(int(x) for x in runtime_torch.split("+")[0].split(".")[:2]) < tuple(
            int(x) for x in target.split(".")[:2]
        )
    except ValueError:
        return None
    if not older:
        return None
    return f"the extension needs torch >= {target} (its stable-ABI target) but torch {runtime_torch} is imported"


def check_built_cuda(
    built_cuda: bool, ext_cuda: bool, cuda_version: str | None, torch_cuda: str | None, gpu_count: int
) -> str | None:
    """A problem line for a CPU-only build on a machine with a GPU, or a CUDA build of another major version.
    built_cuda: the build made the CUDA library; ext_cuda: it is loaded (a CPU-only torch leaves it out, rightly)."""
    if not built_cuda:
        if gpu_count > 0 and torch_cuda:
            return f"the extension was built without CUDA but a GPU is visible: rebuild: WITH_CUDA=1 {REBUILD}"
        return None
    if not ext_cuda or torch_cuda is None:
        return None
    built_cuda_version = cuda_version
    if _major(built_cuda_version) != _major(torch_cuda):
        return f"the extension was built with CUDA {cuda_version} but torch uses CUDA {torch_cuda}: rebuild: {REBUILD}"
    return None


def explain_op_error(message: str, gpu_cc: tuple[int, int] | None = None, built: list[str] | None = None) -> str:
    """One line of advice for an error raised by a tiny op call."""
    if "no kernel image is available" in message:
        cc = f"{gpu_cc[0]}{gpu_cc[1]}" if gpu_cc else "XY"
        held = f"the extension holds {', '.join(built)}; " if built else ""
        return f"no kernel image for this GPU (sm_{cc}): {held}rebuild with COMPUTE_CAPABILITY={cc} {REBUILD}"
    if "with arguments from the 'CUDA' backend" in message:
        return f"the extension has no CUDA kernels (built with WITH_CUDA=0?): rebuild: WITH_CUDA=1 {REBUILD}"
    if "driver version is insufficient" in message:
        return "the NVIDIA driver is too old for this CUDA runtime: update the driver"
    if "undefined symbol" in message:
        return f"undefined symbol: torch was upgraded since the build: rebuild: {REBUILD}"
    if "illegal memory access" in message or "illegal instruction" in message or "misaligned address" in message:
        return (
            "a kernel faulted: rerun with CUDA_KERNELS_DUMP_DIR=/tmp/dumps CUDA_LAUNCH_BLOCKING=1 and replay the dump "
            "under compute-sanitizer (docs/debugging.md)"
        )
    return "unexpected error (see docs/debugging.md)"


def explain_import(err: BaseException) -> str:
    """One line for a failed `import cuda_kernels` (undefined symbol => torch upgraded since the build, ...)."""
    from cuda_kernels._loader import explain_import_error

    raw = err.__cause__ if err.__cause__ is not None else err
    if "(JIT)" in str(err):
        first = str(err).strip().splitlines()[0]
        if "failed" in first:
            first += " (python -c 'import cuda_kernels' shows the compiler output)"
        return first
    return explain_import_error(raw)


# ---------------------------------------------------------------------------------------------------------
# Facts about this machine.


@dataclass
class Gpu:
    index: int
    name: str
    cc: tuple[int, int]
    sms: int
    memory_gib: float


@dataclass
class Facts:
    python: str
    os: str
    torch: str
    torch_cuda: str | None
    cudnn: int | None
    gpus: list[Gpu]
    driver: str | None  # the driver package version (nvidia-smi), e.g. "580.65.06"
    driver_cuda: str | None  # the newest CUDA the driver supports (cuDriverGetVersion), e.g. "13.0"
    cuda_home: str | None
    nvcc: str | None
    build_info: dict[str, Any] | None
    load_error: BaseException | None
    notes: list[str] = field(default_factory=list)
    binary: str | None = None  # the extension's shared object, loaded or not (None: none found)
    pycache: str | None = None  # where bytecode would be cached: torch has none and may not write it (tools/pycache.py)


def _driver_from_nvidia_smi() -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.strip().splitlines()
    return lines[0].strip() if out.returncode == 0 and lines else None


def _driver_cuda_version() -> str | None:
    """cuDriverGetVersion through libcuda (no CUDA context needed): 13000 -> '13.0'."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int(0)
        if libcuda.cuDriverGetVersion(ctypes.byref(version)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return f"{version.value // 1000}.{version.value % 1000 // 10}"


def gather() -> Facts:
    import torch

    from cuda_kernels.tools import build_config, pycache

    gpus = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            gpus.append(Gpu(i, p.name, (p.major, p.minor), p.multi_processor_count, p.total_memory / 2**30))
    cuda_home = build_config.find_cuda_home()
    import cuda_kernels

    load_error = cuda_kernels._LOAD_ERROR
    build_info = None if load_error else cuda_kernels.build_info()
    binary = build_info["path"] if build_info else None
    if binary is None and cuda_kernels._MODE != "jit":
        spec = importlib.util.find_spec("cuda_kernels._C")  # finds the file without loading it
        binary = spec.origin if spec is not None else None
    return Facts(
        python=f"{platform.python_version()} ({sys.executable})",
        os=platform.platform(),
        torch=str(torch.__version__),
        torch_cuda=torch.version.cuda,
        cudnn=torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        gpus=gpus,
        driver=_driver_from_nvidia_smi(),
        driver_cuda=_driver_cuda_version(),
        cuda_home=cuda_home,
        nvcc=build_config.nvcc_version(cuda_home) if cuda_home else None,
        build_info=build_info,
        load_error=load_error,
        binary=binary,
        pycache=pycache.bytecode_cache(os.environ),
    )


def cuda_library_built(bi: dict[str, Any]) -> bool:
    """The build made a CUDA library: it is loaded, or (under a CPU-only torch, which leaves it out) it lies beside
    the CPU library."""
    folder = os.path.dirname(bi["path"] or "")
    return bool(bi["cuda"] or (folder and glob.glob(os.path.join(glob.escape(folder), "_C_cuda*.so"))))


def static_problems(f: Facts) -> list[str]:
    """Every mismatch visible without running anything."""
    problems = [check_nvcc(f.nvcc, f.torch_cuda), check_driver(f.driver_cuda, f.torch_cuda)]
    if f.load_error is not None:
        problems.append(explain_import(f.load_error))
    if f.binary:
        from cuda_kernels.tools import build_config

        problems.append(build_config.cxx_runtime_problem(f.binary))
    if f.build_info is not None:
        bi = f.build_info
        problems.append(check_torch_target(bi["torch_target"], f.torch))
        problems.append(
            check_built_cuda(cuda_library_built(bi), bi["cuda"], bi["cuda_version"], f.torch_cuda, len(f.gpus))
        )
        if bi["cuda"]:
            problems += [check_archs(bi["archs"], g.cc, f"GPU {g.index} ({g.name})") for g in f.gpus]
    return list(dict.fromkeys(p for p in problems if p))  # in order, without repeats


# ---------------------------------------------------------------------------------------------------------
# Tiny op calls.


@dataclass
class OpResult:
    label: str
    ok: bool
    detail: str = ""


def run_ops(facts: Facts) -> list[OpResult]:
    """square and matmul once per device, compared to torch: float32 and bfloat16, variant 0 and every CUDA ladder
    step that takes the dtype on that GPU (the tensor-core steps take 16-bit inputs only)."""
    import torch

    import cuda_kernels
    from cuda_kernels.ops import matmul_cuda_variants
    from cuda_kernels.tools.testing import matmul_error_bound

    devices = ["cpu"] + [f"cuda:{g.index}" for g in facts.gpus]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1027, generator=g)  # odd size: exercises the vector path's scalar tail
    a32 = torch.randn(33, 17, generator=g)  # not multiples of any tile size
    b32 = torch.randn(17, 9, generator=g)
    results = []
    for dev in devices:
        gpu = facts.gpus[int(dev.split(":")[1])] if dev.startswith("cuda") else None
        cuda_build = gpu is not None and facts.build_info and facts.build_info["cuda"]
        # (label, call, inputs on the CPU, check(out, inputs) raising AssertionError)
        calls = [("square", cuda_kernels.square, (x,), {}, _exact(x * x))]
        for dtype in (torch.float32, torch.bfloat16):
            a, b = a32.to(dtype), b32.to(dtype)
            variants = [0] + (matmul_cuda_variants(dtype, gpu.index) if cuda_build else [])
            check = _within_bound(a, b, matmul_error_bound)
            name = str(dtype).removeprefix("torch.")
            calls += [
                (f"matmul {name} variant={v}", cuda_kernels.matmul, (a, b), {"variant": v}, check) for v in variants
            ]
        for name, op, args, kwargs, check in calls:
            label = f"{name} on {dev}"
            try:
                out = op(*(t.to(dev) for t in args), **kwargs)
                if gpu is not None:
                    torch.cuda.synchronize(dev)
                check(out.cpu())
                results.append(OpResult(label, True))
            except AssertionError as err:
                results.append(OpResult(label, False, "differs from torch: " + str(err).splitlines()[0]))
            except Exception as err:  # noqa: BLE001
                built = facts.build_info["archs"] if facts.build_info else None
                advice = explain_op_error(str(err), gpu.cc if gpu else None, built)
                results.append(OpResult(label, False, f"{type(err).__name__}: {str(err).splitlines()[0]} -> {advice}"))
    return results


def _exact(ref):
    """A check that out equals ref exactly."""
    import torch

    def check(out) -> None:
        torch.testing.assert_close(out, ref, rtol=0, atol=0)

    return check


def _within_bound(a, b, bound_fn):
    """A check that out is within the project's matmul error bound (cuda_kernels.tools.testing) of float64 a @ b."""

    def check(out) -> None:
        ref = a.double() @ b.double()
        err = (out.double() - ref).abs()
        worst = (err / bound_fn(a, b, ref)).max().item()
        assert worst <= 1.0, f"error {worst:.3g}x the bound"

    return check


def matmul_paths(gpu_index: int) -> list[str]:
    """What variant 0 runs on GPU `gpu_index` per dtype, and why (the extension's own pick); float32 as TF32 is set
    now, float32+tf32 with TF32 allowed."""
    import cuda_kernels

    lines = []
    for dtype in ("float32", "float32+tf32", "float64", "bfloat16", "float16"):
        variant, name, reason = cuda_kernels.ops.matmul_default_kernel(dtype, gpu_index)
        lines.append(f"{dtype}: step {variant} {name} ({reason})")
    return lines


# ---------------------------------------------------------------------------------------------------------
# Report.


def report(f: Facts) -> list[str]:
    lines = [
        "cuda_kernels doctor",
        f"  python        {f.python}",
        f"  os            {f.os}",
        f"  torch         {f.torch} (CUDA {f.torch_cuda or 'none: CPU-only build'}, cuDNN {f.cudnn})",
        f"  driver        {f.driver or 'nvidia-smi not found'}; supports CUDA {f.driver_cuda or '? (no libcuda)'}",
        f"  nvcc          {f.nvcc or 'not found'}" + (f" at {f.cuda_home}" if f.cuda_home else ""),
    ]
    if f.pycache:
        # Slow, not wrong: every Python process compiles torch from source (seconds). make and pytest avoid it.
        lines.append(
            "  bytecode      none for torch, and PYTHONDONTWRITEBYTECODE is set: every process compiles torch from "
            f"source; make and pytest cache it in {f.pycache}; a shell can too: export PYTHONPYCACHEPREFIX="
            f"{f.pycache}; unset PYTHONDONTWRITEBYTECODE"
        )
    if not f.gpus:
        lines.append("  GPUs          none visible (only the CPU is checked)")
    for g in f.gpus:
        lines.append(
            f"  GPU {g.index}         {g.name}, compute capability {g.cc[0]}.{g.cc[1]} (sm_{g.cc[0]}{g.cc[1]}), "
            f"{g.sms} SMs, {g.memory_gib:.1f} GiB"
        )
    if f.build_info is None:
        lines.append(f"  cuda_kernels  NOT LOADED: {str(f.load_error).strip().splitlines()[0]}")
    else:
        bi = f.build_info
        kind = f"archs=[{', '.join(bi['archs'])}]" if bi["cuda"] else "CPU only"
        lines.append(
            f"  cuda_kernels  mode={bi['mode']} cuda={bi['cuda']} {kind} debug={bi['debug']} "
            f"built with torch {bi['torch']}" + (f" CUDA {bi['cuda_version']}" if bi["cuda"] else "")
        )
        lines.append(
            f"                stable ABI: runs under torch >= {bi['torch_target']}; torch {f.torch} is imported"
            + (
                ""
                if bi["cuda"] or not cuda_library_built(bi)
                else "; its CUDA kernels are not loaded (a CPU-only torch)"
            )
        )
        lines.append(
            f"                {bi['path']}" + (f"\n                {bi['cuda_path']}" if bi["cuda_path"] else "")
        )
        for g in f.gpus if bi["cuda"] else []:
            if "native" in bi["archs"]:
                how = "native build: see the calls"
            elif expand_archs(bi["archs"]) is None:
                how = "cannot tell (an arch name this doctor cannot read): see the calls"
            else:
                how = arch_coverage(bi["archs"], g.cc)
            lines.append(
                f"                GPU {g.index} sm_{g.cc[0]}{g.cc[1]} runs: {how or 'NOTHING (no kernel image)'}"
            )
            try:
                paths = matmul_paths(g.index)
            except Exception as err:  # noqa: BLE001  (a binary without code for this GPU: the calls say more)
                paths = [f"cannot tell: {str(err).splitlines()[0]}"]
            for path in paths:
                lines.append(f"                GPU {g.index} matmul variant 0, {path}")
    return lines


def main(argv: list[str] | None = None) -> int:
    facts = gather()
    for line in report(facts):
        print(line)
    problems = static_problems(facts)
    if facts.build_info is not None:
        print("op calls (float32 and bfloat16, compared to torch)")
        for r in run_ops(facts):
            print(f"  {'ok  ' if r.ok else 'FAIL'}  {r.label}" + (f": {r.detail}" if r.detail else ""))
            if not r.ok:
                problems.append(f"{r.label}: {r.detail}")
    problems = list(dict.fromkeys(problems))  # in order, without repeats
    if problems:
        print(f"problems ({len(problems)})")
        for p in problems:
            print(f"  - {p}")
        return 1
    print("no problems found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
