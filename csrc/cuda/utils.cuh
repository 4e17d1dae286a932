// Small helpers shared by the CUDA kernels. Only light ATen/c10 headers: never torch/extension.h in .cu files
// (it alone doubles a kernel file's compile time).
#pragma once

#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace cuda_kernels {

template <typename T>
__host__ __device__ constexpr T ceil_div(T a, T b) {
  return (a + b - 1) / b;
}

// Multiprocessor count of `device`, read once per device and cached (cudaDeviceGetAttribute is cheap but not free).
inline int sm_count(int device) {
  constexpr int kMaxDevices = 64;
  static int cache[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices) {
    int n = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    return n;
  }
  if (cache[device] == 0) {
    int n = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    cache[device] = n;
  }
  return cache[device];
}

inline bool is_aligned(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

}  // namespace cuda_kernels
