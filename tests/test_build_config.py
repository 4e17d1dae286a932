"""The build switches of setup.py (cuda_kernels/_build_config.py): arch resolution, flags, MAX_JOBS, and the C++
runtime check (the ELF DT_NEEDED reader on tiny libraries built with and without a static libstdc++)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import torch

from cuda_kernels import _build_config as bc

# A tiny C++ library that uses the runtime's number formatting (what crashed with two runtimes in one process).
TINY_CPP = """
#include <sstream>
#include <string>
std::string format_number(long x) { std::ostringstream s; s << "n=" << x; return s.str(); }
"""


@pytest.fixture
def env(monkeypatch):
    for var in ("TORCH_CUDA_ARCH_LIST", "COMPUTE_CAPABILITY", "DEBUG", "LINEINFO", "MAX_JOBS"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_arch_list_is_always_honored(env):
    env.setenv("TORCH_CUDA_ARCH_LIST", "8.0;9.0a")
    assert bc.resolve_arch_list([(8, 6)])[0] == "8.0;9.0a"


def test_compute_capability_is_a_shorthand(env):
    for cc, expected in [("90", "9.0"), ("90a", "9.0a"), ("8.6", "8.6"), ("80;90a", "8.0;9.0a"), ("120", "12.0")]:
        env.setenv("COMPUTE_CAPABILITY", cc)
        assert bc.resolve_arch_list([])[0] == expected


def test_compute_capability_never_overrides_the_list(env):
    env.setenv("TORCH_CUDA_ARCH_LIST", "8.0")
    env.setenv("COMPUTE_CAPABILITY", "90")
    arch_list, why = bc.resolve_arch_list([])
    assert arch_list == "8.0"
    assert "COMPUTE_CAPABILITY=90 ignored" in why


def test_bad_compute_capability_is_an_error(env):
    env.setenv("COMPUTE_CAPABILITY", "nine")
    with pytest.raises(ValueError, match="COMPUTE_CAPABILITY"):
        bc.resolve_arch_list([])


def test_defaults_with_and_without_gpus(env):
    assert bc.resolve_arch_list([(8, 6)])[0] == "8.6+PTX"
    assert bc.resolve_arch_list([(8, 0), (8, 6), (8, 0)])[0] == "8.0;8.6+PTX"
    # Hopper as its arch-specific target (wgmma, TMA); compute_90a PTX would run on 9.0 only, so no +PTX.
    assert bc.resolve_arch_list([(9, 0)])[0] == "9.0a"
    assert bc.resolve_arch_list([(8, 0), (9, 0)])[0] == "8.0;9.0a"
    assert bc.resolve_arch_list([(9, 0), (12, 0)])[0] == "9.0a;12.0+PTX"
    arch_list, why = bc.resolve_arch_list([], "/nonexistent/cuda")
    assert arch_list == bc.DEFAULT_ARCH_LISTS[0][1] and "version unknown" in why


@pytest.mark.parametrize(
    "nvcc, expected",
    [
        ("13.0.88", "8.0;9.0a;10.0;12.0+PTX"),
        ("12.8.93", "8.0;9.0a;10.0;12.0+PTX"),
        ("12.6.85", "8.0;9.0a;9.0+PTX"),  # no sm_100/sm_120 before 12.8
        ("12.0.76", "8.0;9.0a;9.0+PTX"),  # sm_90a from 12.0
        ("11.8.89", "8.0;9.0+PTX"),  # sm_90 from 11.8, no arch-specific targets
        ("11.4.48", "8.0+PTX"),
    ],
)
def test_default_arch_list_follows_nvcc(nvcc, expected):
    assert bc.default_arch_list(nvcc) == expected


def test_default_arch_list_is_what_the_nvcc_here_can_build(env):
    cuda_home = bc.find_cuda_home()
    if cuda_home is None:
        pytest.skip("no CUDA toolkit here to ask (nvcc --list-gpu-arch)")
    nvcc = os.path.join(cuda_home, "bin", "nvcc")
    listed = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True, timeout=60).stdout.split()
    arch_list, why = bc.resolve_arch_list([], cuda_home)
    assert bc.nvcc_version(cuda_home) in why
    for arch in arch_list.split(";"):
        # nvcc lists compute_90, not compute_90a: the arch-specific target exists for every listed 9.0/10.x/12.x.
        major_minor = arch.removesuffix("+PTX").rstrip("af")
        assert f"compute_{major_minor.replace('.', '')}" in listed, (arch, listed)


@pytest.mark.parametrize(
    "arch_list, expected",
    [
        ("Hopper", "9.0+PTX"),
        ("Ampere+PTX", "8.0;8.6+PTX"),  # torch alone turns this into the invalid "8.6+PTX+PTX"
        ("Ampere+Tegra", "8.7"),  # a combined name is one name, not Ampere followed by junk
        ("Ampere+Tegra+PTX", "8.7+PTX"),
        ("8.0 9.0a", "8.0;9.0a"),  # spaces separate, as in torch
        ("8.0;Hopper;9.0+PTX", "8.0;9.0+PTX"),  # no repeats
        ("10.0f;12.0a", "10.0f;12.0a"),
        ("native", "native"),
    ],
)
def test_torch_arch_names_are_expanded(arch_list, expected):
    assert bc.normalize_arch_list(arch_list) == expected


def test_unreadable_arch_list_is_a_clear_error(env):
    env.setenv("TORCH_CUDA_ARCH_LIST", "8.0;Hoper")
    with pytest.raises(ValueError, match="TORCH_CUDA_ARCH_LIST: cannot read 'Hoper'.*Hopper"):
        bc.resolve_arch_list([])


def test_named_arch_lists_resolve_to_numbers(env):
    env.setenv("TORCH_CUDA_ARCH_LIST", "Ampere;Hopper")
    arch_list, why = bc.resolve_arch_list([(9, 0)])
    assert arch_list == "8.0;8.6+PTX;9.0+PTX" and "Ampere;Hopper -> 8.0;8.6+PTX;9.0+PTX" in why
    env.setenv("TORCH_CUDA_ARCH_LIST", "native")  # torch: the visible GPUs
    assert bc.resolve_arch_list([(9, 0)])[0] == "9.0a"


def test_our_names_are_torchs_names(env):
    """Every name torch's cpp_extension knows is in NAMED_ARCHES, and expanded it gives torch the same nvcc flags."""
    import inspect
    import re

    if "torch.utils.cpp_extension" not in sys.modules and bc.find_cuda_home():
        env.setenv("CUDA_HOME", bc.find_cuda_home())  # torch reads it once, at import; its own guess can be wrong
    import torch.utils.cpp_extension as cpp_ext

    get_flags = getattr(cpp_ext, "_get_cuda_arch_flags", None)
    if get_flags is None:
        pytest.skip(f"torch {torch.__version__} has no _get_cuda_arch_flags to compare with")
    torch_names = re.findall(r"\('([A-Za-z+]+)', '[0-9.;+PTX]+'\)", inspect.getsource(get_flags))
    assert torch_names, "could not find torch's named_arches table"
    assert set(torch_names) <= set(bc.NAMED_ARCHES), set(torch_names) - set(bc.NAMED_ARCHES)
    for name in torch_names:
        env.setenv("TORCH_CUDA_ARCH_LIST", name)
        by_torch = get_flags()
        env.setenv("TORCH_CUDA_ARCH_LIST", bc.normalize_arch_list(name))
        assert get_flags() == by_torch, name


@pytest.mark.parametrize(
    "arch_list, archs",
    [
        ("8.0;9.0a", ["8.0", "9.0a"]),
        ("9.0+PTX", ["9.0+PTX"]),
        ("8.0;12.0+PTX", ["8.0", "12.0+PTX"]),
        ("8.0;9.0a;10.0;12.0+PTX", ["8.0", "9.0a", "10.0", "12.0+PTX"]),
        ("10.0f;10.3a+PTX", ["10.0f", "10.3a+PTX"]),
        ("Hopper", ["9.0+PTX"]),
        ("Ampere+PTX", ["8.0", "8.6+PTX"]),
        ("Ampere+Tegra;Blackwell", ["8.7", "10.0", "10.3", "12.0", "12.1+PTX"]),
    ],
)
def test_arch_tag_round_trips_through_build_info(arch_list, archs):
    tag = bc.arch_tag(arch_list)
    assert tag.replace("_", "").isalnum(), tag  # baked into the binary as -DCUDA_KERNELS_ARCHS=<tag>, unquoted
    assert bc.decode_arch_tag(tag) == archs


def test_tags_of_older_builds_with_names_decode():
    # Before names were expanded, arch_tag("Hopper") was "Hopper" and arch_tag("8.0;Ampere+PTX") "80__Ampere_PTX".
    assert bc.decode_arch_tag("Hopper") == ["9.0+PTX"]
    assert bc.decode_arch_tag("80__Ampere_PTX") == ["8.0", "8.6+PTX"]
    assert bc.decode_arch_tag("native") == ["native"] and bc.decode_arch_tag("what") == ["what"]


def test_debug_and_lineinfo_flags(env):
    cfg = bc.make_config(with_cuda=True, arch_list="9.0", cxx11_abi=True)
    assert "-O3" in cfg.nvcc_flags and "-G" not in cfg.nvcc_flags and "-D_GLIBCXX_USE_CXX11_ABI=1" in cfg.cxx_flags
    env.setenv("DEBUG", "1")
    cfg = bc.make_config(with_cuda=True, arch_list="9.0")
    assert {"-O0", "-g", "-G"} <= set(cfg.nvcc_flags) and "-O0" in cfg.cxx_flags
    env.setenv("DEBUG", "0")
    env.setenv("LINEINFO", "1")
    assert "-lineinfo" in bc.make_config(with_cuda=True, arch_list="9.0").nvcc_flags


def test_max_jobs(env):
    assert bc.max_jobs() >= 1
    env.setenv("MAX_JOBS", "3")
    assert bc.max_jobs() == 3


def test_sources_cover_every_kernel_file():
    cpu = bc.sources(with_cuda=False)
    cuda = bc.sources(with_cuda=True)
    assert all(s.endswith(".cpp") for s in cpu) and any(s.endswith("api.cpp") for s in cpu)
    assert set(cpu) < set(cuda) and any(s.endswith("square.cu") for s in cuda)


def test_setup_py_refuses_build_isolation_with_one_line(tmp_path):
    # What pip's isolated build environment looks like: setup.py runs where torch cannot be imported.
    setup_py = str(bc.ROOT) + "/setup.py"
    code = (
        "import sys, builtins; real = builtins.__import__\n"
        "def fake(name, *a, **k):\n"
        "    if name == 'torch' or name.startswith('torch.'): raise ImportError('No module named torch')\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = fake\n"
        "import runpy\n"
        f"sys.argv = [{setup_py!r}, '--version']\n"
        f"runpy.run_path({setup_py!r}, run_name='__main__')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=bc.ROOT)
    assert proc.returncode != 0
    assert "--no-build-isolation" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------------------------------------------------
# The C++ runtime: DT_NEEDED reader, checker, and the link argument, on tiny libraries (about 1 s each).


def tiny_library(folder: str, name: str, *flags: str, cxx: str | None = None) -> str:
    """Builds TINY_CPP into folder/name.so with g++ (or cxx) and extra flags; returns its path."""
    src = os.path.join(folder, "tiny.cpp")
    with open(src, "w") as f:
        f.write(TINY_CPP)
    out = os.path.join(folder, name + ".so")
    subprocess.run([cxx or "g++", "-shared", "-fPIC", src, *flags, "-o", out], check=True, capture_output=True)
    return out


def static_runtime_compiler(folder: str) -> str:
    """A g++ wrapper like the GPU machine's /opt/gcc ones: its -B folder holds only libstdc++.a, so g++'s implicit
    -lstdc++ finds the archive before the shared runtime."""
    archive = subprocess.run(["g++", "-print-file-name=libstdc++.a"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(archive):
        pytest.skip("g++ has no libstdc++.a here, so it cannot link the C++ runtime statically")
    libdir = os.path.join(folder, "gcclib")
    os.makedirs(libdir, exist_ok=True)
    if not os.path.exists(os.path.join(libdir, "libstdc++.a")):
        os.symlink(archive, os.path.join(libdir, "libstdc++.a"))
    wrapper = os.path.join(folder, "g++-static-runtime")
    with open(wrapper, "w") as f:
        f.write(f'#!/bin/sh\nexec {shutil.which("g++")} -B{libdir}/ "$@"\n')
    os.chmod(wrapper, 0o755)
    return wrapper


needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the tiny libraries")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = str(tmp_path_factory.mktemp("tiny"))
    return {"shared": tiny_library(folder, "shared"), "static": tiny_library(folder, "static", "-static-libstdc++")}


@needs_gxx
def test_elf_needed_reads_what_readelf_shows(tiny):
    assert "libstdc++.so.6" in bc.elf_needed(tiny["shared"])
    static = bc.elf_needed(tiny["static"])
    assert static and not any(n.startswith("libstdc++") for n in static)  # libc.so.6 etc., not the C++ runtime
    if shutil.which("readelf"):  # the same list, in the same order
        for path in tiny.values():
            out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
            assert bc.elf_needed(path) == [
                ln.split("[")[1].split("]")[0] for ln in out.splitlines() if "(NEEDED)" in ln
            ]


@needs_gxx
def test_cxx_runtime_problem_names_the_binary_and_the_fix(tiny):
    assert bc.cxx_runtime_problem(tiny["shared"]) is None
    line = bc.cxx_runtime_problem(tiny["static"])
    assert line and tiny["static"] in line and "static copy of the C++ runtime" in line
    assert "Fix: CC=" in line and "CXX=" in line and line.endswith("pip install --no-build-isolation -e .")


def test_files_that_are_not_elf_or_are_broken(tmp_path):
    text = tmp_path / "a.so"
    text.write_text("not a binary")
    assert bc.elf_needed(str(text)) is None and bc.cxx_runtime_problem(str(text)) is None
    truncated = tmp_path / "b.so"
    truncated.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 33 + b"\xff" * 30)  # section headers past the end
    with pytest.raises(ValueError, match="malformed ELF"):
        bc.elf_needed(str(truncated))
    assert bc.cxx_runtime_problem(str(truncated)) is None  # cannot tell: no claim
    assert bc.cxx_runtime_problem(str(tmp_path / "absent.so")) is None


def test_the_runtime_torch_loaded_is_linked(monkeypatch):
    path = bc.loaded_cxx_runtime()
    if path is None:
        pytest.skip("no shared libstdc++ in this process (not Linux?)")
    assert os.path.basename(path).startswith("libstdc++.so") and os.path.isfile(path)
    assert bc.cxx_runtime_link_args() == [path]
    monkeypatch.setenv(bc.LINK_SHARED_CXX_RUNTIME_ENV, "0")
    assert bc.cxx_runtime_link_args() == []


@needs_gxx
def test_the_link_argument_beats_a_compiler_that_links_the_runtime_statically(tmp_path):
    """The mechanism setup.py and the JIT loader rely on, on a tiny library: the wrapper alone links the archive;
    with cxx_runtime_link_args() on the link, the library needs libstdc++.so.6 and holds no copy of the runtime."""
    if not bc.cxx_runtime_link_args():
        pytest.skip("no shared libstdc++ in this process (not Linux?)")
    wrapper = static_runtime_compiler(str(tmp_path))
    broken = tiny_library(str(tmp_path), "broken", cxx=wrapper)
    assert bc.cxx_runtime_problem(broken) is not None, "the wrapper did not link the runtime statically"
    fixed = tiny_library(str(tmp_path), "fixed", *bc.cxx_runtime_link_args(), cxx=wrapper)
    assert bc.cxx_runtime_problem(fixed) is None, bc.elf_needed(fixed)
    assert os.path.getsize(fixed) < os.path.getsize(broken) / 10  # the runtime's code is not in it
