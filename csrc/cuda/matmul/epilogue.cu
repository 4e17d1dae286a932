// linear's epilogue as a pass of its own: for the matmul kernels that do not apply bias and activation as they store
// C (every kernel but 12_hopper_gemm), and for swiglu, whose two halves of a row live in different tiles. The math is
// csrc/epilogue.h's, in the arithmetic type (float, double for float64), rounded once.
#include <cuda_runtime.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cuda/errors.h"
#include "cuda/matmul/args.h"
#include "cuda/opmath.h"
#include "cuda/utils.cuh"
#include "epilogue.h"

namespace cuda_kernels::matmul_ladder {
namespace {

constexpr int kThreads = 256;
constexpr int kVecBytes = 16;            // one 16-byte access per thread and operand when the rows allow it
constexpr int64_t kMaxBlocks = 1 << 16;  // a grid-stride loop covers the rest

// kVec elements of T moved as one 16-byte access when kVectorized, else one by one.
template <typename T, int kVec>
struct Chunk {
  T v[kVec];
};
template <bool kVectorized, typename T, int kVec>
__device__ __forceinline__ Chunk<T, kVec> load_chunk(const T* p) {
  Chunk<T, kVec> c;
  if constexpr (kVectorized) {
    const uint4 bits = *reinterpret_cast<const uint4*>(p);
    memcpy(&c, &bits, sizeof bits);
  } else {
#pragma unroll
    for (int e = 0; e < kVec; ++e) c.v[e] = p[e];
  }
  return c;
}
template <bool kVectorized, typename T, int kVec>
__device__ __forceinline__ void store_chunk(T* p, const Chunk<T, kVec>& c) {
  if constexpr (kVectorized) {
    uint4 bits;
    memcpy(&bits, &c, sizeof bits);
    *reinterpret_cast<uint4*>(p) = bits;
  } else {
#pragma unroll
    for (int e = 0; e < kVec; ++e) p[e] = c.v[e];
  }
}

// c = act(c + bias) over an M x N row-major matrix, kVec columns per thread and step (N % kVec == 0).
template <typename T, int kVec, bool kVectorized, Activation kAct>
__global__ void __launch_bounds__(kThreads)
    epilogue_kernel(T* __restrict__ c, int64_t M, int64_t N, const T* __restrict__ bias) {
  using A = opmath_type<T>;
  const int64_t chunks_per_row = N / kVec;
  const int64_t chunks = M * chunks_per_row;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < chunks; i += int64_t{gridDim.x} * kThreads) {
    const int64_t col = i % chunks_per_row * kVec;  // the chunk's first column
    auto z = load_chunk<kVectorized, T, kVec>(c + i * kVec);
    Chunk<T, kVec> b;
    if (bias != nullptr) b = load_chunk<kVectorized, T, kVec>(bias + col);
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const A v = static_cast<A>(z.v[e]) + (bias != nullptr ? static_cast<A>(b.v[e]) : A(0));
      z.v[e] = static_cast<T>(activate<kAct>(v));
    }
    store_chunk<kVectorized, T, kVec>(c + i * kVec, z);
  }
}

// out[m][n] = silu(z[m][n]) * z[m][n + F] with z = c + bias, F = N / 2; kVec output columns per thread and step
// (F % kVec == 0).
template <typename T, int kVec, bool kVectorized>
__global__ void __launch_bounds__(kThreads)
    swiglu_kernel(const T* __restrict__ c, int64_t M, int64_t N, const T* __restrict__ bias, T* __restrict__ out) {
  using A = opmath_type<T>;
  const int64_t F = N / 2;
  const int64_t chunks_per_row = F / kVec;
  const int64_t chunks = M * chunks_per_row;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < chunks; i += int64_t{gridDim.x} * kThreads) {
    const int64_t row = i / chunks_per_row;
    const int64_t col = (i - row * chunks_per_row) * kVec;  // the chunk's first output column
    const auto gate = load_chunk<kVectorized, T, kVec>(c + row * N + col);
    const auto up = load_chunk<kVectorized, T, kVec>(c + row * N + F + col);
    Chunk<T, kVec> bg, bu;
    if (bias != nullptr) {
      bg = load_chunk<kVectorized, T, kVec>(bias + col);
      bu = load_chunk<kVectorized, T, kVec>(bias + F + col);
    }
    Chunk<T, kVec> y;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const A g = static_cast<A>(gate.v[e]) + (bias != nullptr ? static_cast<A>(bg.v[e]) : A(0));
      const A u = static_cast<A>(up.v[e]) + (bias != nullptr ? static_cast<A>(bu.v[e]) : A(0));
      y.v[e] = static_cast<T>(activate<Activation::kSilu>(g) * u);
    }
    store_chunk<kVectorized, T, kVec>(out + row * F + col, y);
  }
}

unsigned grid_for(int64_t chunks) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(ceil_div<int64_t>(chunks, kThreads), kMaxBlocks)));
}

// Whether every pointer is 16-byte aligned (nullptr counts as aligned).
bool aligned(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers) {
    if (p != nullptr && !is_aligned(p, kVecBytes)) return false;
  }
  return true;
}

}  // namespace

void apply_epilogue(Dtype dtype, void* c, int64_t M, int64_t N, const void* bias, Activation activation,
                    CUstream_st* stream) {
  if (M == 0 || N == 0 || (bias == nullptr && activation == Activation::kNone)) return;
  dispatch_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    constexpr int kVec = kVecBytes / static_cast<int>(sizeof(T));
    T* cp = static_cast<T*>(c);
    const T* bp = static_cast<const T*>(bias);
    with_activation(activation, [&](auto act) {
      if (N % kVec == 0 && aligned({c, bias})) {
        epilogue_kernel<T, kVec, true, act.value><<<grid_for(M * N / kVec), kThreads, 0, stream>>>(cp, M, N, bp);
      } else {
        epilogue_kernel<T, 1, false, act.value><<<grid_for(M * N), kThreads, 0, stream>>>(cp, M, N, bp);
      }
    });
  });
  CUDA_KERNELS_CUDA_CHECK(cudaGetLastError());
}

void apply_swiglu(Dtype dtype, const void* c, int64_t M, int64_t N, const void* bias, void* out, CUstream_st* stream) {
  const int64_t F = N / 2;
  if (M == 0 || F == 0) return;
  dispatch_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    constexpr int kVec = kVecBytes / static_cast<int>(sizeof(T));
    const T* cp = static_cast<const T*>(c);
    const T* bp = static_cast<const T*>(bias);
    T* op = static_cast<T*>(out);
    if (F % kVec == 0 && aligned({c, bias, out})) {
      swiglu_kernel<T, kVec, true><<<grid_for(M * F / kVec), kThreads, 0, stream>>>(cp, M, N, bp, op);
    } else {
      swiglu_kernel<T, 1, false><<<grid_for(M * F), kThreads, 0, stream>>>(cp, M, N, bp, op);
    }
  });
  CUDA_KERNELS_CUDA_CHECK(cudaGetLastError());
}

}  // namespace cuda_kernels::matmul_ladder
