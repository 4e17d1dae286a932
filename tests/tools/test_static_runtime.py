"""A compiler that links the C++ runtime statically still gives a working extension, or a clear stop.

A container image's CC/CXX can be wrappers (`g++ -B/opt/gcc/... "$@"`) whose -B folder holds libstdc++.a but no
libstdc++.so, so g++'s implicit -lstdc++ takes the archive: the extension then carries its own copy of the C++
runtime, and the first error message that formats a number crashes or stops early (docs/debugging.md). Here a
wrapper g++ whose -B folder holds only this machine's libstdc++.a does the same. In a temporary copy of setup.py and
cuda_kernels/, with a csrc/ of one small op (PROBE_OP: an error that formats a shape and a number, through
csrc/checks.h) standing in for the project's, a CPU-only build (WITH_CUDA=0) with that wrapper as CC and CXX

  1. with CUDA_KERNELS_LINK_SHARED_CXX_RUNTIME=0 (the link as the compiler makes it) stops with the fix, leaving
     no binary behind;
  2. by default links the libstdc++ that torch loaded: the binary needs libstdc++.so.6, loads, and the op's error
     carries the full message.

setup.py compiles and links whatever csrc/ holds, and the link (the part under test) does not depend on it: the
stand-in builds in seconds, where the project's CPU library took most of a minute on 2 cores. Build 2 reuses build
1's objects and only links again. Both are DEBUG=1 builds.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from cuda_kernels.tools import build_config as bc

# Not in the fast tier (-m 'not slow'): it runs setup.py twice (about 15 s).
pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The stand-in csrc/'s op (besides csrc/module.cpp, which makes the library a Python module): its error message
# formats a shape and a number with the project's CUDA_KERNELS_CHECK, as every op's input checks do.
PROBE_OP = r"""
#include <torch/csrc/stable/library.h>

#include "checks.h"

namespace {
torch::stable::Tensor probe(torch::stable::Tensor a, int64_t n) {
  CUDA_KERNELS_CHECK(false, "cuda_kernels.probe: a is ", cuda_kernels::shape_str(a), " and n is ", n);
  return a;
}
}  // namespace

STABLE_TORCH_LIBRARY(cuda_kernels_probe, m) { m.def("probe(Tensor a, int n) -> Tensor"); }
STABLE_TORCH_LIBRARY_IMPL(cuda_kernels_probe, CPU, m) { m.impl("probe", TORCH_BOX(&probe)); }
"""

# Runs in a fresh interpreter (a crash must not take pytest down): loads the built library, calls its op.
PROBE = r"""
import json, sys, torch
torch.ops.load_library(sys.argv[1])
try:
    torch.ops.cuda_kernels_probe.probe(torch.zeros(3, 4), 12345)
    error = None
except RuntimeError as err:
    error = str(err)
print(json.dumps({"error": error}))
"""


def _skip_reason() -> str:
    gxx = shutil.which("g++")
    if gxx is None:
        return "needs g++ to mimic a compiler that links libstdc++ statically"
    archive = subprocess.run([gxx, "-print-file-name=libstdc++.a"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(archive):
        return "g++ has no libstdc++.a here, so it cannot link the C++ runtime statically"
    if bc.loaded_cxx_runtime() is None:
        return "this process has no shared libstdc++ loaded (not Linux?): nothing to link against"
    return ""


def _make_static_runtime_compiler(folder: str) -> str:
    """A g++ wrapper like a container image's: its -B folder holds only libstdc++.a, so -lstdc++ finds the archive."""
    gxx = shutil.which("g++")
    archive = subprocess.run([gxx, "-print-file-name=libstdc++.a"], capture_output=True, text=True).stdout.strip()
    libdir = os.path.join(folder, "gcclib")
    os.makedirs(libdir)
    os.symlink(archive, os.path.join(libdir, "libstdc++.a"))
    wrapper = os.path.join(folder, "g++")
    with open(wrapper, "w") as f:
        f.write(f'#!/bin/sh\nexec {gxx} -B{libdir}/ "$@"\n')
    os.chmod(wrapper, 0o755)
    return wrapper


def _copy_sources(dest: str) -> None:
    """setup.py, pyproject.toml and cuda_kernels/ as they are; csrc/: module.cpp, the headers beside it (checks.h and
    what it includes), and PROBE_OP."""
    for name in ("setup.py", "pyproject.toml"):
        shutil.copy(os.path.join(ROOT, name), dest)
    os.makedirs(os.path.join(dest, "csrc"))
    for path in [os.path.join(ROOT, "csrc", "module.cpp"), *glob.glob(os.path.join(ROOT, "csrc", "*.h"))]:
        shutil.copy(path, os.path.join(dest, "csrc"))
    with open(os.path.join(dest, "csrc", "probe.cpp"), "w") as f:
        f.write(PROBE_OP)
    shutil.copytree(
        os.path.join(ROOT, "cuda_kernels"),
        os.path.join(dest, "cuda_kernels"),
        ignore=shutil.ignore_patterns("*.so", "__pycache__"),
    )


def _build(src: str, cxx: str, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    full = dict(os.environ, WITH_CUDA="0", DEBUG="1", CC=cxx, CXX=cxx, **env)
    for var in ("LINEINFO", "CUDA_KERNELS_JIT", "PYTHONPATH"):
        full.pop(var, None)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace"],
        cwd=src,
        env=full,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    return proc, time.perf_counter() - start


def _binaries(src: str) -> list[str]:
    return glob.glob(os.path.join(src, "cuda_kernels", "_C*.so")) + glob.glob(
        os.path.join(src, "build", "lib*", "cuda_kernels", "_C*.so")
    )


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    root = str(tmp_path_factory.mktemp("static_runtime"))
    cxx = _make_static_runtime_compiler(root)
    src = os.path.join(root, "src")
    os.makedirs(src)
    _copy_sources(src)
    off, off_s = _build(src, cxx, **{bc.LINK_SHARED_CXX_RUNTIME_ENV: "0"})
    off_binaries = _binaries(src)
    on, on_s = _build(src, cxx)
    print(f"\nstatic-runtime builds: link fix off {off_s:.1f} s (compiles), on {on_s:.1f} s (links)")
    return {"src": src, "off": off, "off_binaries": off_binaries, "on": on}


def test_without_the_link_fix_the_build_stops_with_the_fix(builds: dict) -> None:
    proc = builds["off"]
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, "the build installed a binary with a static C++ runtime:\n" + out[-3000:]
    assert "static copy of the C++ runtime" in proc.stderr and "the build deleted that binary" in proc.stderr, out
    assert "Fix: CC=" in proc.stderr and "pip install --no-build-isolation -e ." in proc.stderr, out
    assert builds["off_binaries"] == [], "the refused binary was left behind"


def test_the_build_links_the_shared_runtime_and_error_messages_work(builds: dict) -> None:
    proc, src = builds["on"], builds["src"]
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    assert "linking against the C++ runtime torch loaded" in proc.stdout
    (binary,) = glob.glob(os.path.join(src, "cuda_kernels", "_C*.so"))
    assert any(n.startswith("libstdc++.so") for n in bc.elf_needed(binary)), bc.elf_needed(binary)

    env = dict(os.environ)
    env.pop("CUDA_KERNELS_JIT", None)
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, binary], cwd=src, env=env, capture_output=True, text=True, timeout=300
    )
    # A second C++ runtime in the process shows here: SIGSEGV (returncode -11) or a message cut at "a is [".
    assert probe.returncode == 0, f"returncode {probe.returncode}\n{probe.stdout}\n{probe.stderr[-3000:]}"
    error = json.loads(probe.stdout.strip().splitlines()[-1])["error"]
    assert error is not None, "the probe op did not raise"
    assert "cuda_kernels.probe: a is [3, 4] and n is 12345" in error, error
