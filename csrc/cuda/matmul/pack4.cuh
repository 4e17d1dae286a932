// Four consecutive values moved as one access: the building block of the ladder's vectorized steps (03-06),
// with the bounds-checked global loads and stores of steps 3 and 4 and the float32-vector-or-scalar launch choice
// that steps 3-5 share.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/matmul/args.h"
#include "cuda/utils.cuh"

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

// Reads src[row][col .. col+3] of a row-major (rows x cols) matrix as acc_t, zeros outside the matrix.
// kVec: float32, cols % 4 == 0 and src 16-byte aligned, so col (a multiple of 4) is all in or all out.
template <bool kVec, typename acc_t, typename scalar_t>
__device__ __forceinline__ Pack4<acc_t> load4(const scalar_t* src, int64_t row, int64_t col, int64_t rows,
                                              int64_t cols) {
  Pack4<acc_t> out;
  if constexpr (kVec) {
    static_assert(std::is_same_v<scalar_t, float>, "16-byte loads are only used for float32");
    if (row < rows && col < cols) {
      const float4 v = *reinterpret_cast<const float4*>(src + row * cols + col);
      out.v[0] = v.x, out.v[1] = v.y, out.v[2] = v.z, out.v[3] = v.w;
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) out.v[i] = acc_t(0);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out.v[i] = (row < rows && col + i < cols) ? static_cast<acc_t>(src[row * cols + col + i]) : acc_t(0);
    }
  }
  return out;
}

// Writes v to dst[row][col .. col+3] of a row-major (rows x cols) matrix, skipping elements outside it.
template <bool kVec, typename acc_t, typename scalar_t>
__device__ __forceinline__ void store4(scalar_t* dst, int64_t row, int64_t col, int64_t rows, int64_t cols,
                                       const acc_t* v) {
  if (row >= rows) return;
  if constexpr (kVec) {
    if (col < cols) *reinterpret_cast<float4*>(dst + row * cols + col) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (col + i < cols) dst[row * cols + col + i] = static_cast<scalar_t>(v[i]);
    }
  }
}

// Calls launch(scalar_t{}, std::bool_constant<kVec>{}) for the call's dtype: with kVec true for float32 whose rows
// allow 16-byte accesses (pitches K and N multiples of 4, every pointer 16-byte aligned), else with kVec false,
// where the kernel takes scalar, bounds-checked accesses. Steps 3-5 launch their kernel<scalar_t, kVec> through it.
template <typename Launch>
void dispatch_vec4(const Args& args, Launch&& launch) {
  const bool vec = args.dtype == Dtype::kFloat32 && args.K % 4 == 0 && args.N % 4 == 0 && is_aligned(args.a, 16) &&
                   is_aligned(args.b, 16) && is_aligned(args.c, 16);
  if (vec) {
    launch(float{}, std::true_type{});
  } else {
    dispatch_dtype(args.dtype, [&](auto t) { launch(decltype(t){}, std::false_type{}); });
  }
}

}  // namespace cuda_kernels::matmul_ladder
