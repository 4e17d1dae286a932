// cuda_check (csrc/cuda/errors.h): a CUDA error worded by torch's own check, through its C shim, device-side
// assertion details included. Compiled once, by the host compiler, so the kernel files need not parse torch's
// headers.
#include "cuda/errors.h"

#include <torch/csrc/stable/c/shim.h>

#include <stdexcept>
#include <string>

namespace cuda_kernels {

void cuda_check(cudaError_t err, const char* file, const char* function, int line) {
  if (err == cudaSuccess) return;
  char* message = nullptr;
  torch_c10_cuda_check_msg(static_cast<int32_t>(err), file, function, static_cast<uint32_t>(line),
                           /*include_device_assertions=*/true, &message);
  if (message == nullptr) return;
  std::string text(message);
  torch_c10_cuda_free_error_msg(message);
  throw std::runtime_error(text);
}

}  // namespace cuda_kernels
