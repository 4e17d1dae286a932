// The CUDA ops as registered in csrc/api.cpp: validation, device guard and output allocation (host code built by
// the C++ compiler), then the kernel launchers of csrc/cuda/*.cu.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAGuard.h>

#include <string>

#include "checks.h"
#include "ops.h"

namespace cuda_kernels {

at::Tensor square_cuda(const at::Tensor& x) {
  check_square_input(x);
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  if (x.numel() > 0) square_cuda_launch(x, out);
  return out;
}

std::vector<std::pair<int64_t, std::string>> matmul_cuda_variants() {
  std::vector<std::pair<int64_t, std::string>> out;
  for (int64_t v = 1; v <= matmul_cuda_num_variants(); ++v) out.emplace_back(v, matmul_cuda_variant_name(v));
  return out;
}

at::Tensor matmul_cuda(const at::Tensor& a, const at::Tensor& b, int64_t variant) {
  check_matmul_inputs(a, b);
  if (variant < 0 || variant > matmul_cuda_num_variants()) {
    std::string known;
    for (const auto& [v, name] : matmul_cuda_variants())
      known += (known.empty() ? "" : ", ") + std::to_string(v) + " (" + name + ")";
    TORCH_CHECK(false, "cuda_kernels.matmul: unknown variant ", variant, "; use 0 (auto) or one of ", known);
  }
  const c10::cuda::CUDAGuard guard(a.device());
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  if (K == 0) return at::zeros({M, N}, a.options());  // an empty sum is 0, as in torch.mm
  at::Tensor c = at::empty({M, N}, a.options());
  if (M > 0 && N > 0) matmul_cuda_launch(a, b, c, variant);
  return c;
}

}  // namespace cuda_kernels
