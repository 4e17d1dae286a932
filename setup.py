"""Builds the cuda_kernels extension (module cuda_kernels._C) from csrc/.

    pip install --no-build-isolation -e .

Build switches, all read from the environment:

  WITH_CUDA=0|1          force a CPU-only (0) or CUDA (1) build. Default: CUDA when a CUDA toolkit (nvcc) is found
                         and torch is a CUDA build, CPU-only otherwise. The build prints which one it chose.
  TORCH_CUDA_ARCH_LIST   archs to compile for, e.g. "8.0;9.0a" or "9.0+PTX" (torch's own variable, always honored).
  COMPUTE_CAPABILITY     shorthand that fills TORCH_CUDA_ARCH_LIST when that is unset: 90 -> 9.0, 90a -> 9.0a,
                         "80;90a" -> 8.0;9.0a. It never overrides TORCH_CUDA_ARCH_LIST.
                         With neither set: the visible GPUs' archs (9.0 as 9.0a), or with no GPU a default that
                         the nvcc found can build: "8.0;9.0a;10.0;12.0+PTX" from nvcc 12.8 on (see
                         _build_config.DEFAULT_ARCH_LISTS). torch's names (Hopper, Ampere+PTX, ...) work in both.
  DEBUG=1                host -O0 -g, device -O0 -g -G (cuda-gdb can step through kernels; kernels run much slower).
  LINEINFO=1             nvcc -lineinfo: source lines in ncu / compute-sanitizer reports at full speed.
  PTXAS_VERBOSE=1        print registers, shared memory and spills of every kernel.
  MAX_JOBS=N             parallel compile jobs (ninja). Default: bounded by cores and free memory (~2 GB a job).
  NVCC_THREADS=N         nvcc --threads (parallel arch compilation inside one nvcc call). Default 1.
  CUDA_HOME              the CUDA toolkit root, when nvcc on PATH is not the one to use.
  CUDA_KERNELS_LINK_SHARED_CXX_RUNTIME=0
                         do not add the libstdc++ that torch loaded to the link (see below).

The extension is linked against the shared C++ runtime that torch has loaded in this process (its path from
/proc/self/maps), so that a compiler whose library path holds only a static libstdc++.a cannot give it a private
copy of the runtime (such a binary crashes on the first error message that formats a number). After linking,
the binary's DT_NEEDED entries are checked: one without a shared libstdc++ is deleted and the build stops with the fix.

Object files are kept in build/<tag>/ so that a rebuild after editing one file recompiles only that file.
"""

import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))


def _load_build_config():
    # Load by path: importing the package would try to load the extension we are about to build.
    spec = importlib.util.spec_from_file_location(
        "_build_config", os.path.join(ROOT, "cuda_kernels", "_build_config.py")
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while it executes
    spec.loader.exec_module(module)
    return module


cfg_mod = _load_build_config()

try:
    import torch  # noqa: F401
except ImportError:
    sys.exit(
        "cuda_kernels: torch is not importable in this build environment (pip build isolation?): "
        "install torch, then run: pip install --no-build-isolation -e ."
    )

# torch.utils.cpp_extension reads CUDA_HOME once at import: point it at a real toolkit first.
_cuda_home = cfg_mod.find_cuda_home()
if _cuda_home and not os.environ.get("CUDA_HOME"):
    os.environ["CUDA_HOME"] = _cuda_home

from setuptools import setup  # noqa: E402
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension  # noqa: E402


def _choose_cuda() -> tuple[bool, str]:
    forced = os.environ.get("WITH_CUDA")
    have_toolkit = _cuda_home is not None
    torch_cuda = torch.version.cuda is not None
    if forced is not None and forced != "":
        want = cfg_mod.env_flag("WITH_CUDA")
        if want and not have_toolkit:
            sys.exit("cuda_kernels: WITH_CUDA=1 but no CUDA toolkit (nvcc and headers) was found; set CUDA_HOME")
        if want and not torch_cuda:
            sys.exit(f"cuda_kernels: WITH_CUDA=1 but torch {torch.__version__} is a CPU-only build")
        return want, f"WITH_CUDA={forced}"
    if not have_toolkit:
        return False, "no CUDA toolkit found (set CUDA_HOME or WITH_CUDA=1 to insist)"
    if not torch_cuda:
        return False, f"torch {torch.__version__} is a CPU-only build"
    return True, f"CUDA toolkit at {_cuda_home} and torch built with CUDA {torch.version.cuda}"


with_cuda, why = _choose_cuda()
arch_list = None
if with_cuda:
    gpu_caps = [torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())]
    try:
        arch_list, arch_why = cfg_mod.resolve_arch_list(gpu_caps, _cuda_home)
    except ValueError as err:  # an unreadable TORCH_CUDA_ARCH_LIST or COMPUTE_CAPABILITY: one line, no traceback
        sys.exit(f"cuda_kernels: {err}")
    if arch_list:
        # In numbers (torch's names expanded): torch compiles exactly what the binary's arch tag says.
        os.environ["TORCH_CUDA_ARCH_LIST"] = arch_list
    nvcc_ver = cfg_mod.nvcc_version(_cuda_home) or "?"
    print(f"cuda_kernels: building the CUDA extension ({why}); nvcc {nvcc_ver}; archs from {arch_why}")
    if nvcc_ver.split(".")[0] != torch.version.cuda.split(".")[0]:
        print(
            f"cuda_kernels: warning: nvcc {nvcc_ver} and torch's CUDA {torch.version.cuda} differ in major version; "
            "the build may fail or the module may not load. Use a toolkit matching torch."
        )
else:
    print(f"cuda_kernels: building the CPU-only extension ({why})")

os.environ["MAX_JOBS"] = str(cfg_mod.max_jobs())
cfg = cfg_mod.make_config(with_cuda, arch_list, cxx11_abi=bool(torch._C._GLIBCXX_USE_CXX11_ABI))
if cfg.debug or cfg.lineinfo:
    print(f"cuda_kernels: DEBUG={int(cfg.debug)} LINEINFO={int(cfg.lineinfo)}")

sources = [os.path.relpath(s, ROOT) for s in cfg_mod.sources(with_cuda)]
Extension = CUDAExtension if with_cuda else CppExtension
extra = {"cxx": cfg.cxx_flags}
if with_cuda:
    extra["nvcc"] = cfg.nvcc_flags
cxx_runtime = cfg_mod.cxx_runtime_link_args()
if cxx_runtime:
    print(f"cuda_kernels: linking against the C++ runtime torch loaded: {cxx_runtime[0]}")
ext = Extension(
    name="cuda_kernels._C",
    sources=sources,
    include_dirs=[os.path.join(ROOT, "csrc")],
    extra_compile_args=extra,
    extra_link_args=(["-g"] if cfg.debug else []) + cfg_mod.openmp_flags() + cxx_runtime,
)


class BuildExt(BuildExtension):
    """Keeps objects in a persistent build/<tag> folder, so ninja recompiles only what changed."""

    def finalize_options(self):
        super().finalize_options()
        tag = f"{'cuda' if with_cuda else 'cpu'}{'-debug' if cfg.debug else ''}{'-lineinfo' if cfg.lineinfo else ''}"
        self.build_temp = os.path.join(ROOT, "build", tag)

    def build_extension(self, ext):
        # setuptools links into build/lib* and copies to the source tree afterwards: a binary refused here never
        # reaches cuda_kernels/. It skips the link when that binary is newer than the objects, so one left by an
        # earlier build with a static C++ runtime is deleted first, to be linked again.
        path = self.get_ext_fullpath(ext.name)
        if cfg_mod.cxx_runtime_problem(path):
            os.remove(path)
        super().build_extension(ext)
        problem = cfg_mod.cxx_runtime_problem(path)
        if problem:
            os.remove(path)
            how = (
                f"even though the link named {cxx_runtime[0]}"
                if cxx_runtime
                else f"no shared libstdc++ was named on the link: {cfg_mod.LINK_SHARED_CXX_RUNTIME_ENV}=0, or torch "
                "loaded none"
            )
            sys.exit(f"{problem}\ncuda_kernels: the build deleted that binary and stopped; {how}.")


setup(
    ext_modules=[ext],
    cmdclass={"build_ext": BuildExt.with_options(use_ninja=True)},
)
