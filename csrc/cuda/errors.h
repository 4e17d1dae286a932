// Errors raised from kernel files without ATen's headers (see csrc/cuda/matmul/args.h for why they go without):
// the same exception types and messages as c10's TORCH_CHECK and C10_CUDA_CHECK, thrown from csrc/cuda/errors.cpp.
#pragma once

#include <cuda_runtime.h>

#include <sstream>
#include <string>

namespace cuda_kernels {

// Throws c10::Error with `message`, as TORCH_CHECK(false, message) does (Python sees a RuntimeError).
[[noreturn]] void raise_error(const std::string& message);

// As C10_CUDA_CHECK: nothing on cudaSuccess, else the CUDA error (with device-side assertion details) raised as
// c10's CUDA error, naming file, function and line.
void cuda_check(cudaError_t err, const char* file, const char* function, int line);

// TORCH_CHECK(false, ...) without ATen: raises the parts written one after another (with operator<<, as c10 does).
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  raise_error(out.str());
}

}  // namespace cuda_kernels

#define CUDA_KERNELS_CUDA_CHECK(expr) ::cuda_kernels::cuda_check((expr), __FILE__, __func__, __LINE__)
// TORCH_CHECK without ATen: when cond is false, raises the message parts written one after another; like
// TORCH_CHECK, the parts are evaluated only then. E.g.
//   CUDA_KERNELS_CHECK(tiles <= kMaxGridX, "cuda_kernels.matmul: ", M, " x ", N, " output has too many tiles");
#define CUDA_KERNELS_CHECK(cond, ...)               \
  do {                                              \
    if (!(cond)) ::cuda_kernels::fail(__VA_ARGS__); \
  } while (0)
// After a <<<...>>> launch, as C10_CUDA_KERNEL_LAUNCH_CHECK.
#define CUDA_KERNELS_LAUNCH_CHECK() CUDA_KERNELS_CUDA_CHECK(cudaGetLastError())
