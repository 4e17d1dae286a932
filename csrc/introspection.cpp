// What the Python package asks the binary, registered as private ops in csrc/api.cpp: how it was built
// (cuda_kernels.build_info()) and which build of the CPU kernels runs. The CUDA library answers the CUDA questions,
// the archs among them (csrc/cuda/matmul/dispatch.cpp), so that this library compiles to the same objects in a
// CPU-only and a CUDA build (setup.py keeps one copy of them: cuda_kernels/tools/build_config.py).
#include <torch/headeronly/version.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cpu/capability.h"
#include "ops.h"

#ifndef CUDA_KERNELS_DEBUG
#define CUDA_KERNELS_DEBUG 0
#endif
namespace cuda_kernels {

std::vector<std::string> build_info() {
  // The torch whose headers built this binary, and the oldest torch it runs under (TORCH_TARGET_VERSION: major in
  // bits 56-63, minor in 48-55).
  const std::string built_with = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
                                 std::to_string(TORCH_VERSION_PATCH);
  const std::string target =
      std::to_string((TORCH_TARGET_VERSION >> 56) & 0xff) + "." + std::to_string((TORCH_TARGET_VERSION >> 48) & 0xff);
  return {std::string("debug=") + (CUDA_KERNELS_DEBUG ? "1" : "0"), "torch_version=" + built_with,
          "torch_target=" + target};
}

std::string cpu_capability(std::string torch_choice) {
  if (!torch_choice.empty()) cpu::set_torch_choice(torch_choice);
  return cpu::capability_name(cpu::capability());
}

}  // namespace cuda_kernels
