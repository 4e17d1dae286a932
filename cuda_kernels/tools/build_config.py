"""The build plan shared by setup.py (installed build) and cuda_kernels.tools.jit (JIT loop): build_plan().

build_plan() makes every decision of a build once: CUDA or not (and why), the toolkit (CUDA_HOME), the arch list,
the compiler and linker flags, the sources, the build tags. setup.py and the JIT loader only carry it out, so the
two cannot drift apart. The functions below it are its parts (the doctor and the tests use some of them alone).

This file must stay importable without torch and without the package's __init__: setup.py loads it by path.
Every switch is an environment variable; setup.py's docstring lists them for users.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CSRC = os.path.join(ROOT, "csrc")


def _runtime_loader() -> ModuleType:
    """cuda_kernels/_loader.py, which holds what the runtime needs of a build's facts (decode_arch_tag, the C++
    runtime check): imported as usual within the package, loaded by path when this file is (setup.py), since
    importing the package would load the extension being built."""
    if __name__ == "cuda_kernels.tools.build_config":
        from cuda_kernels import _loader

        return _loader
    spec = importlib.util.spec_from_file_location(
        "_cuda_kernels_loader", os.path.join(ROOT, "cuda_kernels", "_loader.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_loader = _runtime_loader()
decode_arch_tag = _loader.decode_arch_tag
elf_needed = _loader.elf_needed
cxx_runtime_problem = _loader.cxx_runtime_problem
TORCH_TARGET = _loader.TORCH_TARGET

# The stable ABI (docs/debugging.md, "The stable ABI"): host code calls torch only through its C shim, written
# against the API of TORCH_TARGET, so the binary loads under that torch and every later one; and Python's limited
# API of 3.10, so one binary serves every Python from 3.10 on (an abi3 wheel: PY_LIMITED_API_TAG).
PY_LIMITED_API = 0x030A0000
PY_LIMITED_API_TAG = "cp310"
STABLE_DEFINES = (
    f"-DTORCH_TARGET_VERSION=0x{TORCH_TARGET[0]:02x}{TORCH_TARGET[1]:02x}000000000000",
    f"-DPy_LIMITED_API=0x{PY_LIMITED_API:08X}",
)
# The libraries a build makes: cuda_kernels._C (the schemas, the CPU kernels, the introspection) always, and
# cuda_kernels._C_cuda (the CUDA kernels) in a CUDA build. Two, so that the CUDA build's wheel still loads under a
# CPU-only torch, which lacks the CUDA libraries _C_cuda links to: the package loads _C_cuda only where torch has
# CUDA. Both compile csrc/api.cpp (the registry; _C_cuda with CUDA_KERNELS_CUDA_LIBRARY) and csrc/module.cpp.
CPU_LIBRARY = "_C"
CUDA_LIBRARY = "_C_cuda"
SHARED_SOURCES = ("api.cpp", "module.cpp")

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


def env_flag(name: str, default: bool = False, env: Mapping[str, str] = os.environ) -> bool:
    """A yes/no switch: unset or empty -> default; "0", "false", "no", "off" (any case) -> False; else True."""
    value = env.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() not in ("0", "false", "no", "off")


def find_cuda_home(env: Mapping[str, str] = os.environ) -> str | None:
    """The CUDA toolkit root: CUDA_HOME/CUDA_PATH, else nvcc's folder, else /usr/local/cuda.

    torch guesses dirname(dirname(which nvcc)), which is wrong when nvcc on PATH is a wrapper script
    (e.g. /usr/local/bin/nvcc -> /usr/local/cuda-13.0/bin/nvcc); so each candidate must hold the headers.
    """
    candidates = [env.get("CUDA_HOME"), env.get("CUDA_PATH")]
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
    """The version `nvcc --version` prints, e.g. "13.0.88"; None when that nvcc cannot be run or read."""
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


def resolve_arch_list(
    gpu_capabilities: list[tuple[int, int]], cuda_home: str | None = None, env: Mapping[str, str] = os.environ
) -> tuple[str | None, str]:
    """Returns (TORCH_CUDA_ARCH_LIST to use, in numbers; a line saying why). gpu_capabilities: the visible GPUs'.

    TORCH_CUDA_ARCH_LIST always wins (torch's names expanded: normalize_arch_list; "native" means the visible
    GPUs, as in torch). COMPUTE_CAPABILITY=90 (or 90a, 8.6, "80;90a") is a shorthand that fills
    TORCH_CUDA_ARCH_LIST only when that is unset; when both are set and differ we say so and keep the list.
    With neither: the visible GPUs' archs, else the default for the nvcc in cuda_home (default_arch_list).
    """
    arch_list = env.get("TORCH_CUDA_ARCH_LIST", "").strip()
    cc = env.get("COMPUTE_CAPABILITY", "").strip()
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


# The arch tag: the arch list as one C identifier, baked into the CUDA library as CUDA_KERNELS_ARCHS (no quoting
# needed) and read back by build_info(). "." is dropped (the minor version is always one digit), "+PTX" -> "_PTX",
# ";" -> "__": "8.0;9.0a;12.0+PTX" <-> "80__90a__120_PTX".


def arch_tag(arch_list: str | None) -> str:
    """Encodes an arch list (torch's names allowed) as an identifier; decode_arch_tag is its inverse."""
    if not arch_list:
        return "native"
    entries = normalize_arch_list(arch_list).split(";")
    return "__".join(e.replace("+PTX", "_PTX").replace(".", "") for e in entries)


def arch_define(arch_list: str | None) -> str:
    """The CUDA library's -D flag that names the archs it is compiled for (build_info() reads it back)."""
    return f"-DCUDA_KERNELS_ARCHS={arch_tag(arch_list)}"


def max_jobs(env: Mapping[str, str] = os.environ) -> int:
    """MAX_JOBS if set, else min(cores, free GB / GB_PER_COMPILE_JOB), at least 1."""
    if env.get("MAX_JOBS"):
        return max(1, int(env["MAX_JOBS"]))
    cores = os.cpu_count() or 1
    try:
        with open("/proc/meminfo") as f:
            info = {line.split(":")[0]: int(line.split()[1]) for line in f if ":" in line}
        free_gb = info.get("MemAvailable", info.get("MemFree", 0)) / 2**20
        return max(1, min(cores, int(free_gb / GB_PER_COMPILE_JOB)))
    except (OSError, ValueError):
        return max(1, cores // 2)


def sources(with_cuda: bool, csrc: str | None = None) -> dict[str, list[str]]:
    """{library: its sources}, sorted. CPU_LIBRARY: every csrc/*.cpp and csrc/cpu/*.cpp; with CUDA, CUDA_LIBRARY:
    SHARED_SOURCES and every .cpp and .cu under csrc/cuda/ at any depth (csrc/cuda/matmul/ladder/ too). A new source
    file needs no entry anywhere. csrc: the folder to list (default CSRC, this checkout's)."""
    csrc = csrc or CSRC
    libs = {
        CPU_LIBRARY: sorted(glob.glob(os.path.join(csrc, "*.cpp")))
        + sorted(glob.glob(os.path.join(csrc, "cpu", "*.cpp")))
    }
    if with_cuda:
        cuda_dir = os.path.join(csrc, "cuda", "**")
        libs[CUDA_LIBRARY] = (
            [os.path.join(csrc, name) for name in SHARED_SOURCES]
            + sorted(glob.glob(os.path.join(cuda_dir, "*.cpp"), recursive=True))
            + sorted(glob.glob(os.path.join(cuda_dir, "*.cu"), recursive=True))
        )
    return libs


def openmp_flags() -> list[str]:
    """-fopenmp where torch's CPU parallelism is OpenMP (Linux builds of torch); none elsewhere (macOS clang)."""
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


def cxx_runtime_link_args(env: Mapping[str, str] = os.environ) -> list[str]:
    """Linker inputs that bind the extension to the C++ runtime torch has loaded: [its path], or [] (nothing
    loaded, not Linux, or CUDA_KERNELS_LINK_SHARED_CXX_RUNTIME=0). Part of BuildPlan.link_args.

    The library is named by path (a library folder may have libstdc++.so.6 but no libstdc++.so for -lstdc++ to
    find); ld records its soname, libstdc++.so.6, not the path.
    """
    if not env_flag(LINK_SHARED_CXX_RUNTIME_ENV, default=True, env=env):
        return []
    path = loaded_cxx_runtime()
    return [path] if path else []


# ---------------------------------------------------------------------------------------------------------
# The build plan: every decision above, made once, for setup.py and the JIT loader alike.


# Why a machine with a toolkit and a CUDA torch but no GPU builds CPU-only, and how to build CUDA all the same.
NO_GPU_WHY = "no GPU visible; WITH_CUDA=1 builds the CUDA kernels anyway, as CI does to compile every .cu"


def manylinux_tag(binaries: list[str], machine: str) -> str:
    """The wheel's platform tag from what its binaries need of glibc: manylinux_2_<y>_<machine> for the newest
    GLIBC_2.<y> symbol version any of them references (PEP 600). A build on an older distribution gets an older tag."""
    newest = 17  # manylinux2014's floor
    for path in binaries:
        with open(path, "rb") as f:
            newest = max([newest, *(int(m) for m in re.findall(rb"GLIBC_2\.(\d+)", f.read()))])
    return f"manylinux_2_{newest}_{machine}"


# What CUDA_LIBRARY's host files add to the flags: the registry's CUDA half (csrc/api.cpp), and USE_CUDA, under
# which torch's C shim declares its CUDA functions (the current stream).
CUDA_LIBRARY_DEFINES = ("-DCUDA_KERNELS_CUDA_LIBRARY=1", "-DUSE_CUDA")


class BuildPlanError(ValueError):
    """A build that cannot be planned as asked: WITH_CUDA=1 without a toolkit or with a CPU-only torch, an unreadable
    TORCH_CUDA_ARCH_LIST or COMPUTE_CAPABILITY. The message has no prefix: setup.py prints it after "cuda_kernels: ",
    the JIT loader after "cuda_kernels (JIT): "."""


@dataclass(frozen=True)
class TorchInfo:
    """What a build needs to know of the torch it builds against; TorchInfo.current() asks the imported torch."""

    version: str  # torch.__version__, e.g. "2.14.1+cu130"
    cuda: str | None  # torch.version.cuda, e.g. "13.0"; None for a CPU-only build of torch
    cxx11_abi: bool | None  # torch._C._GLIBCXX_USE_CXX11_ABI; None: pass no -D_GLIBCXX_USE_CXX11_ABI
    # The visible GPUs' compute capabilities, e.g. [(9, 0)]. Called only when a CUDA build is possible (a toolkit
    # and a CUDA torch) or forced: asking torch.cuda talks to the driver, which a CPU-only build has no business doing.
    gpu_capabilities: Callable[[], list[tuple[int, int]]]

    @staticmethod
    def current() -> TorchInfo:
        """The torch imported in this process (imported here if it is not yet)."""
        import torch

        def gpu_capabilities() -> list[tuple[int, int]]:
            return [torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())]

        return TorchInfo(
            version=torch.__version__,
            cuda=torch.version.cuda,
            cxx11_abi=bool(torch._C._GLIBCXX_USE_CXX11_ABI),
            gpu_capabilities=gpu_capabilities,
        )


@dataclass(frozen=True)
class BuildPlan:
    """One build of csrc/, fully decided (build_plan() makes it). Paths are absolute; flags in compiler order."""

    with_cuda: bool
    why: str  # why CUDA or not, e.g. "WITH_CUDA=0", "torch 2.14.1+cpu is a CPU-only build"
    cuda_home: str | None  # the toolkit found (kept for a CPU-only build too: torch's cpp_extension reads it)
    arch_list: str | None  # TORCH_CUDA_ARCH_LIST in numbers, e.g. "8.0;9.0a"; None for a CPU-only build
    arch_why: str | None  # where arch_list came from (resolve_arch_list); None for a CPU-only build
    debug: bool  # DEBUG=1
    lineinfo: bool  # LINEINFO=1 (nvcc -lineinfo; no effect on a CPU-only build)
    defines: tuple[str, ...]  # -D flags given to both compilers and both libraries
    cxx_flags: tuple[str, ...]  # both libraries'; CUDA_LIBRARY adds CUDA_LIBRARY_DEFINES and arch_define
    nvcc_flags: tuple[str, ...]  # () for a CPU-only build; arch_define included
    link_args: tuple[str, ...]  # [-g], -fopenmp, the C++ runtime torch loaded (cxx_runtime)
    cxx_runtime: str | None  # the libstdc++ named on the link; None: none (not Linux, or switched off)
    libraries: tuple[tuple[str, tuple[str, ...]], ...]  # ((name, sources), ...): CPU_LIBRARY, then CUDA_LIBRARY
    include_dirs: tuple[str, ...]
    max_jobs: int
    # setup.py's object folders build/<variant>/<library>: "cpu", "cuda", "cuda-debug", "cuda-lineinfo", ... Objects
    # of one variant are reused across rebuilds (ninja sees changed flags by itself), so DEBUG on and off stay warm.
    # CPU_LIBRARY's objects are in the CPU-only build's folder in a CUDA build too (object_folder): its flags are the
    # same, so after a CPU-only build a CUDA build compiles only the CUDA library (CI builds both kinds so).
    variant: str
    # The JIT cache folder's name (the JIT adds the checkout): also the Python ABI, torch version, CUDA version and
    # archs, since one cache serves every environment of a user: "py311-torch2.14.1-cu13.0-80__90a-debug",
    # "py311-torch2.14.1-cpu".
    tag: str
    torch: TorchInfo

    @property
    def sources(self) -> tuple[str, ...]:
        """Every source of every library (a file both compile, once)."""
        return tuple(dict.fromkeys(src for _, srcs in self.libraries for src in srcs))

    @property
    def arch_define(self) -> str | None:
        """-DCUDA_KERNELS_ARCHS=<arch_tag>, which build_info() reads (through the CUDA library), or None for a
        CPU-only build. Only the CUDA library gets it: CPU_LIBRARY's flags, and so its objects, are the same in either
        kind of build."""
        return arch_define(self.arch_list) if self.with_cuda else None

    def library_flags(self, name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(g++ flags, nvcc flags) of one library."""
        if name == CUDA_LIBRARY:
            arch = (self.arch_define,) if self.arch_define else ()
            return (*self.cxx_flags, *CUDA_LIBRARY_DEFINES, *arch), (*self.nvcc_flags, *CUDA_LIBRARY_DEFINES)
        return self.cxx_flags, ()

    def object_folder(self, name: str) -> str:
        """setup.py's object folder of one library, relative to build/: <variant>/<name>, except that CPU_LIBRARY
        is always in the CPU-only variant's folder (cpu, cpu-debug), which its flags do not depend on."""
        if name == CPU_LIBRARY:
            return os.path.join("cpu-debug" if self.debug else "cpu", name)
        return os.path.join(self.variant, name)

    @property
    def build_env(self) -> dict[str, str]:
        """Variables torch.utils.cpp_extension reads while it builds: MAX_JOBS and, for CUDA, TORCH_CUDA_ARCH_LIST
        in numbers (torch compiles exactly the archs the binary's CUDA_KERNELS_ARCHS names)."""
        env = {"MAX_JOBS": str(self.max_jobs)}
        if self.with_cuda and self.arch_list:
            env["TORCH_CUDA_ARCH_LIST"] = self.arch_list
        return env

    def export_cuda_home(self) -> None:
        """Sets CUDA_HOME to the toolkit found, unless it is set. Call it before torch.utils.cpp_extension is first
        imported: that reads CUDA_HOME once, and its own guess (dirname(dirname(which nvcc))) can be wrong."""
        if self.cuda_home and not os.environ.get("CUDA_HOME"):
            os.environ["CUDA_HOME"] = self.cuda_home

    def report(self) -> list[str]:
        """The lines setup.py prints about the build: CUDA or CPU-only and why, nvcc and archs, DEBUG/LINEINFO, the
        C++ runtime linked. Runs nvcc --version (the JIT loader, which needs no such line, does not call this)."""
        lines = []
        if self.with_cuda:
            nvcc = (nvcc_version(self.cuda_home) if self.cuda_home else None) or "?"
            lines.append(
                f"cuda_kernels: building the CUDA extension ({self.why}); nvcc {nvcc}; archs from {self.arch_why}"
            )
            if nvcc.split(".")[0] != (self.torch.cuda or "").split(".")[0]:
                lines.append(
                    f"cuda_kernels: warning: nvcc {nvcc} and torch's CUDA {self.torch.cuda} differ in major version; "
                    "the build may fail or the module may not load. Use a toolkit matching torch."
                )
        else:
            lines.append(f"cuda_kernels: building the CPU-only extension ({self.why})")
        if self.debug or self.lineinfo:
            lines.append(f"cuda_kernels: DEBUG={int(self.debug)} LINEINFO={int(self.lineinfo)}")
        if self.cxx_runtime:
            lines.append(f"cuda_kernels: linking against the C++ runtime torch loaded: {self.cxx_runtime}")
        return lines


def build_plan(env: Mapping[str, str] = os.environ, torch_info: TorchInfo | None = None) -> BuildPlan:
    """Decides one build of csrc/ from the build switches in env (setup.py's docstring lists them).

    env: the environment to read (os.environ, or a dict in tests); it is only read. torch_info: the torch to build
    against (default TorchInfo.current()). Raises BuildPlanError when the switches ask for what cannot be built.

    CUDA or not: WITH_CUDA when set; else CUDA when a toolkit is found (find_cuda_home), torch is a CUDA build and
    a GPU is visible. Without a GPU the CUDA kernels could not run here, and compiling them for the default archs
    takes minutes to hours on a small machine; WITH_CUDA=1 compiles them anyway (CI does, to compile every .cu).
    The arch list: resolve_arch_list (TORCH_CUDA_ARCH_LIST, COMPUTE_CAPABILITY, the visible GPUs, nvcc's default).
    Flags: DEBUG, LINEINFO, PTXAS_VERBOSE, NVCC_THREADS; the link: CUDA_KERNELS_LINK_SHARED_CXX_RUNTIME.
    """
    torch_info = torch_info or TorchInfo.current()
    cuda_home = find_cuda_home(env)
    with_cuda, why, gpus = _choose_cuda(env, cuda_home, torch_info)
    arch_list = arch_why = None
    if with_cuda:
        try:
            arch_list, arch_why = resolve_arch_list(gpus, cuda_home, env)
        except ValueError as err:
            raise BuildPlanError(str(err)) from None
    debug = env_flag("DEBUG", env=env)
    lineinfo = env_flag("LINEINFO", env=env)
    defines, cxx_flags, nvcc_flags = _compiler_flags(with_cuda, arch_list, debug, lineinfo, torch_info.cxx11_abi, env)
    cxx_runtime = cxx_runtime_link_args(env)
    variant, tag = _tags(with_cuda, arch_list, debug, lineinfo, torch_info)
    return BuildPlan(
        with_cuda=with_cuda,
        why=why,
        cuda_home=cuda_home,
        arch_list=arch_list,
        arch_why=arch_why,
        debug=debug,
        lineinfo=lineinfo,
        defines=tuple(defines),
        cxx_flags=tuple(cxx_flags),
        nvcc_flags=tuple(nvcc_flags) if with_cuda else (),
        link_args=(*(["-g"] if debug else []), *openmp_flags(), *cxx_runtime),
        cxx_runtime=cxx_runtime[0] if cxx_runtime else None,
        libraries=tuple((name, tuple(srcs)) for name, srcs in sources(with_cuda).items()),
        include_dirs=(CSRC,),
        max_jobs=max_jobs(env),
        variant=variant,
        tag=tag,
        torch=torch_info,
    )


def _choose_cuda(
    env: Mapping[str, str], cuda_home: str | None, torch_info: TorchInfo
) -> tuple[bool, str, list[tuple[int, int]]]:
    """(CUDA build or not, why, the visible GPUs' capabilities: [] for a CPU-only build). WITH_CUDA=1 that cannot be
    built is a BuildPlanError, not a quiet CPU-only build."""
    forced = env.get("WITH_CUDA", "")
    if forced != "":
        want = env_flag("WITH_CUDA", env=env)
        if want and cuda_home is None:
            raise BuildPlanError("WITH_CUDA=1 but no CUDA toolkit (nvcc and headers) was found; set CUDA_HOME")
        if want and torch_info.cuda is None:
            raise BuildPlanError(f"WITH_CUDA=1 but torch {torch_info.version} is a CPU-only build")
        return want, f"WITH_CUDA={forced}", list(torch_info.gpu_capabilities()) if want else []
    if cuda_home is None:
        return False, "no CUDA toolkit found (set CUDA_HOME or WITH_CUDA=1 to insist)", []
    if torch_info.cuda is None:
        return False, f"torch {torch_info.version} is a CPU-only build", []
    gpus = list(torch_info.gpu_capabilities())
    if not gpus:
        return False, NO_GPU_WHY, []
    return True, f"CUDA toolkit at {cuda_home}, torch built with CUDA {torch_info.cuda} and a visible GPU", gpus


def _compiler_flags(
    with_cuda: bool, arch_list: str | None, debug: bool, lineinfo: bool, cxx11_abi: bool | None, env: Mapping[str, str]
) -> tuple[list[str], list[str], list[str]]:
    """(defines, g++ flags, nvcc flags: with arch_define). cxx11_abi is passed explicitly to g++ and to nvcc's host
    compiler, so a host compiler whose default libstdc++ ABI differs from torch's cannot build an extension whose
    std::string objects crash when they cross into libc10."""
    defines = [
        *([f"-D_GLIBCXX_USE_CXX11_ABI={int(cxx11_abi)}"] if cxx11_abi is not None else []),
        *STABLE_DEFINES,
        f"-DCUDA_KERNELS_DEBUG={int(debug)}",
    ]
    # Python's own CFLAGS, which setuptools puts first on every g++ line, carry -g: full debug info of torch's
    # headers makes api.cpp compile a third slower and its object ~25x larger. -g1, later on the line, wins: line
    # tables only, so backtraces (gdb, perf, sanitizers) still name files and lines. DEBUG=1 keeps full -g.
    opt = ["-O0", "-g"] if debug else ["-O3", "-g1"]
    # No -std flag: torch.utils.cpp_extension picks the standard its headers need (C++17 or C++20).
    # -fopenmp: at::parallel_for is a header template that runs on OpenMP in torch's Linux builds; compiled
    # without it, the CPU kernels silently run on one thread.
    # -Wno-unknown-pragmas, -Wno-psabi: the AVX2/AVX512 builds of the CPU kernels (csrc/cpu/vec_isa_begin.h) compile
    # at::vec's vector code, whose headers carry clang/nvcc pragmas (`#pragma unroll`) and pass __m256/__m512 by
    # value, on which g++ -Wall warns and notes dozens of times per file (GCC 12 cannot silence these two with
    # `#pragma GCC diagnostic`). Neither can point at a bug of ours.
    cxx = [*opt, *defines, *openmp_flags(), "-Wno-unknown-pragmas", "-Wno-psabi"]
    nvcc = [*defines, arch_define(arch_list)]
    if debug:
        nvcc += ["-O0", "-g", "-G"]
    else:
        nvcc += ["-O3"]
    if lineinfo and not debug:
        nvcc.append("-lineinfo")
    # Report registers/spills per kernel when asked: the first thing to read when a kernel is slow.
    if env_flag("PTXAS_VERBOSE", env=env):
        nvcc.append("-Xptxas=-v")
    nvcc += ["--expt-relaxed-constexpr", f"--threads={env.get('NVCC_THREADS', '1')}"]
    return defines, cxx, nvcc


def _tags(
    with_cuda: bool, arch_list: str | None, debug: bool, lineinfo: bool, torch_info: TorchInfo
) -> tuple[str, str]:
    """(variant, tag): BuildPlan's two names of a build, with the same -debug/-lineinfo suffix. LINEINFO changes no
    flag of a CPU-only build, so it does not name a CPU-only build apart."""
    suffix = f"{'-debug' if debug else ''}{'-lineinfo' if lineinfo and with_cuda else ''}"
    variant = f"{'cuda' if with_cuda else 'cpu'}{suffix}"
    py = f"py{sys.version_info.major}{sys.version_info.minor}"
    torch_version = torch_info.version.split("+")[0]
    device = f"cu{torch_info.cuda}-{arch_tag(arch_list)}" if with_cuda else "cpu"
    tag = f"{py}-torch{torch_version}-{device}{suffix}"
    # A folder name (and part of the module name's hash): only characters safe in both.
    return variant, "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in tag)
