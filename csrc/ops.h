// Declarations of every op's per-device implementation. csrc/api.cpp registers them with the dispatcher.
//
// Adding an op: declare its CPU and CUDA functions here, implement them in csrc/cpu/<op>.cpp and
// csrc/cuda/<op>.cu (kernels + a launcher) with its checks/allocation in csrc/cuda/ops.cpp, then add one schema
// and two impl lines in csrc/api.cpp.
//
// Checks and allocation live in .cpp files so that .cu files hold only kernels and their launchers: one place per
// op for validation, and the messages are built by the same host compiler as the rest of the extension.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace cuda_kernels {

// square(x) = x * x elementwise. Any shape; float32/float64/float16/bfloat16; result contiguous.
at::Tensor square_cpu(const at::Tensor& x);
at::Tensor square_cuda(const at::Tensor& x);                    // csrc/cuda/ops.cpp: checks, guard, allocation, then:
void square_cuda_launch(const at::Tensor& x, at::Tensor& out);  // csrc/cuda/square.cu (x.numel() >= 1)

// matmul(a, b) = a @ b for 2-D a (M, K) and b (K, N); accumulates in fp32 (fp64 for fp64).
// variant: 0 picks the fastest kernel for the shape; >= 1 forces one step of the CUDA kernel ladder
// (see csrc/cuda/matmul.cu). The CPU has one kernel and accepts only 0.
at::Tensor matmul_cpu(const at::Tensor& a, const at::Tensor& b, int64_t variant);
at::Tensor matmul_cuda(const at::Tensor& a, const at::Tensor& b, int64_t variant);  // csrc/cuda/ops.cpp
// The CUDA ladder's steps as (variant, name), e.g. {1, "01_tiled"}; empty in a CPU-only build.
std::vector<std::pair<int64_t, std::string>> matmul_cuda_variants();
// csrc/cuda/matmul.cu: the ladder. M, N, K >= 1, c allocated (M, N) row-major, variant in [0, num_variants].
void matmul_cuda_launch(const at::Tensor& a, const at::Tensor& b, at::Tensor& c, int64_t variant);
int64_t matmul_cuda_num_variants();
const char* matmul_cuda_variant_name(int64_t variant);

}  // namespace cuda_kernels
