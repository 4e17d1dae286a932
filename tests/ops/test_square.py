"""cuda_kernels.square against torch on every device x dtype, plus opcheck, gradcheck, torch.compile and bad input."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys

import pytest
import torch
from conftest import DEVICES, DTYPES, disassemble_extension, rand, requires_cuda, requires_objdump

import cuda_kernels

# 0-d, empty, 1, primes, odd rectangles, sizes around the 16-byte vector width and the kernel's per-block tile.
SHAPES = [
    (),
    (0,),
    (1,),
    (7,),
    (8,),
    (9,),
    (1023,),
    (1025,),
    (65537,),
    (3, 0, 5),
    (3, 5, 7),
    (999, 999),
    (2, 3, 4, 5),
]


def reference(x: torch.Tensor) -> torch.Tensor:
    """x * x rounded once to x's dtype. Exact for all four dtypes: the square of a p-bit significand fits in
    float64's 53 bits, so float64 computes it exactly and one rounding gives what float32/float16 math gives."""
    return x.double().square().to(x.dtype)


def check(out: torch.Tensor, x: torch.Tensor) -> None:
    assert out.shape == x.shape and out.dtype == x.dtype and out.device == x.device
    assert out.is_contiguous()
    torch.testing.assert_close(out, reference(x), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_square_matches_torch(device, dtype, shape):
    x = rand(*shape, dtype=dtype, device=device)
    check(cuda_kernels.square(x), x)
    check(torch.ops.cuda_kernels.square(x), x)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "make_view",
    [
        pytest.param(lambda t: t.t(), id="transposed"),
        pytest.param(lambda t: t[:, ::3], id="step-slice"),
        pytest.param(lambda t: t[1:, 1:], id="offset-2d"),
        pytest.param(lambda t: t.flatten()[1:], id="misaligned-contiguous"),
        pytest.param(lambda t: t[:1].expand(40, -1), id="expanded"),
        pytest.param(lambda t: t.view(4, 10, 33).permute(2, 0, 1), id="permuted-3d"),
    ],
)
def test_square_non_contiguous(device, dtype, make_view):
    base = rand(40, 33, dtype=dtype, device=device, seed=1)
    x = make_view(base)
    check(cuda_kernels.square(x), x)


def mid_size_range(dtype: torch.dtype) -> tuple[int, int]:
    """Element counts (exclusive low, inclusive high) that square.cu launches with 4 packs per thread on this GPU:
    its 2-pack grid needs more than one wave of 128-thread blocks, its 4-pack grid at most two (16-byte packs;
    assumes threads, not registers, bound the resident blocks, as launch_bounds ensures)."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    blocks_per_wave = props.multi_processor_count * (props.max_threads_per_multi_processor // 128)
    elements_per_pack = 16 // torch.empty((), dtype=dtype).element_size()
    return blocks_per_wave * 128 * 2 * elements_per_pack, 2 * blocks_per_wave * 128 * 4 * elements_per_pack


@requires_cuda
@pytest.mark.gpu
@pytest.mark.heavy
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_square_both_launch_shapes(dtype):
    """Sizes on both sides of the switches between 2 and 4 packs per thread (contiguous, aligned), odd tails."""
    low, high = mid_size_range(dtype)
    # Made on the GPU: up to 35 M elements on an H100, which conftest's CPU generator takes 0.1-0.4 s a dtype to make.
    g = torch.Generator(device="cuda").manual_seed(2)
    base = torch.randn(2 * high + 64, generator=g, device="cuda").to(dtype)
    for n in (low // 2 + 3, low - 1, low + 1, low + 129, high - 1, high + 1, high + 129, 2 * high + 7):
        x = base[:n]
        check(cuda_kernels.square(x), x)


@pytest.mark.parametrize("device", DEVICES)
def test_square_special_values(device):
    x = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e20, 1e-30, -3.0], device=device)
    for dtype in DTYPES:
        xd = x.to(dtype)
        check(cuda_kernels.square(xd), xd)


@pytest.mark.parametrize("device", DEVICES)
def test_square_opcheck(device):
    for dtype in (torch.float32, torch.float16):
        for x in (rand(5, 3, dtype=dtype, device=device), rand(4, 6, device=device).t().to(dtype)):
            torch.library.opcheck(torch.ops.cuda_kernels.square.default, (x.requires_grad_(dtype.is_floating_point),))


@pytest.mark.parametrize("device", DEVICES)
def test_square_gradcheck(device):
    x = rand(4, 5, dtype=torch.float64, device=device).requires_grad_()
    assert torch.autograd.gradcheck(cuda_kernels.square, (x,))
    assert torch.autograd.gradgradcheck(cuda_kernels.square, (x,))


@pytest.mark.parametrize("device", DEVICES)
def test_square_autograd_records_only_when_needed(device):
    """square's C++ autograd kernel (csrc/api.cpp) skips the graph when nothing needs it, and records it otherwise."""
    x = rand(6, device=device)
    assert cuda_kernels.square(x).grad_fn is None
    xg = x.clone().requires_grad_()
    with torch.no_grad():
        assert not cuda_kernels.square(xg).requires_grad
    y = cuda_kernels.square(xg)
    assert y.requires_grad and y.grad_fn is not None
    y.sum().backward()
    torch.testing.assert_close(xg.grad, 2 * x, rtol=0, atol=0)


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_square_compile_fullgraph(device):
    torch._dynamo.reset()

    def f(x):
        return cuda_kernels.square(x) + 1

    compiled = torch.compile(f, fullgraph=True)
    x = rand(17, 3, device=device)
    torch.testing.assert_close(compiled(x), reference(x) + 1, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "x, message",
    [
        (
            lambda d: torch.ones(3, dtype=torch.int32, device=d),
            "cuda_kernels.square: x must be float32.*got Int",
        ),
        (
            lambda d: torch.ones(3, dtype=torch.bool, device=d),
            "cuda_kernels.square: x must be float32.*got Bool",
        ),
        (
            lambda d: torch.ones(3, dtype=torch.complex64, device=d),
            "cuda_kernels.square: x must be float32.*got ComplexFloat",
        ),
    ],
    ids=["int32", "bool", "complex64"],
)
def test_square_bad_input(device, x, message):
    with pytest.raises(RuntimeError, match=message):
        cuda_kernels.square(x(device))


# The CPU kernel is compiled once per CPU capability (csrc/cpu/capability.h) and torch's ATEN_CPU_CAPABILITY,
# read once per process, picks the build: each build is checked exactly in its own process, at every length
# around its vector width (a full register is 64 bytes with AVX-512), on misaligned starts and special values.
#
# torch trusts ATEN_CPU_CAPABILITY=avx512 even on a CPU without AVX-512; csrc/cpu/capability.cpp does not: it
# lowers torch's choice to what the CPU has. The expected build is computed here by the same rule, from the
# CPU's flags in /proc/cpuinfo (the kernel lists a feature there only when the CPU has it and the OS enabled it,
# as __builtin_cpu_supports checks). A build the CPU cannot run is skipped with the missing features named,
# after checking that the fallback build is the one chosen (nothing is computed then: torch's own AVX-512
# kernels would crash such a CPU).
CAPABILITY_FEATURES = {  # the instruction sets each build uses (capability.cpp, vec_isa_begin.h)
    "DEFAULT": (),
    "AVX2": ("avx2", "fma", "f16c"),
    "AVX512": ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq"),
}
# Where the extension has its AVX2/AVX512 builds (capability.h: x86-64 with GCC, i.e. Linux here); elsewhere
# only DEFAULT exists.
X86_BUILDS = platform.machine() == "x86_64" and sys.platform.startswith("linux")


def cpu_flags() -> set[str] | None:
    """The CPU's feature flags from /proc/cpuinfo (Linux), or None where that file is missing."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        return None
    return set()


def missing_features(capability: str, flags: set[str]) -> list[str]:
    """Features of `capability` ("DEFAULT", "AVX2", "AVX512") that `flags` lacks, in CAPABILITY_FEATURES order."""
    return [f for f in CAPABILITY_FEATURES[capability] if f not in flags]


def expected_capability(torch_choice: str, flags: set[str], x86_builds: bool = True) -> str:
    """The build capability.cpp runs: torch's choice, lowered to the best build whose features the CPU has."""
    if not x86_builds:
        return "DEFAULT"
    if torch_choice == "AVX512" and not missing_features("AVX512", flags):
        return "AVX512"
    if torch_choice in ("AVX512", "AVX2") and not missing_features("AVX2", flags):
        return "AVX2"
    return "DEFAULT"


def test_expected_capability_mirrors_capability_cpp():
    avx512 = set(CAPABILITY_FEATURES["AVX512"]) | {"sse4_2", "avx"}
    epyc_avx2 = set(CAPABILITY_FEATURES["AVX2"]) | {"sse4_2", "avx"}  # an AMD EPYC without AVX-512
    assert expected_capability("AVX512", avx512) == "AVX512"
    assert expected_capability("AVX2", avx512) == "AVX2"
    assert expected_capability("DEFAULT", avx512) == "DEFAULT"
    assert expected_capability("AVX512", epyc_avx2) == "AVX2"
    assert missing_features("AVX512", epyc_avx2) == ["avx512f", "avx512bw", "avx512vl", "avx512dq"]
    assert expected_capability("AVX512", avx512 - {"avx512vl"}) == "AVX2"  # all four AVX-512 subsets are needed
    assert expected_capability("AVX2", epyc_avx2 - {"f16c"}) == "DEFAULT"
    assert expected_capability("AVX512", avx512 - {"fma"}) == "DEFAULT"  # AVX512 builds on the AVX2 set
    assert expected_capability("AVX512", avx512, x86_builds=False) == "DEFAULT"


_CAPABILITY_SCRIPT = r"""
import sys
import torch
import cuda_kernels

print("TORCH", torch.backends.cpu.get_cpu_capability(), "OURS", cuda_kernels._C._cpu_capability(), flush=True)
if sys.argv[1] != "sweep":
    sys.exit(0)
special = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e20, 1e-20, 1e-30, -3.0, 65504.0])
gen = torch.Generator().manual_seed(0)
for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
    for n in [*range(1, 70), 127, 129, 1023, 1025, 65537, 3 * 32768 + 5]:
        base = torch.randn(n + 3, generator=gen, dtype=torch.float64) * 50
        base[: min(n, len(special))] = special[: min(n, len(special))].double()
        base = base.to(dtype)
        for x in (base[:n], base[1 : n + 1], base[3:]):  # aligned and misaligned contiguous starts
            ref = x.double().square().to(dtype)
            torch.testing.assert_close(cuda_kernels.square(x), ref, rtol=0, atol=0, equal_nan=True)
print("OK")
"""


@pytest.mark.slow
@pytest.mark.parametrize("capability", ["default", "avx2", "avx512"])
def test_square_cpu_capability(capability):
    want = capability.upper()
    flags = cpu_flags()
    if flags is None and want != "DEFAULT":
        pytest.skip(f"no /proc/cpuinfo: cannot tell whether this CPU has the instruction sets of the {want} build")
    flags = flags or set()
    missing = missing_features(want, flags)
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(cuda_kernels.__file__)))
    env = dict(os.environ, ATEN_CPU_CAPABILITY=capability)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    # Without the features, only report the choice: torch's own kernels would run instructions the CPU lacks.
    mode = "report" if missing else "sweep"
    proc = subprocess.run(
        [sys.executable, "-c", _CAPABILITY_SCRIPT, mode], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    words = proc.stdout.split()
    assert words[:1] == ["TORCH"] and words[2:3] == ["OURS"], proc.stdout + proc.stderr
    torch_choice, ours = words[1], words[3]
    expected = expected_capability(torch_choice, flags, X86_BUILDS)
    assert ours == expected, (
        f"ATEN_CPU_CAPABILITY={capability}: torch runs {torch_choice}, our kernels {ours}; expected {expected} "
        f"on a CPU with {sorted(flags & set(CAPABILITY_FEATURES['AVX512']))}"
    )
    if torch_choice != want:
        pytest.skip(f"torch runs {torch_choice} here with ATEN_CPU_CAPABILITY={capability}, not {want}")
    if missing:
        pytest.skip(f"this CPU lacks {', '.join(missing)}: our {want} build cannot run here ({expected} runs instead)")
    assert words[-1] == "OK", proc.stdout + proc.stderr


@requires_objdump
def test_square_cpu_avx_code_stays_in_avx_builds():
    """No function outside the AVX2/AVX512 builds' namespaces may use an AVX instruction. The linker keeps one copy
    of each inline function for the whole library; were it a copy compiled in an AVX translation unit, every caller
    would crash with SIGILL on a CPU without AVX (why csrc/cpu/vec_isa_begin.h includes headers before its pragma)."""
    disassembly = disassemble_extension()
    # A VEX/EVEX-encoded instruction (AT&T mnemonics vmovups, vpxor, ...) or a 256/512-bit register.
    avx = re.compile(r":\tv[a-z0-9]+\s|%[yz]mm")
    function, outside, inside = "", set(), 0
    for line in disassembly.splitlines():
        if line.endswith(">:"):  # "0000000000012340 <cuda_kernels::...>:" starts a function
            function = line
        elif avx.search(line):
            if "::AVX2::" in function or "::AVX512::" in function:
                inside += 1
            else:
                outside.add(function)
    assert not outside, "AVX code outside the AVX builds:\n" + "\n".join(sorted(outside))
    if platform.system() == "Linux":  # built with GCC: the AVX builds exist and hold AVX code
        assert inside > 0
