// torch_threads() (kernel_api.h): torch's intra-op thread pool through the stable ABI, for the CPU kernel files.
#include <torch/csrc/stable/ops.h>

#include "kernel_api.h"

namespace cuda_kernels::cpu {
namespace {

void stable_parallel_for(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
  torch::stable::parallel_for(begin, end, grain, f);
}

}  // namespace

Parallel torch_threads() {
  return {&stable_parallel_for, static_cast<int64_t>(torch::stable::get_num_threads())};
}

}  // namespace cuda_kernels::cpu
