// matmul(a, b) on CUDA: validation, allocation and the choice of a kernel from the ladder in csrc/cuda/matmul/.
//
// variant = 0 picks the fastest step for the shape; variant = N forces ladder step N (tests and the benchmark
// use this to cover and time every step).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAGuard.h>

#include <iterator>
#include <string>

#include "checks.h"
#include "cuda/matmul/ladder.h"
#include "ops.h"

namespace cuda_kernels {
namespace {

using matmul_ladder::Step;

// The ladder, in order. Add a step: write csrc/cuda/matmul/NN_name.cu, declare its launcher in ladder.h,
// and list it here.
constexpr Step kLadder[] = {
    {1, "01_tiled", matmul_ladder::kAnyStrides, &matmul_ladder::launch_01_tiled},
};
constexpr int kNumSteps = static_cast<int>(std::size(kLadder));

// The step used for variant = 0.
const Step& pick_step(int64_t /*M*/, int64_t /*N*/, int64_t /*K*/) {
  return kLadder[kNumSteps - 1];
}

std::string variant_list() {
  std::string s;
  for (const Step& st : kLadder) s += (s.empty() ? "" : ", ") + std::to_string(st.variant) + " (" + st.name + ")";
  return s;
}

}  // namespace

std::vector<std::pair<int64_t, std::string>> matmul_cuda_variants() {
  std::vector<std::pair<int64_t, std::string>> out;
  for (const Step& st : kLadder) out.emplace_back(st.variant, st.name);
  return out;
}

at::Tensor matmul_cuda(const at::Tensor& a_in, const at::Tensor& b_in, int64_t variant) {
  check_matmul_inputs(a_in, b_in);
  TORCH_CHECK(variant >= 0 && variant <= kNumSteps, "cuda_kernels.matmul: unknown variant ", variant,
              "; use 0 (auto) or one of ", variant_list());
  const c10::cuda::CUDAGuard guard(a_in.device());
  const int64_t M = a_in.size(0), K = a_in.size(1), N = b_in.size(1);
  if (K == 0) return at::zeros({M, N}, a_in.options());  // an empty sum is 0, as in torch.mm
  at::Tensor c = at::empty({M, N}, a_in.options());
  if (M == 0 || N == 0) return c;
  const Step& step = variant == 0 ? pick_step(M, N, K) : kLadder[variant - 1];
  const bool row_major = step.requirements & matmul_ladder::kRowMajorInputs;
  const at::Tensor a = row_major ? a_in.contiguous() : a_in;
  const at::Tensor b = row_major ? b_in.contiguous() : b_in;
  step.launch(a, b, c);
  return c;
}

}  // namespace cuda_kernels
