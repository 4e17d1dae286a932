// Small helpers shared by the CUDA kernels. No ATen or c10 headers (csrc/cuda/matmul/args.h says why): errors go
// through csrc/cuda/errors.h.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "cuda/errors.h"

namespace cuda_kernels {

template <typename T>
__host__ __device__ constexpr T ceil_div(T a, T b) {
  return (a + b - 1) / b;
}

namespace detail {
// cudaDeviceGetAttribute(kAttr, device), read once per device and cached (cheap, but not free on every launch).
template <cudaDeviceAttr kAttr>
int cached_device_attribute(int device) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices] = {};  // 0 = not read yet; racing first reads store the same value
  const bool cacheable = device >= 0 && device < kMaxDevices;
  if (cacheable) {
    const int cached = cache[device].load(std::memory_order_relaxed);
    if (cached != 0) return cached;
  }
  int value = 0;
  CUDA_KERNELS_CUDA_CHECK(cudaDeviceGetAttribute(&value, kAttr, device));
  if (cacheable) cache[device].store(value, std::memory_order_relaxed);
  return value;
}
}  // namespace detail

// Multiprocessor (SM) count of `device`.
inline int sm_count(int device) {
  return detail::cached_device_attribute<cudaDevAttrMultiProcessorCount>(device);
}

// Blocks of `threads_per_block` threads that the whole GPU runs at once (one "wave"): SMs x resident blocks per SM,
// assuming the thread count per SM is the binding limit (true for kernels under 32 registers per thread and
// without shared memory, such as square_kernel; check ptxas -v before using it for another kernel).
inline int64_t blocks_per_wave(int device, int threads_per_block) {
  const int per_sm =
      std::min(detail::cached_device_attribute<cudaDevAttrMaxThreadsPerMultiProcessor>(device) / threads_per_block,
               detail::cached_device_attribute<cudaDevAttrMaxBlocksPerMultiprocessor>(device));
  return int64_t{sm_count(device)} * std::max(per_sm, 1);
}

inline bool is_aligned(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

#ifdef __CUDACC__  // device code: the host compiler also reads this file (csrc/cuda/ops.cpp)
// Sums v over each aligned group of `width` consecutive lanes of a warp (width a power of two, 1 to 32), by
// butterfly shuffles: every lane of a group gets the group's sum, the same bits in each. All 32 lanes must call it.
template <typename T>
__device__ __forceinline__ T warp_group_sum(T v, int width) {
  for (int offset = width / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sums v over the block's threads: within warps by shuffles, then the warps' sums in warp order (so the result is
// the same bits every run). `scratch` holds blockDim.x / 32 values of shared memory. Every thread gets the sum; all
// the block's threads must call it (it synchronizes), and scratch is free again when it returns.
template <typename T>
__device__ T block_sum(T v, T* scratch) {
  v = warp_group_sum(v, 32);
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) scratch[warp] = v;
  __syncthreads();
  T sum = scratch[0];
  for (int i = 1; i < static_cast<int>(blockDim.x / 32); ++i) sum += scratch[i];
  __syncthreads();
  return sum;
}
#endif  // __CUDACC__

// CUDA's limit on gridDim.x.
constexpr int64_t kMaxGridX = 2147483647;
constexpr int64_t kMaxGridZ = 65535;  // CUDA's limit on gridDim.z (and gridDim.y)

// Lets kKernel use `bytes` of dynamic shared memory on `device` (above 48 KiB a kernel must opt in), once per device
// and kernel. (The Hopper steps have hopper::opt_in_smem, which returns the error instead: the standalone harness
// compiles them without c10.)
template <auto kKernel>
void opt_in_dynamic_smem(std::size_t bytes, int device) {
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> done[kMaxDevices] = {};
  if (device < kMaxDevices && done[device].load(std::memory_order_relaxed)) return;
  CUDA_KERNELS_CUDA_CHECK(
      cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  if (device < kMaxDevices) done[device].store(true, std::memory_order_relaxed);
}

// The virtual architecture (major * 10 + minor: the __CUDA_ARCH__ / 10 its device code saw) of the code of kKernel
// that runs on the current device, once per device and kernel: an H100 runs a binary built for sm_80 only through
// its compute_80 code, so whether a kernel may use an sm_90 feature (clusters) is a question for the binary, not
// for the GPU.
template <auto kKernel>
int kernel_ptx_version(int device) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices] = {};  // 0 = not read yet
  if (device < kMaxDevices) {
    const int cached = cache[device].load(std::memory_order_relaxed);
    if (cached != 0) return cached;
  }
  cudaFuncAttributes attr{};
  CUDA_KERNELS_CUDA_CHECK(cudaFuncGetAttributes(&attr, kKernel));
  if (device < kMaxDevices) cache[device].store(attr.ptxVersion, std::memory_order_relaxed);
  return attr.ptxVersion;
}

}  // namespace cuda_kernels
