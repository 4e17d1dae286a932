"""Builds the cuda_kernels extension (module cuda_kernels._C) from csrc/.

    pip install --no-build-isolation -e .

Build switches, all read from the environment:

  WITH_CUDA=0|1          force a CPU-only (0) or CUDA (1) build. Default: CUDA when a CUDA toolkit (nvcc) is found,
                         torch is a CUDA build and a GPU is visible; CPU-only otherwise (the CUDA kernels could not
                         run, and compiling them for the default archs takes many minutes on a small machine).
                         The build prints which one it chose, and why. WITH_CUDA=1 compiles CUDA without a GPU, as
                         CI does to compile every .cu.
  TORCH_CUDA_ARCH_LIST   archs to compile for, e.g. "8.0;9.0a" or "9.0+PTX" (torch's own variable, always honored).
  COMPUTE_CAPABILITY     shorthand that fills TORCH_CUDA_ARCH_LIST when that is unset: 90 -> 9.0, 90a -> 9.0a,
                         "80;90a" -> 8.0;9.0a. It never overrides TORCH_CUDA_ARCH_LIST.
                         With neither set: the visible GPUs' archs (9.0 as 9.0a), or with no GPU (WITH_CUDA=1) a
                         default that the nvcc found can build: "8.0;9.0a;10.0;12.0+PTX" from nvcc 12.8 on
                         (DEFAULT_ARCH_LISTS in cuda_kernels/tools/build_config.py). torch's names (Hopper,
                         Ampere+PTX, ...) work in both.
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

Object files are kept in build/<variant>/ (cpu, cuda, cuda-debug, cuda-lineinfo, ...) so that a rebuild after
editing one file recompiles only that file. The CPU library's are in build/cpu/ (or cpu-debug/) in a CUDA build too:
its flags are the same in both kinds, so a CUDA build after a CPU-only one compiles only the CUDA library.

Every decision above is made by build_plan() in cuda_kernels/tools/build_config.py, which the JIT loader
(CUDA_KERNELS_JIT=1, cuda_kernels/tools/jit.py) calls too: this file only carries the plan out.
"""

import importlib.util
import os
import sys
from pathlib import Path

ROOT = os.path.dirname(os.path.abspath(__file__))


def _load_build_config():
    # Load by path: importing the package would try to load the extension we are about to build.
    spec = importlib.util.spec_from_file_location(
        "_build_config", os.path.join(ROOT, "cuda_kernels", "tools", "build_config.py")
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while it executes
    spec.loader.exec_module(module)
    return module


# pip runs this file twice per install: `dist_info` (the package's metadata, which pyproject.toml holds) and then
# the build. The metadata needs neither torch nor the build plan, so that pass skips them: one `import torch`
# (seconds) less per `pip install -e .`, the edit loop's install path included.
_METADATA_COMMANDS = {"dist_info", "egg_info"}
_BUILD_COMMANDS = {"build", "build_ext", "bdist_wheel", "editable_wheel", "develop", "install"}
if _METADATA_COMMANDS & set(sys.argv[1:]) and not _BUILD_COMMANDS & set(sys.argv[1:]):
    from setuptools import setup

    setup()
    sys.exit(0)

cfg_mod = _load_build_config()

try:
    import torch  # noqa: F401
except ImportError:
    sys.exit(
        "cuda_kernels: torch is not importable in this build environment (pip build isolation?): "
        "install torch, then run: pip install --no-build-isolation -e ."
    )

try:
    # Every decision of the build, made where the JIT loader makes it too (cuda_kernels/tools/build_config.py).
    plan = cfg_mod.build_plan()
except cfg_mod.BuildPlanError as err:  # WITH_CUDA=1 that cannot be built, an unreadable arch list: one line
    sys.exit(f"cuda_kernels: {err}")
# Before torch.utils.cpp_extension is imported: it reads CUDA_HOME once, at import.
plan.export_cuda_home()
os.environ.update(plan.build_env)

from setuptools import setup  # noqa: E402
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension  # noqa: E402

for line in plan.report():
    print(line)


def extension(name: str, sources: tuple[str, ...]):
    """One library of the plan (cuda_kernels/tools/build_config.py: CPU_LIBRARY and, with CUDA, CUDA_LIBRARY), as a
    Python module on the limited API (py_limited_api: an abi3 binary)."""
    cxx, nvcc = plan.library_flags(name)
    cuda = name == cfg_mod.CUDA_LIBRARY
    return (CUDAExtension if cuda else CppExtension)(
        name=f"cuda_kernels.{name}",
        sources=[os.path.relpath(src, ROOT) for src in sources],
        include_dirs=list(plan.include_dirs),
        extra_compile_args={"cxx": list(cxx), **({"nvcc": list(nvcc)} if cuda else {})},
        extra_link_args=list(plan.link_args),
        py_limited_api=True,
    )


exts = [extension(name, sources) for name, sources in plan.libraries]


class BuildExt(BuildExtension):
    """Keeps objects in a persistent build/<variant>/<library> folder, so ninja recompiles only what changed (one
    folder per library: both compile csrc/api.cpp and csrc/module.cpp, with different flags)."""

    def run(self):
        super().run()
        if self.inplace:
            self.remove_stale_binaries()

    def remove_stale_binaries(self):
        """Deletes the package's binaries this build did not make: Python would import them beside the new ones (the
        CUDA library left by a CUDA build after a CPU-only rebuild), or instead of them (a _C.cpython-*.so of a build
        before the stable ABI, whose suffix Python tries before .abi3.so)."""
        made = {os.path.basename(self.get_ext_filename(ext.name)) for ext in self.extensions}
        for path in Path(ROOT, "cuda_kernels").glob("_C*.so"):
            if path.name not in made:
                print(f"cuda_kernels: removing {path.name}, a binary this build does not make")
                path.unlink()

    def build_extension(self, ext):
        self.build_temp = os.path.join(ROOT, "build", plan.object_folder(ext.name.split(".")[-1]))
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
                f"even though the link named {plan.cxx_runtime}"
                if plan.cxx_runtime
                else f"no shared libstdc++ was named on the link: {cfg_mod.LINK_SHARED_CXX_RUNTIME_ENV}=0, or torch "
                "loaded none"
            )
            sys.exit(f"{problem}\ncuda_kernels: the build deleted that binary and stopped; {how}.")


try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel


class BdistWheel(bdist_wheel):
    """Tags the wheel cp310-abi3 (the limited API) and manylinux_2_<y> for the glibc its binaries need, so pip installs
    it on every Python from 3.10 and every Linux with that glibc or newer."""

    def get_tag(self):
        impl, abi, plat = super().get_tag()
        if plat.startswith("linux_"):
            binaries = [str(p) for p in Path(self.bdist_dir).rglob("*.so")]
            plat = cfg_mod.manylinux_tag(binaries, plat.removeprefix("linux_"))
        return impl, abi, plat


setup(
    ext_modules=exts,
    cmdclass={"build_ext": BuildExt.with_options(use_ninja=True), "bdist_wheel": BdistWheel},
    # One wheel for every Python from 3.10 on: the libraries use only its limited API.
    options={"bdist_wheel": {"py_limited_api": cfg_mod.PY_LIMITED_API_TAG}},
)
