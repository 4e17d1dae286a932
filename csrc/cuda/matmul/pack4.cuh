// Four consecutive values moved as one access: the building block of the ladder's vectorized steps (03-06).
#pragma once

namespace cuda_kernels::matmul_ladder {

// Four consecutive values, aligned so that a copy of one is a single 16-byte access for float.
template <typename T>
struct alignas(4 * sizeof(T)) Pack4 {
  T v[4];
};

// Shared-memory copies of 4 aligned values (one 16-byte instruction for float).
template <typename T>
__device__ __forceinline__ Pack4<T> read4(const T* p) {
  return *reinterpret_cast<const Pack4<T>*>(p);
}
template <typename T>
__device__ __forceinline__ void write4(T* p, const Pack4<T>& v) {
  *reinterpret_cast<Pack4<T>*>(p) = v;
}

}  // namespace cuda_kernels::matmul_ladder
