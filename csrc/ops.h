// Declarations of every op's per-device implementation, which csrc/api.cpp registers with the dispatcher.
//
// Adding an op: `python -m cuda_kernels.new NAME` writes one in every place (README, "Add your own op"). By hand:
// declare its CPU and CUDA functions here, implement them in csrc/cpu/<op>.cpp and csrc/cuda/ (kernels and a
// launcher in <op>.cu, the checks, guard and allocation in a .cpp), then add its schema and impl lines to
// csrc/api.cpp.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace cuda_kernels {

// square(x) = x * x elementwise. Any shape; float32/float64/float16/bfloat16; result contiguous.
at::Tensor square_cpu(const at::Tensor& x);   // csrc/cpu/square.cpp
at::Tensor square_cuda(const at::Tensor& x);  // csrc/cuda/ops.cpp, kernels in csrc/cuda/square.cu
// square's autograd kernel (csrc/autograd.cpp): records grad * 2 * x, then calls the CPU or CUDA kernel.
at::Tensor square_autograd(const at::Tensor& x);

// matmul(a, b) = a @ b for 2-D a (M, K) and b (K, N); accumulates in fp32 (fp64 for fp64).
// variant: 0 picks a kernel; >= 1 forces one kernel of the CUDA table (csrc/cuda/matmul/dispatch.cpp), which must
// take the dtype and run on the GPU. The CPU has one kernel and accepts only 0.
at::Tensor matmul_cpu(const at::Tensor& a, const at::Tensor& b, int64_t variant);   // csrc/cpu/matmul.cpp
at::Tensor matmul_cuda(const at::Tensor& a, const at::Tensor& b, int64_t variant);  // csrc/cuda/matmul/dispatch.cpp

// cuda_kernels.new: declarations above this line

// What the Python package asks the binary, registered as private ops (csrc/api.cpp).
// csrc/introspection.cpp: how the binary was built, as "key=value" strings; the CPU kernels' build that runs.
std::vector<std::string> build_info();
std::string cpu_capability();
// csrc/cuda/matmul/dispatch.cpp (in a CPU-only build, csrc/introspection.cpp: none, or an error).
// The CUDA kernels as (variants, names, dtypes), dtypes comma-separated: ({1, ...}, {"01_tiled", ...},
// {"float32,float64,float16,bfloat16", ...}).
std::tuple<std::vector<int64_t>, std::vector<std::string>, std::vector<std::string>> matmul_kernels();
// The kernel variant 0 runs for a dtype on a CUDA device (-1: the current one), as (variant, name, reason).
// dtype_name: "float32", "float64", "float16", "bfloat16" (or "torch.<name>"); "float32" takes TF32 as torch allows
// it now, "float32+tf32" with TF32 allowed.
std::tuple<int64_t, std::string, std::string> matmul_default_kernel(const std::string& dtype_name, int64_t device);
// Why kernel `variant` cannot run dtype_name on `device`; empty when it can.
std::string matmul_unmet_need(int64_t variant, const std::string& dtype_name, int64_t device);
// Sets a tuning knob of the CUDA kernels (csrc/cuda/matmul/tuning.h) and returns its previous value.
std::string matmul_tuning(const std::string& knob, const std::string& value);

}  // namespace cuda_kernels
