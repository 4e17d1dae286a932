"""The build switches of setup.py (cuda_kernels/tools/build_config.py): arch resolution, flags, MAX_JOBS, and the C++
runtime check (the ELF DT_NEEDED reader on tiny libraries built with and without a static libstdc++)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import torch

from cuda_kernels.tools import build_config as bc

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


# ---------------------------------------------------------------------------------------------------------
# build_plan(): the one plan setup.py and the JIT loader carry out. A fake torch (TorchInfo) and a fake toolkit
# (a folder with include/cuda_runtime.h and a bin/nvcc script) make every branch reachable on any machine.


def fake_torch(cuda: str | None = "13.0", caps: list[tuple[int, int]] | None = ()) -> bc.TorchInfo:
    """A torch 2.14.1 built with CUDA `cuda` (None: CPU-only). caps: the visible GPUs; None: asking is a failure."""

    def gpu_capabilities() -> list[tuple[int, int]]:
        assert caps is not None, "the plan asked torch.cuda for GPUs"
        return list(caps)

    version = "2.14.1+" + (f"cu{cuda.replace('.', '')}" if cuda else "cpu")
    return bc.TorchInfo(version=version, cuda=cuda, cxx11_abi=True, gpu_capabilities=gpu_capabilities)


@pytest.fixture
def toolkit(tmp_path) -> str:
    """A fake CUDA toolkit whose nvcc says it is 12.8.93 (so it differs from torch's 13.0 in major version)."""
    home = tmp_path / "cuda"
    (home / "include").mkdir(parents=True)
    (home / "include" / "cuda_runtime.h").write_text("")
    (home / "bin").mkdir()
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.8, V12.8.93'\n")
    nvcc.chmod(0o755)
    return str(home)


def test_plan_without_cuda_says_why_and_asks_no_gpu(toolkit):
    plan = bc.build_plan({"WITH_CUDA": "0", "CUDA_HOME": toolkit}, fake_torch(caps=None))
    assert not plan.with_cuda and plan.why == "WITH_CUDA=0"
    assert plan.arch_list is None and plan.arch_why is None and plan.nvcc_flags == ()
    assert set(bc.STABLE_DEFINES) <= set(plan.cxx_flags) and plan.arch_define is None
    assert not any(f.startswith("-DCUDA_KERNELS_ARCHS") for f in plan.cxx_flags)
    assert [lib for lib, _ in plan.libraries] == [bc.CPU_LIBRARY]
    assert all(s.endswith(".cpp") for s in plan.sources) and plan.sources == tuple(bc.sources(False)[bc.CPU_LIBRARY])
    assert plan.variant == "cpu" and plan.tag.endswith("-torch2.14.1-cpu") and plan.tag.startswith("py3")
    assert "TORCH_CUDA_ARCH_LIST" not in plan.build_env and int(plan.build_env["MAX_JOBS"]) >= 1
    assert plan.cuda_home == toolkit  # still found: torch's cpp_extension is pointed at it either way
    assert plan.report()[0] == "cuda_kernels: building the CPU-only extension (WITH_CUDA=0)"


def test_plan_chooses_cuda_by_what_is_there(toolkit, monkeypatch):
    env = {"CUDA_HOME": toolkit, "TORCH_CUDA_ARCH_LIST": "9.0a"}
    plan = bc.build_plan(env, fake_torch(caps=[(9, 0)]))
    assert plan.with_cuda and plan.why == f"CUDA toolkit at {toolkit}, torch built with CUDA 13.0 and a visible GPU"
    assert [lib for lib, _ in plan.libraries] == [bc.CPU_LIBRARY, bc.CUDA_LIBRARY]
    assert dict(plan.libraries) == {lib: tuple(srcs) for lib, srcs in bc.sources(True).items()}
    plan = bc.build_plan(env, fake_torch(cuda=None, caps=None))  # a CPU-only torch: the driver is not asked
    assert not plan.with_cuda and plan.why == "torch 2.14.1+cpu is a CPU-only build"
    plan = bc.build_plan({"WITH_CUDA": "off", "CUDA_HOME": toolkit}, fake_torch(caps=None))
    assert not plan.with_cuda and plan.why == "WITH_CUDA=off"
    monkeypatch.setattr(bc, "find_cuda_home", lambda env=None: None)
    plan = bc.build_plan({"WITH_CUDA": ""}, fake_torch(caps=None))  # empty: not set
    assert not plan.with_cuda and plan.why.startswith("no CUDA toolkit found")


def test_no_gpu_visible_builds_cpu_only_unless_forced(toolkit):
    """A toolkit and a CUDA torch but no GPU (a laptop, a CI runner): the CUDA kernels could not run, and compiling
    them for the default archs takes minutes to hours on a small machine. CPU-only, said in one line of the report
    with the switch that builds CUDA anyway; WITH_CUDA=1 does (CI compiles every .cu that way)."""
    env = {"CUDA_HOME": toolkit, "TORCH_CUDA_ARCH_LIST": "9.0a"}  # an arch list alone does not ask for CUDA
    plan = bc.build_plan(env, fake_torch(caps=[]))
    assert not plan.with_cuda and plan.arch_list is None and plan.nvcc_flags == () and plan.variant == "cpu"
    assert plan.sources == tuple(bc.sources(False)[bc.CPU_LIBRARY])
    report = plan.report()
    assert report[0] == (
        "cuda_kernels: building the CPU-only extension (no GPU visible; WITH_CUDA=1 builds the CUDA kernels anyway, "
        "as CI does to compile every .cu)"
    )
    assert [line for line in report if "GPU" in line] == report[:1]
    forced = bc.build_plan({**env, "WITH_CUDA": "1"}, fake_torch(caps=[]))
    assert forced.with_cuda and forced.why == "WITH_CUDA=1" and forced.arch_list == "9.0a"
    forced = bc.build_plan({"CUDA_HOME": toolkit, "WITH_CUDA": "1"}, fake_torch(caps=[]))
    assert forced.arch_list == bc.default_arch_list("12.8.93") and forced.arch_why.startswith("no GPU visible")


def test_with_cuda_1_that_cannot_be_built_is_an_error(toolkit, monkeypatch):
    with pytest.raises(bc.BuildPlanError, match=r"^WITH_CUDA=1 but torch 2\.14\.1\+cpu is a CPU-only build$"):
        bc.build_plan({"WITH_CUDA": "1", "CUDA_HOME": toolkit}, fake_torch(cuda=None))
    with pytest.raises(bc.BuildPlanError, match=r"^TORCH_CUDA_ARCH_LIST: cannot read 'Hoper'"):
        bc.build_plan({"WITH_CUDA": "1", "CUDA_HOME": toolkit, "TORCH_CUDA_ARCH_LIST": "Hoper"}, fake_torch())
    with pytest.raises(bc.BuildPlanError, match=r"^COMPUTE_CAPABILITY: cannot read"):
        bc.build_plan({"CUDA_HOME": toolkit, "COMPUTE_CAPABILITY": "nine"}, fake_torch(caps=[(9, 0)]))
    monkeypatch.setattr(bc, "find_cuda_home", lambda env=None: None)
    with pytest.raises(bc.BuildPlanError, match=r"^WITH_CUDA=1 but no CUDA toolkit .*found; set CUDA_HOME$"):
        bc.build_plan({"WITH_CUDA": "1"}, fake_torch())


def test_plan_takes_the_arch_list_from_the_env_then_the_gpus_then_nvcc(toolkit):
    plan = bc.build_plan({"CUDA_HOME": toolkit, "TORCH_CUDA_ARCH_LIST": "Hopper"}, fake_torch(caps=[(8, 0)]))
    assert plan.arch_list == "9.0+PTX" and plan.arch_why == "TORCH_CUDA_ARCH_LIST=Hopper -> 9.0+PTX"
    assert plan.build_env["TORCH_CUDA_ARCH_LIST"] == "9.0+PTX"  # in numbers: what the binary's tag says
    cuda_cxx, cuda_nvcc = plan.library_flags(bc.CUDA_LIBRARY)
    assert "-DCUDA_KERNELS_ARCHS=90_PTX" in cuda_nvcc and "-DCUDA_KERNELS_ARCHS=90_PTX" in cuda_cxx
    assert plan.variant == "cuda" and plan.tag.endswith("-torch2.14.1-cu13.0-90_PTX")
    plan = bc.build_plan({"CUDA_HOME": toolkit, "COMPUTE_CAPABILITY": "80;90a"}, fake_torch(caps=[(8, 6)]))
    assert plan.arch_list == "8.0;9.0a" and plan.tag.endswith("-cu13.0-80__90a")
    plan = bc.build_plan({"CUDA_HOME": toolkit}, fake_torch(caps=[(9, 0)]))
    assert plan.arch_list == "9.0a" and plan.arch_why == "the visible GPU(s)"
    plan = bc.build_plan({"CUDA_HOME": toolkit, "WITH_CUDA": "1"}, fake_torch())
    assert plan.arch_list == bc.default_arch_list("12.8.93") and "nvcc 12.8.93" in plan.arch_why


def test_plan_reads_only_the_env_it_is_given(env, toolkit):
    env.setenv("DEBUG", "1")
    env.setenv("MAX_JOBS", "7")
    plan = bc.build_plan({"WITH_CUDA": "0"}, fake_torch())
    assert not plan.debug and "-O3" in plan.cxx_flags and plan.max_jobs == bc.max_jobs({})
    plan = bc.build_plan({"WITH_CUDA": "0", "DEBUG": "1", "MAX_JOBS": "3"}, fake_torch())
    assert plan.debug and plan.max_jobs == 3 and plan.build_env["MAX_JOBS"] == "3"


def test_debug_and_lineinfo_flags(toolkit):
    base = {"CUDA_HOME": toolkit, "TORCH_CUDA_ARCH_LIST": "9.0", "WITH_CUDA": "1"}
    plan = bc.build_plan(base, fake_torch())
    assert "-O3" in plan.nvcc_flags and "-G" not in plan.nvcc_flags and "-lineinfo" not in plan.nvcc_flags
    assert "-D_GLIBCXX_USE_CXX11_ABI=1" in plan.cxx_flags and "-D_GLIBCXX_USE_CXX11_ABI=1" in plan.nvcc_flags
    assert "-g" not in plan.link_args and "--threads=1" in plan.nvcc_flags and "-Xptxas=-v" not in plan.nvcc_flags
    # Release host code: line tables only (-g1 overrides the -g of Python's CFLAGS), full -g only with DEBUG=1.
    assert "-g1" in plan.cxx_flags and "-g" not in plan.cxx_flags
    plan = bc.build_plan({**base, "DEBUG": "1", "PTXAS_VERBOSE": "1", "NVCC_THREADS": "4"}, fake_torch())
    assert {"-O0", "-g", "-G", "-Xptxas=-v", "--threads=4"} <= set(plan.nvcc_flags) and "-O0" in plan.cxx_flags
    assert "-g" in plan.cxx_flags and "-g1" not in plan.cxx_flags
    assert plan.link_args[0] == "-g" and "-DCUDA_KERNELS_DEBUG=1" in plan.defines
    assert plan.variant == "cuda-debug" and plan.tag.endswith("-cu13.0-90-debug")
    plan = bc.build_plan({**base, "DEBUG": "0", "LINEINFO": "1"}, fake_torch())
    assert "-lineinfo" in plan.nvcc_flags and plan.variant == "cuda-lineinfo" and plan.tag.endswith("-90-lineinfo")
    # LINEINFO changes no flag of a CPU-only build, so it names no build of its own.
    cpu = bc.build_plan({"WITH_CUDA": "0", "DEBUG": "1", "LINEINFO": "1"}, fake_torch())
    assert cpu.variant == "cpu-debug" and cpu.tag.endswith("-cpu-debug")
    assert cpu.cxx_flags == bc.build_plan({"WITH_CUDA": "0", "DEBUG": "1"}, fake_torch()).cxx_flags


@pytest.mark.parametrize("switches", [{}, {"DEBUG": "1"}, {"LINEINFO": "1"}])
def test_the_cpu_library_is_the_same_in_either_kind_of_build(toolkit, switches):
    """The CPU library compiles with the same flags and into the same object folder in a CPU-only and a CUDA build
    (the archs are the CUDA library's), so a CUDA build after a CPU-only one compiles only the CUDA library."""
    base = {"CUDA_HOME": toolkit, "TORCH_CUDA_ARCH_LIST": "8.0;9.0a", **switches}
    cpu = bc.build_plan({**base, "WITH_CUDA": "0"}, fake_torch())
    cuda = bc.build_plan({**base, "WITH_CUDA": "1"}, fake_torch())
    assert cpu.library_flags(bc.CPU_LIBRARY) == cuda.library_flags(bc.CPU_LIBRARY)
    assert cpu.object_folder(bc.CPU_LIBRARY) == cuda.object_folder(bc.CPU_LIBRARY)
    assert dict(cpu.libraries)[bc.CPU_LIBRARY] == dict(cuda.libraries)[bc.CPU_LIBRARY]
    assert (
        cuda.object_folder(bc.CUDA_LIBRARY) == f"{cuda.variant}/{bc.CUDA_LIBRARY}" != cpu.object_folder(bc.CPU_LIBRARY)
    )
    assert (
        cuda.arch_define == "-DCUDA_KERNELS_ARCHS=80__90a"
        and cuda.arch_define in cuda.library_flags(bc.CUDA_LIBRARY)[0]
    )


def test_plan_links_the_runtime_torch_loaded():
    plan = bc.build_plan({"WITH_CUDA": "0"}, fake_torch())
    assert plan.cxx_runtime == bc.loaded_cxx_runtime()
    if plan.cxx_runtime is not None:
        assert plan.link_args[-1] == plan.cxx_runtime
        assert plan.report()[-1] == f"cuda_kernels: linking against the C++ runtime torch loaded: {plan.cxx_runtime}"
    off = bc.build_plan({"WITH_CUDA": "0", bc.LINK_SHARED_CXX_RUNTIME_ENV: "0"}, fake_torch())
    assert off.cxx_runtime is None and off.link_args == tuple(bc.openmp_flags())
    assert not any("linking against" in line for line in off.report())


def test_report_names_the_build_and_warns_of_a_mismatched_nvcc(toolkit):
    env = {"CUDA_HOME": toolkit, "TORCH_CUDA_ARCH_LIST": "9.0a", "LINEINFO": "1"}
    plan = bc.build_plan(env, fake_torch(caps=[(9, 0)]))
    lines = plan.report()
    assert lines[0] == (
        f"cuda_kernels: building the CUDA extension (CUDA toolkit at {toolkit}, torch built with CUDA 13.0 and a "
        "visible GPU); nvcc 12.8.93; archs from TORCH_CUDA_ARCH_LIST=9.0a"
    )
    assert lines[1].startswith("cuda_kernels: warning: nvcc 12.8.93 and torch's CUDA 13.0 differ in major version")
    assert lines[2] == "cuda_kernels: DEBUG=0 LINEINFO=1"
    matched = bc.build_plan({"CUDA_HOME": toolkit, "TORCH_CUDA_ARCH_LIST": "9.0a"}, fake_torch("12.6", [(9, 0)]))
    assert not any("warning" in line for line in matched.report())


# The build decisions build_plan() makes: neither setup.py nor the JIT loader may make any of them again.
PLAN_PARTS = {"find_cuda_home", "resolve_arch_list", "nvcc_version", "arch_tag", "max_jobs", "sources", "openmp_flags",
              "cxx_runtime_link_args", "loaded_cxx_runtime", "default_arch_list", "normalize_arch_list"}  # fmt: skip
BUILD_SWITCHES = {"WITH_CUDA", "TORCH_CUDA_ARCH_LIST", "COMPUTE_CAPABILITY", "DEBUG", "LINEINFO", "PTXAS_VERBOSE",
                  "NVCC_THREADS", "MAX_JOBS", "CUDA_HOME", "CUDA_PATH"}  # fmt: skip


@pytest.mark.parametrize("path", ["setup.py", "cuda_kernels/tools/jit.py"])
def test_setup_py_and_the_jit_take_every_decision_from_build_plan(path):
    import ast

    with open(os.path.join(bc.ROOT, path)) as f:
        tree = ast.parse(f.read())
    called = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    called |= {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert "build_plan" in called
    assert not called & PLAN_PARTS, f"{path} decides {called & PLAN_PARTS} itself instead of taking build_plan's"
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert not defined & {"_choose_cuda", "make_tag"}, defined
    docstring = ast.get_docstring(tree, clean=False)
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value != docstring}
    assert not strings & BUILD_SWITCHES, f"{path} reads {strings & BUILD_SWITCHES} itself"


# Runs setup.py with setuptools.setup replaced: prints, as JSON, the extension it would build and where.
CAPTURE_SETUP = r"""
import json, os, runpy, sys
import setuptools
from setuptools.dist import Distribution
out = {}
def fake_setup(**kw):
    out["exts"] = [dict(name=ext.name, libraries=ext.libraries, sources=ext.sources, include_dirs=ext.include_dirs,
                        extra_compile_args=ext.extra_compile_args, extra_link_args=ext.extra_link_args,
                        py_limited_api=ext.py_limited_api) for ext in kw["ext_modules"]]
    out["wheel"] = kw["options"]["bdist_wheel"]
    out["env"] = {k: os.environ.get(k) for k in ("TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "CUDA_HOME")}
setuptools.setup = fake_setup
sys.argv = ["setup.py", "--version"]
runpy.run_path("setup.py", run_name="__main__")
print(json.dumps(out))
"""


@pytest.mark.parametrize(
    "switches",
    [{"WITH_CUDA": "0", "DEBUG": "1"}, {"WITH_CUDA": "1", "TORCH_CUDA_ARCH_LIST": "Hopper", "LINEINFO": "1"}],
    ids=["cpu-debug", "cuda-lineinfo"],
)
def test_setup_py_and_the_jit_build_the_same_plan(switches, monkeypatch, tmp_path):
    """In one environment, setup.py's extension and the JIT loader's plan are build_plan()'s, field by field."""
    import json

    from cuda_kernels.tools import jit as _jit

    if switches["WITH_CUDA"] == "1" and (bc.find_cuda_home() is None or torch.version.cuda is None):
        pytest.skip("needs a CUDA toolkit and a CUDA build of torch to plan a CUDA build")
    for var in BUILD_SWITCHES | {bc.LINK_SHARED_CXX_RUNTIME_ENV}:
        monkeypatch.delenv(var, raising=False)
    for var, value in {**switches, "MAX_JOBS": "2", "CUDA_KERNELS_JIT_DIR": str(tmp_path)}.items():
        monkeypatch.setenv(var, value)
    proc = subprocess.run(
        [sys.executable, "-c", CAPTURE_SETUP], cwd=bc.ROOT, env=dict(os.environ), capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    plan = bc.build_plan()
    jit = _jit.plan().build
    assert {k: v for k, v in vars(jit).items() if k != "torch"} == {k: v for k, v in vars(plan).items() if k != "torch"}

    assert [ext["name"] for ext in out["exts"]] == [f"cuda_kernels.{lib}" for lib, _ in plan.libraries]
    assert out["wheel"] == {"py_limited_api": bc.PY_LIMITED_API_TAG}
    for ext, (lib, sources) in zip(out["exts"], plan.libraries, strict=True):
        cxx, nvcc = plan.library_flags(lib)
        assert ("torch_cuda" in ext["libraries"]) == (lib == bc.CUDA_LIBRARY)  # a CUDAExtension, or a CppExtension
        assert [os.path.join(bc.ROOT, s) for s in ext["sources"]] == list(sources)
        assert ext["include_dirs"][: len(plan.include_dirs)] == list(plan.include_dirs)
        assert ext["extra_compile_args"]["cxx"] == list(cxx)
        assert ext["extra_compile_args"].get("nvcc", []) == list(nvcc)
        assert ext["extra_link_args"] == list(plan.link_args)
        assert ext["py_limited_api"]
    ext = out
    assert {k: v for k, v in ext["env"].items() if k != "CUDA_HOME"} == {
        "TORCH_CUDA_ARCH_LIST": plan.build_env.get("TORCH_CUDA_ARCH_LIST"),
        "MAX_JOBS": "2",
    }
    assert ext["env"]["CUDA_HOME"] == plan.cuda_home


def test_max_jobs(env):
    assert bc.max_jobs() >= 1
    env.setenv("MAX_JOBS", "3")
    assert bc.max_jobs() == 3


def test_sources_cover_every_kernel_file():
    cpu = bc.sources(with_cuda=False)[bc.CPU_LIBRARY]
    libs = bc.sources(with_cuda=True)
    assert all(s.endswith(".cpp") for s in cpu) and any(s.endswith("api.cpp") for s in cpu)
    assert libs[bc.CPU_LIBRARY] == cpu and any(s.endswith("square.cu") for s in libs[bc.CUDA_LIBRARY])


def test_sources_take_every_file_of_the_layout(tmp_path):
    """The CPU library: every top-level .cpp (the registry, build info, the module) and the CPU folder; with CUDA,
    the CUDA library: the registry and the module again, and every .cpp and .cu under csrc/cuda/ at any depth.
    Headers and other files are not compiled, nor CPU subfolders."""
    files = ["api.cpp", "autograd.cpp", "build_info.cpp", "module.cpp", "ops.h", "notes.md", "cpu/square.cpp",
             "cpu/capability.h", "cpu/extra/skipped.cpp", "cuda/ops.cpp", "cuda/square.cu", "cuda/utils.cuh",
             "cuda/matmul/dispatch.cpp", "cuda/matmul/matvec.cu", "cuda/matmul/hopper.cuh",
             "cuda/matmul/ladder/01_tiled.cu", "cuda/matmul/ladder/12_hopper_gemm.cuh"]  # fmt: skip
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    cpu = ["api.cpp", "autograd.cpp", "build_info.cpp", "module.cpp", "cpu/square.cpp"]
    cuda = ["api.cpp", "module.cpp", "cuda/matmul/dispatch.cpp", "cuda/ops.cpp", "cuda/matmul/ladder/01_tiled.cu",
            "cuda/matmul/matvec.cu", "cuda/square.cu"]  # fmt: skip

    def rel(libs: dict[str, list[str]]) -> dict[str, list[str]]:
        return {lib: [os.path.relpath(s, tmp_path) for s in srcs] for lib, srcs in libs.items()}

    assert rel(bc.sources(False, str(tmp_path))) == {bc.CPU_LIBRARY: cpu}
    assert rel(bc.sources(True, str(tmp_path))) == {bc.CPU_LIBRARY: cpu, bc.CUDA_LIBRARY: cuda}


# Headers a kernel file may reach: CUDA's, the standard library's, the scalar types, and the project's own light
# headers. ATen, torch and c10 cost 10-40 s per nvcc pass of every file that includes them (csrc/cuda/matmul/args.h);
# the .cpp files beside the kernels (dispatch.cpp, ops.cpp, errors.cpp) include torch's stable-ABI headers instead.
# The scalar types, header-only (the stable ABI's: torch/headeronly/).
LIGHT_C10_HEADERS = {"torch/headeronly/util/Half.h", "torch/headeronly/util/BFloat16.h"}


def _heavy_includes(path: str, seen: set[str], csrc: str = bc.CSRC) -> list[str]:
    """The ATen/torch/c10 headers (other than LIGHT_C10_HEADERS) path includes, following the project's includes
    (quoted names found under csrc)."""
    import re

    if path in seen:
        return []
    seen.add(path)
    heavy = []
    with open(path) as f:
        for line in f:
            m = re.match(r'\s*#\s*include\s*([<"])([^>"]+)[>"]', line)
            if not m:
                continue
            name = m.group(2)
            own = os.path.join(csrc, name)
            if m.group(1) == '"' and os.path.exists(own):
                heavy += [f"{name} -> {h}" for h in _heavy_includes(own, seen, csrc)]
            elif name.split("/")[0] in ("ATen", "torch", "c10") and name not in LIGHT_C10_HEADERS:
                heavy.append(name)
    return heavy


def test_kernel_files_include_no_aten_headers():
    """Every kernel file: square's, the ladder's, and those of ops `python -m cuda_kernels.new` added (test_new_op
    checks the generator's own output)."""
    import glob

    cuda = os.path.join(bc.CSRC, "cuda")
    kernel_files = sorted(glob.glob(os.path.join(cuda, "**", "*.cu"), recursive=True))
    kernel_files += sorted(glob.glob(os.path.join(cuda, "**", "*.cuh"), recursive=True))
    assert len(kernel_files) > 20
    heavy = {os.path.relpath(f, bc.CSRC): _heavy_includes(f, set()) for f in kernel_files}
    assert {f: h for f, h in heavy.items() if h} == {}


def run_setup_py_without_torch(*args: str) -> subprocess.CompletedProcess:
    """Runs `setup.py ARGS` in a fresh interpreter where `import torch` fails, as in pip's isolated build env."""
    setup_py = str(bc.ROOT) + "/setup.py"
    code = (
        "import sys, builtins; real = builtins.__import__\n"
        "def fake(name, *a, **k):\n"
        "    if name == 'torch' or name.startswith('torch.'): raise ImportError('No module named torch')\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = fake\n"
        "import runpy\n"
        f"sys.argv = {[setup_py, *args]!r}\n"
        f"runpy.run_path({setup_py!r}, run_name='__main__')\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=bc.ROOT)


def test_setup_py_refuses_build_isolation_with_one_line():
    proc = run_setup_py_without_torch("--version")
    assert proc.returncode != 0
    assert "--no-build-isolation" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_setup_py_metadata_pass_needs_no_torch(tmp_path):
    # pip runs setup.py once for the metadata (`dist_info`) before the build: that pass must not import torch (it
    # would cost an `import torch` per `pip install -e .`) and must still write the package's metadata.
    proc = run_setup_py_without_torch("dist_info", "--output-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    (metadata,) = tmp_path.glob("cuda_kernels-*.dist-info/METADATA")
    text = metadata.read_text()
    assert "Name: cuda_kernels" in text and "Requires-Dist: torch>=2.4" in text


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
    """A g++ wrapper like a container image's /opt/gcc ones: its -B folder holds only libstdc++.a, so g++'s implicit
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
