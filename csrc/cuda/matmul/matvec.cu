// matmul special case matvec (variant 14; every dtype, any CUDA GPU): skinny outputs, M or N of at most 16 (a
// matrix-vector product, a decode step's few tokens against a weight matrix). Variant 0 takes it for those shapes
// only (csrc/cuda/matmul/dispatch.cpp).
//
// With M <= 16 the tiled steps leave most of each 128-row tile empty and their split-K still reads the big
// operand through shared memory; the work is really "read B once": memory-bound. So this kernel names the short
// side S and the long side L and streams the big operand Q (K x L) once with 16-byte loads:
//  - M <= N: S = M, P = A (S x K, the small operand), Q = B, C[s][l] row-major;
//  - M > N: C^T = B^T A^T, so S = N, P = B^T, Q = A^T, and C is written transposed (C[l][s]).
// Q's layout picks the kernel (no copy of Q for row-major or transposed inputs):
//  - "rows" (Q's rows contiguous along l: B row-major, or A a transposed view): a thread owns kVec consecutive l
//    and walks k, multiplying Q[k][l..l+kVec) by P[s][k] for its s rows (a broadcast load: the same for the
//    whole warp). A block's 8 warps split k (and s, for S > SR), then add up in shared memory.
//  - "cols" (Q's columns contiguous along k: A row-major, or B a transposed weight as in x @ w.t()): a warp owns
//    kCols columns l, its lanes walk k kVec at a time and multiply by P[s][k..k+kVec) (the block's rows of P
//    staged in shared memory); the lanes add up with shuffles.
//  - "mma" (float16/bfloat16 in either layout, compute >= 8.0): at 16 rows the CUDA-core kernels' FMAs (16 per
//    element of Q) take longer than reading Q, so this one runs them on the tensor cores: a 16-row mma.sync (m16n8k16)
//    takes P's S rows (zero rows past S) as its A fragment, slabs of Q come through a cp.async pipeline into swizzled
//    shared memory (step 8's layout) in Q's own layout, a block of 4 warps covers 64 columns.
// Q is read once in all, so the kernels load it with the evict-first cache policy (ld.global.cs, or cp.async with
// an L2 evict-first hint): its lines are the first to leave L2 again, and the lines that earlier kernels left there
// (dirty ones among them, which would cost a write-back to DRAM each) stay (docs/matmul.md has what it measured).
// All split K over blocks (grid.y): the CUDA-core kernels until the GPU has about kBlocksPerSm* blocks per SM, the
// mma kernel as mma_splits weighs it. On sm_90 the splits of one output tile form a cluster and add up through
// distributed shared memory before the kernel ends (at most kMaxClusterSplits of them); elsewhere their partial sums
// (fp32, fp64 for fp64) go to a workspace and matmul_kernel_matvec_reduce adds them. Both add the splits in split
// order (deterministic, and the two paths round alike) and round to the output dtype. Forced (variant=14) on any
// other shape it still computes the right result, S rows at a time over grid.z, just slowly. A batch of products is
// one launch: grid.z holds each matrix's blocks of S rows in turn (matrix_of_block), and the splits add up per
// matrix.
#include <cooperative_groups.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <set>
#include <type_traits>
#include <utility>

#include "cuda/matmul/args.h"
#include "cuda/matmul/mma_sm80.cuh"
#include "cuda/matmul/tuning.h"
#include "cuda/utils.cuh"

namespace cuda_kernels::matmul_ladder {
namespace {

constexpr int kThreads = 256;  // 8 warps a block
constexpr int kWarps = kThreads / 32;
constexpr int kCols = 4;         // Q columns per warp ("cols")
constexpr int kMaxGroups = 4;    // s groups of a "rows" block (its warps split S and K)
constexpr int kKAlignRows = 64;  // a split covers a multiple of this many k ("rows")
constexpr int64_t kMaxGridYZ = 65535;

// Elements in one 16-byte load.
template <typename T>
__host__ __device__ constexpr int vec_of() {
  return static_cast<int>(16 / sizeof(T));
}

// The problem as the kernels see it. P[s][k] = p[s * ps + k * pk]; Q[k][l] = q[k * qk + l * ql]; out[s][l] =
// c[s * cs + l * cl], or, with splits > 1, partial[(split * S + s) * L + l] in the workspace. A batch of `batch`
// such products: matrix i's p, q, c and partial start i * p_batch, q_batch, c_batch and partial_batch elements
// after the first (p_batch or q_batch 0: one matrix for all); grid.z holds s_blocks blocks of S rows per matrix.
template <typename T, typename Acc>
struct SkinnyArgs {
  const T* p;
  int64_t ps, pk;
  const T* q;
  int64_t qk, ql;
  T* c;
  int64_t cs, cl;
  Acc* partial;  // nullptr: one split, or a cluster's splits; results go straight to c
  int S, L, K;
  int kc;       // k per split (a multiple of 32 lanes x kVec for "cols")
  bool vec;     // Q's 16-byte loads allowed: aligned base and a pitch that keeps every vector aligned
  bool p_vec;   // the same for P along k ("cols")
  int cluster;  // > 1: grid.y's K splits are one cluster of this many blocks, added up by cluster_sum_store
  int batch = 1, s_blocks = 1;
  int64_t p_batch = 0, q_batch = 0, c_batch = 0, partial_batch = 0;
};

// a for the matrix of the batch that this block works on (blockIdx.z / s_blocks), and the block's share of S rows
// (blockIdx.z % s_blocks) in *s_block. The kernels are compiled with and without a batch (kBatched), and only the
// batched ones call it: the pointers it moves live in registers, which in a one-matrix kernel cost a block per SM
// that a memory-bound kernel pays for (docs/matmul.md).
template <typename T, typename Acc>
__device__ __forceinline__ SkinnyArgs<T, Acc> matrix_of_block(SkinnyArgs<T, Acc> a, int* s_block) {
  const int z = static_cast<int>(blockIdx.z), m = z / a.s_blocks;
  *s_block = z - m * a.s_blocks;
  a.p += m * a.p_batch;
  a.q += m * a.q_batch;
  a.c += m * a.c_batch;
  if (a.partial != nullptr) a.partial += m * a.partial_batch;
  return a;
}

template <typename T, typename Acc>
__device__ __forceinline__ void store_out(const SkinnyArgs<T, Acc>& a, int s, int l, Acc v) {
  if (a.partial != nullptr) {
    a.partial[(int64_t{blockIdx.y} * a.S + s) * a.L + l] = v;
  } else {
    a.c[s * a.cs + l * a.cl] = static_cast<T>(v);
  }
}

// The cluster's way of adding up K splits (a.cluster > 1, sm_90): every block holds its sums in its own shared
// memory, `tile` (n of them; where(i, s, l) names output i's place, s >= S or l >= L for none); the blocks of the
// cluster are the splits, and each adds up a share of the outputs over all of them, reading the others' tiles
// through distributed shared memory, in split order as the reduce kernel does, and stores it. No workspace, no
// second launch.
template <typename T, typename Acc, typename Where>
__device__ __forceinline__ void cluster_sum_store(const SkinnyArgs<T, Acc>& a, Acc* tile, int n, Where where) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every split's tile is complete
  const int splits = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  for (int i = rank * static_cast<int>(blockDim.x) + threadIdx.x; i < n; i += splits * static_cast<int>(blockDim.x)) {
    int s, l;
    where(i, s, l);
    if (s < a.S && l < a.L) {
      Acc sum = 0;
      for (int r = 0; r < splits; ++r) sum += cluster.map_shared_rank(tile, r)[i];
      a.c[s * a.cs + l * a.cl] = static_cast<T>(sum);
    }
  }
  cluster.sync();  // no block exits (freeing its tile) while another still reads it
#else
  __trap();  // the launcher asks for clusters only of code built for sm_90+
#endif
}

// Loads kV elements of T (16 bytes) as Acc; kStream: from Q in global memory, evict-first (ld.global.cs).
template <typename T, typename Acc, int kV, bool kStream = false>
__device__ __forceinline__ void load_vec(const T* src, Acc (&dst)[kV]) {
  uint4 raw;
  if constexpr (kStream) {
    raw = __ldcs(reinterpret_cast<const uint4*>(src));
  } else {
    raw = *reinterpret_cast<const uint4*>(src);
  }
  const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int v = 0; v < kV; ++v) dst[v] = static_cast<Acc>(e[v]);
}

// "rows": Q[k][l..] contiguous along l. Block: l tile of 32 * kV columns (blockIdx.x), split blockIdx.y of k,
// rows [blockIdx.z * kSB, + kSB) of S, kSB = SR * groups (groups: 1, 2 or 4 by S). Warp w: s group
// w % groups (SR rows), k group w / groups (every kWarps / groups-th k of the split).
// P's values: with few rows (SR < kPSharedRows) a thread loads P[s][k] for its SR rows, the same for every lane of
// a warp: one broadcast load each, from L1 after the first block (P is small). With many rows those loads, one per
// kV FMAs, are what the kernel would wait on; so there (groups = 1) the block stages kPRowsK k of its SR rows of P
// k-major in shared memory (pt[k][r]), and a thread reads one k's SR values as 16-byte loads (a broadcast too: the
// whole warp reads one address).
constexpr int kPRowsK = 64;  // k of P staged at a time
constexpr int kPSharedRows = 8;
template <typename T, typename Acc, int SR, bool kBatched>
__global__ void __launch_bounds__(kThreads) matmul_kernel_matvec_rows(SkinnyArgs<T, Acc> a, int groups) {
  constexpr int kV = vec_of<T>();
  constexpr int kLTile = 32 * kV;
  constexpr bool kPShared = SR >= kPSharedRows;
  constexpr int kSBMax = kPShared ? SR : kMaxGroups * SR;
  constexpr int kAccVec = 16 / sizeof(Acc);  // Acc values per 16-byte load
  // One 16-byte pad after each k's SR values: the staging stores of consecutive k spread over the banks.
  constexpr int kPtPitch = SR + kAccVec;
  __shared__ Acc red[kSBMax][kLTile];  // the warps' sums
  __shared__ __align__(16) Acc pt[kPShared ? kPRowsK : 1][kPtPitch];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int sb = SR * groups;
  int s_block;
  if constexpr (kBatched) {
    a = matrix_of_block(a, &s_block);
  } else {
    s_block = static_cast<int>(blockIdx.z);
  }
  const int s0 = s_block * sb;
  const int g = warp % groups, kg = warp / groups, k_groups = kWarps / groups;
  const int l = blockIdx.x * kLTile + lane * kV;  // this thread's first column
  // The last split's k_begin + kc may pass 2^31 (K close to it, rounded up): computed in 64 bits.
  const int k_begin = blockIdx.y * a.kc, k_end = static_cast<int>(min(int64_t{a.K}, int64_t{k_begin} + a.kc));
  const bool full = a.vec && l + kV <= a.L;

  Acc acc[SR][kV] = {};
  if constexpr (kPShared) {
    for (int c0 = k_begin; c0 < k_end; c0 += kPRowsK) {
      const int chunk = min(kPRowsK, k_end - c0);
      __syncthreads();  // the previous chunk's readers are done
      for (int i = threadIdx.x; i < SR * kPRowsK; i += kThreads) {
        const int r = i / kPRowsK, k = i % kPRowsK;  // consecutive threads read consecutive k of one row
        const T* src = a.p + int64_t{min(s0 + r, a.S - 1)} * a.ps + int64_t{c0 + k} * a.pk;  // past S: the last row
        pt[k][r] = k < chunk ? static_cast<Acc>(*src) : Acc(0);
      }
      __syncthreads();
      // One k's SR values of P, from the staged chunk.
      const auto p_at = [&](int kk, Acc(&pv)[SR]) {
#pragma unroll
        for (int j = 0; j < SR; j += kAccVec) {
          const uint4 raw = *reinterpret_cast<const uint4*>(&pt[kk][j]);
          const Acc* e = reinterpret_cast<const Acc*>(&raw);
#pragma unroll
          for (int v = 0; v < kAccVec; ++v) pv[j + v] = e[v];
        }
      };
      if (full) {
        // kU vectors of Q loaded before any is used: loads in flight are what a memory-bound kernel runs on.
        constexpr int kU = 4;
        for (int kk0 = kg; kk0 < chunk; kk0 += kU * k_groups) {
          uint4 raw[kU];
#pragma unroll
          for (int u = 0; u < kU; ++u) {
            const int kk = kk0 + u * k_groups;
            raw[u] = kk < chunk ? __ldcs(reinterpret_cast<const uint4*>(a.q + int64_t{c0 + kk} * a.qk + l))
                                : make_uint4(0, 0, 0, 0);
          }
#pragma unroll
          for (int u = 0; u < kU; ++u) {
            const int kk = kk0 + u * k_groups;
            if (kk < chunk) {  // (pt past the chunk may hold anything: skipped, not multiplied by zero)
              Acc pv[SR];
              p_at(kk, pv);
              const T* e = reinterpret_cast<const T*>(&raw[u]);
#pragma unroll
              for (int r = 0; r < SR; ++r)
#pragma unroll
                for (int v = 0; v < kV; ++v) acc[r][v] += pv[r] * static_cast<Acc>(e[v]);
            }
          }
        }
      } else {
        // Q's last columns, or a layout without 16-byte loads: element by element.
        for (int kk = kg; kk < chunk; kk += k_groups) {
          Acc pv[SR];
          p_at(kk, pv);
          const T* src = a.q + int64_t{c0 + kk} * a.qk + int64_t{l} * a.ql;
#pragma unroll
          for (int v = 0; v < kV; ++v) {
            const Acc q = l + v < a.L ? static_cast<Acc>(src[v * a.ql]) : Acc(0);
#pragma unroll
            for (int r = 0; r < SR; ++r) acc[r][v] += pv[r] * q;
          }
        }
      }
    }
  } else {
    const T* p_rows[SR];  // this warp's rows of P (past S: the last row again, never stored)
#pragma unroll
    for (int r = 0; r < SR; ++r) p_rows[r] = a.p + int64_t{min(s0 + g * SR + r, a.S - 1)} * a.ps;
    if (full) {
      // kU k steps loaded (Q's vectors and P's values) before any is used: loads in flight are what a memory-bound
      // kernel runs on.
      constexpr int kU = 8;
      for (int k0 = k_begin + kg; k0 < k_end; k0 += kU * k_groups) {
        uint4 raw[kU];
        Acc pv[kU][SR];
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          const int k = k0 + u * k_groups;
          const bool in = k < k_end;
          raw[u] = in ? __ldcs(reinterpret_cast<const uint4*>(a.q + k * a.qk + l)) : make_uint4(0, 0, 0, 0);
#pragma unroll
          for (int r = 0; r < SR; ++r) pv[u][r] = in ? static_cast<Acc>(p_rows[r][k * a.pk]) : Acc(0);
        }
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          const T* e = reinterpret_cast<const T*>(&raw[u]);
#pragma unroll
          for (int r = 0; r < SR; ++r)
#pragma unroll
            for (int v = 0; v < kV; ++v) acc[r][v] += pv[u][r] * static_cast<Acc>(e[v]);
        }
      }
    } else {
      // Q's last columns, or a layout without 16-byte loads: element by element.
      for (int k = k_begin + kg; k < k_end; k += k_groups) {
        const T* src = a.q + k * a.qk + int64_t{l} * a.ql;
#pragma unroll
        for (int v = 0; v < kV; ++v) {
          const Acc q = l + v < a.L ? static_cast<Acc>(src[v * a.ql]) : Acc(0);
#pragma unroll
          for (int r = 0; r < SR; ++r) acc[r][v] += static_cast<Acc>(p_rows[r][k * a.pk]) * q;
        }
      }
    }
  }
  // The k groups add up in shared memory, one after another (a fixed order: deterministic). Element (row, v) of
  // lane `lane` sits at red[row][v * 32 + lane]: the 32 lanes store to 32 consecutive words (no bank conflicts).
  for (int turn = 0; turn < k_groups; ++turn) {
    if (kg == turn) {
#pragma unroll
      for (int r = 0; r < SR; ++r)
#pragma unroll
        for (int v = 0; v < kV; ++v) {
          Acc& slot = red[g * SR + r][v * 32 + lane];
          slot = turn == 0 ? acc[r][v] : slot + acc[r][v];
        }
    }
    __syncthreads();
  }
  // red[r][i] is out[s0 + r][column of lane i % 32, element i / 32].
  const auto where = [&](int i, int& s, int& col) {
    const int r = i / kLTile, x = i % kLTile;
    s = s0 + r;
    col = blockIdx.x * kLTile + x % 32 * kV + x / 32;
  };
  if (a.cluster > 1) {
    cluster_sum_store(a, &red[0][0], sb * kLTile, where);
  } else {
    for (int i = threadIdx.x; i < sb * kLTile; i += kThreads) {
      int s, col;
      where(i, s, col);
      if (s < a.S && col < a.L) store_out(a, s, col, red[i / kLTile][i % kLTile]);
    }
  }
}

// "cols": Q[..][l] contiguous along k. Block: kWarps * kCols columns (blockIdx.x), split blockIdx.y of k, rows
// [blockIdx.z * SR, + SR) of S. Warp w: columns w * kCols + j; lane: k = lane * kV + i * 32 * kV of each chunk.
// The block's rows of P are staged in shared memory kPChunkBytes of each row at a time: every warp reads all of
// them, and from L2 that traffic was several times Q's.
constexpr int kPChunkBytes = 2048;
template <typename T, typename Acc, int SR, bool kBatched>
__global__ void __launch_bounds__(kThreads) matmul_kernel_matvec_cols(SkinnyArgs<T, Acc> a) {
  constexpr int kV = vec_of<T>();
  constexpr int kChunk = kPChunkBytes / sizeof(T);  // k per chunk: a multiple of 32 lanes x kV
  // Q evict-first (the top of the file), except in float64, whose "cols" blocks measured slower with it.
  constexpr bool kStreamQ = sizeof(T) <= 4;
  __shared__ __align__(16) T ps[SR][kChunk];
  __shared__ Acc sums[SR][kWarps * kCols];  // the block's sums, when a cluster adds up the splits
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int s_block;
  if constexpr (kBatched) {
    a = matrix_of_block(a, &s_block);
  } else {
    s_block = static_cast<int>(blockIdx.z);
  }
  const int s0 = s_block * SR;
  const int l0 = (blockIdx.x * kWarps + warp) * kCols;
  // The last split's k_begin + kc may pass 2^31 (K close to it, rounded up): computed in 64 bits.
  const int k_begin = blockIdx.y * a.kc, k_end = static_cast<int>(min(int64_t{a.K}, int64_t{k_begin} + a.kc));

  Acc acc[SR][kCols] = {};
  for (int c0 = k_begin; c0 < k_end; c0 += kChunk) {
    const int chunk = min(kChunk, k_end - c0);
    __syncthreads();  // the previous chunk's readers are done
    if (a.p_vec && chunk == kChunk) {
      for (int i = threadIdx.x; i < SR * kChunk / kV; i += kThreads) {
        const int r = i / (kChunk / kV), k = i % (kChunk / kV) * kV, s = min(s0 + r, a.S - 1);
        *reinterpret_cast<uint4*>(&ps[r][k]) = *reinterpret_cast<const uint4*>(a.p + int64_t{s} * a.ps + c0 + k);
      }
    } else {
      for (int i = threadIdx.x; i < SR * kChunk; i += kThreads) {
        const int r = i / kChunk, k = i % kChunk, s = min(s0 + r, a.S - 1);
        ps[r][k] = k < chunk ? a.p[int64_t{s} * a.ps + (c0 + k) * a.pk] : T(0);
      }
    }
    __syncthreads();
    for (int kk = lane * kV; kk < chunk; kk += 32 * kV) {
      const int k = c0 + kk;
      const bool whole = kk + kV <= chunk;
      Acc q[kCols][kV];
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        const int col = min(l0 + j, a.L - 1);  // past L: a duplicate of the last column, never stored
        const T* src = a.q + int64_t{col} * a.ql + k * a.qk;
        if (a.vec && whole) {
          load_vec<T, Acc, kV, kStreamQ>(src, q[j]);
        } else {
#pragma unroll
          for (int v = 0; v < kV; ++v) q[j][v] = kk + v < chunk ? static_cast<Acc>(src[v * a.qk]) : Acc(0);
        }
      }
#pragma unroll
      for (int r = 0; r < SR; ++r) {
        Acc pv[kV];
        load_vec<T, Acc, kV>(&ps[r][kk], pv);  // past the chunk: zeros (only whole vectors are read)
#pragma unroll
        for (int j = 0; j < kCols; ++j)
#pragma unroll
          for (int v = 0; v < kV; ++v) acc[r][j] += pv[v] * q[j][v];
      }
    }
  }
  // Lanes add up (butterfly: every lane ends with every sum); lane (r * kCols + j) % 32 stores sum (r, j).
#pragma unroll
  for (int r = 0; r < SR; ++r) {
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      Acc v = acc[r][j];
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
      if (lane == (r * kCols + j) % 32) {
        if (a.cluster > 1) {
          sums[r][warp * kCols + j] = v;
        } else if (s0 + r < a.S && l0 + j < a.L) {
          store_out(a, s0 + r, l0 + j, v);
        }
      }
    }
  }
  if (a.cluster > 1) {
    constexpr int kBlockCols = kWarps * kCols;
    cluster_sum_store(a, &sums[0][0], SR * kBlockCols, [&](int i, int& s, int& l) {
      s = s0 + i / kBlockCols;
      l = blockIdx.x * kBlockCols + i % kBlockCols;
    });
  }
}

// "mma": tensor cores for 16-bit problems, Q in either layout. Block: kMmaCols columns of Q (blockIdx.x), split
// blockIdx.y of k, 4 warps of kMmaCols / 4 columns; all S <= 16 rows. Slab: kMmaK k, i.e. P (16 x kMmaK: rows past
// S and k past the split zero-filled) and Q (kMmaK x kMmaCols, its edges zero-filled), kMmaStages slabs in flight.
// Q's slab keeps Q's layout: k rows of kMmaCols columns ("rows", read by ldmatrix.trans into mma's k-pair B
// fragments) or kMmaCols rows of kMmaK k ("cols": already mma's "col" B operand, plain ldmatrix).
constexpr int kMmaThreads = 128;
constexpr int kMmaCols = 64;   // Q columns per block
constexpr int kMmaK = 128;     // k per slab (the launcher's split alignment: every split is whole slabs)
constexpr int kMmaStages = 3;  // slabs in shared memory (60 KiB a block: 3 blocks fit an H100 SM)
constexpr int kMmaWarpCols = kMmaCols / (kMmaThreads / 32);  // 16: two 8-column mma tiles a warp
constexpr int kChunkElems = 8;                               // 16-bit elements per 16-byte chunk
constexpr int kPStageBytes = 16 * kMmaK * 2, kQStageBytes = kMmaK * kMmaCols * 2;
constexpr int kMmaStageBytes = kPStageBytes + kQStageBytes;
constexpr size_t kMmaSmemBytes = size_t{kMmaStages} * kMmaStageBytes;

// Byte offset of 16-byte chunk c of row r in a tile of rows kChunksPerRow (>= 8) chunks long: chunk c ^ (r % 8),
// so that ldmatrix's 8 rows of one chunk column and a cp.async phase's 8 chunks of one row hit 8 different bank
// groups (step 8 explains the pattern).
template <int kChunksPerRow>
__device__ __forceinline__ uint32_t mma_swizzle(int r, int c) {
  static_assert(kChunksPerRow % 8 == 0);
  return r * (kChunksPerRow * 16) + ((c ^ (r & 7)) << 4);
}

template <typename T, bool kQCols, bool kBatched>
__global__ void __launch_bounds__(kMmaThreads) matmul_kernel_matvec_mma(SkinnyArgs<T, float> a) {
#if CUDA_KERNELS_SM80_UNSUPPORTED
  __trap();  // the launcher takes this kernel on compute >= 8.0 only
#else
  constexpr bool kBf16 = std::is_same_v<T, c10::BFloat16>;
  constexpr int kPChunks = kMmaK / kChunkElems;                        // chunks per row of P's slab ...
  constexpr int kQChunks = (kQCols ? kMmaK : kMmaCols) / kChunkElems;  // ... and of Q's
  constexpr int kQRows = kQCols ? kMmaCols : kMmaK;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t smem0 = sm80::smem_addr(smem);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  int s_block;  // 0: one block has all S rows
  if constexpr (kBatched) {
    a = matrix_of_block(a, &s_block);
  } else {
    s_block = static_cast<int>(blockIdx.z);
  }
  const int l0 = blockIdx.x * kMmaCols;
  // The last split's k_begin + kc may pass 2^31 (K close to it, rounded up): computed in 64 bits.
  const int k_begin = blockIdx.y * a.kc, k_end = static_cast<int>(min(int64_t{a.K}, int64_t{k_begin} + a.kc));
  const int slabs = (k_end - k_begin + kMmaK - 1) / kMmaK;

  // Copies slab `slab` of this split into the stage at shared address `stage`. It runs right after the barrier that
  // frees the stage, and every instruction in it delays the slab's loads, so what is the same in every slab (each
  // chunk's place, source row and bounds) is worked out once, here.
  // P: 16 rows x kPChunks chunks, kPPerThread a thread (chunk tid + j * kMmaThreads). Rows past S are zero in every
  // stage, written once before the loop; a live row's chunk goes by cp.async, or element by element when P's rows
  // are not 16-byte vectors along k (a transposed P) or when the chunk crosses the split's end.
  constexpr int kPPerThread = 16 * kPChunks / kMmaThreads;
  static_assert(kPPerThread * kMmaThreads == 16 * kPChunks, "P's slab is whole chunks a thread");
  const int p_col = tid % kPChunks;  // the same for each of the thread's chunks
  bool p_live[kPPerThread];
  const T* p_src[kPPerThread];
  uint32_t p_dst[kPPerThread];
#pragma unroll
  for (int j = 0; j < kPPerThread; ++j) {
    const int row = (tid + j * kMmaThreads) / kPChunks;
    p_live[j] = row < a.S;
    p_src[j] = a.p + int64_t{p_live[j] ? row : 0} * a.ps + (int64_t{k_begin} + p_col * kChunkElems) * a.pk;
    p_dst[j] = mma_swizzle<kPChunks>(row, p_col);
  }
  // Q: kQRows rows x kQChunks chunks, kQPerThread a thread (16-byte cp.async; the launcher makes sure that a chunk is
  // wholly inside Q or outside: L % 8 == 0 for "rows", K % 8 == 0 for "cols"), zeros past L and past the split. A
  // chunk's place in the stage, its k within the slab and whether its columns are inside Q are the same in every
  // slab; its source moves by kMmaK rows of k a slab.
  constexpr int kQPerThread = kQRows * kQChunks / kMmaThreads;
  // A thread's chunk i sits kMmaThreads chunks after its chunk i - 1: whole rows of 8 later, so the swizzle (which
  // depends on the row mod 8) moves it by exactly kMmaThreads * 16 bytes.
  static_assert((kMmaThreads / kQChunks) % 8 == 0, "a thread's chunks are a whole number of swizzle periods apart");
  constexpr uint32_t kQChunkStride = kMmaThreads * 16;
  const T* q_src[kQPerThread];
  int q_dk[kQPerThread];
  bool q_in[kQPerThread];
#pragma unroll
  for (int i = 0; i < kQPerThread; ++i) {
    const int chunk = tid + i * kMmaThreads;
    const int r = chunk / kQChunks, c = chunk % kQChunks;
    const int64_t l = int64_t{l0} + (kQCols ? r : c * kChunkElems);
    q_dk[i] = kQCols ? c * kChunkElems : r;
    q_in[i] = l < a.L;
    q_src[i] = q_in[i] ? a.q + (int64_t{k_begin} + q_dk[i]) * a.qk + l * a.ql : a.q;
  }
  const uint32_t q_dst0 = kPStageBytes + mma_swizzle<kQChunks>(tid / kQChunks, tid % kQChunks);
  const uint64_t q_policy = sm80::l2_evict_first_policy();
  // q_dst: this thread's first Q chunk in the stage, passed as a per-thread value carried from slab to slab. Computed
  // as the stage's (uniform) address plus an offset, ptxas 13.0 encodes these cp.async's shared address as register +
  // uniform register with the L2 policy in an odd uniform register (cuobjdump: desc[UR1]), which the H100 stops at as
  // an illegal instruction.
  const auto copy_slab = [&](int slab, uint32_t stage, uint32_t q_dst) {
    const int k0 = k_begin + slab * kMmaK;
    // Every chunk of the slab is inside the split, but in its last slab.
    const bool whole = k_end - k0 >= kMmaK;
    const int64_t q_step = int64_t{slab} * kMmaK * a.qk;
#pragma unroll
    for (int i = 0; i < kQPerThread; ++i) {
      const bool ok = q_in[i] && (whole || k0 + q_dk[i] < k_end);
      sm80::cp_async16_zfill_stream(q_dst + i * kQChunkStride, ok ? q_src[i] + q_step : a.q, ok, q_policy);
    }
    const int64_t k = int64_t{k0} + p_col * kChunkElems;
#pragma unroll
    for (int j = 0; j < kPPerThread; ++j) {
      if (!p_live[j]) continue;
      const T* src = p_src[j] + int64_t{slab} * kMmaK * a.pk;
      if (a.p_vec && k_end - k >= kChunkElems) {
        sm80::cp_async16_zfill(stage + p_dst[j], src, true);
      } else {
        const int n = static_cast<int>(max(int64_t{0}, min(int64_t{kChunkElems}, k_end - k)));
        alignas(16) T e[kChunkElems];
#pragma unroll
        for (int i = 0; i < kChunkElems; ++i) e[i] = i < n ? src[int64_t{i} * a.pk] : T(0);
        sm80::st_shared16(stage + p_dst[j], *reinterpret_cast<const uint4*>(e));
      }
    }
  };

#pragma unroll
  for (int j = 0; j < kPPerThread; ++j) {
    if (p_live[j]) continue;
#pragma unroll
    for (int s = 0; s < kMmaStages; ++s)
      sm80::st_shared16(smem0 + s * kMmaStageBytes + p_dst[j], make_uint4(0, 0, 0, 0));
  }
  uint32_t q_dst = smem0 + q_dst0;
#pragma unroll 1  // a loop, so that q_dst is carried in a register here too (the comment at copy_slab says why)
  for (int s = 0; s < kMmaStages - 1; ++s) {
    if (s < slabs) copy_slab(s, smem0 + s * kMmaStageBytes, q_dst);
    sm80::cp_async_commit();
    q_dst += kMmaStageBytes;
  }
  float acc[kMmaWarpCols / 8][4] = {};
  int read_stage = 0, write_stage = kMmaStages - 1;
  for (int slab = 0; slab < slabs; ++slab) {
    sm80::cp_async_wait<kMmaStages - 2>();  // this thread's copies of the slab have landed ...
    __syncthreads();  // ... and everyone's; everyone also finished the previous slab, whose stage is refilled
    if (slab + kMmaStages - 1 < slabs) copy_slab(slab + kMmaStages - 1, smem0 + write_stage * kMmaStageBytes, q_dst);
    sm80::cp_async_commit();
    const uint32_t stage = smem0 + read_stage * kMmaStageBytes;
#pragma unroll
    for (int ks = 0; ks < kMmaK / 16; ++ks) {
      // A: P rows lane % 16, chunk 2 ks + lane / 16 (the four 8x8 matrices in a[0..3]'s order).
      uint32_t pa[4];
      sm80::ldmatrix_x4(pa, stage + mma_swizzle<kPChunks>(lane % 16, 2 * ks + lane / 16));
#pragma unroll
      for (int j = 0; j < kMmaWarpCols / 8; j += 2) {
        // B for mma columns j and j + 1: r[0..1] and r[2..3].
        const int col = warp * kMmaWarpCols + j * 8;  // the pair's first column in the block tile
        uint32_t r[4];
        if constexpr (kQCols) {
          // "cols": lanes 8i..8i+7 address matrix i = (column tile j + i / 2, k half i % 2): its 8 columns' rows.
          sm80::ldmatrix_x4(r, stage + kPStageBytes +
                                   mma_swizzle<kQChunks>(col + 8 * (lane / 16) + lane % 8, 2 * ks + (lane / 8) % 2));
        } else {
          // "rows": k rows 16 ks + lane % 16, the chunk of column tile j (lanes < 16) or j + 1, transposed.
          sm80::ldmatrix_x4_trans(
              r, stage + kPStageBytes + mma_swizzle<kQChunks>(16 * ks + lane % 16, col / kChunkElems + lane / 16));
        }
        const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
        sm80::mma_m16n8k16<kBf16>(acc[j], pa, b0);
        sm80::mma_m16n8k16<kBf16>(acc[j + 1], pa, b1);
      }
    }
    read_stage = read_stage + 1 == kMmaStages ? 0 : read_stage + 1;
    write_stage = write_stage + 1 == kMmaStages ? 0 : write_stage + 1;
    q_dst = write_stage == 0 ? q_dst - (kMmaStages - 1) * kMmaStageBytes : q_dst + kMmaStageBytes;
  }
  sm80::cp_async_wait<0>();
  // acc[j][h] is out[g + 8 (h / 2)][l0 + warp's columns + 8 j + 2 t + h % 2] (g = lane / 4, t = lane % 4).
  const int g = lane / 4, t = lane % 4;
  if (a.cluster > 1) {
    // The block's 16 x kMmaCols sums go to shared memory (the stages, now read by no one) for the cluster.
    __syncthreads();
    float* tile = reinterpret_cast<float*>(smem);
#pragma unroll
    for (int j = 0; j < kMmaWarpCols / 8; ++j)
#pragma unroll
      for (int h = 0; h < 4; ++h)
        tile[(g + 8 * (h / 2)) * kMmaCols + warp * kMmaWarpCols + 8 * j + 2 * t + h % 2] = acc[j][h];
    cluster_sum_store(a, tile, 16 * kMmaCols, [&](int i, int& s, int& l) {
      s = i / kMmaCols;
      l = l0 + i % kMmaCols;
    });
    return;
  }
#pragma unroll
  for (int j = 0; j < kMmaWarpCols / 8; ++j) {
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      const int s = g + 8 * (h / 2), l = l0 + warp * kMmaWarpCols + 8 * j + 2 * t + h % 2;
      if (s < a.S && l < a.L) store_out(a, s, l, acc[j][h]);
    }
  }
#endif
}

// out[s][l] = sum over splits of the partial sums, in split order, rounded to T; every matrix of the batch.
template <typename T, typename Acc>
__global__ void __launch_bounds__(kThreads) matmul_kernel_matvec_reduce(SkinnyArgs<T, Acc> a, int splits) {
  const int64_t n = int64_t{a.S} * a.L;
  for (int64_t j = blockIdx.x * int64_t{kThreads} + threadIdx.x; j < n * a.batch; j += int64_t{gridDim.x} * kThreads) {
    const int64_t m = j / n, i = j - m * n;  // matrix m, its output i
    Acc sum = 0;
    for (int split = 0; split < splits; ++split) sum += a.partial[m * a.partial_batch + split * n + i];
    const int s = static_cast<int>(i / a.L), l = static_cast<int>(i % a.L);
    a.c[m * a.c_batch + s * a.cs + l * a.cl] = static_cast<T>(sum);
  }
}

// Rows of S per thread ("rows") or per block ("cols"), by S. "rows" in 16-bit types (when the mma kernel does
// not take them) gives each thread at most 4, as their threads hold twice the columns (8 x 8 accumulators left one
// block per SM, too few loads in flight), and splits the rest over warps; float32 and float64 take up to 16 rows
// a thread, P staged in shared memory (8 rows a thread over two warp groups, P read 16 bytes at a time from global
// memory, measured slower).
int rows_per_thread(int S, bool cols, int element_size) {
  if (S == 1) return 1;
  if (S <= 4 || (!cols && element_size == 2)) return 4;
  if (cols) return 16;
  return S <= kPSharedRows ? kPSharedRows : 16;
}

// Blocks per SM the K splits of the CUDA-core kernels aim at. More splits mean more loads in flight but more partial
// sums to add; the matvec_blocks_per_sm tuning knob (cuda/matmul/tuning.h) overrides it, for the "mma" kernel too
// (mma_splits otherwise). 2 for "cols" at one row, 4 for the others: what measured fastest on the H100
// (docs/matmul.md).
constexpr int kBlocksPerSmFew = 2, kBlocksPerSmMany = 4;

// A tuning knob's value (positive when set), or `fallback` when it is unset.
int knob_or(int64_t knob, int fallback) {
  return knob > 0 ? static_cast<int>(std::min<int64_t>(knob, 1 << 30)) : fallback;
}
int blocks_per_sm_target(int default_target) {
  return knob_or(tuning().matvec_blocks_per_sm, default_target);
}

// The "mma" kernel's K splits: the fewest that give every SM a block, or more where they take less time through the
// busiest SM, counted as its blocks (the split's block count over the SMs, rounded up) times each block's slabs plus
// one (a block's fixed cost: prologue and the adding up of splits). Counts that would put more than
// kMmaBlocksPerSmMax blocks on an SM are weighed only where every count would (3 fit an H100 SM, and a third
// block measured slower). On the H100 this was faster than a fixed 2 blocks an SM at 51 of the corpus's 55 decode
// shapes (docs/matmul.md). Up to kMmaSplitsSearched counts are weighed (each costs a call's host time a few
// divisions; past the first 16 no shape of the benchmark's corpus would choose another).
constexpr int64_t kMmaSplitsSearched = 16, kMmaBlocksPerSmMax = 2;
int64_t mma_splits(int64_t tiles, int64_t slabs, int64_t sms, int64_t splits_max) {
  const int64_t first = std::clamp<int64_t>(ceil_div<int64_t>(sms, tiles), 1, splits_max);
  const bool crowded = tiles * first > kMmaBlocksPerSmMax * sms;  // then every count is: weigh them all
  int64_t best = first, best_load = -1;
  for (int64_t want = first; want <= std::min(splits_max, first + kMmaSplitsSearched - 1); ++want) {
    const int64_t per_split = ceil_div<int64_t>(slabs, want);    // slabs a block (whole slabs, so
    const int64_t splits = ceil_div<int64_t>(slabs, per_split);  // fewer splits may cover K)
    if (!crowded && tiles * splits > kMmaBlocksPerSmMax * sms) break;
    const int64_t load = ceil_div<int64_t>(tiles * splits, sms) * (per_split + 1);
    if (best_load < 0 || load < best_load) best = splits, best_load = load;
  }
  return best;
}

// The "mma" kernel takes 16-bit problems with at least this many rows: all, as it measured faster than the "rows"
// kernel at every S on the H100, 1 row included (its cp.async pipeline keeps more loads in flight). The
// matvec_mma_min_rows tuning knob overrides it; 17 turns it off.
constexpr int kMmaMinRows = 1;
int mma_min_rows() {
  return knob_or(tuning().matvec_mma_min_rows, kMmaMinRows);
}

// Where clusters are used (launch_typed), at most this many K splits form one (8: the portable cluster size; the
// mma kernel's exception is below); more wanted splits are cut to it. The matvec_cluster_splits tuning knob overrides
// it: 1 turns clusters off (the workspace and the reduce kernel, as on GPUs before sm_90), up to 16 on an H100 (a
// non-portable size).
constexpr int kMaxClusterSplits = 8, kPortableClusterSize = 8;
int max_cluster_splits() {
  return knob_or(tuning().matvec_cluster_splits, kMaxClusterSplits);
}

// The "mma" kernel's splits where no knob sets the cluster size (launch_typed): with few column tiles (a weight of
// at most 768 columns on an H100) clusters of kMaxClusterSplits leave a quarter of the SMs or more without a
// block, so there they may hold kWideClusterSplits blocks (a non-portable size, where the GPU can schedule it); and
// where the clusters (of 8, or of 16 where allowed) still leave SMs idle on a read of at least kReduceMinQBytes, all
// the wanted splits go through the workspace and the reduce kernel instead, its second launch costing less than the
// idle SMs (docs/matmul.md has the sweep).
constexpr int kWideClusterSplits = 16;
constexpr int64_t kReduceMinQBytes = int64_t{32} << 20;

// The most blocks a cluster of the mma kernel may hold on `device`, up to kWideClusterSplits (every mma kernel has
// the same block and shared memory), read once per device.
template <typename T>
int mma_cluster_limit(int device) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices] = {};  // 0 = not read yet; racing first reads store the same value
  const bool cacheable = device >= 0 && device < kMaxDevices;
  const int cached = cacheable ? cache[device].load(std::memory_order_relaxed) : 0;
  if (cached != 0) return cached;
  constexpr auto* kernel = &matmul_kernel_matvec_mma<T, true, false>;
  opt_in_dynamic_smem<kernel>(kMmaSmemBytes, device);
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(1, kWideClusterSplits, 1);
  config.blockDim = dim3(kMmaThreads);
  config.dynamicSmemBytes = kMmaSmemBytes;
  int size = 0;
  // A GPU that refuses non-portable sizes keeps the portable one (the error is cleared: nothing failed).
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess ||
      cudaOccupancyMaxPotentialClusterSize(&size, kernel, &config) != cudaSuccess) {
    (void)cudaGetLastError();
    size = kPortableClusterSize;
  }
  const int limit = std::clamp(size, kPortableClusterSize, kWideClusterSplits);
  if (cacheable) cache[device].store(limit, std::memory_order_relaxed);
  return limit;
}

// Clusters need an sm_90+ GPU and this file's kernels built for it (every kernel of a file is built for the same
// architectures, so the reduce kernel answers for all).
bool clusters_available(int device) {
  return detail::cached_device_attribute<cudaDevAttrClusterLaunch>(device) != 0 &&
         kernel_ptx_version<&matmul_kernel_matvec_reduce<float, float>>(device) >= 90;
}

// Lets `kernel` launch clusters of more than 8 blocks on the current device, once per kernel and device (the call
// costs host time, and the mma kernel takes such clusters by default for narrow weights).
void allow_nonportable_clusters(const void* kernel) {
  int device = 0;
  CUDA_KERNELS_CUDA_CHECK(cudaGetDevice(&device));
  static std::mutex mutex;
  static std::set<std::pair<const void*, int>> allowed;
  const std::lock_guard<std::mutex> lock(mutex);
  if (allowed.count({kernel, device}) != 0) return;
  CUDA_KERNELS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  allowed.insert({kernel, device});
}

// Launches kernel<<<grid, threads, smem, stream>>>(args...), as a grid of clusters of `cluster` blocks along y when
// cluster > 1.
template <typename... Params, typename... Actual>
void launch(void (*kernel)(Params...), dim3 grid, int threads, size_t smem, cudaStream_t stream, int cluster,
            Actual&&... args) {
  if (cluster <= 1) {
    kernel<<<grid, threads, smem, stream>>>(std::forward<Actual>(args)...);
    CUDA_KERNELS_LAUNCH_CHECK();
    return;
  }
  if (cluster > kPortableClusterSize) allow_nonportable_clusters(reinterpret_cast<const void*>(kernel));
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = 1;
  attr.val.clusterDim.y = static_cast<unsigned>(cluster);
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = &attr;
  config.numAttrs = 1;
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel, std::forward<Actual>(args)...);
  if (err != cudaSuccess) (void)cudaGetLastError();  // cleared: the error is reported here
  CUDA_KERNELS_CHECK(err == cudaSuccess, "cuda_kernels.matmul: matvec: launching clusters of ", cluster,
                     " blocks failed: ", cudaGetErrorString(err),
                     " (the matvec_cluster_splits tuning knob sets their most; 1 turns clusters off)");
}

// Launches the "mma" kernel (launch_typed asks for it with 16-bit T only).
template <typename T, bool kQCols, bool kBatched>
void launch_mma(const dim3& grid, const SkinnyArgs<T, opmath_type<T>>& args, int device, cudaStream_t stream) {
  if constexpr (sizeof(T) == 2) {
    constexpr auto* kernel = &matmul_kernel_matvec_mma<T, kQCols, kBatched>;
    opt_in_dynamic_smem<kernel>(kMmaSmemBytes, device);
    launch(kernel, grid, kMmaThreads, kMmaSmemBytes, stream, args.cluster, args);
  } else {
    fail("cuda_kernels.matmul: matvec's mma kernel takes float16 and bfloat16 only");
  }
}

template <typename T>
void launch_typed(SkinnyArgs<T, opmath_type<T>> args, bool cols, int device, cudaStream_t stream,
                  Workspace& workspace) {
  using Acc = opmath_type<T>;
  constexpr int kV = vec_of<T>();
  const int S = args.S, L = args.L, K = args.K;
  // "mma": 16-bit, 16-byte vectors of Q and whole chunks (L % 8 == 0 for "rows", K % 8 == 0 for "cols"), mma.sync
  // (compute >= 8.0), S <= 16 (one mma's rows; forced on more, S is split over grid.z by the other kernels).
  bool mma = false;
  if constexpr (sizeof(T) == 2) {
    mma = args.vec && (cols ? K % kChunkElems == 0 : L % kChunkElems == 0) && S <= 16 && S >= mma_min_rows() &&
          detail::cached_device_attribute<cudaDevAttrComputeCapabilityMajor>(device) >= 8;
  }
  const int sr = rows_per_thread(S, cols, sizeof(T));
  // "rows": the warps split S too (s groups of sr rows) when S > sr: 1, 2 or 4 groups (divisors of kWarps), unless
  // P is staged in shared memory (sr >= kPSharedRows).
  int groups = 1;
  while (!cols && sr < kPSharedRows && groups < kMaxGroups && groups * sr < S) groups *= 2;
  const int64_t l_tiles = ceil_div<int64_t>(L, mma ? kMmaCols : (cols ? kWarps * kCols : 32 * kV));
  const int64_t s_blocks = mma ? 1 : ceil_div<int64_t>(S, sr * groups);
  CUDA_KERNELS_CHECK(s_blocks <= kMaxGridYZ, "cuda_kernels.matmul: matvec: ", S,
                     " rows on the short side are too many");
  // A batch's matrices share grid.z with the blocks of S rows: as many as fit in one launch (more: more launches).
  const int64_t batch = args.batch, per_launch = std::min<int64_t>(batch, kMaxGridYZ / s_blocks);
  if (per_launch < batch) {
    for (int64_t first = 0; first < batch; first += per_launch) {
      SkinnyArgs<T, Acc> part = args;
      part.batch = static_cast<int>(std::min(per_launch, batch - first));
      part.p += first * args.p_batch;
      part.q += first * args.q_batch;
      part.c += first * args.c_batch;
      launch_typed<T>(part, cols, device, stream, workspace);
    }
    return;
  }
  // Split K (memory-bound: every SM needs loads in flight), each split a whole number of `align` k: "mma" by
  // mma_splits, the others until the GPU has about blocks_per_sm_target(...) blocks per SM.
  const int align = mma ? kMmaK : (cols ? 32 * kV : kKAlignRows);
  const int64_t tiles = l_tiles * s_blocks * batch;  // blocks per split
  const int64_t splits_max = std::min<int64_t>(ceil_div<int64_t>(K, align), kMaxGridYZ);
  int64_t splits = 0;
  if (mma && tuning().matvec_blocks_per_sm <= 0) {
    splits = mma_splits(tiles, ceil_div<int64_t>(K, align), sm_count(device), splits_max);
  } else {
    const int64_t resident =
        int64_t{sm_count(device)} * blocks_per_sm_target((cols && S == 1) ? kBlocksPerSmFew : kBlocksPerSmMany);
    splits = std::clamp<int64_t>(ceil_div<int64_t>(resident, tiles), 1, splits_max);
  }
  // Clusters where they measured faster on the H100 (docs/matmul.md): not for float64, whose kernels ran as fast or
  // faster with the reduce kernel, nor for "rows" with 16 rows a thread (register-heavy blocks, two an SM).
  const bool cluster_pays = sizeof(T) <= 4 && (mma || cols || sr < 16);
  bool cluster = cluster_pays && splits > 1 && max_cluster_splits() > 1 && clusters_available(device);
  if (cluster) {
    int64_t cap = max_cluster_splits();
    if constexpr (sizeof(T) == 2) {
      if (mma && tuning().matvec_cluster_splits <= 0) {  // the mma kernel's own choice (kWideClusterSplits says why)
        const int64_t sms = sm_count(device);
        if (4 * tiles * cap <= 3 * sms) cap = std::max<int64_t>(cap, mma_cluster_limit<T>(device));
        const int64_t q_bytes = int64_t{K} * L * static_cast<int64_t>(sizeof(T)) * (args.q_batch != 0 ? batch : 1);
        if (tiles * std::min(splits, cap) < sms && q_bytes >= kReduceMinQBytes) cluster = false;
      }
    }
    if (cluster) splits = std::min(splits, cap);
  }
  args.kc = static_cast<int>(ceil_div<int64_t>(ceil_div<int64_t>(K, splits), align) * align);
  splits = ceil_div<int64_t>(K, args.kc);
  args.cluster = cluster && splits > 1 ? static_cast<int>(splits) : 0;
  args.s_blocks = static_cast<int>(s_blocks);
  if (splits > 1 && args.cluster == 0) {
    args.partial_batch = splits * S * L;
    args.partial = static_cast<Acc*>(workspace.alloc(sizeof(Acc) * args.partial_batch * batch));
  }
  const dim3 grid(static_cast<unsigned>(l_tiles), static_cast<unsigned>(splits),
                  static_cast<unsigned>(s_blocks * batch));
  const int cl = args.cluster;
  // The kernels for a batch, or for one matrix (matrix_of_block says why both).
  const auto run = [&](auto batched) {
    constexpr bool kB = decltype(batched)::value;
    if (mma) {
      cols ? launch_mma<T, true, kB>(grid, args, device, stream) : launch_mma<T, false, kB>(grid, args, device, stream);
    } else if (cols) {
      if (sr == 1) launch(matmul_kernel_matvec_cols<T, Acc, 1, kB>, grid, kThreads, 0, stream, cl, args);
      if (sr == 4) launch(matmul_kernel_matvec_cols<T, Acc, 4, kB>, grid, kThreads, 0, stream, cl, args);
      if (sr == 16) launch(matmul_kernel_matvec_cols<T, Acc, 16, kB>, grid, kThreads, 0, stream, cl, args);
    } else {
      if (sr == 1) launch(matmul_kernel_matvec_rows<T, Acc, 1, kB>, grid, kThreads, 0, stream, cl, args, groups);
      if (sr == 4) launch(matmul_kernel_matvec_rows<T, Acc, 4, kB>, grid, kThreads, 0, stream, cl, args, groups);
      if constexpr (sizeof(T) != 2) {  // 16-bit types take at most 4 rows a thread (rows_per_thread)
        if (sr == 8) launch(matmul_kernel_matvec_rows<T, Acc, 8, kB>, grid, kThreads, 0, stream, cl, args, groups);
        if (sr == 16) launch(matmul_kernel_matvec_rows<T, Acc, 16, kB>, grid, kThreads, 0, stream, cl, args, groups);
      }
    }
  };
  if (batch > 1) {
    run(std::true_type{});
  } else {
    run(std::false_type{});
  }
  if (splits > 1 && cl == 0) {
    const int64_t blocks =
        std::min<int64_t>(ceil_div<int64_t>(int64_t{S} * L * batch, kThreads), int64_t{sm_count(device)} * 8);
    matmul_kernel_matvec_reduce<T, Acc>
        <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args, static_cast<int>(splits));
    CUDA_KERNELS_LAUNCH_CHECK();
  }
}

// A stride of a size-1 dimension is never used: call it 1, so that layouts are judged by the dimensions that
// matter (a 1 x K row is "contiguous along k" whatever its row stride).
int64_t stride_or_unit(int64_t size, int64_t stride) {
  return size == 1 ? 1 : stride;
}

}  // namespace

void launch_matvec(const Args& args) {
  const int64_t M = args.M, N = args.N, K = args.K;
  CUDA_KERNELS_CHECK(
      M < (int64_t{1} << 31) && N < (int64_t{1} << 31) && K < (int64_t{1} << 31) && args.batch < (int64_t{1} << 31),
      "cuda_kernels.matmul: matvec takes M, N, K and a batch < 2^31, got ", M, " x ", N, " x ", K, " (batch ",
      args.batch, ")");
  // Short side S, long side L; P (S x K) and Q (K x L) as views of a and b (or of b^T and a^T), C's (s, l)
  // strides.
  const bool m_short = M <= N;
  const int64_t S = m_short ? M : N, L = m_short ? N : M;
  const void* p = m_short ? args.a : args.b;
  const void* q = m_short ? args.b : args.a;
  int64_t ps = stride_or_unit(S, m_short ? args.sa0 : args.sb1), pk = stride_or_unit(K, m_short ? args.sa1 : args.sb0);
  int64_t qk = stride_or_unit(K, m_short ? args.sb0 : args.sa1), ql = stride_or_unit(L, m_short ? args.sb1 : args.sa0);
  // A batch: the matrices' strides (0: one matrix for all, copied once where it is copied).
  const int64_t batch = args.batch;
  int64_t p_batch = batch > 1 ? (m_short ? args.sa_batch : args.sb_batch) : 0;
  int64_t q_batch = batch > 1 ? (m_short ? args.sb_batch : args.sa_batch) : 0;
  // Neither layout (e.g. a sliced or expanded view): copy Q row-major, the "rows" layout.
  if (qk != 1 && ql != 1) {
    const int64_t copies = q_batch == 0 ? 1 : batch;
    q = args.workspace->copy_3d(q, args.dtype, copies, K, L, q_batch, qk, ql, L);
    q_batch = copies > 1 ? K * L : 0;
    qk = stride_or_unit(K, L);
    ql = 1;
  }
  const bool cols = qk == 1 && ql != 1;
  // "cols" reads P along k 16 bytes at a time: P (S x K, small) is copied row-major when it is not laid out so
  // (e.g. P = B^T for row-major B), with its rows padded to whole vectors.
  const int64_t kV = 16 / dtype_size(args.dtype);
  // Rows of P 16-byte aligned: an aligned base and a row pitch of whole vectors (any, for one row), in every matrix
  // of a batch.
  const auto p_rows_aligned = [&] { return is_aligned(p, 16) && (S == 1 || ps % kV == 0) && p_batch % kV == 0; };
  if (cols && (pk != 1 || !p_rows_aligned())) {
    const bool contiguous = pk == 1 && (S == 1 || ps == K) && (p_batch == 0 || p_batch % kV == 0);
    const bool pad = S > 1 && K % kV != 0;
    if (!contiguous || pad) {
      const int64_t pitch = pad ? ceil_div<int64_t>(K, kV) * kV : K;
      const int64_t copies = p_batch == 0 ? 1 : batch;
      p = args.workspace->copy_3d(p, args.dtype, copies, S, K, p_batch, ps, pk, pitch);
      p_batch = copies > 1 ? S * pitch : 0;
      ps = stride_or_unit(S, pitch);
      pk = 1;
    }
  }
  dispatch_dtype(args.dtype, [&](auto t) {
    using scalar_t = decltype(t);
    constexpr int kVec = vec_of<scalar_t>();
    // 16-byte loads of Q: an aligned base, and the pitch between vectors a whole number of them.
    const int64_t pitch = cols ? ql : qk;
    const int64_t vectors = cols ? L : K;  // Q's vectors run along its other dimension
    const bool vec = is_aligned(q, 16) && (vectors == 1 || pitch % kVec == 0) && q_batch % kVec == 0;
    // P's rows may come from any layout; contiguous along k ("cols" reads them along k) they are read 16 bytes
    // at a time too.
    const bool p_vec = pk == 1 && p_rows_aligned();
    SkinnyArgs<scalar_t, opmath_type<scalar_t>> skinny{static_cast<const scalar_t*>(p),
                                                       ps,
                                                       pk,
                                                       static_cast<const scalar_t*>(q),
                                                       qk,
                                                       ql,
                                                       args.c_ptr<scalar_t>(),
                                                       m_short ? N : 1,
                                                       m_short ? 1 : N,
                                                       nullptr,
                                                       static_cast<int>(S),
                                                       static_cast<int>(L),
                                                       static_cast<int>(K),
                                                       0,
                                                       vec,
                                                       p_vec,
                                                       0};
    skinny.batch = static_cast<int>(batch);
    skinny.p_batch = p_batch;
    skinny.q_batch = q_batch;
    skinny.c_batch = M * N;
    launch_typed<scalar_t>(skinny, cols, args.device, args.stream, *args.workspace);
  });
}

}  // namespace cuda_kernels::matmul_ladder
