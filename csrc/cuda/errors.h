// CUDA errors raised from kernel files without torch's headers (see csrc/cuda/matmul/args.h for why they go
// without), worded as torch words them (csrc/cuda/errors.cpp); the other errors are csrc/fail.h's.
#pragma once

#include <cuda_runtime.h>

#include "fail.h"

namespace cuda_kernels {

// As C10_CUDA_CHECK: nothing on cudaSuccess, else the CUDA error (with device-side assertion details, as torch
// words it) thrown as std::runtime_error, naming file, function and line.
void cuda_check(cudaError_t err, const char* file, const char* function, int line);

}  // namespace cuda_kernels

#define CUDA_KERNELS_CUDA_CHECK(expr) ::cuda_kernels::cuda_check((expr), __FILE__, __func__, __LINE__)
// After a <<<...>>> launch, as C10_CUDA_KERNEL_LAUNCH_CHECK.
#define CUDA_KERNELS_LAUNCH_CHECK() CUDA_KERNELS_CUDA_CHECK(cudaGetLastError())
