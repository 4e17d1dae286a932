// square(x) on CUDA, written to run at the memory roofline. Validation, the device guard, allocation, the dtype
// switch and the input's layout are the host side's, in csrc/cuda/ops.cpp; this file holds the kernels and their
// launcher, and includes no ATen header (csrc/cuda/square.h says why).
//
// Three paths, one kernel name (square_kernel, so `ncu -k square_kernel` catches all of them):
//  * vector:    16-byte loads and stores (LDG.128/STG.128), 2 (4 at mid sizes) loads in flight per thread,
//               one pass: enough blocks to cover the tensor once (no grid-stride loop), a scalar tail;
//  * unaligned: the input is contiguous but its data pointer is not 16-byte aligned (a view with a storage
//               offset): scalar loads, 16-byte stores (the output is freshly allocated, hence aligned);
//  * strided:   non-contiguous input read through sizes/strides (no .contiguous() copy), contiguous output.
// 32-bit indexing when the tensor is small enough, 64-bit otherwise.
#include <cuda_runtime.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <algorithm>
#include <cstdint>

#include "cuda/opmath.h"
#include "cuda/square.h"
#include "cuda/utils.cuh"  // ceil_div, is_aligned

namespace cuda_kernels::square_launch {
namespace {

// Launch shape (docs/benchmarks.md, "square's launch shape", has what was measured behind each choice):
//  * one pass of 128-thread blocks, 2 packs per thread, for large tensors: it matches the device-to-device copy
//    of the same bytes, where 256-thread blocks did not on every H100.
//  * no grid sized from the SM count that strides over the tensor: its blocks drift apart in memory as they
//    loop, and it stays below the copy even with many waves.
//  * the SM count decides the work per thread instead. Mid-size tensors, whose 2-pack grid needs more than one
//    wave (SMs x resident blocks per SM) but whose 4-pack grid fits in kFewWaves waves, get 4 packs per thread:
//    the whole tensor is then in flight at once (torch's float64 kernel does the same). Smaller tensors keep 2
//    packs, which spreads them over more SMs.
constexpr int kBytesPerAccess = 16;  // one 128-bit memory instruction per pack
constexpr int kPacksManyWaves = 2;   // independent packs loaded per thread before the first store: large tensors
constexpr int kPacksFewWaves = 4;    // ... and for mid-size tensors, whose 4-pack grid fits in kFewWaves waves
constexpr int kFewWaves = 2;
constexpr int kStridedUnroll = 2;  // strided path: elements loaded per thread before the first store
// Contiguous kernel: ask for every block an SM can hold (2048 threads on sm_80/sm_90). That caps registers at 32
// per thread, so the resident-block count that blocks_per_wave assumes holds (ptxas -v: 19-32, no spills).
constexpr int kMinBlocksPerSm = 2048 / kThreads;

template <typename scalar_t>
__device__ __forceinline__ scalar_t square_one(scalar_t x) {
  using opmath_t = opmath_type<scalar_t>;  // float for half/bfloat16, as torch.square computes them
  const opmath_t v = static_cast<opmath_t>(x);
  return static_cast<scalar_t>(v * v);
}

// kVec elements that travel as one 16-byte access.
template <typename scalar_t>
struct alignas(kBytesPerAccess) Pack {
  static constexpr int kVec = kBytesPerAccess / sizeof(scalar_t);
  scalar_t v[kVec];
};

// Contiguous input, kUnroll packs per thread. kAlignedIn: the input pointer is 16-byte aligned (vector loads),
// else scalar loads.
template <typename scalar_t, typename index_t, bool kAlignedIn, int kUnroll>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    square_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, index_t n) {
  using P = Pack<scalar_t>;
  constexpr int kVec = P::kVec;
  const index_t n_packs = n / kVec;
  // Block b covers packs [b * kThreads * kUnroll, (b + 1) * kThreads * kUnroll); thread t takes packs
  // t, t + kThreads, ... of it, so each of the kUnroll loads is coalesced across the warp.
  const index_t base = static_cast<index_t>(blockIdx.x) * kThreads * kUnroll + threadIdx.x;
  P buf[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {  // all loads first: kUnroll requests in flight
    const index_t p = base + u * kThreads;
    if (p < n_packs) {
      if constexpr (kAlignedIn) {
        buf[u] = reinterpret_cast<const P*>(x)[p];
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) buf[u].v[e] = x[p * kVec + e];
      }
    }
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const index_t p = base + u * kThreads;
    if (p < n_packs) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) buf[u].v[e] = square_one(buf[u].v[e]);
      reinterpret_cast<P*>(y)[p] = buf[u];
    }
  }
  // Scalar tail: the last n % kVec (< kVec) elements, one per thread of block 0.
  const index_t tail = n_packs * kVec + threadIdx.x;
  if (blockIdx.x == 0 && tail < n) y[tail] = square_one(x[tail]);
}

// Non-contiguous input: output element i (row-major) reads the input at the offset its multi-index gives.
template <typename scalar_t, typename index_t>
__global__ void __launch_bounds__(kThreads)
    square_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, index_t n, StridedLayout layout) {
  const index_t base = static_cast<index_t>(blockIdx.x) * kThreads * kStridedUnroll + threadIdx.x;
  scalar_t buf[kStridedUnroll];
#pragma unroll
  for (int u = 0; u < kStridedUnroll; ++u) {
    const index_t i = base + u * kThreads;
    if (i < n) {
      // Peel the multi-index of i off from the innermost dim outwards, summing index * stride.
      index_t rest = i, offset = 0;
      for (int d = layout.ndim - 1; d >= 0; --d) {
        const index_t size = static_cast<index_t>(layout.sizes[d]);
        offset += (rest % size) * static_cast<index_t>(layout.strides[d]);
        rest /= size;
      }
      buf[u] = x[offset];
    }
  }
#pragma unroll
  for (int u = 0; u < kStridedUnroll; ++u) {
    const index_t i = base + u * kThreads;
    if (i < n) y[i] = square_one(buf[u]);
  }
}

// Blocks to cover work_items once with items_per_thread each (at least 1 block, for the scalar tail). gridDim.x
// allows 2^31 - 1 blocks, far more than the 2^31 * 256 * 2 packs that would need them.
int64_t grid_size(int64_t work_items, int items_per_thread) {
  return std::max<int64_t>(1, ceil_div<int64_t>(work_items, int64_t{kThreads} * items_per_thread));
}

// More than one wave of blocks at kPacksManyWaves packs per thread, at most kFewWaves at kPacksFewWaves.
bool is_mid_size(int64_t n_packs, int64_t blocks_per_wave) {
  return grid_size(n_packs, kPacksManyWaves) > blocks_per_wave &&
         grid_size(n_packs, kPacksFewWaves) <= kFewWaves * blocks_per_wave;
}

template <typename scalar_t, typename index_t, bool kAlignedIn, int kUnroll>
void launch_contiguous(const scalar_t* in, scalar_t* out, int64_t n, cudaStream_t stream) {
  const auto grid = static_cast<unsigned>(grid_size(n / Pack<scalar_t>::kVec, kUnroll));
  square_kernel<scalar_t, index_t, kAlignedIn, kUnroll>
      <<<grid, kThreads, 0, stream>>>(in, out, static_cast<index_t>(n));
}

template <typename scalar_t, typename index_t>
void launch_typed(const scalar_t* in, scalar_t* out, int64_t n, const StridedLayout* strided, int64_t blocks_per_wave,
                  cudaStream_t stream) {
  constexpr bool kIndex32 = sizeof(index_t) == 4;
  if (strided != nullptr) {
    const auto grid = static_cast<unsigned>(grid_size(n, kStridedUnroll));
    square_kernel<scalar_t, index_t><<<grid, kThreads, 0, stream>>>(in, out, static_cast<index_t>(n), *strided);
  } else if (!is_aligned(in, kBytesPerAccess)) {
    // A view with a storage offset: scalar loads (at 4 packs those would spill registers for fp16/bf16).
    launch_contiguous<scalar_t, index_t, false, kPacksManyWaves>(in, out, n, stream);
  } else if (kIndex32 && is_mid_size(n / Pack<scalar_t>::kVec, blocks_per_wave)) {
    // 64-bit indices mean >= 2^30 elements, never a few waves: that kernel is not even compiled.
    launch_contiguous<scalar_t, index_t, true, kIndex32 ? kPacksFewWaves : kPacksManyWaves>(in, out, n, stream);
  } else {
    launch_contiguous<scalar_t, index_t, true, kPacksManyWaves>(in, out, n, stream);
  }
}

}  // namespace

template <typename scalar_t>
cudaError_t launch(const scalar_t* in, scalar_t* out, int64_t n, const StridedLayout* strided, bool index32,
                   int64_t blocks_per_wave, cudaStream_t stream) {
  if (index32) {
    launch_typed<scalar_t, int32_t>(in, out, n, strided, blocks_per_wave, stream);
  } else {
    launch_typed<scalar_t, int64_t>(in, out, n, strided, blocks_per_wave, stream);
  }
  return cudaGetLastError();
}

// The dtypes the host side dispatches to (AT_DISPATCH_FLOATING_TYPES_AND2(kHalf, kBFloat16) in ops.cpp).
template cudaError_t launch<float>(const float*, float*, int64_t, const StridedLayout*, bool, int64_t, cudaStream_t);
template cudaError_t launch<double>(const double*, double*, int64_t, const StridedLayout*, bool, int64_t, cudaStream_t);
template cudaError_t launch<c10::Half>(const c10::Half*, c10::Half*, int64_t, const StridedLayout*, bool, int64_t,
                                       cudaStream_t);
template cudaError_t launch<c10::BFloat16>(const c10::BFloat16*, c10::BFloat16*, int64_t, const StridedLayout*, bool,
                                           int64_t, cudaStream_t);

}  // namespace cuda_kernels::square_launch
