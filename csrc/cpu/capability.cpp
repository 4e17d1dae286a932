// cpu::capability(): torch's CPU capability, capped by the instruction sets this CPU has (capability.h).
#include "capability.h"

#include <ATen/Version.h>

#include <string>

namespace cuda_kernels::cpu {
namespace {

Capability detect() {
#if CUDA_KERNELS_CPU_X86_KERNELS
  // "AVX512", "AVX2" or "DEFAULT": what torch runs its own kernels with, ATEN_CPU_CAPABILITY included.
  const std::string torch_choice = at::get_cpu_capability();
  __builtin_cpu_init();  // fills the CPUID data __builtin_cpu_supports reads
  // The instruction sets named in vec_isa_begin.h's #pragma GCC target lines (keep the two in sync).
  const bool has_avx2 =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  const bool has_avx512 = has_avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (torch_choice == "AVX512" && has_avx512) return Capability::kAvx512;
  if ((torch_choice == "AVX512" || torch_choice == "AVX2") && has_avx2) return Capability::kAvx2;
#endif
  return Capability::kDefault;
}

}  // namespace

Capability capability() {
  static const Capability chosen = detect();  // thread-safe one-time initialization
  return chosen;
}

const char* capability_name(Capability capability) {
  switch (capability) {
    case Capability::kAvx512:
      return "AVX512";
    case Capability::kAvx2:
      return "AVX2";
    default:
      return "DEFAULT";
  }
}

}  // namespace cuda_kernels::cpu
