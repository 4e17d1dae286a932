"""Build configuration shared by setup.py (installed build) and cuda_kernels._jit (JIT loop).

This file must stay importable without torch and without the package's __init__: setup.py loads it by path.
Every switch is an environment variable; setup.py's docstring lists them for users.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CSRC = os.path.join(ROOT, "csrc")

# Archs built when no GPU is visible and neither TORCH_CUDA_ARCH_LIST nor COMPUTE_CAPABILITY is given:
# Ampere, Hopper, Blackwell (datacenter and consumer), with PTX of the newest so future GPUs can JIT it.
DEFAULT_ARCH_LIST = "8.0;9.0;10.0;12.0+PTX"

# Each nvcc job can take ~2 GB of host memory on template-heavy files; bound MAX_JOBS by what is free.
GB_PER_COMPILE_JOB = 2.0


def env_flag(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() not in ("0", "false", "no", "off")


def find_cuda_home() -> str | None:
    """The CUDA toolkit root: CUDA_HOME/CUDA_PATH, else nvcc's folder, else /usr/local/cuda.

    torch guesses dirname(dirname(which nvcc)), which is wrong when nvcc on PATH is a wrapper script
    (e.g. /usr/local/bin/nvcc -> /usr/local/cuda-13.0/bin/nvcc); so each candidate must hold the headers.
    """
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    candidates += ["/usr/local/cuda"] + sorted(glob.glob("/usr/local/cuda-*"), reverse=True)
    for home in candidates:
        if home and os.path.isfile(os.path.join(home, "include", "cuda_runtime.h")):
            if os.path.isfile(os.path.join(home, "bin", "nvcc")):
                return home
    return None


def nvcc_version(cuda_home: str) -> str | None:
    try:
        out = subprocess.run(
            [os.path.join(cuda_home, "bin", "nvcc"), "--version"], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for token in out.replace(",", " ").split():
        if token.startswith("V") and token[1:2].isdigit():
            return token[1:]
    return None


def visible_arch_list(capabilities: list[tuple[int, int]]) -> str | None:
    """The visible GPUs' archs, the newest with +PTX, e.g. [(9, 0)] -> "9.0+PTX"; None without GPUs.

    What torch would build for when TORCH_CUDA_ARCH_LIST is unset, spelled out so that build_info() and the
    doctor name the real archs.
    """
    if not capabilities:
        return None
    archs = [f"{major}.{minor}" for major, minor in sorted(set(capabilities))]
    archs[-1] += "+PTX"
    return ";".join(archs)


def resolve_arch_list(gpu_capabilities: list[tuple[int, int]]) -> tuple[str | None, str]:
    """Returns (TORCH_CUDA_ARCH_LIST to use, a line saying why). gpu_capabilities: those of the visible GPUs.

    TORCH_CUDA_ARCH_LIST always wins. COMPUTE_CAPABILITY=90 (or 90a, 8.6, "80;90a") is a shorthand that fills
    TORCH_CUDA_ARCH_LIST only when that is unset; when both are set and differ we say so and keep the list.
    """
    arch_list = os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip()
    cc = os.environ.get("COMPUTE_CAPABILITY", "").strip()
    cc_list = ";".join(_cc_to_arch(c) for c in cc.replace(",", ";").split(";") if c.strip()) if cc else ""
    if arch_list:
        why = f"TORCH_CUDA_ARCH_LIST={arch_list}"
        if cc_list and cc_list != arch_list:
            why += f" (COMPUTE_CAPABILITY={cc} ignored: TORCH_CUDA_ARCH_LIST is set and takes precedence)"
        return arch_list, why
    if cc_list:
        return cc_list, f"COMPUTE_CAPABILITY={cc} -> TORCH_CUDA_ARCH_LIST={cc_list}"
    if gpu_capabilities:
        return visible_arch_list(gpu_capabilities), "the visible GPU(s)"
    return DEFAULT_ARCH_LIST, f"no GPU visible, default {DEFAULT_ARCH_LIST}"


def _cc_to_arch(cc: str) -> str:
    """'90' -> '9.0', '90a' -> '9.0a', '8.6' -> '8.6', '120' -> '12.0', '9.0+PTX' unchanged."""
    cc = cc.strip()
    if "." in cc:
        return cc
    suffix = ""
    if cc.endswith("a") or cc.endswith("f"):
        cc, suffix = cc[:-1], cc[-1]
    if not cc.isdigit() or len(cc) < 2:
        raise ValueError(f"COMPUTE_CAPABILITY: cannot read {cc!r}; use e.g. 80, 90, 90a or 8.6")
    return f"{cc[:-1]}.{cc[-1]}{suffix}"


def arch_tag(arch_list: str | None) -> str:
    """An identifier that names the arch list, baked into the binary as CUDA_KERNELS_ARCHS (no quoting)."""
    if not arch_list:
        return "native"
    tag = arch_list.replace(" ", ";").replace("+PTX", "_PTX").replace(".", "").replace(";", "__")
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in tag)


def max_jobs() -> int:
    """MAX_JOBS if set, else min(cores, free GB / GB_PER_COMPILE_JOB), at least 1."""
    if os.environ.get("MAX_JOBS"):
        return max(1, int(os.environ["MAX_JOBS"]))
    cores = os.cpu_count() or 1
    try:
        with open("/proc/meminfo") as f:
            info = {line.split(":")[0]: int(line.split()[1]) for line in f if ":" in line}
        free_gb = info.get("MemAvailable", info.get("MemFree", 0)) / 2**20
        return max(1, min(cores, int(free_gb / GB_PER_COMPILE_JOB)))
    except (OSError, ValueError):
        return max(1, cores // 2)


def sources(with_cuda: bool) -> list[str]:
    """All C++ sources (csrc/api.cpp, csrc/cpu/*.cpp) plus, with CUDA, every csrc/cuda/**/*.cpp and *.cu."""
    srcs = [os.path.join(CSRC, "api.cpp")] + sorted(glob.glob(os.path.join(CSRC, "cpu", "*.cpp")))
    if with_cuda:
        cuda_dir = os.path.join(CSRC, "cuda", "**")
        srcs += sorted(glob.glob(os.path.join(cuda_dir, "*.cpp"), recursive=True))
        srcs += sorted(glob.glob(os.path.join(cuda_dir, "*.cu"), recursive=True))
    return srcs


def openmp_flags() -> list[str]:
    """-fopenmp where torch's CPU parallelism is OpenMP (Linux builds of torch); none elsewhere (macOS clang)."""
    import sys

    return ["-fopenmp"] if sys.platform.startswith("linux") else []


@dataclass
class BuildConfig:
    with_cuda: bool
    debug: bool
    lineinfo: bool
    arch_list: str | None
    cxx_flags: list[str] = field(default_factory=list)
    nvcc_flags: list[str] = field(default_factory=list)
    defines: list[str] = field(default_factory=list)


def make_config(with_cuda: bool, arch_list: str | None, cxx11_abi: bool | None = None) -> BuildConfig:
    """Compiler flags. cxx11_abi: torch._C._GLIBCXX_USE_CXX11_ABI, passed explicitly to g++ and to nvcc's host
    compiler, so a host compiler whose default libstdc++ ABI differs from torch's cannot build an extension whose
    std::string objects crash when they cross into libc10."""
    debug = env_flag("DEBUG")
    lineinfo = env_flag("LINEINFO")
    defines = [
        *([f"-D_GLIBCXX_USE_CXX11_ABI={int(cxx11_abi)}"] if cxx11_abi is not None else []),
        f"-DCUDA_KERNELS_WITH_CUDA={int(with_cuda)}",
        f"-DCUDA_KERNELS_DEBUG={int(debug)}",
        f"-DCUDA_KERNELS_ARCHS={arch_tag(arch_list) if with_cuda else 'none'}",
    ]
    opt = ["-O0", "-g"] if debug else ["-O3"]
    # No -std flag: torch.utils.cpp_extension picks the standard its headers need (C++17 or C++20).
    # -fopenmp: at::parallel_for is a header template that runs on OpenMP in torch's Linux builds; compiled
    # without it, the CPU kernels silently run on one thread.
    # -Wno-unknown-pragmas, -Wno-psabi: the AVX2/AVX512 builds of the CPU kernels (csrc/cpu/vec_isa_begin.h) compile
    # at::vec's vector code, whose headers carry clang/nvcc pragmas (`#pragma unroll`) and pass __m256/__m512 by
    # value, on which g++ -Wall warns and notes dozens of times per file (GCC 12 cannot silence these two with
    # `#pragma GCC diagnostic`). Neither can point at a bug of ours.
    cxx = [*opt, *defines, *openmp_flags(), "-Wno-unknown-pragmas", "-Wno-psabi"]
    nvcc = [*defines]
    if debug:
        nvcc += ["-O0", "-g", "-G"]
    else:
        nvcc += ["-O3"]
    if lineinfo and not debug:
        nvcc.append("-lineinfo")
    # Report registers/spills per kernel when asked: the first thing to read when a kernel is slow.
    if env_flag("PTXAS_VERBOSE"):
        nvcc.append("-Xptxas=-v")
    nvcc += ["--expt-relaxed-constexpr", f"--threads={os.environ.get('NVCC_THREADS', '1')}"]
    return BuildConfig(with_cuda, debug, lineinfo, arch_list, cxx, nvcc, defines)
