"""Finds and loads the compiled extension, and turns the usual load failures into one-line advice.

Also the two facts of a build that the runtime reads: whether a binary carries its own static C++ runtime
(cxx_runtime_problem, checked before loading it) and the archs a binary was built for (decode_arch_tag, for
build_info()). They live here, not in cuda_kernels/tools/build_config.py (which uses them too), so that
`import cuda_kernels` does not import the build config. Standard library only: setup.py loads this file by path,
through the build config.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import mmap
import os
import struct
import sys
from types import ModuleType
from typing import NoReturn

REBUILD = "pip install --no-build-isolation -e ."

# The oldest torch the binary runs under: the stable ABI's TORCH_TARGET_VERSION, which the build passes to the
# compilers (cuda_kernels/tools/build_config.py reads it here), and load_extension checks before loading.
TORCH_TARGET = (2, 11)


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


def torch_too_old(version: str, target: tuple[int, int] = TORCH_TARGET) -> str | None:
    """The line that stops a load under a torch older than the binary's stable-ABI target, naming both; None when
    `version` (torch.__version__, e.g. "2.11.0+cu130") is the target or later."""
    try:
        major, minor = (int(part) for part in version.split("+")[0].split(".")[:2])
    except ValueError:
        return None  # a version torch itself could not have: let the load say what is wrong
    if (major, minor) >= target:
        return None
    return (
        f"cuda_kernels: this build needs torch >= {target[0]}.{target[1]} (its stable-ABI target), but torch "
        f"{version} is imported; upgrade torch"
    )


def _find_library(name: str) -> importlib.machinery.ModuleSpec | None:
    """The spec of cuda_kernels.<name> in this package's own folder, or None. Only there: an editable install of
    another checkout adds an import hook that would otherwise supply a library this copy lacks (its CUDA library
    beside this copy's CPU-only build)."""
    return importlib.machinery.PathFinder.find_spec(f"cuda_kernels.{name}", [os.path.dirname(__file__)])


def _import_checked(spec: importlib.machinery.ModuleSpec) -> ModuleType:
    """Imports a library after refusing a binary with its own static C++ runtime (it would load, then crash on the
    first error message that formats a number); ImportError with one line of advice otherwise."""
    problem = cxx_runtime_problem(spec.origin) if spec.origin else None
    if problem:
        raise ImportError(problem)
    try:
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    except ImportError as err:
        sys.modules.pop(spec.name, None)
        raise ImportError(explain_import_error(err)) from err
    package, _, name = spec.name.rpartition(".")
    if package in sys.modules:  # as an import statement would: cuda_kernels._C is an attribute of the package
        setattr(sys.modules[package], name, module)
    return module


def load_extension(jit: bool) -> tuple[ModuleType, ModuleType | None, str]:
    """Loads the binary's two libraries (their import registers the ops): (the CPU library cuda_kernels._C, the CUDA
    library cuda_kernels._C_cuda or None, mode). The CUDA library is loaded where torch has CUDA and the build made
    one (a CPU-only build has none); under a CPU-only torch the same build's CUDA library stays unloaded. jit: build
    csrc/ with the JIT loop instead of importing the installed build."""
    import torch

    too_old = torch_too_old(torch.__version__)
    if too_old:
        raise ImportError(too_old)
    if jit:
        from cuda_kernels.tools.jit import load as load_jit

        cpu, cuda = load_jit()
        return cpu, cuda, "jit"
    cpu_spec = _find_library("_C")
    if cpu_spec is None:
        raise ImportError(explain_import_error(ModuleNotFoundError("No module named 'cuda_kernels._C'")))
    cpu = _import_checked(cpu_spec)
    cuda_spec = _find_library("_C_cuda") if torch.version.cuda else None
    cuda = _import_checked(cuda_spec) if cuda_spec is not None else None
    return cpu, cuda, "installed"


def decode_arch_tag(tag: str) -> list[str]:
    """The archs of a binary's arch tag (build_info() reads it; the build config's arch_tag writes it):
    '80__90a_PTX' -> ['8.0', '9.0a+PTX']; 'native' and 'none' -> [tag].

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
            # Only such old tags reach this: the table of torch's names belongs to the build config.
            from cuda_kernels.tools.build_config import normalize_arch_list

            archs += [a for a in normalize_arch_list(part.replace("_", "+")).split(";") if a not in archs]
        except ValueError:
            archs.append(part)
    return archs


# ---------------------------------------------------------------------------------------------------------
# The C++ runtime of a binary (cuda_kernels/tools/build_config.py says why the link names the shared one).

# Sonames of a shared C++ runtime: GNU libstdc++, LLVM libc++.
_SHARED_CXX_RUNTIMES = ("libstdc++.so", "libc++.so")


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


def cxx_runtime_problem(path: str, rebuild: str = REBUILD) -> str | None:
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
