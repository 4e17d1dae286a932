// Which build of the CPU kernels runs: DEFAULT (baseline ISA, any CPU), AVX2 or AVX512.
//
// Kernels written with at::vec::Vectorized are compiled once per capability, the way torch compiles its own CPU
// kernels (csrc/cpu/vec_isa_begin.h explains how), and the op picks one at run time with capability(): torch's own
// choice (torch.backends.cpu.get_cpu_capability(), which honours the ATEN_CPU_CAPABILITY=default|avx2|avx512
// environment variable; the Python package passes it in once, at import, through the private op _cpu_capability),
// lowered where this CPU lacks an instruction set our build of that capability uses. Before that (the library
// loaded without the package), the best build this CPU runs.
// The AVX2/AVX512 builds exist on x86-64 with GCC; elsewhere (other CPUs, clang) only DEFAULT is compiled.
#pragma once

#include <string>

// 1: the AVX2/AVX512 builds are compiled. Defining it to 0 (-DCUDA_KERNELS_CPU_X86_KERNELS=0) builds only DEFAULT,
// as on other CPUs: a way to compile the portable path on x86-64.
#ifndef CUDA_KERNELS_CPU_X86_KERNELS
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CUDA_KERNELS_CPU_X86_KERNELS 1
#else
#define CUDA_KERNELS_CPU_X86_KERNELS 0
#endif
#endif

namespace cuda_kernels::cpu {

enum class Capability { kDefault, kAvx2, kAvx512 };

// The capability whose kernels run in this process.
Capability capability();

// Takes torch's choice ("DEFAULT", "AVX2", "AVX512", ...): capability() is then the highest this CPU and torch's
// choice both allow.
void set_torch_choice(const std::string& torch_choice);

// "DEFAULT", "AVX2" or "AVX512", torch's spelling (torch.backends.cpu.get_cpu_capability()).
const char* capability_name(Capability capability);

}  // namespace cuda_kernels::cpu
