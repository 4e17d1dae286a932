"""Build configuration shared by setup.py (installed build) and cuda_kernels._jit (JIT loop).

This file must stay importable without torch and without the package's __init__: setup.py loads it by path.
Every switch is an environment variable; setup.py's docstring lists them for users.
"""

from __future__ import annotations

import glob
import mmap
import os
import re
import shutil
import struct
import subprocess
from dataclasses import dataclass, field
from typing import NoReturn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CSRC = os.path.join(ROOT, "csrc")

# Archs built when no GPU is visible and neither TORCH_CUDA_ARCH_LIST nor COMPUTE_CAPABILITY is given, by the
# version of the nvcc found: (oldest nvcc, list), newest first. Ampere, Hopper as 9.0a (the arch-specific target:
# wgmma and TMA kernels exist only there), Blackwell (datacenter and consumer), with PTX of the newest arch the
# toolkit knows so that future GPUs can JIT it. sm_90a needs nvcc 12.0, sm_90 11.8, sm_100 and sm_120 12.8.
DEFAULT_ARCH_LISTS: tuple[tuple[tuple[int, int], str], ...] = (
    ((12, 8), "8.0;9.0a;10.0;12.0+PTX"),
    ((12, 0), "8.0;9.0a;9.0+PTX"),
    ((11, 8), "8.0;9.0+PTX"),
    ((0, 0), "8.0+PTX"),
)

# Compute capabilities whose visible-GPU build uses the arch-specific target ("9.0a", not "9.0"): without it
# nvcc compiles no wgmma/TMA code, and the Hopper kernels fall back to their portable paths.
ARCH_SPECIFIC_CAPABILITIES = {(9, 0)}

# The names torch.utils.cpp_extension accepts in TORCH_CUDA_ARCH_LIST (its _get_cuda_arch_flags, torch 2.14; a
# local table there, not importable). Combined names first: torch expands them by string replacement in this order.
# We expand them ourselves (normalize_arch_list), so that the tag baked into the binary, build_info() and the
# doctor see numbers, and so that "Ampere+PTX" works (torch alone turns it into the invalid "8.6+PTX+PTX").
NAMED_ARCHES: dict[str, str] = {
    "Kepler+Tesla": "3.7",
    "Kepler": "3.5+PTX",
    "Maxwell+Tegra": "5.3",
    "Maxwell": "5.0;5.2+PTX",
    "Pascal": "6.0;6.1+PTX",
    "Volta+Tegra": "7.2",
    "Volta": "7.0+PTX",
    "Turing": "7.5+PTX",
    "Ampere+Tegra": "8.7",
    "Ampere": "8.0;8.6+PTX",
    "Ada": "8.9+PTX",
    "Hopper": "9.0+PTX",
    "Blackwell+Tegra": "11.0",
    "Blackwell": "10.0;10.3;12.0;12.1+PTX",
    "Rubin": "10.7+PTX",
}

# One numeric arch: major.minor, optional "a" (arch-specific) or "f" (family), optional "+PTX".
_ARCH_RE = re.compile(r"^(\d+)\.(\d)([af]?)(\+PTX)?$")

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


def _version_tuple(version: str | None) -> tuple[int, int] | None:
    """'12.8.93' -> (12, 8); None or unreadable -> None."""
    parts = (version or "").split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return int(parts[0]), int(parts[1])


def default_arch_list(nvcc: str | None) -> str:
    """The no-GPU default for an nvcc version ('13.0.88'): the newest row of DEFAULT_ARCH_LISTS it can build.

    An nvcc whose version cannot be read gets the newest row: the build itself then says what nvcc rejects.
    """
    have = _version_tuple(nvcc)
    for oldest, arch_list in DEFAULT_ARCH_LISTS:
        if have is None or have >= oldest:
            return arch_list
    return DEFAULT_ARCH_LISTS[-1][1]


def visible_arch_list(capabilities: list[tuple[int, int]]) -> str | None:
    """The visible GPUs' archs, e.g. [(8, 0), (8, 6)] -> "8.0;8.6+PTX", [(9, 0)] -> "9.0a"; None without GPUs.

    What torch would build for when TORCH_CUDA_ARCH_LIST is unset, spelled out so that build_info() and the
    doctor name the real archs, except that a capability in ARCH_SPECIFIC_CAPABILITIES gets its "a" target. The
    newest arch carries +PTX (newer GPUs can JIT it) unless it is arch-specific: compute_90a PTX runs only on 9.0.
    """
    if not capabilities:
        return None
    archs = [
        f"{major}.{minor}{'a' if (major, minor) in ARCH_SPECIFIC_CAPABILITIES else ''}"
        for major, minor in sorted(set(capabilities))
    ]
    if not archs[-1].endswith("a"):
        archs[-1] += "+PTX"
    return ";".join(archs)


def normalize_arch_list(arch_list: str) -> str:
    """A TORCH_CUDA_ARCH_LIST in numbers, entries in order, without repeats; raises ValueError on what it cannot read.

    Separators ";" or spaces (as torch). Torch's names expand as torch expands them: "Hopper" -> "9.0+PTX",
    "Ampere" -> "8.0;8.6+PTX"; a name with +PTX puts PTX on the newest arch of its expansion: "Ampere+Tegra+PTX" ->
    "8.7+PTX". "native" (torch: the visible GPUs) is kept as it is. Examples: "8.0 9.0a" -> "8.0;9.0a",
    "Ampere+PTX;Hopper" -> "8.0;8.6+PTX;9.0+PTX".
    """
    out: list[str] = []
    for entry in arch_list.replace(" ", ";").split(";"):
        entry = entry.strip()
        if not entry:
            continue
        if entry == "native" or _ARCH_RE.match(entry):
            expanded = [entry]
        else:
            name = entry.removesuffix("+PTX")
            if name not in NAMED_ARCHES:
                raise ValueError(
                    f"TORCH_CUDA_ARCH_LIST: cannot read {entry!r} in {arch_list!r}; use numbers such as 8.0, 9.0a, "
                    f"9.0+PTX, or one of torch's names: {', '.join(NAMED_ARCHES)}"
                )
            expanded = NAMED_ARCHES[name].split(";")
            if entry.endswith("+PTX") and not expanded[-1].endswith("+PTX"):
                expanded[-1] += "+PTX"
        out += [e for e in expanded if e not in out]
    return ";".join(out)


def resolve_arch_list(gpu_capabilities: list[tuple[int, int]], cuda_home: str | None = None) -> tuple[str | None, str]:
    """Returns (TORCH_CUDA_ARCH_LIST to use, in numbers; a line saying why). gpu_capabilities: the visible GPUs'.

    TORCH_CUDA_ARCH_LIST always wins (torch's names expanded: normalize_arch_list; "native" means the visible
    GPUs, as in torch). COMPUTE_CAPABILITY=90 (or 90a, 8.6, "80;90a") is a shorthand that fills
    TORCH_CUDA_ARCH_LIST only when that is unset; when both are set and differ we say so and keep the list.
    With neither: the visible GPUs' archs, else the default for the nvcc in cuda_home (default_arch_list).
    """
    arch_list = os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip()
    cc = os.environ.get("COMPUTE_CAPABILITY", "").strip()
    cc_list = ";".join(_cc_to_arch(c) for c in cc.replace(",", ";").split(";") if c.strip()) if cc else ""
    if arch_list:
        normalized = normalize_arch_list(arch_list)
        why = f"TORCH_CUDA_ARCH_LIST={arch_list}"
        if normalized == "native" and gpu_capabilities:
            normalized = visible_arch_list(gpu_capabilities)
        if normalized != arch_list:
            why += f" -> {normalized}"
        if cc_list and cc_list != normalized:
            why += f" (COMPUTE_CAPABILITY={cc} ignored: TORCH_CUDA_ARCH_LIST is set and takes precedence)"
        return normalized, why
    if cc_list:
        return normalize_arch_list(cc_list), f"COMPUTE_CAPABILITY={cc} -> TORCH_CUDA_ARCH_LIST={cc_list}"
    if gpu_capabilities:
        return visible_arch_list(gpu_capabilities), "the visible GPU(s)"
    nvcc = nvcc_version(cuda_home) if cuda_home else None
    default = default_arch_list(nvcc)
    return default, f"no GPU visible, default for nvcc {nvcc or '(version unknown)'}: {default}"


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


# The arch tag: the arch list as one C identifier, baked into the binary as CUDA_KERNELS_ARCHS (no quoting needed)
# and read back by build_info(). "." is dropped (the minor version is always one digit), "+PTX" -> "_PTX",
# ";" -> "__": "8.0;9.0a;12.0+PTX" <-> "80__90a__120_PTX".


def arch_tag(arch_list: str | None) -> str:
    """Encodes an arch list (torch's names allowed) as an identifier; decode_arch_tag is its inverse."""
    if not arch_list:
        return "native"
    entries = normalize_arch_list(arch_list).split(";")
    return "__".join(e.replace("+PTX", "_PTX").replace(".", "") for e in entries)


def decode_arch_tag(tag: str) -> list[str]:
    """Inverse of arch_tag: '80__90a_PTX' -> ['8.0', '9.0a+PTX']; 'native' and 'none' -> [tag].

    Binaries built before arch_tag expanded torch's names carry them ("Hopper", "Ampere_PTX"): those expand
    here; an entry that still cannot be read is returned as it is (the doctor then cannot check it).
    """
    if tag in ("native", "none"):
        return [tag]
    archs: list[str] = []
    for part in tag.split("__"):
        ptx = part.endswith("_PTX")
        core = part.removesuffix("_PTX")
        suffix = core[-1] if core[-1:] in ("a", "f") else ""
        digits = core[: len(core) - len(suffix)]
        if len(digits) >= 2 and digits.isdigit():
            # The last digit is the minor version: 80 -> 8.0, 120 -> 12.0, 90a -> 9.0a.
            archs.append(f"{digits[:-1]}.{digits[-1]}{suffix}{'+PTX' if ptx else ''}")
            continue
        try:
            archs += [a for a in normalize_arch_list(part.replace("_", "+")).split(";") if a not in archs]
        except ValueError:
            archs.append(part)
    return archs


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


# ---------------------------------------------------------------------------------------------------------
# The C++ runtime. The extension must use the libstdc++ that torch has loaded, through its DT_NEEDED entry
# libstdc++.so.6. A compiler whose library path finds libstdc++.a before libstdc++.so (a wrapper whose -B folder
# holds only the archive: `g++ -print-file-name=libstdc++.so` prints a bare name) links a private copy of the
# runtime into the extension; two runtimes then share one process, and the first error message that formats a
# number crashes (SIGSEGV) or stops early, in libstdc++'s locale code. So the link names the shared runtime that
# this process (which has imported torch) has loaded: its symbols are then defined before g++'s implicit
# -lstdc++ is searched, and nothing is taken from the archive. After linking, the binary is checked.

# CUDA_KERNELS_LINK_SHARED_CXX_RUNTIME=0 leaves the link as the compiler makes it (the check still runs).
LINK_SHARED_CXX_RUNTIME_ENV = "CUDA_KERNELS_LINK_SHARED_CXX_RUNTIME"

# Sonames of a shared C++ runtime: GNU libstdc++, LLVM libc++.
_SHARED_CXX_RUNTIMES = ("libstdc++.so", "libc++.so")


def loaded_cxx_runtime(maps: str = "/proc/self/maps") -> str | None:
    """The path of the shared libstdc++ this process has loaded (torch loads it), e.g.
    /usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.33; None where there is none or no /proc (macOS)."""
    try:
        with open(maps) as f:
            for line in f:
                # address perms offset dev inode [path]; the path may hold spaces.
                fields = line.split(maxsplit=5)
                path = fields[5].strip() if len(fields) == 6 else ""
                if os.path.basename(path).startswith("libstdc++.so") and os.path.isfile(path):
                    return path
    except OSError:
        pass
    return None


def cxx_runtime_link_args() -> list[str]:
    """Linker inputs that bind the extension to the C++ runtime torch has loaded: [its path], or [] (nothing
    loaded, not Linux, or CUDA_KERNELS_LINK_SHARED_CXX_RUNTIME=0). setup.py and the JIT loader both add these.

    The library is named by path (a library folder may have libstdc++.so.6 but no libstdc++.so for -lstdc++ to
    find); ld records its soname, libstdc++.so.6, not the path.
    """
    if not env_flag(LINK_SHARED_CXX_RUNTIME_ENV, default=True):
        return []
    path = loaded_cxx_runtime()
    return [path] if path else []


def elf_needed(path: str) -> list[str] | None:
    """The DT_NEEDED entries of an ELF shared object (what `readelf -d` lists as NEEDED), in order; None when
    the file is not ELF (e.g. a Mach-O on macOS). Raises ValueError for a truncated or malformed ELF file.

    Reads the section headers, the SHT_DYNAMIC section and the string table it links to (its sh_link).
    """
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size < 64:  # shorter than an ELF header
            if f.read(4) == b"\x7fELF":
                _malformed(path, "truncated header")
            return None
        # Mapped, not read: a CUDA build's binary is tens of MB, and only its headers and dynamic section are used.
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _elf_needed(path, data)


def _malformed(path: str, why: str) -> NoReturn:
    raise ValueError(f"{path}: malformed ELF file ({why})")


def _elf_needed(path: str, data: mmap.mmap) -> list[str] | None:
    if data[:4] != b"\x7fELF":
        return None
    if data[4] not in (1, 2) or data[5] not in (1, 2):
        _malformed(path, "unknown class or byte order")
    is64 = data[4] == 2  # EI_CLASS: 1 = 32-bit, 2 = 64-bit
    end = "<" if data[5] == 1 else ">"  # EI_DATA: 1 = little endian, 2 = big endian
    try:
        if is64:
            (shoff,) = struct.unpack_from(end + "Q", data, 0x28)  # e_shoff
            shentsize, shnum = struct.unpack_from(end + "HH", data, 0x3A)  # e_shentsize, e_shnum
            # Elf64_Shdr: name u32, type u32, flags u64, addr u64, offset u64, size u64, link u32; Elf64_Dyn: i64, u64.
            sh_fmt, dyn_fmt = end + "IIQQQQI", end + "qQ"
        else:
            (shoff,) = struct.unpack_from(end + "I", data, 0x20)
            shentsize, shnum = struct.unpack_from(end + "HH", data, 0x2E)
            # Elf32_Shdr: the same fields, all u32; Elf32_Dyn: i32, u32.
            sh_fmt, dyn_fmt = end + "IIIIIII", end + "iI"
        sections = [struct.unpack_from(sh_fmt, data, shoff + i * shentsize) for i in range(shnum)]
        needed: list[str] = []
        dynamic = False
        for _, sh_type, _, _, offset, size, link in sections:
            if sh_type != 6:  # SHT_DYNAMIC
                continue
            dynamic = True
            strtab_offset = sections[link][4]
            step = struct.calcsize(dyn_fmt)
            for at in range(offset, offset + size - step + 1, step):
                tag, value = struct.unpack_from(dyn_fmt, data, at)
                if tag == 0:  # DT_NULL ends the table
                    break
                if tag == 1:  # DT_NEEDED: value is an offset into the dynamic string table
                    start = strtab_offset + value
                    stop = data.find(b"\0", start)
                    if stop < 0:
                        _malformed(path, "unterminated string")
                    needed.append(data[start:stop].decode())
        if not dynamic:  # every shared object has one; a binary stripped of its section headers cannot be read here
            _malformed(path, "no dynamic section found")
        return needed
    except (struct.error, IndexError, OverflowError, UnicodeDecodeError) as err:
        _malformed(path, str(err))


def cxx_runtime_problem(path: str, rebuild: str = "pip install --no-build-isolation -e .") -> str | None:
    """None when the C++ extension at `path` uses a shared C++ runtime (or is no ELF file, or cannot be read); else a
    message that says what is wrong and the one-line fix (the same text for the build, the loader, the doctor).
    rebuild: the command that rebuilds the binary, after the compiler settings in the fix."""
    try:
        needed = elf_needed(path)
    except (OSError, ValueError):  # absent, unreadable or not understood: cannot tell, so no claim
        return None
    if needed is None or any(n.startswith(_SHARED_CXX_RUNTIMES) for n in needed):
        return None
    system = "/usr/bin/g++" if os.path.exists("/usr/bin/g++") else "g++"
    system_cc = "/usr/bin/gcc" if system.startswith("/") else "gcc"
    return (
        f"cuda_kernels: {path} carries its own static copy of the C++ runtime (no libstdc++.so.6 among its "
        f"needed libraries: {', '.join(needed) or 'none'}), so it would crash on the first error message that "
        "formats a number. The compiler that linked it found libstdc++.a before libstdc++.so (e.g. a CC/CXX wrapper "
        f"whose -B folder holds only the archive). Fix: CC={system_cc} CXX={system} {rebuild}"
    )


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
