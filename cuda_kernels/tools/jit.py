"""JIT loop: build csrc/ on import with torch.utils.cpp_extension.load, so an edited .cu/.cpp needs no reinstall.

    CUDA_KERNELS_JIT=1 python -m pytest -q tests/     # first run compiles, later runs recompile what changed

The build is planned by setup.py's function, build_plan() in cuda_kernels/tools/build_config.py: the same choice of
CUDA or not, toolkit, archs, sources and flags, from the same switches: WITH_CUDA, TORCH_CUDA_ARCH_LIST,
COMPUTE_CAPABILITY, DEBUG, LINEINFO, PTXAS_VERBOSE, NVCC_THREADS, MAX_JOBS, CUDA_HOME. Objects stay in a build
folder per configuration (BuildPlan.tag) and checkout,

    $CUDA_KERNELS_JIT_DIR/<tag>-<checkout>     (default ~/.cache/cuda_kernels/jit/<tag>-<checkout>)
    <tag> = py311-torch2.14.1-cu13.0-<archs>[-debug][-lineinfo]   or   py311-torch2.14.1-cpu[-debug]
    <checkout> = checkout_key(): 8 hex digits of the checkout's csrc/ path

so ninja recompiles only the files whose sources or headers changed, switching DEBUG=1 on and off keeps both
builds warm, and two clones sharing the cache do not rebuild over each other (build.ninja names one checkout's
sources by path). CUDA_KERNELS_JIT_VERBOSE=1 prints the compiler commands. As in setup.py, the module is linked
against the libstdc++ torch loaded (BuildPlan.link_args) and refused if it has a C++ runtime of its own
(build_config.cxx_runtime_problem).

The module gets its own name (cuda_kernels_jit_<hash>): the installed cuda_kernels._C is never imported in JIT
mode, because TORCH_LIBRARY(cuda_kernels, ...) can register the ops only once per process.

Warm start: torch's load() runs ninja (and imports its build machinery) in every new process, about a second even
when nothing changed. After each build the folder gets <name>.fingerprint, a hash of the plan and of every file
under csrc/; an import whose fingerprint matches imports the cached module directly, without torch's load().
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType

from cuda_kernels.tools import build_config as bc
from cuda_kernels.tools import pycache

# What the last load() did, for build_info() and the docs' timings.
LAST_LOAD: dict[str, object] = {}

_MODULES: tuple[ModuleType, ModuleType | None] | None = None


@dataclass(frozen=True)
class JitPlan:
    """Everything load() needs; computed without compiling anything (tests inspect it)."""

    build: bc.BuildPlan  # the build, as setup.py would make it in this environment
    build_dir: str  # cache_root()/<build.tag>-<checkout_key(csrc)>
    name: str  # the module's name: cuda_kernels_jit_<hash of the checkout and the tag>


def cache_root() -> str:
    """CUDA_KERNELS_JIT_DIR, else ~/.cache/cuda_kernels/jit (XDG_CACHE_HOME honored)."""
    if os.environ.get("CUDA_KERNELS_JIT_DIR"):
        return os.path.abspath(os.path.expanduser(os.environ["CUDA_KERNELS_JIT_DIR"]))
    return os.path.join(pycache.cache_home(os.environ), "jit")


def checkout_key(csrc: str) -> str:
    """8 hex digits of a checkout's absolute csrc/ path: its own build folder in a cache every checkout shares."""
    return hashlib.sha1(os.path.abspath(csrc).encode()).hexdigest()[:8]


def plan() -> JitPlan:
    """Plans the build with bc.build_plan(), as setup.py does, and names its cache folder and module.

    Raises bc.BuildPlanError where setup.py would stop (WITH_CUDA=1 that cannot be built, an unreadable arch list).
    """
    build = bc.build_plan()
    # The module name must be a C identifier (it becomes PyInit_<name>) and unique per checkout and config.
    digest = hashlib.sha1(f"{bc.ROOT}|{build.tag}".encode()).hexdigest()[:10]
    build_dir = os.path.join(cache_root(), f"{build.tag}-{checkout_key(bc.CSRC)}")
    return JitPlan(build=build, build_dir=build_dir, name=f"cuda_kernels_jit_{digest}")


@contextmanager
def _env(**values: str | None):
    """Sets environment variables for the duration of the build, then restores them."""
    saved = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is not None:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _first_failure(output: str) -> str:
    """ninja's output from the first failed command on (the compiler's error), or all of it if none is marked."""
    at = output.find("FAILED:")
    if at < 0:
        return output
    return "(compiler output from the first failure; CUDA_KERNELS_JIT_VERBOSE=1 shows every command)\n" + output[at:]


def check_object_names(sources: list[str]) -> None:
    """torch's load() names each object after its source's basename (x.cpp -> x.o, x.cu -> x.cuda.o), in one
    folder: two sources with the same basename would overwrite each other's object. Refuse that clearly."""
    seen: dict[str, str] = {}
    for src in sources:
        stem, ext = os.path.splitext(os.path.basename(src))
        obj = f"{stem}.cuda.o" if ext == ".cu" else f"{stem}.o"
        if obj in seen:
            raise ImportError(
                f"cuda_kernels (JIT): {seen[obj]} and {src} would both compile to {obj} in the JIT build folder; "
                "rename one of them (torch.utils.cpp_extension.load keys objects by file name)"
            )
        seen[obj] = src


def ninja_log(build_dir: str) -> list[tuple[str, float]]:
    """(output, seconds) of every command in the build folder's .ninja_log, oldest first (each line: start and end
    in ms, mtime, output, hash; tab-separated). Empty before the first build."""
    entries = []
    try:
        with open(os.path.join(build_dir, ".ninja_log")) as f:
            for line in f:
                fields = line.rstrip("\n").split("\t")
                if not line.startswith("#") and len(fields) >= 4:
                    entries.append((fields[3], (int(fields[1]) - int(fields[0])) / 1e3))
    except OSError:
        pass
    return entries


def fingerprint(p: JitPlan) -> str:
    """sha256 of what the binary is made from: the plan (tag, flags, link args, sources, include dirs, module name)
    and the bytes of every file under csrc/ (sources and headers alike, so an edited header counts)."""
    h = hashlib.sha256()
    b = p.build
    for part in (p.name, b.tag, b.cxx_flags, b.nvcc_flags, b.link_args, b.sources, b.include_dirs):
        h.update(repr(part).encode())
    for folder, dirs, files in sorted(os.walk(bc.CSRC)):
        dirs.sort()
        for file in sorted(files):
            path = os.path.join(folder, file)
            h.update(os.path.relpath(path, bc.CSRC).encode() + b"\0")
            with open(path, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def _fingerprint_path(p: JitPlan) -> str:
    return os.path.join(p.build_dir, p.name + ".fingerprint")


def _library_paths(p: JitPlan) -> list[tuple[str, tuple[str, ...], str, str]]:
    """(library, sources, module name, binary path) of each library the plan builds, in load order: the CPU library
    (it defines the schemas), then the CUDA one. Each has a folder of its own (both compile csrc/api.cpp, with
    different flags)."""
    out = []
    for lib, sources in p.build.libraries:
        name = p.name + ("_cuda" if lib == bc.CUDA_LIBRARY else "")
        out.append((lib, sources, name, os.path.join(p.build_dir, lib, name + ".so")))
    return out


def _import_file(name: str, so_path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, so_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cuda_kernels (JIT): cannot import {so_path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _import_cached(p: JitPlan, digest: str) -> list[ModuleType] | None:
    """The cached modules when the fingerprint matches digest (nothing changed since they were built), else None."""
    try:
        with open(_fingerprint_path(p)) as f:
            if f.read().strip() != digest:
                return None
    except OSError:
        return None
    libraries = _library_paths(p)
    if not all(os.path.exists(so) and not bc.cxx_runtime_problem(so) for _, _, _, so in libraries):
        return None
    return [_import_file(name, so) for _, _, name, so in libraries]


def load() -> tuple[ModuleType, ModuleType | None]:
    """Builds (if needed) and imports the JIT libraries; returns (the CPU library's module, the CUDA library's or
    None in a CPU-only build). Raises ImportError with the compiler output."""
    global _MODULES
    if _MODULES is not None:
        return _MODULES
    try:
        p = plan()
    except bc.BuildPlanError as err:
        raise ImportError(f"cuda_kernels (JIT): {err}") from None
    b = p.build
    start = time.perf_counter()
    digest = fingerprint(p)
    verbose = bc.env_flag("CUDA_KERNELS_JIT_VERBOSE")
    modules = None if verbose else _import_cached(p, digest)
    if modules is not None:
        LAST_LOAD.update(
            seconds=time.perf_counter() - start, cold=False, cached=True, build_dir=p.build_dir, name=p.name,
            tag=b.tag, with_cuda=b.with_cuda, compiled=[],
        )  # fmt: skip
        _MODULES = (modules[0], modules[1] if len(modules) > 1 else None)
        return _MODULES
    for _, sources, _, _ in _library_paths(p):
        check_object_names(list(sources))
    b.export_cuda_home()  # before torch.utils.cpp_extension is first imported: it reads CUDA_HOME then, once
    import torch.utils.cpp_extension as cpp_ext

    if b.with_cuda and cpp_ext.CUDA_HOME is None:  # imported earlier by someone else, before CUDA_HOME was set
        cpp_ext.CUDA_HOME = b.cuda_home

    libraries = _library_paths(p)
    try:
        for _, _, _, so in libraries:
            os.makedirs(os.path.dirname(so), exist_ok=True)
    except OSError as err:
        raise ImportError(f"cuda_kernels (JIT): cannot create the build folder {p.build_dir}: {err}") from err
    cold = not all(os.path.exists(so) for _, _, _, so in libraries)
    if cold or verbose:
        what = f"CUDA, archs {b.arch_list}" if b.with_cuda else "CPU only"
        print(
            f"cuda_kernels: JIT-building csrc/ ({what}; {b.why}) into {p.build_dir}; "
            "a first build takes minutes, later ones recompile only what changed",
            file=sys.stderr,
            flush=True,
        )
    logged = {lib: len(ninja_log(os.path.dirname(so))) for lib, _, _, so in libraries}
    start = time.perf_counter()
    modules = []
    for lib, sources, name, so in libraries:
        # A binary cached by a build that linked its own static C++ runtime (setup.py's docstring says why that
        # crashes): delete it, so that ninja links it again, now against the shared runtime.
        if os.path.exists(so) and bc.cxx_runtime_problem(so):
            os.remove(so)
        cxx, nvcc = b.library_flags(lib)
        cuda = lib == bc.CUDA_LIBRARY
        try:
            with _env(**b.build_env):
                module = cpp_ext.load(
                    name=name,
                    sources=list(sources),
                    extra_cflags=list(cxx),
                    extra_cuda_cflags=list(nvcc) if cuda else None,
                    extra_ldflags=list(b.link_args),
                    extra_include_paths=list(b.include_dirs),
                    build_directory=os.path.dirname(so),
                    verbose=verbose,
                    with_cuda=cuda,
                )
        except (RuntimeError, OSError, ValueError) as err:
            raise ImportError(
                f"cuda_kernels (JIT): building csrc/ in {os.path.dirname(so)} failed:\n{_first_failure(str(err))}"
            ) from None
        # load() has imported the module already; a binary with a static C++ runtime is refused all the same (and
        # deleted) rather than crash later on an error message.
        problem = bc.cxx_runtime_problem(so, rebuild="CUDA_KERNELS_JIT=1 python -c 'import cuda_kernels'")
        if problem:
            os.remove(so)
            raise ImportError(f"{problem}\ncuda_kernels (JIT): deleted that binary.")
        modules.append(module)
    seconds = time.perf_counter() - start
    # Written only after builds that succeeded and passed the check: the next process imports them directly.
    with open(_fingerprint_path(p), "w") as f:
        f.write(digest + "\n")
    compiled = [entry for lib, _, _, so in libraries for entry in ninja_log(os.path.dirname(so))[logged[lib] :]]
    LAST_LOAD.update(
        seconds=seconds, cold=cold, cached=False, build_dir=p.build_dir, name=p.name, tag=b.tag, with_cuda=b.with_cuda,
        compiled=compiled,  # what this build ran: [(object or module, seconds)]
    )  # fmt: skip
    if cold or verbose:
        print(f"cuda_kernels: JIT build ready in {seconds:.1f} s", file=sys.stderr, flush=True)
    _MODULES = (modules[0], modules[1] if len(modules) > 1 else None)
    return _MODULES
