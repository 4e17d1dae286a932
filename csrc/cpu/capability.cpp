// cpu::capability(): torch's CPU capability, capped by the instruction sets this CPU has (capability.h).
#include "capability.h"

#include <atomic>
#include <string>

namespace cuda_kernels::cpu {
namespace {

// The best build this CPU can run.
Capability supported() {
#if CUDA_KERNELS_CPU_X86_KERNELS
  __builtin_cpu_init();  // fills the CPUID data __builtin_cpu_supports reads
  // The instruction sets named in vec_isa_begin.h's #pragma GCC target lines (keep the two in sync).
  const bool has_avx2 =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  const bool has_avx512 = has_avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (has_avx512) return Capability::kAvx512;
  if (has_avx2) return Capability::kAvx2;
#endif
  return Capability::kDefault;
}

std::atomic<Capability>& chosen() {
  static std::atomic<Capability> value{supported()};
  return value;
}

}  // namespace

Capability capability() {
  return chosen().load(std::memory_order_relaxed);
}

void set_torch_choice(const std::string& torch_choice) {
  // torch's own names: DEFAULT, AVX2, AVX512 (and others on other CPUs, ZVECTOR, SVE256, ..., which cap at DEFAULT).
  const Capability wanted = torch_choice.rfind("AVX512", 0) == 0 ? Capability::kAvx512
                            : torch_choice == "AVX2"             ? Capability::kAvx2
                                                                 : Capability::kDefault;
  const Capability cpu = supported();
  chosen().store(static_cast<int>(wanted) < static_cast<int>(cpu) ? wanted : cpu, std::memory_order_relaxed);
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
