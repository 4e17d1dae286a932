"""How the extension is built, checked on the binary and per CPU build: not what an op computes (tests/ops/).

square's CPU kernel is compiled once per CPU capability (csrc/cpu/capability.h), and the machine code of the built
extension must keep AVX instructions inside the AVX builds. Moved out of tests/ops/test_square.py, the file a new
op's tests are copied from, where these checks of the build's internals would be copied for nothing.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys

import pytest
from conftest import disassemble_extension, requires_objdump

import cuda_kernels

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

print("TORCH", torch.backends.cpu.get_cpu_capability(), "OURS", torch.ops.cuda_kernels._cpu_capability(), flush=True)
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
