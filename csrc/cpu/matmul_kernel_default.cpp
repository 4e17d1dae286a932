// matmul's blocked kernel for the baseline instruction set (any CPU): matmul_kernel.h, CPU_CAPABILITY DEFAULT.
// No CPU_CAPABILITY_* macro defined: vec_isa_begin.h makes this the DEFAULT build.
// clang-format off: the order is the point (vec_isa_begin.h sets the instruction set for what follows)
#include "vec_isa_begin.h"
#include "matmul_kernel.h"
#include "vec_isa_end.h"
// clang-format on
