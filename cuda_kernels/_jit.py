"""JIT loop: build csrc/ on import with torch.utils.cpp_extension.load, so an edited .cu/.cpp needs no reinstall.

    CUDA_KERNELS_JIT=1 python -m pytest -q tests/     # first run compiles, later runs recompile what changed

The sources and flags are setup.py's (cuda_kernels/_build_config.py), and so are the switches: WITH_CUDA,
TORCH_CUDA_ARCH_LIST, COMPUTE_CAPABILITY, DEBUG, LINEINFO, PTXAS_VERBOSE, MAX_JOBS, CUDA_HOME. Objects stay in
a build folder per configuration,

    $CUDA_KERNELS_JIT_DIR/<tag>     (default ~/.cache/cuda_kernels/jit/<tag>)
    <tag> = py311-torch2.14.1-cu13.0-<archs>[-debug][-lineinfo]   or   py311-torch2.14.1-cpu[-debug]

so ninja recompiles only the files whose sources or headers changed, and switching DEBUG=1 on and off keeps
both builds warm. CUDA_KERNELS_JIT_VERBOSE=1 prints the compiler commands. As in setup.py, the module is linked
against the libstdc++ torch loaded (_build_config.cxx_runtime_link_args) and refused if it has a C++ runtime of
its own (_build_config.cxx_runtime_problem).

The module gets its own name (cuda_kernels_jit_<hash>): the installed cuda_kernels._C is never imported in JIT
mode, because TORCH_LIBRARY(cuda_kernels, ...) can register the ops only once per process.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType

import torch

from cuda_kernels import _build_config as bc

# What the last load() did, for build_info() and the docs' timings.
LAST_LOAD: dict[str, object] = {}

_MODULE: ModuleType | None = None


@dataclass
class JitPlan:
    """Everything load() needs; computed without compiling anything (tests inspect it)."""

    with_cuda: bool
    why: str
    cuda_home: str | None
    arch_list: str | None
    tag: str
    build_dir: str
    name: str
    cfg: bc.BuildConfig


def _choose_cuda(cuda_home: str | None) -> tuple[bool, str]:
    """setup.py's rule: WITH_CUDA if given, else CUDA when a toolkit is found and torch is a CUDA build."""
    forced = os.environ.get("WITH_CUDA", "")
    if forced != "":
        want = bc.env_flag("WITH_CUDA")
        if want and cuda_home is None:
            raise ImportError(
                "cuda_kernels (JIT): WITH_CUDA=1 but no CUDA toolkit (nvcc and headers) was found; set CUDA_HOME"
            )
        if want and torch.version.cuda is None:
            raise ImportError(f"cuda_kernels (JIT): WITH_CUDA=1 but torch {torch.__version__} is a CPU-only build")
        return want, f"WITH_CUDA={forced}"
    if cuda_home is None:
        return False, "no CUDA toolkit found"
    if torch.version.cuda is None:
        return False, f"torch {torch.__version__} is a CPU-only build"
    return True, f"CUDA toolkit at {cuda_home}, torch built with CUDA {torch.version.cuda}"


def cache_root() -> str:
    """CUDA_KERNELS_JIT_DIR, else ~/.cache/cuda_kernels/jit (XDG_CACHE_HOME honored)."""
    if os.environ.get("CUDA_KERNELS_JIT_DIR"):
        return os.path.abspath(os.path.expanduser(os.environ["CUDA_KERNELS_JIT_DIR"]))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "cuda_kernels", "jit")


def make_tag(with_cuda: bool, arch_list: str | None, debug: bool, lineinfo: bool) -> str:
    """Names one build configuration: Python ABI, torch, CUDA or cpu, archs, debug, lineinfo."""
    py = f"py{sys.version_info.major}{sys.version_info.minor}"
    torch_ver = torch.__version__.split("+")[0]
    dev = f"cu{torch.version.cuda}-{bc.arch_tag(arch_list)}" if with_cuda else "cpu"
    tag = f"{py}-torch{torch_ver}-{dev}{'-debug' if debug else ''}{'-lineinfo' if lineinfo and with_cuda else ''}"
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in tag)


def plan() -> JitPlan:
    """Resolves the configuration from the environment exactly as setup.py does (see its docstring)."""
    cuda_home = bc.find_cuda_home()
    with_cuda, why = _choose_cuda(cuda_home)
    arch_list = None
    if with_cuda:
        gpu_caps = [torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())]
        arch_list, _ = bc.resolve_arch_list(gpu_caps, cuda_home)
    cfg = bc.make_config(with_cuda, arch_list, cxx11_abi=bool(torch._C._GLIBCXX_USE_CXX11_ABI))
    tag = make_tag(with_cuda, arch_list, cfg.debug, cfg.lineinfo)
    # The module name must be a C identifier (it becomes PyInit_<name>) and unique per checkout and config.
    digest = hashlib.sha1(f"{bc.ROOT}|{tag}".encode()).hexdigest()[:10]
    return JitPlan(
        with_cuda=with_cuda,
        why=why,
        cuda_home=cuda_home,
        arch_list=arch_list,
        tag=tag,
        build_dir=os.path.join(cache_root(), tag),
        name=f"cuda_kernels_jit_{digest}",
        cfg=cfg,
    )


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


def load() -> ModuleType:
    """Builds (if needed) and imports the JIT module; returns it. Raises ImportError with the compiler output."""
    global _MODULE
    if _MODULE is not None:
        return _MODULE
    try:
        p = plan()
    except ValueError as err:  # an unreadable TORCH_CUDA_ARCH_LIST or COMPUTE_CAPABILITY
        raise ImportError(f"cuda_kernels (JIT): {err}") from None
    check_object_names(bc.sources(p.with_cuda))
    # torch.utils.cpp_extension reads CUDA_HOME once, when it is first imported (as setup.py knows).
    if p.cuda_home and not os.environ.get("CUDA_HOME"):
        os.environ["CUDA_HOME"] = p.cuda_home
    import torch.utils.cpp_extension as cpp_ext

    if p.with_cuda and cpp_ext.CUDA_HOME is None:  # imported earlier by someone else, before CUDA_HOME was set
        cpp_ext.CUDA_HOME = p.cuda_home

    try:
        os.makedirs(p.build_dir, exist_ok=True)
    except OSError as err:
        raise ImportError(f"cuda_kernels (JIT): cannot create the build folder {p.build_dir}: {err}") from err
    so_path = os.path.join(p.build_dir, p.name + ".so")
    cold = not os.path.exists(so_path)
    verbose = bc.env_flag("CUDA_KERNELS_JIT_VERBOSE")
    if cold or verbose:
        what = f"CUDA, archs {p.arch_list}" if p.with_cuda else "CPU only"
        print(
            f"cuda_kernels: JIT-building csrc/ ({what}; {p.why}) into {p.build_dir}; "
            "a first build takes minutes, later ones recompile only what changed",
            file=sys.stderr,
            flush=True,
        )
    # A binary cached by a build that linked its own static C++ runtime (setup.py's docstring says why that
    # crashes): delete it, so that ninja links it again, now against the shared runtime.
    if not cold and bc.cxx_runtime_problem(so_path):
        os.remove(so_path)
    ldflags = (["-g"] if p.cfg.debug else []) + bc.openmp_flags() + bc.cxx_runtime_link_args()
    start = time.perf_counter()
    try:
        with _env(
            TORCH_CUDA_ARCH_LIST=p.arch_list if p.with_cuda else None,
            MAX_JOBS=str(bc.max_jobs()),
        ):
            module = cpp_ext.load(
                name=p.name,
                sources=bc.sources(p.with_cuda),
                extra_cflags=p.cfg.cxx_flags,
                extra_cuda_cflags=p.cfg.nvcc_flags if p.with_cuda else None,
                extra_ldflags=ldflags,
                extra_include_paths=[bc.CSRC],
                build_directory=p.build_dir,
                verbose=verbose,
                with_cuda=p.with_cuda,
            )
    except (RuntimeError, OSError, ValueError) as err:
        raise ImportError(
            f"cuda_kernels (JIT): building csrc/ in {p.build_dir} failed:\n{_first_failure(str(err))}"
        ) from None
    seconds = time.perf_counter() - start
    # load() has imported the module already; a binary with a static C++ runtime is refused all the same (and
    # deleted) rather than crash later on an error message.
    problem = bc.cxx_runtime_problem(so_path, rebuild="CUDA_KERNELS_JIT=1 python -c 'import cuda_kernels'")
    if problem:
        os.remove(so_path)
        raise ImportError(f"{problem}\ncuda_kernels (JIT): deleted that binary.")
    LAST_LOAD.update(seconds=seconds, cold=cold, build_dir=p.build_dir, name=p.name, tag=p.tag, with_cuda=p.with_cuda)
    if cold or verbose:
        print(f"cuda_kernels: JIT build ready in {seconds:.1f} s", file=sys.stderr, flush=True)
    _MODULE = module
    return module
