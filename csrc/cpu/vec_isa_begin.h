// Opens a translation unit that compiles at::vec::Vectorized kernels for one CPU capability, as torch compiles its
// own kernels once per capability (DEFAULT, AVX2, AVX512) and picks one at run time (csrc/cpu/capability.h).
//
// Use, as the whole of a <op>_kernel_<isa>.cpp (no other header before it; see square_kernel_avx512.cpp):
//
//     #include "capability.h"
//     #if CUDA_KERNELS_CPU_X86_KERNELS     // AVX2/AVX512 builds only where they can be compiled
//     #define CPU_CAPABILITY_AVX512        // or CPU_CAPABILITY_AVX2; neither (and no #if) for DEFAULT
//     #include "vec_isa_begin.h"
//     #include "<op>_kernel.h"             // kernels in namespace cuda_kernels::cpu::CPU_CAPABILITY
//     #include "vec_isa_end.h"
//     #endif
//
// What it does, and why this way:
//  - torch builds each capability's files with its own -m flags. An extension's sources all get the same flags
//    (setup.py and the JIT loop share one list), so here `#pragma GCC target` gives the rest of the file the
//    capability's instruction sets instead, and vec_isa_end.h restores the baseline.
//  - CPU_CAPABILITY_AVX2/AVX512 make at::vec define its 256/512-bit Vectorized<T>; CPU_CAPABILITY names the
//    (inline) namespace everything is put in, at::vec::AVX512 and cuda_kernels::cpu::AVX512 say, so the three
//    builds of the same code never share a symbol (no ODR clash at link time).
//  - The headers at::vec builds on are included first, before the pragma: their inline functions are then compiled
//    for the baseline ISA, and when the linker keeps one copy of such a function for the whole library, it is one
//    that every CPU can run. Only at::vec's own code (in its per-capability namespace) and ours get the target.
//  - In C++, GCC's target pragma does not define __AVX2__/__AVX512F__, which sleef.h (SLEEF vector math, pulled
//    in by at::vec) reads to declare its 256/512-bit functions; they are defined around that one include.
//  - The stable ABI's TORCH_TARGET_VERSION, which the build defines for every file, is undefined here first:
//    ATen's headers refuse to compile under it. The kernels use only their header-only parts (at::vec, c10's
//    scalar types) and get torch's threads from the host side (kernel_api.h), so the binary still calls torch
//    only through its C shim (tests/tools/test_stable_abi.py checks the symbols).
// No #pragma once: each capability's translation unit includes it once.
//
// The list below is every header that at::vec (torch 2.x) includes that is not part of at::vec itself, and
// OpMathType.h, which the kernels use; nothing more: ATen's headers are most of each capability's compile time. To
// redo it for another torch: g++ -H -fsyntax-only on a TU that includes this file lists the headers opened after
// sleef.h.
#undef TORCH_TARGET_VERSION
#undef TORCH_STABLE_ONLY

#include <ATen/AccumulateType.h>
#include <ATen/NumericUtils.h>
#include <ATen/OpMathType.h>
#include <ATen/native/Math.h>
#include <ATen/native/cpu/zmath.h>
#include <ATen/native/quantized/AffineQuantizerBase.h>
#include <c10/util/BFloat16-math.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <c10/util/Load.h>
#include <c10/util/MathConstants.h>
#include <c10/util/TypeCast.h>
#include <c10/util/complex.h>
#include <c10/util/copysign.h>
#include <c10/util/irange.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>
#include <utility>

#include "kernel_api.h"

// at::vec's AVX code, built with -Wall, warns about GCC's own intrinsics headers: the deliberately undefined lanes
// of _mm512_undefined_ps & co. (Its other warnings, unknown pragmas and vector ABI notes, GCC 12 cannot silence
// here: cuda_kernels/tools/build_config.py passes -Wno-unknown-pragmas -Wno-psabi.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#if defined(CPU_CAPABILITY_AVX512)
#pragma GCC push_options
// torch's AVX512 flags (-mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma) plus what they imply; capability.cpp
// checks this same list on the CPU before it picks this build.
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#define CPU_CAPABILITY AVX512
#define __AVX__ 1
#define __AVX2__ 1
#define __AVX512F__ 1
#include <sleef.h>
#undef __AVX__
#undef __AVX2__
#undef __AVX512F__
#elif defined(CPU_CAPABILITY_AVX2)
#pragma GCC push_options
// torch's AVX2 flags (-mavx2 -mfma -mf16c); capability.cpp checks the same list on the CPU.
#pragma GCC target("avx2,fma,f16c")
#define CPU_CAPABILITY AVX2
#define __AVX__ 1
#define __AVX2__ 1
#include <sleef.h>
#undef __AVX__
#undef __AVX2__
#else
#define CPU_CAPABILITY DEFAULT
#endif

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
