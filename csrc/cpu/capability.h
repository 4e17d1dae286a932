// Which build of the CPU kernels runs: DEFAULT (baseline ISA, any CPU), AVX2 or AVX512.
//
// Kernels written with at::vec::Vectorized are compiled once per capability, the way torch compiles its own CPU
// kernels (csrc/cpu/vec_isa_begin.h explains how), and the op picks one at run time with capability(): torch's own
// choice (at::get_cpu_capability(), which honours the ATEN_CPU_CAPABILITY=default|avx2|avx512 environment variable,
// read once per process), lowered where this CPU lacks an instruction set our build of that capability uses.
// The AVX2/AVX512 builds exist on x86-64 with GCC; elsewhere (other CPUs, clang) only DEFAULT is compiled.
#pragma once

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

// The capability whose kernels run in this process; computed on the first call.
Capability capability();

// "DEFAULT", "AVX2" or "AVX512", torch's spelling (torch.backends.cpu.get_cpu_capability()).
const char* capability_name(Capability capability);

}  // namespace cuda_kernels::cpu
