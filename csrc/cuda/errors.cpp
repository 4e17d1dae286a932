// The one place where kernel files' errors become c10's exceptions (csrc/cuda/errors.h): compiled once, by the
// host compiler, so the kernel files need not parse c10's headers.
#include "cuda/errors.h"

#include <c10/cuda/CUDAException.h>
#include <c10/util/Exception.h>

#include <cstdint>

namespace cuda_kernels {

void raise_error(const std::string& message) {
  C10_THROW_ERROR(Error, message);  // what TORCH_CHECK(false, message) expands to
}

void cuda_check(cudaError_t err, const char* file, const char* function, int line) {
  if (err == cudaSuccess) return;
  c10::cuda::c10_cuda_check_implementation(static_cast<int32_t>(err), file, function, static_cast<uint32_t>(line),
                                           /*include_device_assertions=*/true);
}

}  // namespace cuda_kernels
