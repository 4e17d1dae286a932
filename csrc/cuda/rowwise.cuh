// The row-wise pattern: kernels that reduce over the last dimension of x (a norm, a softmax, a loss) and then write
// a row of the same length, with the row held in registers between the reduction and the write, so that x is read
// from memory once. rms_norm.cu is built on it, and so are the ops `python -m cuda_kernels.new NAME --kind rowwise`
// writes; docs/rowwise.md explains the mapping. No ATen or torch header (csrc/cuda/matmul/args.h says why).
//
// A row of n elements is cut into packs of 16 bytes (kPackBytes: one LDG.128 / STG.128) and split among the `tpr`
// threads of a row (threads per row, a power of two). Thread `lane` of the row holds kPacks packs in registers:
// packs lane, lane + tpr, lane + 2 tpr, ..., so each of its kPacks loads is coalesced across the row's threads. A
// block holds blockDim.x / tpr rows ("slots"); blocks walk the rows with a grid stride, so one grid of a few waves
// covers any number of rows. Rows longer than the registers of one row-group hold (long_row) take a two-pass path.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <type_traits>

#include "cuda/opmath.h"
#include "cuda/utils.cuh"

namespace cuda_kernels::rowwise {

constexpr int kPackBytes = 16;  // one 128-bit load or store
constexpr int kPacks = 4;       // packs per thread, by default: 64 bytes of the row in flight per thread
// Threads per row at most: beyond 512 threads a block could no longer give every thread the 128 registers a
// kernel's packs and sums need; longer rows take the two-pass path.
constexpr int kMaxThreadsPerRow = 512;
constexpr int kMinBlockThreads = 256;  // short rows: several rows per block, so a block still has 8 warps
constexpr int kLongRowThreads = 512;   // the two-pass path: one block per row

// kVec elements of T that travel as one 16-byte access.
template <typename T>
struct alignas(kPackBytes) Pack {  // a uint4's bits: load_pack and store_pack move it as one
  static constexpr int kVec = kPackBytes / static_cast<int>(sizeof(T));
  T v[kVec];
};

// Where the rows are, and how a kernel's threads split them. The host side fills in the first four fields (from a
// RowView, csrc/rowwise.h); a launcher adds its split with split_rows.
struct Rows {
  int64_t rows = 0;         // number of rows: the product of x's leading dimensions
  int64_t n = 0;            // elements per row: x's last dimension
  int64_t in_stride = 0;    // elements from one input row to the next (outputs are contiguous: n)
  bool vectorized = false;  // every row of every operand starts 16-byte aligned and n is a whole number of packs
  int tpr = 1;              // threads per row (a power of two); unused by the two-pass path
  bool long_row = false;    // the row does not fit `packs` packs per thread at kMaxThreadsPerRow: two passes
};

// Threads per block for a row of `tpr` threads: at least kMinBlockThreads, so short rows share a block.
inline int block_threads(int tpr) {
  return std::max(tpr, kMinBlockThreads);
}

// `rows` with the split of a kernel that holds `packs` packs of 16 bytes per thread, for elements of `elem_bytes`:
// the fewest threads per row (a power of two) that hold the row, or the two-pass path beyond kMaxThreadsPerRow.
inline Rows split_rows(Rows rows, int packs, int elem_bytes) {
  const int64_t vec = kPackBytes / elem_bytes;
  const int64_t threads = ceil_div<int64_t>(ceil_div<int64_t>(rows.n, vec), packs);
  rows.long_row = threads > kMaxThreadsPerRow;
  rows.tpr = 1;
  while (!rows.long_row && rows.tpr < threads) rows.tpr *= 2;
  return rows;
}

// The kernels' view of rows (a launcher adds its split with split_rows): where they are (`view`: a RowView of
// csrc/rowwise.h, or anything with its rows, n and stride), and whether every operand in `pointers` (nullptr: none)
// allows 16-byte accesses.
template <typename View>
Rows kernel_rows(const View& view, int elem_bytes, std::initializer_list<const void*> pointers) {
  Rows rows;
  rows.rows = view.rows;
  rows.n = view.n;
  rows.in_stride = view.stride;
  const int64_t vec = kPackBytes / elem_bytes;
  rows.vectorized = view.n % vec == 0 && view.stride % vec == 0;
  for (const void* p : pointers) rows.vectorized = rows.vectorized && (p == nullptr || is_aligned(p, kPackBytes));
  return rows;
}

#ifdef __CUDACC__  // device code (and launch helpers): the host side reads only the part above (csrc/cuda/ops.cpp)

// The thread's place in the block: its row slot and its lane within the row.
struct Slot {
  int lane;   // 0 .. tpr - 1
  int slot;   // 0 .. slots - 1: which of the block's rows
  int slots;  // rows per block
};
__device__ __forceinline__ Slot my_slot(int tpr) {
  return {static_cast<int>(threadIdx.x) & (tpr - 1), static_cast<int>(threadIdx.x) / tpr,
          static_cast<int>(blockDim.x) / tpr};
}

// One 16-byte global store (STG.128). Inline PTX, because the compiler split plain Pack<T> or uint4 stores of a
// thread's later packs into 2- and 4-byte stores (seen in the PTX of rms_norm_kernel), eight times the store
// instructions for 16-bit types.
__device__ __forceinline__ void store_16_bytes(void* dst, const uint4& v) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// Pack `pack` of a row (elements pack * kVec ...): one 16-byte load when kVectorized (rows aligned, n a whole
// number of packs: Rows::vectorized), else element by element; elements at or past n read as zero. kVectorized is a
// template parameter, not a runtime flag: with both paths in one kernel each load sat behind a branch (in the PTX).
template <bool kVectorized, typename T>
__device__ __forceinline__ Pack<T> load_pack(const T* __restrict__ row, int64_t n, int64_t pack) {
  constexpr int kVec = Pack<T>::kVec;
  const int64_t first = pack * kVec;
  Pack<T> p;
  if constexpr (kVectorized) {
    if (first < n) {
      // Through a uint4, not a Pack<T> assignment: the compiler split some of those into 2-byte accesses.
      const uint4 bits = *reinterpret_cast<const uint4*>(row + first);
      memcpy(&p, &bits, sizeof bits);
    } else {
#pragma unroll
      for (int e = 0; e < kVec; ++e) p.v[e] = T(0.0f);
    }
  } else {
#pragma unroll
    for (int e = 0; e < kVec; ++e) p.v[e] = first + e < n ? row[first + e] : T(0.0f);
  }
  return p;
}

// Stores pack `pack` of a row: the elements before n.
template <bool kVectorized, typename T>
__device__ __forceinline__ void store_pack(T* __restrict__ row, int64_t n, int64_t pack, const Pack<T>& p) {
  constexpr int kVec = Pack<T>::kVec;
  const int64_t first = pack * kVec;
  if constexpr (kVectorized) {
    if (first < n) {
      uint4 bits;
      memcpy(&bits, &p, sizeof bits);
      store_16_bytes(row + first, bits);
    }
  } else {
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      if (first + e < n) row[first + e] = p.v[e];
    }
  }
}

// The pack index of the thread's k-th pack: lane, lane + tpr, lane + 2 tpr, ...
__device__ __forceinline__ int64_t pack_index(int lane, int k, int tpr) {
  return static_cast<int64_t>(lane) + static_cast<int64_t>(k) * tpr;
}

// Loads the thread's kP packs of a row into registers (all kP loads issued before any is used).
template <int kP, bool kVectorized, typename T>
__device__ __forceinline__ void load_row(const T* __restrict__ row, int64_t n, int lane, int tpr, Pack<T> (&p)[kP]) {
#pragma unroll
  for (int k = 0; k < kP; ++k) p[k] = load_pack<kVectorized>(row, n, pack_index(lane, k, tpr));
}

// Stores the thread's kP packs of a row (the places load_row read).
template <int kP, bool kVectorized, typename T>
__device__ __forceinline__ void store_row(T* __restrict__ row, int64_t n, int lane, int tpr, const Pack<T> (&p)[kP]) {
#pragma unroll
  for (int k = 0; k < kP; ++k) store_pack<kVectorized>(row, n, pack_index(lane, k, tpr), p[k]);
}

// Calls f(std::true_type{}) or f(std::false_type{}) as `vectorized` says: a launcher picks its kernel's
// kVectorized instantiation with it, as in `with_vectorized(rows.vectorized, [&](auto vec) {
// kernel<T, vec.value><<<...>>>(...); })`.
template <typename F>
decltype(auto) with_vectorized(bool vectorized, F&& f) {
  return vectorized ? f(std::true_type{}) : f(std::false_type{});
}

// Sums each of v[0..kN) over the tpr threads of each row of the block; every thread gets its row's sums, the same
// bits each run (fixed shuffle and warp order). Rows of up to 32 threads stay in their warp; longer rows meet in
// `scratch` (kN * blockDim.x / 32 values of shared memory), all kN sums behind one pair of barriers. All the block's
// threads must call it, active row or not.
template <int kN, typename A>
__device__ __forceinline__ void row_sums(A (&v)[kN], int tpr, A* scratch) {
#pragma unroll
  for (int i = 0; i < kN; ++i) v[i] = warp_group_sum(v[i], tpr < 32 ? tpr : 32);
  if (tpr <= 32) return;
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) {
#pragma unroll
    for (int i = 0; i < kN; ++i) scratch[warp * kN + i] = v[i];
  }
  __syncthreads();
  const int per_row = tpr / 32;
  const int first = warp / per_row * per_row;  // the row's first warp
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    v[i] = scratch[first * kN + i];
    for (int j = 1; j < per_row; ++j) v[i] += scratch[(first + j) * kN + i];
  }
  __syncthreads();  // scratch is free for the next call
}

// row_sums of one value. Written out rather than as row_sums<1>, with which the compiler spilled rms_norm_kernel
// (bf16) at its 64-register bound.
template <typename A>
__device__ __forceinline__ A row_sum(A v, int tpr, A* scratch) {
  v = warp_group_sum(v, tpr < 32 ? tpr : 32);
  if (tpr <= 32) return v;
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) scratch[warp] = v;
  __syncthreads();
  const int per_row = tpr / 32;
  const int first = warp / per_row * per_row;
  A sum = scratch[first];
  for (int i = 1; i < per_row; ++i) sum += scratch[first + i];
  __syncthreads();
  return sum;
}

// A backward's per-block sums over rows of a per-column quantity (a weight's gradient), without atomics: each thread
// sums its columns over the rows it works on in registers (`sums`: its kP packs of kVec columns, the places
// load_row reads; changed here); the block then writes one row of `partial` (n columns), the same bits every run:
// the rows a warp holds (tpr < 32) are added by a fixed butterfly of shuffles, then each warp (or each row of several
// warps) leaves its sums in a row of `shared` (kMinBlockThreads * kP * kVec values at least, when the block holds
// several rows), and after one barrier every column adds those rows in order. sum_partial_rows then adds the blocks'
// rows in order. All the block's threads must call it. (Adding the slots one after another, a barrier each, left
// most warps of a block waiting: at rows of 16 threads that made the backward 19% slower.)
template <int kP, int kVec, typename A>
__device__ __forceinline__ void write_partial_row(A (&sums)[kP][kVec], A* __restrict__ partial, A* shared,
                                                  const Slot& s, int tpr, int64_t n) {
  A* out = partial + static_cast<int64_t>(blockIdx.x) * n;
  if (s.slots == 1) {
#pragma unroll
    for (int k = 0; k < kP; ++k) {
      const int64_t first = pack_index(s.lane, k, tpr) * kVec;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        if (first + e < n) out[first + e] = sums[k][e];
      }
    }
    return;
  }
  // Lanes tpr apart hold the same columns of different rows.
  for (int offset = tpr; offset < 32; offset *= 2) {
#pragma unroll
    for (int k = 0; k < kP; ++k) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) sums[k][e] += __shfl_xor_sync(0xffffffffu, sums[k][e], offset);
    }
  }
  const int width = tpr < 32 ? 32 : tpr;  // the threads behind one row of `shared`: a warp, or a row's warps
  const int group = static_cast<int>(threadIdx.x) / width;
  const int groups = static_cast<int>(blockDim.x) / width;
  if (tpr >= 32 || static_cast<int>(threadIdx.x % 32) < tpr) {  // after the shuffles a warp's rows agree: one writes
#pragma unroll
    for (int k = 0; k < kP; ++k) {
      const int64_t first = pack_index(s.lane, k, tpr) * kVec;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        if (first + e < n) shared[group * n + first + e] = sums[k][e];
      }
    }
  }
  __syncthreads();
  for (int64_t col = threadIdx.x; col < n; col += blockDim.x) {
    A v = shared[col];
    for (int g = 1; g < groups; ++g) v += shared[g * n + col];
    out[col] = v;
  }
}

// column_sum_kernel: a block sums kColumnSumCols columns, its kColumnSumSlices warps each a strided share of the rows.
constexpr int kColumnSumCols = 32;
constexpr int kColumnSumSlices = 32;

// out[col] = sum over the `parts` rows of partial (parts x n), in row order: each of a block's kColumnSumSlices
// warps sums every kColumnSumSlices-th row for its kColumnSumCols columns, then the first warp adds the slices' sums
// in slice order (the same bits every run).
template <typename A, typename T>
__global__ void __launch_bounds__(kColumnSumCols* kColumnSumSlices)
    column_sum_kernel(const A* __restrict__ partial, int64_t parts, int64_t n, T* __restrict__ out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Launched as a programmatic dependent of the backward (sum_partial_rows): its blocks may start before the
  // backward has finished, and wait here until it has and its partial rows are visible.
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  __shared__ A sums[kColumnSumSlices][kColumnSumCols];
  const int lane = threadIdx.x % kColumnSumCols;
  const int slice = threadIdx.x / kColumnSumCols;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kColumnSumCols + lane;
  A sum = 0;
  if (col < n) {
    for (int64_t p = slice; p < parts; p += kColumnSumSlices) sum += partial[p * n + col];
  }
  sums[slice][lane] = sum;
  __syncthreads();
  if (slice != 0 || col >= n) return;
  for (int i = 1; i < kColumnSumSlices; ++i) sum += sums[i][lane];
  out[col] = static_cast<T>(sum);
}

// Lets the grid launched after this kernel (sum_partial_rows's column sum) start its blocks on SMs this grid no
// longer fills, before it ends: the launch and the ramp-up of that small kernel then overlap this one's tail. A
// no-op before sm_90 (and for a kernel launched without the attribute).
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// Launches column_sum_kernel: out (n elements) = the sum of partial's `parts` rows (write_partial_row's), on
// `device`. Where the kernel's code waits for the kernel before it (sm_90 code), as a programmatic dependent launch.
template <typename A, typename T>
cudaError_t sum_partial_rows(const A* partial, int64_t parts, int64_t n, T* out, int device, cudaStream_t stream) {
  constexpr auto* kernel = &column_sum_kernel<A, T>;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(ceil_div<int64_t>(n, kColumnSumCols)));
  cfg.blockDim = dim3(kColumnSumCols * kColumnSumSlices);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  // Binaries with only older code run here through it, which does not wait: then the launch must not overlap.
  cfg.numAttrs = kernel_ptx_version<kernel>(device) >= 90 ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, partial, parts, n, out);
}

// 1 / sqrt(v) in the arithmetic type: the fast approximate rsqrtf for float (2 ulp), the correctly rounded sqrt
// for double.
__device__ __forceinline__ float inv_sqrt(float v) {
  return rsqrtf(v);
}
__device__ __forceinline__ double inv_sqrt(double v) {
  return 1.0 / sqrt(v);
}

// Grid size for a row kernel: enough blocks for every row group once, at most `waves` times what the GPU holds at
// once (blocks_resident: SMs x resident blocks per SM); the blocks' grid stride covers the rest.
inline int64_t row_grid(int64_t rows, int slots, int64_t blocks_resident) {
  return std::max<int64_t>(1, std::min<int64_t>(ceil_div<int64_t>(rows, slots), blocks_resident));
}

// Blocks of kKernel with `threads` threads that `device` holds at once (SMs x
// cudaOccupancyMaxActiveBlocksPerMultiprocessor), once per kernel, device and block size. The row kernels use
// static shared memory only, so the block size is all that changes their occupancy; it is kMinBlockThreads or
// kMaxThreadsPerRow (kLongRowThreads is the same), the two slots of the cache.
template <auto kKernel>
int64_t resident_blocks(int device, int threads) {
  static_assert(kLongRowThreads == kMaxThreadsPerRow, "the cache below has one slot for both");
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices][2] = {};  // 0 = not asked yet
  const int key = threads > kMinBlockThreads ? 1 : 0;
  const bool cacheable = device >= 0 && device < kMaxDevices;
  if (cacheable) {
    const int cached = cache[device][key].load(std::memory_order_relaxed);
    if (cached != 0) return int64_t{cached} * sm_count(device);
  }
  int per_sm = 0;
  CUDA_KERNELS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kKernel, threads, 0));
  per_sm = std::max(per_sm, 1);
  if (cacheable) cache[device][key].store(per_sm, std::memory_order_relaxed);
  return int64_t{per_sm} * sm_count(device);
}

#endif  // __CUDACC__

}  // namespace cuda_kernels::rowwise
