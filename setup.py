"""Builds the cuda_kernels extension (module cuda_kernels._C) from csrc/.

    pip install --no-build-isolation -e .

Build switches, all read from the environment:

  WITH_CUDA=0|1          force a CPU-only (0) or CUDA (1) build. Default: CUDA when a CUDA toolkit (nvcc) is found
                         and torch is a CUDA build, CPU-only otherwise. The build prints which one it chose.
  TORCH_CUDA_ARCH_LIST   archs to compile for, e.g. "8.0;9.0a" or "9.0+PTX" (torch's own variable, always honored).
  COMPUTE_CAPABILITY     shorthand that fills TORCH_CUDA_ARCH_LIST when that is unset: 90 -> 9.0, 90a -> 9.0a,
                         "80;90a" -> 8.0;9.0a. It never overrides TORCH_CUDA_ARCH_LIST.
                         With neither set: the visible GPU's arch, or with no GPU "8.0;9.0;10.0;12.0+PTX".
  DEBUG=1                host -O0 -g, device -O0 -g -G (cuda-gdb can step through kernels; kernels run much slower).
  LINEINFO=1             nvcc -lineinfo: source lines in ncu / compute-sanitizer reports at full speed.
  PTXAS_VERBOSE=1        print registers, shared memory and spills of every kernel.
  MAX_JOBS=N             parallel compile jobs (ninja). Default: bounded by cores and free memory (~2 GB a job).
  NVCC_THREADS=N         nvcc --threads (parallel arch compilation inside one nvcc call). Default 1.
  CUDA_HOME              the CUDA toolkit root, when nvcc on PATH is not the one to use.

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
    arch_list, arch_why = cfg_mod.resolve_arch_list(gpu_caps)
    if arch_list:
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
ext = Extension(
    name="cuda_kernels._C",
    sources=sources,
    include_dirs=[os.path.join(ROOT, "csrc")],
    extra_compile_args=extra,
    extra_link_args=(["-g"] if cfg.debug else []) + cfg_mod.openmp_flags(),
)


class BuildExt(BuildExtension):
    """Keeps objects in a persistent build/<tag> folder, so ninja recompiles only what changed."""

    def finalize_options(self):
        super().finalize_options()
        tag = f"{'cuda' if with_cuda else 'cpu'}{'-debug' if cfg.debug else ''}{'-lineinfo' if cfg.lineinfo else ''}"
        self.build_temp = os.path.join(ROOT, "build", tag)


setup(
    ext_modules=[ext],
    cmdclass={"build_ext": BuildExt.with_options(use_ninja=True)},
)
