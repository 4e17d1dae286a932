// rms_norm(x, w, eps) on CUDA, forward and backward, on the row-wise pattern of csrc/cuda/rowwise.cuh: each row is
// read once into registers, reduced, and written from there. Validation, the device guard, allocation and the
// dtype switch are the host side's (csrc/cuda/ops.cpp); this file holds the kernels and their launchers and
// includes no ATen header.
//
//   forward:   r = rsqrt(mean(x^2) + eps);  y = x * r * w
//   backward:  g = dy * w;  dx = r * g - x * r^3 * mean(g * x);  dw = sum over rows of dy * x * r
//
// Kernels (ncu -k regex:rms_norm): rms_norm_kernel and rms_norm_backward_kernel for rows that fit the registers of
// one row group (rowwise::split_rows), their _long_ twins for longer rows (two passes over x, one block per row),
// and rowwise::column_sum_kernel (csrc/cuda/rowwise.cuh), which sums the backward's per-block dw rows in a fixed
// order (no atomics).
#include <cuda_runtime.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cuda/opmath.h"
#include "cuda/rms_norm.h"
#include "cuda/rowwise.cuh"
#include "cuda/utils.cuh"

namespace cuda_kernels::rms_norm_launch {
namespace {

using rowwise::kLongRowThreads;
using rowwise::kMaxThreadsPerRow;
using rowwise::kMinBlockThreads;
using rowwise::Pack;
using rowwise::Rows;

// Packs of 16 bytes per thread. Bandwidth takes bytes in flight: an SM needs about 64 KB of loads outstanding to
// reach the copy's rate on the H100. The forward holds kPacks packs of x per thread (64 bytes) so that 1024 threads
// (2 blocks of 512, or 4 of 256) fit an SM at 64 registers each (kForwardMinBlocks asks the compiler for that;
// vectorized only, the scalar fallback would spill). float rows also load w's packs up front (kHoldWeight), which
// takes w's latency off the path from the reduction to the store; 16-bit and double rows spill at 64 registers with
// them, so they read w after the reduction, a pack at a time. Rows too long for kPacks at kMaxThreadsPerRow threads
// take twice the packs, then the two-pass kernel.
// The backward holds x, dy and w and sums dw in registers for every element it holds (up to 128 registers, so 512
// threads per SM). Rows of at most kMaxPrefetchThreads threads at kBackwardPacks packs load the next row group's x
// and dy while working on this one (kPrefetch: 64 bytes in flight all the time); types of 8 bytes do not (slower at
// short rows). Other rows take kWideBackwardPacks packs without the prefetch (128 bytes of loads at the top of each
// row group): half the threads per row, so half the barriers of row_sums; then the two-pass kernel, which reads x
// and dy twice. docs/rowwise.md has the measurements and what else was tried.
constexpr int kForwardPacks = rowwise::kPacks;
template <int kP, bool kVectorized>
constexpr int kForwardMinBlocks = kVectorized && kP <= rowwise::kPacks ? 2 : 1;
template <typename T, int kP>
constexpr bool kHoldWeight = sizeof(T) == 4 && kP == kForwardPacks;
constexpr int kBackwardPacks = rowwise::kPacks / 2;
constexpr int kWideBackwardPacks = rowwise::kPacks;
constexpr int kMaxPrefetchThreads = 128;
template <typename T>
constexpr bool kPrefetchable = sizeof(T) <= 4;  // the types that take the prefetching kernel at all
template <int kP>
constexpr bool kPrefetch = kP == kBackwardPacks;

// The backward sums dw over the rows of a block in shared memory when a block holds several rows
// (rowwise::write_partial_row): a row of n <= tpr * kP * kVec columns for every warp, or every slot of tpr >= 32
// threads, of a kMinBlockThreads block.
template <typename T, int kP>
constexpr int kSharedCols = kMinBlockThreads * kP * Pack<T>::kVec;

// The math, one piece per function, which both the in-register and the two-pass kernels call (the kernels are the
// mapping of rows to threads; the scaffold of `python -m cuda_kernels.new NAME --kind rowwise` has the same shape).

// The forward's reduction over the elements a thread holds: x^2 added to sum_sq (row_sum adds the row's threads).
template <int kP, typename T, typename A>
__device__ __forceinline__ void add_squares(const Pack<T> (&xp)[kP], A& sum_sq) {
#pragma unroll
  for (int k = 0; k < kP; ++k) {
#pragma unroll
    for (int e = 0; e < Pack<T>::kVec; ++e) {
      const A v = static_cast<A>(xp[k].v[e]);
      sum_sq += v * v;
    }
  }
}

// y of one pack, in place: x * r * w (r = rsqrt(mean(x^2) + eps)).
template <typename T, typename A>
__device__ __forceinline__ void normalize_pack(Pack<T>& xp, const Pack<T>& wp, bool has_w, A r) {
#pragma unroll
  for (int e = 0; e < Pack<T>::kVec; ++e) {
    A v = static_cast<A>(xp.v[e]) * r;
    if (has_w) v *= static_cast<A>(wp.v[e]);
    xp.v[e] = static_cast<T>(v);
  }
}

// Element e of a pack in the arithmetic type. kByWords: bfloat16 from the pack's 32-bit words (a shift or a mask),
// which the wide backward needs to fit its registers (the element-wise conversion spilled it, and ran at 0.76x);
// the other kernels keep the element-wise one, which was 1% faster in the prefetching backward.
template <bool kByWords, typename T>
__device__ __forceinline__ opmath_type<T> element(const Pack<T>& p, int e) {
  if constexpr (kByWords && std::is_same_v<T, c10::BFloat16>) {
    uint32_t word;
    memcpy(&word, reinterpret_cast<const char*>(&p) + (e / 2) * sizeof word, sizeof word);
    return __uint_as_float(e % 2 == 0 ? word << 16 : word & 0xffff0000u);  // element 0 is the low half
  } else {
    return static_cast<opmath_type<T>>(p.v[e]);
  }
}

// The backward's two reductions over the elements a thread holds: sum x^2 and sum (dy * w) * x.
template <bool kByWords, int kP, typename T, typename A>
__device__ __forceinline__ void backward_sums(const Pack<T> (&xp)[kP], const Pack<T> (&gp)[kP], const Pack<T> (&wp)[kP],
                                              bool has_w, A& sum_sq, A& dot) {
#pragma unroll
  for (int k = 0; k < kP; ++k) {
#pragma unroll
    for (int e = 0; e < Pack<T>::kVec; ++e) {
      const A v = element<kByWords>(xp[k], e);
      A g = element<kByWords>(gp[k], e);
      if (has_w) g *= element<kByWords>(wp[k], e);
      sum_sq += v * v;
      dot += g * v;
    }
  }
}

// dx of one pack, in place of x: (dy * w) * r - x * c, with c = dot * r^3 / n; and each element's term of dw,
// dy * x * r, handed to add_dw(e, term) (the kernels keep dw in registers or in their partial row).
template <bool kByWords, typename T, typename A, typename AddDw>
__device__ __forceinline__ void backward_pack(Pack<T>& xp, const Pack<T>& gp, const Pack<T>& wp, bool has_w, A r, A c,
                                              AddDw&& add_dw) {
#pragma unroll
  for (int e = 0; e < Pack<T>::kVec; ++e) {
    const A v = element<kByWords>(xp, e);
    const A g0 = element<kByWords>(gp, e);
    const A g = has_w ? g0 * element<kByWords>(wp, e) : g0;
    add_dw(e, g0 * v * r);
    xp.v[e] = static_cast<T>(g * r - v * c);
  }
}

template <typename T, int kP, bool kVectorized>
__global__ void __launch_bounds__(kMaxThreadsPerRow, kForwardMinBlocks<kP, kVectorized>)
    rms_norm_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, Rows rows,
                    opmath_type<T> eps) {
  using A = opmath_type<T>;
  __shared__ A scratch[kMaxThreadsPerRow / 32];
  const rowwise::Slot s = rowwise::my_slot(rows.tpr);
  Pack<T> w_held[kHoldWeight<T, kP> ? kP : 1];  // the thread's columns are the same in every row
  if constexpr (kHoldWeight<T, kP>) {
    if (w != nullptr) rowwise::load_row<kP, kVectorized>(w, rows.n, s.lane, rows.tpr, w_held);
  }
  // Every thread runs the same number of iterations (row_sum synchronizes the block); slots past the last row
  // compute on zeros and store nothing.
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * s.slots; base < rows.rows;
       base += static_cast<int64_t>(gridDim.x) * s.slots) {
    const int64_t row = base + s.slot;
    const bool active = row < rows.rows;
    Pack<T> xp[kP];
    rowwise::load_row<kP, kVectorized>(x + (active ? row : 0) * rows.in_stride, active ? rows.n : 0, s.lane, rows.tpr,
                                       xp);
    A sum_sq = 0;
    add_squares(xp, sum_sq);
    const A r = rowwise::inv_sqrt(rowwise::row_sum(sum_sq, rows.tpr, scratch) / static_cast<A>(rows.n) + eps);
    if (!active) continue;
#pragma unroll
    for (int k = 0; k < kP; ++k) {
      Pack<T> wp;
      if constexpr (kHoldWeight<T, kP>) {
        wp = w_held[k];
      } else if (w != nullptr) {
        wp = rowwise::load_pack<kVectorized>(w, rows.n, rowwise::pack_index(s.lane, k, rows.tpr));
      }
      normalize_pack(xp[k], wp, w != nullptr, r);
    }
    rowwise::store_row<kP, kVectorized>(y + row * rows.n, rows.n, s.lane, rows.tpr, xp);
  }
}

// Rows too long for one row group's registers: one block per row, which walks the row in chunks of kLongPacks packs
// per thread (loads issued together, as load_row does) and reads x twice: once for the sum, once for the output.
constexpr int kLongPacks = rowwise::kPacks;

template <typename T, bool kVectorized>
__global__ void __launch_bounds__(kLongRowThreads)
    rms_norm_long_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, Rows rows,
                         opmath_type<T> eps) {
  using A = opmath_type<T>;
  constexpr int kVec = Pack<T>::kVec;
  __shared__ A scratch[kLongRowThreads / 32];
  const int tpr = static_cast<int>(blockDim.x);
  const int64_t chunk = int64_t{kLongPacks} * kVec * tpr;  // elements a chunk covers: a multiple of kVec
  for (int64_t row = blockIdx.x; row < rows.rows; row += gridDim.x) {
    const T* xr = x + row * rows.in_stride;
    A sum_sq = 0;
    for (int64_t c = 0; c < rows.n; c += chunk) {
      Pack<T> xp[kLongPacks];
      rowwise::load_row<kLongPacks, kVectorized>(xr + c, rows.n - c, threadIdx.x, tpr, xp);
      add_squares(xp, sum_sq);
    }
    const A r = rowwise::inv_sqrt(block_sum(sum_sq, scratch) / static_cast<A>(rows.n) + eps);
    for (int64_t c = 0; c < rows.n; c += chunk) {
      Pack<T> xp[kLongPacks], wp[kLongPacks];
      rowwise::load_row<kLongPacks, kVectorized>(xr + c, rows.n - c, threadIdx.x, tpr, xp);
      if (w != nullptr) rowwise::load_row<kLongPacks, kVectorized>(w + c, rows.n - c, threadIdx.x, tpr, wp);
#pragma unroll
      for (int k = 0; k < kLongPacks; ++k) normalize_pack(xp[k], wp[k], w != nullptr, r);
      rowwise::store_row<kLongPacks, kVectorized>(y + row * rows.n + c, rows.n - c, threadIdx.x, tpr, xp);
    }
  }
}

template <typename T, bool kVectorized, int kP>
__global__ void __launch_bounds__(kMaxThreadsPerRow)
    rms_norm_backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ w,
                             T* __restrict__ dx, opmath_type<T>* __restrict__ partial, Rows rows, opmath_type<T> eps) {
  using A = opmath_type<T>;
  constexpr int kVec = Pack<T>::kVec;
  constexpr bool kWide = kP == kWideBackwardPacks;
  __shared__ A scratch[2 * kMaxThreadsPerRow / 32];
  __shared__ A block_dw[kSharedCols<T, kP>];
  rowwise::allow_dependent_launch();  // the grid is one wave: the column sum may take the SMs it leaves
  const rowwise::Slot s = rowwise::my_slot(rows.tpr);
  const A n = static_cast<A>(rows.n);
  Pack<T> wp[kP];
  if (w != nullptr) rowwise::load_row<kP, kVectorized>(w, rows.n, s.lane, rows.tpr, wp);
  // x's and dy's packs of the slot's row in the row group that starts at `base` (zeros past the last row).
  auto load_group = [&](int64_t base, Pack<T>(&xs)[kP], Pack<T>(&gs)[kP]) {
    const int64_t row = base + s.slot;
    const bool active = row < rows.rows;
    const int64_t offset = (active ? row : 0) * rows.in_stride;
    rowwise::load_row<kP, kVectorized>(x + offset, active ? rows.n : 0, s.lane, rows.tpr, xs);
    rowwise::load_row<kP, kVectorized>(dy + offset, active ? rows.n : 0, s.lane, rows.tpr, gs);
  };
  A dw[kP][kVec] = {};  // this thread's columns of dw, summed over its rows
  const int64_t stride = static_cast<int64_t>(gridDim.x) * s.slots;
  Pack<T> xp[kP], gp[kP];
  int64_t base = static_cast<int64_t>(blockIdx.x) * s.slots;
  if constexpr (kPrefetch<kP>) load_group(base, xp, gp);
  for (; base < rows.rows; base += stride) {
    Pack<T> xn[kP], gn[kP];  // the next row group's packs, in flight while this one is worked on
    if constexpr (kPrefetch<kP>) {
      load_group(base + stride, xn, gn);
    } else {
      load_group(base, xp, gp);
    }
    const int64_t row = base + s.slot;
    A sums[2] = {0, 0};  // sum x^2 and sum (dy * w) * x over the row, reduced together (one barrier pair)
    backward_sums<kWide>(xp, gp, wp, w != nullptr, sums[0], sums[1]);
    rowwise::row_sums(sums, rows.tpr, scratch);
    const A r = rowwise::inv_sqrt(sums[0] / n + eps);
    const A c = sums[1] * r * r * r / n;
    if (row < rows.rows) {
#pragma unroll
      for (int k = 0; k < kP; ++k) {
        backward_pack<kWide>(xp[k], gp[k], wp[k], w != nullptr, r, c, [&](int e, A term) { dw[k][e] += term; });
      }
      rowwise::store_row<kP, kVectorized>(dx + row * rows.n, rows.n, s.lane, rows.tpr, xp);
    }
    if constexpr (kPrefetch<kP>) {
#pragma unroll
      for (int k = 0; k < kP; ++k) {
        xp[k] = xn[k];
        gp[k] = gn[k];
      }
    }
  }
  if (w == nullptr) return;
  rowwise::write_partial_row(dw, partial, block_dw, s, rows.tpr, rows.n);
}

// out[first + e] += terms[e] for the columns before n, as 16-byte loads and stores where the rows allow them (a
// pack's kVec sums span whole 16-byte words then); scalar accesses, 16 or 32 bytes apart across a warp, took four
// times the memory transactions. Not rowwise::load_pack: its loads of const, restrict rows may take the
// non-coherent read-only path, and this thread rewrites these words every row.
template <bool kVectorized, int kVec, typename A>
__device__ __forceinline__ void add_to_partial(A* __restrict__ out, int64_t n, int64_t first, const A (&terms)[kVec]) {
  constexpr int kPerWord = rowwise::kPackBytes / static_cast<int>(sizeof(A));
  if constexpr (kVectorized && kVec % kPerWord == 0) {
    if (first >= n) return;
#pragma unroll
    for (int i = 0; i < kVec / kPerWord; ++i) {
      A* at = out + first + i * kPerWord;
      const uint4 bits = *reinterpret_cast<const uint4*>(at);
      A sums[kPerWord];
      memcpy(sums, &bits, sizeof bits);
#pragma unroll
      for (int j = 0; j < kPerWord; ++j) sums[j] += terms[i * kPerWord + j];
      uint4 out_bits;
      memcpy(&out_bits, sums, sizeof out_bits);
      *reinterpret_cast<uint4*>(at) = out_bits;
    }
  } else {
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      if (first + e < n) out[first + e] += terms[e];
    }
  }
}

// The backward of rms_norm_long_kernel: one block per row, two passes in chunks; the block's dw row lives in
// `partial`, which only this block touches, each column always by the same thread.
template <typename T, bool kVectorized>
__global__ void __launch_bounds__(kLongRowThreads)
    rms_norm_backward_long_kernel(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ w,
                                  T* __restrict__ dx, opmath_type<T>* __restrict__ partial, Rows rows,
                                  opmath_type<T> eps) {
  using A = opmath_type<T>;
  constexpr int kVec = Pack<T>::kVec;
  constexpr int kP = kLongPacks / 2;  // x, dy and w: as many bytes in flight as the forward's chunks
  __shared__ A scratch[kLongRowThreads / 32];
  rowwise::allow_dependent_launch();
  const int tpr = static_cast<int>(blockDim.x);
  const int64_t chunk = int64_t{kP} * kVec * tpr;
  const A n = static_cast<A>(rows.n);
  A* out = partial + static_cast<int64_t>(blockIdx.x) * rows.n;
  if (w != nullptr) {
    for (int64_t col = threadIdx.x; col < rows.n; col += blockDim.x) out[col] = 0;
    __syncthreads();  // the zeros are written by other threads than those that add to them below
  }
  for (int64_t row = blockIdx.x; row < rows.rows; row += gridDim.x) {
    const T* xr = x + row * rows.in_stride;
    const T* gr = dy + row * rows.in_stride;
    A sum_sq = 0, dot = 0;
    for (int64_t c = 0; c < rows.n; c += chunk) {
      Pack<T> xp[kP], gp[kP], wp[kP];
      rowwise::load_row<kP, kVectorized>(xr + c, rows.n - c, threadIdx.x, tpr, xp);
      rowwise::load_row<kP, kVectorized>(gr + c, rows.n - c, threadIdx.x, tpr, gp);
      if (w != nullptr) rowwise::load_row<kP, kVectorized>(w + c, rows.n - c, threadIdx.x, tpr, wp);
      backward_sums<false>(xp, gp, wp, w != nullptr, sum_sq, dot);
    }
    sum_sq = block_sum(sum_sq, scratch);
    dot = block_sum(dot, scratch);
    const A r = rowwise::inv_sqrt(sum_sq / n + eps);
    const A c_dot = dot * r * r * r / n;
    for (int64_t c = 0; c < rows.n; c += chunk) {
      Pack<T> xp[kP], gp[kP], wp[kP];
      rowwise::load_row<kP, kVectorized>(xr + c, rows.n - c, threadIdx.x, tpr, xp);
      rowwise::load_row<kP, kVectorized>(gr + c, rows.n - c, threadIdx.x, tpr, gp);
      if (w != nullptr) rowwise::load_row<kP, kVectorized>(w + c, rows.n - c, threadIdx.x, tpr, wp);
#pragma unroll
      for (int k = 0; k < kP; ++k) {
        const int64_t first = c + rowwise::pack_index(threadIdx.x, k, tpr) * kVec;  // the pack's first column
        A terms[kVec];
        backward_pack<false>(xp[k], gp[k], wp[k], w != nullptr, r, c_dot, [&](int e, A term) { terms[e] = term; });
        if (w != nullptr) add_to_partial<kVectorized>(out, rows.n, first, terms);
      }
      rowwise::store_row<kP, kVectorized>(dx + row * rows.n + c, rows.n - c, threadIdx.x, tpr, xp);
    }
  }
}

// The backward's split of the rows, and which kernel it takes: kBackwardPacks packs a thread while a row takes at
// most kMaxPrefetchThreads threads (kPrefetchable types), else kWideBackwardPacks (`wide`), else the two-pass
// kernel (long_row).
struct BackwardSplit {
  Rows rows;
  bool wide = false;
};
template <typename T>
BackwardSplit backward_split(const Rows& rows_in) {
  if (const Rows rows = rowwise::split_rows(rows_in, kBackwardPacks, sizeof(T));
      kPrefetchable<T> && !rows.long_row && rows.tpr <= kMaxPrefetchThreads) {
    return {rows, false};
  }
  const Rows wide = rowwise::split_rows(rows_in, kWideBackwardPacks, sizeof(T));
  return {wide, !wide.long_row};
}

// Calls f(kernel, threads, slots) with the backward kernel of `split` as a compile-time constant (kernel.value, so
// that resident_blocks caches per kernel), its block size and its rows per block.
template <auto kKernel>
using KernelConstant = std::integral_constant<decltype(kKernel), kKernel>;
template <typename T, typename F>
decltype(auto) with_backward_kernel(const BackwardSplit& split, F&& f) {
  return rowwise::with_vectorized(split.rows.vectorized, [&](auto vec) {
    if (split.rows.long_row)
      return f(KernelConstant<&rms_norm_backward_long_kernel<T, vec.value>>{}, kLongRowThreads, 1);
    const int threads = rowwise::block_threads(split.rows.tpr);
    if constexpr (kPrefetchable<T>) {  // (not instantiated for the others, which never take it)
      if (!split.wide) {
        return f(KernelConstant<&rms_norm_backward_kernel<T, vec.value, kBackwardPacks>>{}, threads,
                 threads / split.rows.tpr);
      }
    }
    return f(KernelConstant<&rms_norm_backward_kernel<T, vec.value, kWideBackwardPacks>>{}, threads,
             threads / split.rows.tpr);
  });
}

// The grid of the backward (one partial row per block): every row group once, at most one wave of resident blocks.
template <typename T>
int64_t backward_grid(const BackwardSplit& split, int device) {
  return with_backward_kernel<T>(split, [&](auto kernel, int threads, int slots) -> int64_t {
    return rowwise::row_grid(split.rows.rows, slots,
                             rowwise::resident_blocks<decltype(kernel)::value>(device, threads));
  });
}

}  // namespace

template <typename T>
cudaError_t forward(const T* x, const T* w, T* y, const Rows& rows_in, double eps, int /*device*/,
                    cudaStream_t stream) {
  using A = opmath_type<T>;
  constexpr int kP = kForwardPacks;
  // One block per row group (no persistent loop: its blocks would drift apart in memory, as square's did); the
  // kernel's grid stride covers grids past CUDA's limit.
  auto launch = [&](auto kernel, const Rows& rows) {
    const int threads = rowwise::block_threads(rows.tpr);
    const auto grid =
        static_cast<unsigned>(std::min<int64_t>(ceil_div<int64_t>(rows.rows, threads / rows.tpr), kMaxGridX));
    kernel<<<grid, threads, 0, stream>>>(x, w, y, rows, static_cast<A>(eps));
  };
  rowwise::with_vectorized(rows_in.vectorized, [&](auto vec) {
    if (const Rows rows = rowwise::split_rows(rows_in, kP, sizeof(T)); !rows.long_row) {
      launch(rms_norm_kernel<T, kP, vec.value>, rows);
    } else if (const Rows wide = rowwise::split_rows(rows_in, 2 * kP, sizeof(T)); !wide.long_row) {
      launch(rms_norm_kernel<T, 2 * kP, vec.value>, wide);
    } else {
      const auto grid = static_cast<unsigned>(std::min<int64_t>(rows_in.rows, kMaxGridX));
      rms_norm_long_kernel<T, vec.value><<<grid, kLongRowThreads, 0, stream>>>(x, w, y, rows, static_cast<A>(eps));
    }
  });
  return cudaGetLastError();
}

template <typename T>
int64_t partial_rows(const Rows& rows, int device) {
  return backward_grid<T>(backward_split<T>(rows), device);
}

template <typename T>
cudaError_t backward(const T* dy, const T* x, const T* w, T* dx, T* dw, opmath_type<T>* partial, const Rows& rows_in,
                     double eps, int device, cudaStream_t stream) {
  using A = opmath_type<T>;
  const BackwardSplit split = backward_split<T>(rows_in);
  const int64_t grid = backward_grid<T>(split, device);
  with_backward_kernel<T>(split, [&](auto kernel, int threads, int /*slots*/) {
    constexpr auto kKernel = decltype(kernel)::value;
    kKernel<<<static_cast<unsigned>(grid), threads, 0, stream>>>(dy, x, w, dx, partial, split.rows,
                                                                 static_cast<A>(eps));
  });
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess || w == nullptr) return err;
  return rowwise::sum_partial_rows(partial, grid, split.rows.n, dw, device, stream);
}

// The dtypes the host side dispatches to.
#define CUDA_KERNELS_RMS_NORM_INSTANTIATE(T)                                                                        \
  template cudaError_t forward<T>(const T*, const T*, T*, const Rows&, double, int, cudaStream_t);                  \
  template int64_t partial_rows<T>(const Rows&, int);                                                               \
  template cudaError_t backward<T>(const T*, const T*, const T*, T*, T*, opmath_type<T>*, const Rows&, double, int, \
                                   cudaStream_t);
CUDA_KERNELS_RMS_NORM_INSTANTIATE(float)
CUDA_KERNELS_RMS_NORM_INSTANTIATE(double)
CUDA_KERNELS_RMS_NORM_INSTANTIATE(c10::Half)
CUDA_KERNELS_RMS_NORM_INSTANTIATE(c10::BFloat16)
#undef CUDA_KERNELS_RMS_NORM_INSTANTIATE

}  // namespace cuda_kernels::rms_norm_launch
