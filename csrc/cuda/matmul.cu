// matmul on CUDA: the choice of a kernel from the ladder in csrc/cuda/matmul/.
// Validation, the device guard and allocation happen before, in csrc/cuda/ops.cpp.
//
// variant = 0 picks the fastest step for the shape; variant = N forces ladder step N (tests and the benchmark
// use this to cover and time every step).
#include <ATen/core/Tensor.h>

#include <iterator>

#include "cuda/matmul/ladder.h"
#include "ops.h"

namespace cuda_kernels {
namespace {

using matmul_ladder::Step;

// The ladder, in order. Add a step: write csrc/cuda/matmul/NN_name.cu, declare its launcher in ladder.h,
// and list it here.
constexpr Step kLadder[] = {
    {1, "01_tiled", matmul_ladder::kAnyStrides, &matmul_ladder::launch_01_tiled},
    {2, "02_blocktile_2d", matmul_ladder::kRowMajorInputs, &matmul_ladder::launch_02_blocktile_2d},
    {3, "03_vectorized", matmul_ladder::kRowMajorInputs, &matmul_ladder::launch_03_vectorized},
    {4, "04_double_buffer", matmul_ladder::kRowMajorInputs, &matmul_ladder::launch_04_double_buffer},
    {5, "05_warptile", matmul_ladder::kRowMajorInputs, &matmul_ladder::launch_05_warptile},
    {6, "06_async_pipeline", matmul_ladder::kRowMajorInputs, &matmul_ladder::launch_06_async_pipeline},
};
constexpr int kNumSteps = static_cast<int>(std::size(kLadder));

// The step used for variant = 0: step 6 at every shape. Measured on the H100 (scripts/tune_matmul.py, float32,
// docs/matmul.md) it is the fastest step from 1 x 4096 x 4096 (its 16-row tiles and split K) through 1024^3
// (split K) to 8192^3; it also handles what the earlier steps would be picked for (tiny M, few tiles) itself.
// (float16/bfloat16 at 4096^3 run ~8% faster on step 3 than on step 6's untuned scalar path; tensor-core
// kernels are the better answer there.)
const Step& pick_step(int64_t /*M*/, int64_t /*N*/, int64_t /*K*/) {
  return kLadder[kNumSteps - 1];
}

}  // namespace

int64_t matmul_cuda_num_variants() {
  return kNumSteps;
}

const char* matmul_cuda_variant_name(int64_t variant) {
  return variant >= 1 && variant <= kNumSteps ? kLadder[variant - 1].name : "";
}

void matmul_cuda_launch(const at::Tensor& a_in, const at::Tensor& b_in, at::Tensor& c, int64_t variant) {
  const int64_t M = a_in.size(0), K = a_in.size(1), N = b_in.size(1);
  const Step& step = variant == 0 ? pick_step(M, N, K) : kLadder[variant - 1];
  const bool row_major = step.requirements & matmul_ladder::kRowMajorInputs;
  const at::Tensor a = row_major ? a_in.contiguous() : a_in;
  const at::Tensor b = row_major ? b_in.contiguous() : b_in;
  step.launch(a, b, c);
}

}  // namespace cuda_kernels
