// matmul's blocked kernel for AVX2: matmul_kernel.h compiled with CPU_CAPABILITY AVX2 (x86-64 GCC only;
// elsewhere this file is empty and matmul.cpp never asks for it).
#include "capability.h"

#if CUDA_KERNELS_CPU_X86_KERNELS
#define CPU_CAPABILITY_AVX2
// clang-format off: the order is the point (vec_isa_begin.h sets the instruction set for what follows)
#include "vec_isa_begin.h"
#include "matmul_kernel.h"
#include "vec_isa_end.h"
// clang-format on
#endif
