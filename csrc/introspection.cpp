// What the Python package asks the binary, registered as private ops in csrc/api.cpp: how it was built
// (cuda_kernels.build_info()), which build of the CPU kernels runs, and, in a CPU-only build, the answers to the
// CUDA matmul's questions (csrc/cuda/matmul/dispatch.cpp answers them in a CUDA build).
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/capability.h"
#include "ops.h"

#ifndef CUDA_KERNELS_WITH_CUDA
#define CUDA_KERNELS_WITH_CUDA 0
#endif
#ifndef CUDA_KERNELS_DEBUG
#define CUDA_KERNELS_DEBUG 0
#endif
#ifndef CUDA_KERNELS_ARCHS
#define CUDA_KERNELS_ARCHS none
#endif
#define CUDA_KERNELS_STR_(x) #x
#define CUDA_KERNELS_STR(x) CUDA_KERNELS_STR_(x)

#if CUDA_KERNELS_WITH_CUDA
#include <cuda_runtime_api.h>  // CUDART_VERSION
#endif

namespace cuda_kernels {

std::vector<std::string> build_info() {
  const std::string torch_version = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) +
                                    "." + std::to_string(TORCH_VERSION_PATCH);
#if CUDA_KERNELS_WITH_CUDA
  // CUDART_VERSION is e.g. 13000 for 13.0.
  const std::string cuda_version =
      std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10);
#else
  const std::string cuda_version;
#endif
  return {std::string("cuda=") + (CUDA_KERNELS_WITH_CUDA ? "1" : "0"),
          std::string("debug=") + (CUDA_KERNELS_DEBUG ? "1" : "0"),
          std::string("archs_tag=") + CUDA_KERNELS_STR(CUDA_KERNELS_ARCHS), "torch_version=" + torch_version,
          "cuda_version=" + cuda_version};
}

std::string cpu_capability() {
  return cpu::capability_name(cpu::capability());
}

#if !CUDA_KERNELS_WITH_CUDA
std::tuple<std::vector<int64_t>, std::vector<std::string>, std::vector<std::string>> matmul_kernels() {
  return {};
}
std::tuple<int64_t, std::string, std::string> matmul_default_kernel(const std::string&, int64_t) {
  return {0, "", "the extension was built without CUDA"};
}
std::string matmul_unmet_need(int64_t variant, const std::string&, int64_t) {
  TORCH_CHECK(false, "cuda_kernels.matmul: variant ", variant, " is a CUDA kernel; this build has none");
}
std::string matmul_tuning(const std::string&, const std::string&) {
  TORCH_CHECK(false, "cuda_kernels.matmul_tuning: this build has no CUDA kernels to tune");
}
#endif

}  // namespace cuda_kernels
