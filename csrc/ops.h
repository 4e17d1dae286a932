// Declarations of every op's per-device implementation, which csrc/api.cpp registers with the dispatcher.
//
// Adding an op: `python -m cuda_kernels.new NAME [--schema "(...) -> ..."]` writes one in every place (README, "Add
// your own op"), with the C++ types the stable ABI unboxes its schema's types to (optional inputs as std::optional,
// int[] as a HeaderOnlyArrayRef<int64_t>: cuda_kernels/tools/op_schema.py). By hand:
// declare its CPU and CUDA functions here, implement them in csrc/cpu/<op>.cpp and csrc/cuda/ (kernels and a
// launcher in <op>.cu, the checks, guard and allocation in a .cpp), then add its schema and impl lines to
// csrc/api.cpp.
#pragma once

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/util/HeaderOnlyArrayRef.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace cuda_kernels {

using torch::stable::Tensor;
using OptTensor = std::optional<Tensor>;   // an optional input (Tensor? in the schema); as csrc/checks.h
using Grads = std::tuple<Tensor, Tensor>;  // a row-wise backward's (dx, dweight)

// square(x) = x * x elementwise. Any shape; float32/float64/float16/bfloat16; result contiguous.
Tensor square_cpu(const Tensor& x);   // csrc/cpu/square.cpp
Tensor square_cuda(const Tensor& x);  // csrc/cuda/ops.cpp, kernels in csrc/cuda/square.cu

// matmul(a, b) = a @ b for 2-D a (M, K) and b (K, N); accumulates in fp32 (fp64 for fp64).
// variant: 0 picks a kernel; >= 1 forces one kernel of the CUDA table (csrc/cuda/matmul/dispatch.cpp), which must
// take the dtype and run on the GPU. The CPU has one kernel and accepts only 0. allow_tf32: whether float32 may run
// on the tensor cores as TF32 (the Python wrapper passes torch.backends.cuda.matmul.allow_tf32).
Tensor matmul_cpu(const Tensor& a, const Tensor& b, int64_t variant, bool allow_tf32);   // csrc/cpu/matmul.cpp
Tensor matmul_cuda(const Tensor& a, const Tensor& b, int64_t variant, bool allow_tf32);  // csrc/cuda/matmul/

// rms_norm(x, weight, eps) = x * rsqrt(mean(x^2 over the last dim) + eps) * weight, as
// torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps); eps none: the dtype's machine epsilon. Any shape
// with at least one dim, any strides; float32/float64/float16/bfloat16; computed in float32 (float64 for float64).
// rms_norm_backward gives (dx, dweight) for a gradient of its output; dweight is empty without a weight.
Tensor rms_norm_cpu(const Tensor& x, const std::optional<Tensor>& weight, std::optional<double> eps);   // csrc/cpu/
Tensor rms_norm_cuda(const Tensor& x, const std::optional<Tensor>& weight, std::optional<double> eps);  // cuda/ops.cpp
std::tuple<Tensor, Tensor> rms_norm_backward_cpu(const Tensor& grad, const Tensor& x,
                                                 const std::optional<Tensor>& weight, std::optional<double> eps);
std::tuple<Tensor, Tensor> rms_norm_backward_cuda(const Tensor& grad, const Tensor& x,
                                                  const std::optional<Tensor>& weight, std::optional<double> eps);

// linear(x, weight, bias, activation) = activation(x @ weight.T + bias), as torch.nn.functional.linear followed by
// the activation: x (..., K), weight (N, K) as nn.Linear stores it, bias (N,) or none; activation none, "relu",
// "gelu", "gelu_tanh", "silu", or "swiglu" (weight holds the gate rows then the up rows, N even; the result's N / 2
// columns are silu(gate) * up). Result (..., N or N / 2), contiguous; one rounding of the float32 (float64) result.
// allow_tf32: as matmul's. On CUDA the tensor-core kernel applies bias and activation as it stores its tiles.
Tensor linear_cpu(const Tensor& x, const Tensor& weight, const OptTensor& bias,
                  const std::optional<std::string>& activation, bool allow_tf32);  // csrc/cpu/linear.cpp
Tensor linear_cuda(const Tensor& x, const Tensor& weight, const OptTensor& bias,
                   const std::optional<std::string>& activation, bool allow_tf32);  // csrc/cuda/matmul/dispatch.cpp

// cuda_kernels.new: declarations above this line

// What the Python package asks the binary, registered as private ops (csrc/api.cpp).
// csrc/introspection.cpp: how the CPU library was built, as "key=value" strings (the same in a CPU-only and a CUDA
// build: the CUDA library answers for the archs, cuda_archs_tag); the CPU kernels' build that runs, after
// torch's choice (torch.backends.cpu.get_cpu_capability(), which the package passes in once at import).
std::vector<std::string> build_info();
std::string cpu_capability(std::string torch_choice);
// csrc/cuda/matmul/dispatch.cpp, in the CUDA library only.
// The CUDA kernels as (variants, names, dtypes), dtypes comma-separated: ({1, ...}, {"01_tiled", ...},
// {"float32,float64,float16,bfloat16", ...}).
std::tuple<std::vector<int64_t>, std::vector<std::string>, std::vector<std::string>> matmul_kernels();
// The kernel variant 0 runs for a dtype on a CUDA device (-1: the current one), as (variant, name, reason).
// dtype_name: "float32", "float64", "float16", "bfloat16" (or "torch.<name>"); "float32+tf32": float32 with TF32.
std::tuple<int64_t, std::string, std::string> matmul_default_kernel(std::string dtype_name, int64_t device);
// Why kernel `variant` cannot run dtype_name on `device`; empty when it can.
std::string matmul_unmet_need(int64_t variant, std::string dtype_name, int64_t device);
// Sets a tuning knob of the CUDA kernels (csrc/cuda/matmul/tuning.h) and returns its previous value.
std::string matmul_tuning(std::string knob, std::string value);
// The CUDA toolkit the CUDA library was built with, e.g. "13.0".
std::string cuda_build_version();
// The archs the CUDA library was compiled for, as the build's arch tag (cuda_kernels/tools/build_config.py
// arch_tag): "80__90a" for "8.0;9.0a".
std::string cuda_archs_tag();

}  // namespace cuda_kernels
