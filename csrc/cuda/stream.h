// The current CUDA stream of a device, as the kernels' launchers take it, through torch's C shim: the stable ABI
// has no CUDAStream class (its accelerator Stream's id() is not a cudaStream_t), so this is what
// c10::cuda::getCurrentCUDAStream(device).stream() was. Host files only.
#pragma once

#include <cuda_runtime_api.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/macros.h>

namespace cuda_kernels {

inline cudaStream_t current_stream(int device) {
  void* stream = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(device, &stream));
  return static_cast<cudaStream_t>(stream);
}

}  // namespace cuda_kernels
