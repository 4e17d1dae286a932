// Declarations of every op's per-device implementation. csrc/api.cpp registers them with the dispatcher.
//
// Adding an op: `python -m cuda_kernels.new NAME` writes an elementwise one in every place (README, "Adding a
// kernel"). By hand: declare its CPU and CUDA functions here, implement them in csrc/cpu/<op>.cpp and
// csrc/cuda/<op>.cu (kernels + a launcher) with its checks/allocation in csrc/cuda/ops.cpp, then add one schema
// and two impl lines in csrc/api.cpp.
//
// Checks and allocation live in .cpp files so that .cu files hold only kernels and their launchers: one place per
// op for validation, and the messages are built by the same host compiler as the rest of the extension.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/matmul/ladder.h"

namespace cuda_kernels {

// square(x) = x * x elementwise. Any shape; float32/float64/float16/bfloat16; result contiguous.
at::Tensor square_cpu(const at::Tensor& x);
// csrc/cuda/ops.cpp: checks, guard, allocation, the dtype switch, then the kernels' launcher (csrc/cuda/square.h).
at::Tensor square_cuda(const at::Tensor& x);

// matmul(a, b) = a @ b for 2-D a (M, K) and b (K, N); accumulates in fp32 (fp64 for fp64).
// variant: 0 picks a kernel; >= 1 forces one step of the CUDA kernel ladder (see csrc/cuda/matmul.cu), which must
// take the dtype and run on the GPU (csrc/checks.h: check_matmul_variant). The CPU has one kernel and accepts only 0.
at::Tensor matmul_cpu(const at::Tensor& a, const at::Tensor& b, int64_t variant);
at::Tensor matmul_cuda(const at::Tensor& a, const at::Tensor& b, int64_t variant);  // csrc/cuda/ops.cpp
// The CUDA ladder's steps as (variant, name), e.g. {1, "01_tiled"}; empty in a CPU-only build.
std::vector<std::pair<int64_t, std::string>> matmul_cuda_variants();
// csrc/cuda/ops.cpp, for cuda_kernels._C (csrc/api.cpp). dtype_name: "float32", "float64", "float16", "bfloat16"
// (or "torch.<name>", "float", "double", "half"), "float32" with TF32 as torch allows it now, "float32+tf32" with
// TF32 allowed; device: a CUDA device index, -1 for the current device.
// The step variant 0 runs for that dtype on that GPU: (variant, name, reason), e.g.
// (8, "08_mma_pipeline", "compute 9.0 (NVIDIA H100 80GB HBM3), bfloat16: ...").
std::tuple<int64_t, std::string, std::string> matmul_cuda_default_step_info(const std::string& dtype_name,
                                                                            int64_t device);
// Why ladder step `variant` cannot run dtype_name on `device` (as check_matmul_variant words it, without the op
// and step prefix); empty when it can.
std::string matmul_cuda_variant_unmet_need(int64_t variant, const std::string& dtype_name, int64_t device);
// The dtypes each step takes: (variant, ["float16", "bfloat16"]), for the fake kernel (cuda_kernels/ops.py).
std::vector<std::pair<int64_t, std::vector<std::string>>> matmul_cuda_variant_dtypes();

// csrc/cuda/matmul.cu: the ladder.
c10::ArrayRef<matmul_ladder::Step> matmul_cuda_ladder();
// The step variant 0 runs for dtype on gpu; *reason (if given) gets why (what was skipped).
// tf32: whether TF32 is allowed for float32 (at::globalContext().allowTF32CuBLAS()). shape: the output's {M, N},
// or nullptr for large outputs (the answer build_info gives).
const matmul_ladder::Step& matmul_cuda_default_step(at::ScalarType dtype, const matmul_ladder::GpuInfo& gpu, bool tf32,
                                                    const int64_t* shape, std::string* reason);
// Runs `step` (its needs checked by the caller): M, N, K >= 1, c allocated (M, N) row-major. Copies a and b to
// row-major first when the step needs it.
void matmul_cuda_launch(const at::Tensor& a, const at::Tensor& b, at::Tensor& c, const matmul_ladder::Step& step);

// cuda_kernels.new: declarations above this line

}  // namespace cuda_kernels
