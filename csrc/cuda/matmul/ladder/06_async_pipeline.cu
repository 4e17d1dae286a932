// Ladder step 6: a multi-stage cp.async pipeline and tile sizes tuned for the H100.
//
// Step 5 stages the next slab in registers: 16 registers per thread that the accumulators cannot use, a load ->
// store round trip through the register file, and a prefetch distance of one slab. Here the loads are cp.async
// copies (sm_80+) that go from global to shared memory without touching registers, kStages slabs deep: while the
// FMAs run on slab t, slabs t + 1 .. t + kStages - 1 are in flight. The registers freed let two blocks of 256
// threads (8 x 8 outputs each, at most 128 registers) share an SM, so one block's FMAs fill the other's barrier
// waits. The float32 tile (BigConfig) is 128 x 128 with 32-deep slabs in 3 stages: 100 KB of shared memory per
// block, 200 KB per SM, more than the static 48 KB limit, so it is dynamic shared memory enabled with
// cudaFuncSetAttribute (the H100 has 228 KB per SM). Deeper slabs mean fewer barriers and less copy overhead per
// FMA: the unrolled loop of a slab is 2048 FMAs and ~240 other instructions.
//  - A is still stored transposed: it is copied element by element (4-byte cp.async, which may scatter), each
//    warp copying 8 consecutive k of 4 rows, which with the 4-word row padding hits 32 different banks.
//  - B goes in 16-byte copies when its rows are 16-byte aligned (float32, N % 4 == 0), else element by element.
//    A K-major B (b = W.t() of a weight W stored (N, K), as nn.Linear keeps it) is copied as A is, transposed
//    element by element into the same padded layout, instead of being copied to row-major by the caller first
//    (for few rows, that copy of W cost as much as the product).
//  - Out-of-range elements are zero-filled by the copy itself (cp.async's src-size operand); tiles and slabs
//    that lie wholly inside the matrices (all but the edges) skip the bounds checks.
//  - Blocks walk the output in groups of kGroupM row tiles (column by column inside a group), so the blocks
//    running at the same time share rows of A and columns of B in L2.
//  - Too few tiles to fill the GPU (small M or N, e.g. 1024^3, or M = 1): K is split over several blocks that
//    write partial products, summed by a second kernel (float32). M <= 16 uses 16-row tiles. Small problems
//    (M <= 64, or too few 128 x 128 tiles for one block per SM even with K split: 512^3) use 32 x 64 tiles, K
//    split too: a 256^3 product is 4 big tiles, so 4 busy SMs, and splitting K alone leaves each of them a long
//    chain of slabs.
// float16/bfloat16 are converted to float on the way into shared memory, so they use plain loads and stores
// instead of cp.async (correct, not tuned); float64 uses 8-byte cp.async. Both run a small tile configuration.
//
// Shared memory: BigConfig's 99,840 bytes (97.5 KiB) per block fit sm_80, sm_86/89 (99 KiB opt-in) and sm_90 on,
// not sm_75 (64 KiB) or sm_70 (96 KiB). The launcher reads the device's opt-in limit per block
// (cudaDevAttrMaxSharedMemoryPerBlockOptin) and takes the first configuration of its preference list that fits;
// the last of each list fits the 48 KiB that every device gives without opting in. The tuning knob
// smem_limit_bytes (cuda/matmul/tuning.h) caps the limit the launcher believes, so one GPU can exercise the choices
// made on smaller ones (tests/ops/test_matmul_smem_limit.py).
//
// Tuning: kFp32Configs lists the float32 configurations compiled in; the launcher picks one by shape, and the
// knobs config06 and splits06 (cuda/matmul/tuning.h) force a configuration and a split-K factor
// (scripts/tune_matmul.py uses them). Compiling with
// -DCUDA_KERNELS_MATMUL_TUNING (e.g. NVCC_APPEND_FLAGS=-DCUDA_KERNELS_MATMUL_TUNING pip install ...) adds the
// candidates that lost on the H100, to re-tune on another GPU; docs/matmul.md has their timings.
#include <algorithm>
#include <cstring>
#include <string>

#include "cuda/matmul/args.h"
#include "cuda/matmul/pack4.cuh"
#include "cuda/matmul/tuning.h"
#include "cuda/utils.cuh"

namespace cuda_kernels::matmul_ladder {
namespace {

constexpr int kAPad = 4;    // extra words per As row: keeps 16-byte alignment, makes the transposing copies
                            // of a warp (8 k x 4 rows) land in 32 different banks
constexpr int kGroupM = 8;  // row tiles per group in the block order (L2 reuse)

// A block tile configuration. kBM x kBN outputs per block, kBK-deep slabs, kWM x kWN per warp, kTM x kTN per
// thread (in 4 x 4 sub-tiles), kStages shared-memory slabs, and the minimum blocks per SM given to
// __launch_bounds__ (2 caps registers at 65536 / (2 * threads)).
template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int Stages, int MinBlocks>
struct Config {
  static constexpr int kBM = BM, kBN = BN, kBK = BK, kWM = WM, kWN = WN, kTM = TM, kTN = TN;
  static constexpr int kStages = Stages, kMinBlocks = MinBlocks;
  static constexpr int kLanesM = WM / TM;  // lanes of a warp along M
  static constexpr int kLanesN = WN / TN;  // ... and along N
  static constexpr int kWarpsN = BN / WN;
  static constexpr int kThreads = 32 * (BM / WM) * kWarpsN;
  static constexpr int kAStride = BM + kAPad;  // words between consecutive k in the transposed A slab
  static constexpr int kAStage = BK * kAStride;
  // Words between consecutive k in the B slab: a row-major B's rows as they are; a K-major B is transposed on
  // the way in, as A is, and padded as A is.
  static constexpr int b_stride(bool b_k_major) { return b_k_major ? BN + kAPad : BN; }
  static constexpr int b_stage(bool b_k_major) { return BK * b_stride(b_k_major); }
  static_assert(kLanesM * kLanesN == 32, "a warp tile must hold exactly 32 thread patches");
  static_assert(BM % WM == 0 && BN % WN == 0 && TM % 4 == 0 && TN % 4 == 0);
  static_assert(BK % 8 == 0 && BM % (kThreads / 8) == 0, "A copies: 8 consecutive k of kThreads / 8 rows");
  static_assert(BN % (kThreads / 8) == 0, "K-major B copies: as A's, 8 consecutive k of kThreads / 8 columns");
  static_assert((BM * BK) % kThreads == 0 && (BK * BN) % kThreads == 0);
  static_assert(Stages >= 2);
  template <typename acc_t>
  static constexpr size_t smem_bytes(bool b_k_major = false) {
    return static_cast<size_t>(kStages) * (kAStage + b_stage(b_k_major)) * sizeof(acc_t);
  }
};

// Copies kBytes from global src to shared dst, asynchronously on sm_80+; with valid = false it writes zeros
// and reads nothing (src must still be a valid address: callers pass the matrix base).
template <int kBytes>
__device__ __forceinline__ void cp_async_zfill(void* dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned saddr = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int src_bytes = valid ? kBytes : 0;
  if constexpr (kBytes == 16) {
    // .cg: bypass L1 (each 16-byte piece is read once per block).
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(saddr), "l"(src), "r"(src_bytes));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(saddr), "l"(src), "n"(kBytes), "r"(src_bytes));
  }
#else
  struct alignas(kBytes) Chunk {
    unsigned char b[kBytes];
  };
  *static_cast<Chunk*>(dst) = valid ? *static_cast<const Chunk*>(src) : Chunk{};
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
// Waits until at most n of this thread's committed copy groups are still in flight.
template <int n>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(n) : "memory");
#endif
}

// One element into shared memory: cp.async when no conversion is needed, else a load, convert and store.
template <typename acc_t, typename scalar_t>
__device__ __forceinline__ void copy_elem(acc_t* dst, const scalar_t* src, const scalar_t* base, bool valid) {
  if constexpr (std::is_same_v<acc_t, scalar_t>) {
    cp_async_zfill<sizeof(acc_t)>(dst, valid ? src : base, valid);
  } else {
    *dst = valid ? static_cast<acc_t>(*src) : acc_t(0);
  }
}

// Copies the slabs of one block tile (rows row0 + [0, BM) of A, columns col0 + [0, BN) of B), one per call of
// load_next(), into pipeline stages. Address and bounds arithmetic is done once per tile; each slab only moves
// two pointers and one counter. A is (M, k_len) with row pitch lda; B is (k_len, N) with row pitch ldb, or with
// kBKMajor K-major: element (k, n) at B[n * ldb + k] (then copied as A is, kVec or not).
template <class Cfg, bool kVec, bool kBKMajor, typename scalar_t>
struct TileLoader {
  using acc_t = opmath_type<scalar_t>;
  static constexpr int T = Cfg::kThreads, BM = Cfg::kBM, BN = Cfg::kBN, BK = Cfg::kBK;
  // A: element e = tid + l * T of the slab is row (e / 8) % BM, k 8 * ((e / 8) / BM) + e % 8: a warp copies
  // 8 consecutive k of 4 consecutive rows (four full 32-byte sectors). As BM % (T / 8) == 0, this thread's
  // row and k move by compile-time steps with l: rows by T / 8 per pass over the rows, k by 8 per full pass.
  static constexpr int kARowsPerPass = T / 8;
  // B (kVec): 16-byte chunk e = tid + l * T is row e / (BN / 4), columns 4 * (e % (BN / 4)) + [0, 4); as
  // T % (BN / 4) == 0, this thread's column is fixed and its row moves by T / (BN / 4).
  static constexpr int kBChunksPerRow = BN / 4;

  const scalar_t* a_src;  // this thread's first A element of the next slab
  const scalar_t* b_src;  // kVec: this thread's first B chunk of the next slab; kBKMajor: its first B element
  int64_t k_len;          // the tile's K extent
  int64_t k_left;         // k_len minus the next slab's first k
  int a_rows_left;        // rows of A from this thread's first row to the end of the matrix (capped at BM)
  bool b_col_ok;          // kVec: this thread's B column lies inside the matrix
  int b_cols_left;        // kBKMajor: columns of B from this thread's first column to the end (capped at BN)
  bool full_tile;         // every row and column of the tile exists: only k can run out
  int64_t col0;           // !kVec: the tile's first column

  __device__ __forceinline__ TileLoader(const scalar_t* A, int64_t lda, const scalar_t* B, int64_t ldb, int64_t M,
                                        int64_t N, int64_t k_len_, int64_t row0, int64_t col0_)
      : k_len(k_len_), k_left(k_len_), col0(col0_) {
    static_assert(!kVec || T % kBChunksPerRow == 0, "B copy mapping");
    const int tid = threadIdx.x;
    full_tile = row0 + BM <= M && col0 + BN <= N;
    a_rows_left = static_cast<int>(std::min<int64_t>(M - row0 - tid / 8, BM));
    a_src = A + (row0 + tid / 8) * lda + tid % 8;
    if constexpr (kBKMajor) {  // B's columns are laid out as A's rows: the same mapping, columns for rows
      b_cols_left = static_cast<int>(std::min<int64_t>(N - col0 - tid / 8, BN));
      b_src = B + (col0 + tid / 8) * ldb + tid % 8;
    } else if constexpr (kVec) {
      const int64_t col = col0 + 4 * (tid % kBChunksPerRow);
      b_col_ok = col < N;
      b_src = B + (tid / kBChunksPerRow) * ldb + col;
    }
  }

  // Copies the next slab into the stage at As / Bs and moves on. A, B, lda, ldb, N are passed again: kernel
  // parameters are free to read, members take registers.
  __device__ __forceinline__ void load_next(acc_t* As, acc_t* Bs, const scalar_t* A, int64_t lda, const scalar_t* B,
                                            int64_t ldb, int64_t N) {
    // Full slab of a full tile (all but the edges of the output and the last slab): no bounds checks at all.
    if (full_tile && k_left >= BK) {
      copy_slab<false>(As, Bs, A, lda, B, ldb, N);
    } else {
      copy_slab<true>(As, Bs, A, lda, B, ldb, N);
    }
    a_src += BK;
    if constexpr (kBKMajor) {
      b_src += BK;
    } else if constexpr (kVec) {
      b_src += BK * ldb;
    }
    k_left -= BK;
  }

  template <bool kChecked>
  __device__ __forceinline__ void copy_slab(acc_t* As, acc_t* Bs, const scalar_t* A, int64_t lda, const scalar_t* B,
                                            int64_t ldb, int64_t N) const {
    const int tid = threadIdx.x;
    const int a_k_left = kChecked ? static_cast<int>(std::min<int64_t>(k_left - tid % 8, BK)) : BK;
#pragma unroll
    for (int l = 0; l < BM * BK / T; ++l) {
      const int dr = (l * kARowsPerPass) % BM, dk = 8 * ((l * kARowsPerPass) / BM);
      const bool valid = !kChecked || (dr < a_rows_left && dk < a_k_left);
      copy_elem(&As[(tid % 8 + dk) * Cfg::kAStride + tid / 8 + dr], a_src + dr * lda + dk, A, valid);
    }
    if constexpr (kBKMajor) {
      // As A's loop, with B's columns for A's rows (the k mapping is the same, so is a_k_left).
      constexpr int kBStride = Cfg::b_stride(true);
#pragma unroll
      for (int l = 0; l < BN * BK / T; ++l) {
        const int dc = (l * kARowsPerPass) % BN, dk = 8 * ((l * kARowsPerPass) / BN);
        const bool valid = !kChecked || (dc < b_cols_left && dk < a_k_left);
        copy_elem(&Bs[(tid % 8 + dk) * kBStride + tid / 8 + dc], b_src + dc * ldb + dk, B, valid);
      }
    } else if constexpr (kVec) {
      const int b_k_left = kChecked ? static_cast<int>(std::min<int64_t>(k_left - tid / kBChunksPerRow, BK)) : BK;
#pragma unroll
      for (int l = 0; l < BK * BN / 4 / T; ++l) {
        const int dr = l * (T / kBChunksPerRow);
        const bool valid = !kChecked || (b_col_ok && dr < b_k_left);
        cp_async_zfill<16>(&Bs[(tid / kBChunksPerRow + dr) * BN + 4 * (tid % kBChunksPerRow)],
                           valid ? b_src + dr * ldb : B, valid);
      }
    } else {
      // Element by element: e = tid + l * T is row e / BN, column e % BN (a warp copies consecutive columns).
      const int64_t k0 = k_len - k_left;  // the slab's first row of B
#pragma unroll 4
      for (int e = tid; e < BK * BN; e += T) {
        const int r = e / BN, c = e % BN;
        const int64_t col = col0 + c;
        copy_elem(&Bs[r * BN + c], B + (k0 + r) * ldb + col, B, r < k_left && col < N);
      }
    }
  }
};

// Shared memory one SM offers blocks on the architecture being compiled (the device pass for each arch sees its
// own __CUDA_ARCH__): kMinBlocks is only promised to __launch_bounds__ where that many blocks fit, so the A100
// (164 KB, one 100 KB block) is not given a register cap it gains nothing from (ptxas spilled under it).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
constexpr size_t kArchSmemPerSm = 227 * 1024;
#elif __CUDA_ARCH__ == 800 || __CUDA_ARCH__ == 870
constexpr size_t kArchSmemPerSm = 163 * 1024;
#elif __CUDA_ARCH__ == 750
constexpr size_t kArchSmemPerSm = 64 * 1024;
#elif __CUDA_ARCH__ < 750
constexpr size_t kArchSmemPerSm = 96 * 1024;  // sm_70, sm_72
#else
constexpr size_t kArchSmemPerSm = 99 * 1024;
#endif
template <class Cfg, typename acc_t, bool kBKMajor>
constexpr int arch_min_blocks() {
  constexpr size_t kPerBlock = Cfg::template smem_bytes<acc_t>(kBKMajor) + 1024;  // + the 1 KB the driver reserves
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(Cfg::kMinBlocks, kArchSmemPerSm / kPerBlock)));
}

// C = A @ B for one block tile per block (blockIdx.x, in grouped order) of matrix blockIdx.z of a batch (A and B
// sa_batch and sb_batch elements apart, C M * N). Split-K: block (x, y, z) sums only k in [y * k_split,
// (y + 1) * k_split) and writes its partial tile to C + (y * gridDim.z + z) * M * N (the launcher then adds the
// gridDim.y partial products); without a split, gridDim.y = 1 and k_split = K. B's row pitch is ldb, or with
// kBKMajor B is K-major, its column pitch ldb.
template <class Cfg, typename scalar_t, bool kVec, bool kBKMajor>
__global__ void __launch_bounds__(Cfg::kThreads, (arch_min_blocks<Cfg, opmath_type<scalar_t>, kBKMajor>()))
    matmul_kernel_06_async_pipeline(const scalar_t* __restrict__ A, const scalar_t* __restrict__ B,
                                    scalar_t* __restrict__ C, int64_t M, int64_t N, int64_t K, int64_t ldb,
                                    int64_t k_split, int64_t sa_batch, int64_t sb_batch) {
  using acc_t = opmath_type<scalar_t>;
  constexpr int BM = Cfg::kBM, BN = Cfg::kBN, BK = Cfg::kBK, TM = Cfg::kTM, TN = Cfg::kTN, S = Cfg::kStages;
  constexpr int kBStride = Cfg::b_stride(kBKMajor), kBStage = Cfg::b_stage(kBKMajor);
  extern __shared__ __align__(128) unsigned char smem[];
  acc_t* const As = reinterpret_cast<acc_t*>(smem);  // kStages transposed A slabs, then kStages B slabs
  acc_t* const Bs = As + S * Cfg::kAStage;
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  // This thread's rows are wm0 + i * 4 * kLanesM + [0, 4) for sub-tile i < TM / 4, its columns
  // wn0 + j * 4 * kLanesN + [0, 4) for j < TN / 4: per k, the lanes of a warp read 4 * kLanesM adjacent A
  // values and 4 * kLanesN adjacent B values (conflict-free 16-byte loads, broadcast across lanes).
  const int wm0 = (warp / Cfg::kWarpsN) * Cfg::kWM + (lane / Cfg::kLanesN) * 4;
  const int wn0 = (warp % Cfg::kWarpsN) * Cfg::kWN + (lane % Cfg::kLanesN) * 4;
  const int64_t m_tiles = ceil_div<int64_t>(M, BM), n_tiles = ceil_div<int64_t>(N, BN);
  // Grouped order: tiles [g * kGroupM * n_tiles, (g + 1) * kGroupM * n_tiles) cover row tiles
  // g * kGroupM + [0, group_rows), walked down each column of tiles before moving right.
  const int64_t tile = blockIdx.x;
  const int64_t group = tile / (kGroupM * n_tiles);
  const int64_t first_m = group * kGroupM;
  const int64_t group_rows = std::min<int64_t>(m_tiles - first_m, kGroupM);
  const int64_t in_group = tile - group * kGroupM * n_tiles;
  const int64_t row0 = (first_m + in_group % group_rows) * BM;
  const int64_t col0 = (in_group / group_rows) * BN;
  A += blockIdx.z * sa_batch;
  B += blockIdx.z * sb_batch;
  C += (blockIdx.y * int64_t{gridDim.z} + blockIdx.z) * M * N;
  // This block's share of K: A's columns and B's rows from k_begin on, k_len of them.
  const int64_t k_begin = blockIdx.y * k_split;
  const int64_t k_len = std::min(K - k_begin, k_split);
  const int64_t k_tiles = ceil_div<int64_t>(k_len, BK);
  const scalar_t* const A_k = A + k_begin;
  const scalar_t* const B_k = B + (kBKMajor ? k_begin : k_begin * ldb);

  TileLoader<Cfg, kVec, kBKMajor, scalar_t> loader(A_k, K, B_k, ldb, M, N, k_len, row0, col0);
  // Prologue: slabs 0 .. S - 2 in flight, one commit group each (possibly empty, to keep the count).
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (s < k_tiles) loader.load_next(As + s * Cfg::kAStage, Bs + s * kBStage, A_k, K, B_k, ldb, N);
    cp_async_commit();
  }
  acc_t acc[TM][TN] = {};
  int read_stage = 0, write_stage = S - 1;
  for (int64_t kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<S - 2>();      // this thread's copies of slab kt have landed ...
    __syncthreads();             // ... and everyone's; everyone also finished slab kt - 1, whose stage is refilled
    if (kt + S - 1 < k_tiles) {  // slab kt + S - 1 goes into the stage that slab kt - 1 used
      loader.load_next(As + write_stage * Cfg::kAStage, Bs + write_stage * kBStage, A_k, K, B_k, ldb, N);
    }
    cp_async_commit();
    const acc_t* as = As + read_stage * Cfg::kAStage;
    const acc_t* bs = Bs + read_stage * kBStage;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      Pack4<acc_t> a_frag[TM / 4], b_frag[TN / 4];
#pragma unroll
      for (int i = 0; i < TM / 4; ++i) a_frag[i] = read4(as + k * Cfg::kAStride + wm0 + i * 4 * Cfg::kLanesM);
#pragma unroll
      for (int j = 0; j < TN / 4; ++j) b_frag[j] = read4(bs + k * kBStride + wn0 + j * 4 * Cfg::kLanesN);
#pragma unroll
      for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += a_frag[i / 4].v[i % 4] * b_frag[j / 4].v[j % 4];
      }
    }
    read_stage = read_stage + 1 == S ? 0 : read_stage + 1;
    write_stage = write_stage + 1 == S ? 0 : write_stage + 1;
  }
  cp_async_wait<0>();  // nothing is in flight any more (the last groups are empty); for form's sake

  // acc[i][j] is C(row0 + wm0 + (i / 4) * 4 * kLanesM + i % 4, col0 + wn0 + (j / 4) * 4 * kLanesN + j % 4):
  // a warp's 16-byte stores for one (i, j) cover kLanesM rows x 16 * kLanesN contiguous bytes.
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int64_t row = row0 + wm0 + (i / 4) * 4 * Cfg::kLanesM + i % 4;
    if (row >= M) continue;
#pragma unroll
    for (int j = 0; j < TN; j += 4) {
      const int64_t col = col0 + wn0 + (j / 4) * 4 * Cfg::kLanesN;
      scalar_t* dst = C + row * N + col;
      if constexpr (kVec) {
        if (col < N)
          *reinterpret_cast<float4*>(dst) = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          if (col + q < N) dst[q] = static_cast<scalar_t>(acc[i][j + q]);
        }
      }
    }
  }
}

// Split-K epilogue: C[i] = sum over s < splits of partial[s * mn + i], 4 elements per thread (mn % 4 == 0).
__global__ void matmul_kernel_06_splitk_reduce(const float* __restrict__ partial, float* __restrict__ C, int64_t mn,
                                               int splits) {
  const int64_t n4 = mn / 4;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n4; i += int64_t{gridDim.x} * blockDim.x) {
    float4 sum = reinterpret_cast<const float4*>(partial)[i];
    for (int s = 1; s < splits; ++s) {
      const float4 v = reinterpret_cast<const float4*>(partial + s * mn)[i];
      sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
    }
    reinterpret_cast<float4*>(C)[i] = sum;
  }
}

// Launches one configuration, one block per output tile and matrix of a batch and `splits` blocks along K (splits
// > 1: float32 with kVec only; partial products go to a (splits, batch, M, N) workspace, then
// matmul_kernel_06_splitk_reduce). kBKMajor: b is K-major (args.sb0 == 1), its column pitch args.sb1.
// Raises the kernel's dynamic shared-memory limit once per device.
template <class Cfg, typename scalar_t, bool kVec, bool kBKMajor>
void launch_config(const Args& args, int64_t splits) {
  using acc_t = opmath_type<scalar_t>;
  const int64_t M = args.M, N = args.N, K = args.K;
  const int64_t ldb = kBKMajor ? args.sb1 : args.sb0;
  auto* kernel = &matmul_kernel_06_async_pipeline<Cfg, scalar_t, kVec, kBKMajor>;
  constexpr size_t smem = Cfg::template smem_bytes<acc_t>(kBKMajor);
  constexpr int kMaxDevices = 64;
  static bool configured[kMaxDevices] = {};  // benign race: setting the attribute twice is harmless
  const int device = args.device;
  if (device >= kMaxDevices || !configured[device]) {
    CUDA_KERNELS_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    CUDA_KERNELS_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
    if (device < kMaxDevices) configured[device] = true;
  }
  const int64_t tiles = ceil_div<int64_t>(M, Cfg::kBM) * ceil_div<int64_t>(N, Cfg::kBN);
  // Even 64 x 64 tiles reach this limit only beyond 2^43 outputs, far more than any GPU's memory.
  CUDA_KERNELS_CHECK(tiles <= kMaxGridX, "cuda_kernels.matmul: ", M, " x ", N,
                     " output has too many tiles for one launch");
  const cudaStream_t stream = args.stream;
  // Each split covers a whole number of slabs; recount the splits after rounding.
  const int64_t k_split = splits > 1 ? ceil_div<int64_t>(ceil_div<int64_t>(K, splits), Cfg::kBK) * Cfg::kBK : K;
  splits = ceil_div<int64_t>(K, k_split);
  if (splits > 1 && !(std::is_same_v<scalar_t, float> && kVec)) {
    fail("cuda_kernels.matmul: split-K is only implemented for float32");
  }
  // A batch: blockIdx.z is the matrix, kMaxGridZ of them per launch.
  for (int64_t first = 0; first < args.batch; first += kMaxGridZ) {
    const int64_t count = std::min<int64_t>(args.batch - first, kMaxGridZ);
    const scalar_t* const a = args.a_ptr<scalar_t>() + first * args.sa_batch;
    const scalar_t* const b = args.b_ptr<scalar_t>() + first * args.sb_batch;
    scalar_t* const c = args.c_ptr<scalar_t>() + first * M * N;
    const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(splits), static_cast<unsigned>(count));
    if (splits == 1) {
      kernel<<<grid, Cfg::kThreads, smem, stream>>>(a, b, c, M, N, K, ldb, K, args.sa_batch, args.sb_batch);
      CUDA_KERNELS_LAUNCH_CHECK();
      continue;
    }
    if constexpr (std::is_same_v<scalar_t, float> && kVec) {
      // Partial products as (splits, count, M, N), then their sum.
      auto* partial = static_cast<float*>(args.workspace->alloc(sizeof(float) * splits * count * M * N));
      kernel<<<grid, Cfg::kThreads, smem, stream>>>(a, b, partial, M, N, K, ldb, k_split, args.sa_batch, args.sb_batch);
      CUDA_KERNELS_LAUNCH_CHECK();
      constexpr int kReduceThreads = 256;
      const int64_t blocks = std::min<int64_t>(ceil_div<int64_t>(count * M * N / 4, kReduceThreads), 65535);
      matmul_kernel_06_splitk_reduce<<<static_cast<unsigned>(blocks), kReduceThreads, 0, stream>>>(
          partial, c, count * M * N, static_cast<int>(splits));
      CUDA_KERNELS_LAUNCH_CHECK();
    }
  }
}

// Split K when the output has fewer tiles than the GPU has SMs: the fewest splits, a power of two, whose blocks fill
// at least kMinSlotFill of one wave's block slots (min_blocks per SM), with at least kMinSlabsPerSplit slabs in each
// (the partial products cost an extra pass over M x N). A wave filled part of the way leaves SMs with one block
// beside SMs with two, and split counts that are not powers of two measured slower (docs/matmul.md has the timings).
constexpr int64_t kMinSlabsPerSplit = 4;
constexpr int kMinSlotFillNum = 4, kMinSlotFillDen = 5;  // kMinSlotFill = 4/5
int64_t max_splits(int64_t K, int bk) {
  return std::max<int64_t>(1, K / (kMinSlabsPerSplit * bk));
}
int64_t choose_splits(int64_t tiles, int64_t K, int bk, int min_blocks, int sms) {
  if (tiles >= sms) return 1;
  const int64_t cap = max_splits(K, bk), slots = int64_t{sms} * min_blocks;
  int64_t splits = 1;
  while (splits * 2 <= cap && tiles * splits * kMinSlotFillDen < slots * kMinSlotFillNum) splits *= 2;
  return splits;
}

// float32 configurations (the launcher picks one by shape and by the shared memory the device allows): big tiles,
// with K split when they are too few to fill the GPU; skinny tiles for M <= 16 (M = 1 is a matrix-vector
// product), always with K split. Where BigConfig's 97.5 KiB do not fit (sm_70: 96 KiB, sm_75: 64 KiB), the same
// 128 x 128 tiles with 16-deep slabs: MidConfig (3 stages, 48.75 KiB; one block per SM on those GPUs, so no
// register cap), else SmallConfig (2 stages, 32.5 KiB).
using BigConfig = Config<128, 128, 32, 32, 64, 8, 8, 3, 2>;
using MidConfig = Config<128, 128, 16, 32, 64, 8, 8, 3, 1>;
using SmallConfig = Config<128, 128, 16, 32, 64, 8, 8, 2, 2>;
using SkinnyConfig = Config<16, 128, 16, 16, 32, 4, 4, 4, 4>;
constexpr int64_t kSkinnyMaxM = 16;
using SmallProblemConfig = Config<32, 64, 16, 16, 32, 4, 4, 3, 4>;
// Small tiles where big ones would be mostly empty (M <= kSmallProblemMaxM) or too few for one block per SM even
// with K split (256^3, 512^3); else big tiles, K split when they are few (docs/matmul.md has the timings).
constexpr int64_t kSmallProblemMaxM = 64;
// float16 / bfloat16 / float64, and float32 that cannot use 16-byte copies of B.
using ScalarConfig = Config<64, 64, 16, 32, 32, 4, 8, 2, 1>;

// Dynamic shared memory (bytes) any device gives a block without opting in: the last resort of every preference list.
constexpr size_t kNoOptInSmem = 48 * 1024;
// (A K-major B's padded slabs are the larger.) The big tile with a K-major B needs all of the 99 KiB that sm_86/89
// allow a block: any more (padding, slab depth) and those GPUs take the 16-deep MidConfig for it.
static_assert(BigConfig::smem_bytes<float>(true) <= 99 * 1024);
static_assert(SmallConfig::smem_bytes<float>(true) <= kNoOptInSmem &&
              SkinnyConfig::smem_bytes<float>(true) <= kNoOptInSmem &&
              SmallProblemConfig::smem_bytes<float>(true) <= kNoOptInSmem);
static_assert(ScalarConfig::smem_bytes<double>(true) <= kNoOptInSmem, "the scalar path never needs the opt-in");

// The float32 configurations compiled in, by the name the config06 knob takes:
// BMxBNxBK_wWMxWN_tTMxTN_s<stages>_b<min blocks per SM>. launch and smem by B's layout: [0] row-major, [1] K-major.
struct Fp32Config {
  const char* name;
  void (*launch[2])(const Args& args, int64_t splits);
  int bm, bn, bk, min_blocks;
  size_t smem[2];  // dynamic shared memory per block, bytes
};
template <class Cfg>
constexpr Fp32Config fp32_config(const char* name) {
  return {name,
          {&launch_config<Cfg, float, true, false>, &launch_config<Cfg, float, true, true>},
          Cfg::kBM,
          Cfg::kBN,
          Cfg::kBK,
          Cfg::kMinBlocks,
          {Cfg::template smem_bytes<float>(false), Cfg::template smem_bytes<float>(true)}};
}
// The launcher's choices first (kBig .. kSkinny index them), then the tuning candidates (docs/matmul.md has
// their timings).
constexpr int kBig = 0, kMid = 1, kSmall = 2, kSkinny = 3, kSmallProblem = 4;
const Fp32Config kFp32Configs[] = {
    fp32_config<BigConfig>("128x128x32_w32x64_t8x8_s3_b2"),
    fp32_config<MidConfig>("128x128x16_w32x64_t8x8_s3_b1"),
    fp32_config<SmallConfig>("128x128x16_w32x64_t8x8_s2_b2"),
    fp32_config<SkinnyConfig>("16x128x16_w16x32_t4x4_s4_b4"),
    fp32_config<SmallProblemConfig>("32x64x16_w16x32_t4x4_s3_b4"),
#ifdef CUDA_KERNELS_MATMUL_TUNING
    fp32_config<Config<128, 128, 32, 32, 64, 8, 8, 2, 2>>("128x128x32_w32x64_t8x8_s2_b2"),
    fp32_config<Config<128, 128, 24, 32, 64, 8, 8, 4, 2>>("128x128x24_w32x64_t8x8_s4_b2"),
    fp32_config<Config<128, 256, 32, 32, 64, 8, 8, 3, 1>>("128x256x32_w32x64_t8x8_s3_b1"),
    fp32_config<Config<256, 128, 32, 64, 32, 8, 8, 3, 1>>("256x128x32_w64x32_t8x8_s3_b1"),
    fp32_config<Config<128, 256, 32, 32, 128, 8, 16, 3, 1>>("128x256x32_w32x128_t8x16_s3_b1"),
    fp32_config<Config<64, 128, 16, 32, 64, 8, 8, 3, 4>>("64x128x16_w32x64_t8x8_s3_b4"),
    fp32_config<Config<32, 128, 16, 32, 32, 8, 4, 4, 4>>("32x128x16_w32x32_t8x4_s4_b4"),
    fp32_config<Config<256, 128, 8, 64, 64, 16, 8, 3, 1>>("256x128x8_w64x64_t16x8_s3_b1"),
    fp32_config<Config<64, 64, 16, 32, 32, 4, 8, 3, 4>>("64x64x16_w32x32_t4x8_s3_b4"),
    fp32_config<Config<64, 64, 32, 32, 32, 4, 8, 3, 4>>("64x64x32_w32x32_t4x8_s3_b4"),
    fp32_config<Config<32, 32, 16, 16, 32, 4, 4, 3, 8>>("32x32x16_w16x32_t4x4_s3_b8"),
    fp32_config<Config<64, 32, 16, 32, 32, 8, 4, 3, 8>>("64x32x16_w32x32_t8x4_s3_b8"),
#endif
};
// Preference lists, best first; each ends with a configuration that fits kNoOptInSmem.
constexpr int kGeneralPreference[] = {kBig, kMid, kSmall};
constexpr int kSkinnyPreference[] = {kSkinny};
constexpr int kSmallProblemPreference[] = {kSmallProblem};

std::string fp32_config_names() {
  std::string s;
  for (const Fp32Config& cfg : kFp32Configs) s += (s.empty() ? "" : ", ") + std::string(cfg.name);
  return s;
}

// Dynamic shared memory a block may use on `device`: its opt-in limit (cached per device), capped by the
// smem_limit_bytes knob when set.
size_t smem_limit(int device) {
  const int64_t cap = tuning().smem_limit_bytes;
  const auto optin =
      static_cast<size_t>(detail::cached_device_attribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>(device));
  return cap > 0 ? std::min(optin, static_cast<size_t>(cap)) : optin;
}

// The first configuration of `preference` whose shared memory (for B's layout, `b_k_major`) fits `limit` bytes.
template <size_t kCount>
const Fp32Config& first_that_fits(const int (&preference)[kCount], size_t limit, bool b_k_major) {
  const int* fit =
      std::find_if(preference, preference + kCount, [&](int i) { return kFp32Configs[i].smem[b_k_major] <= limit; });
  // Only a cap below 48 KiB fails this: every device allows the last choice of each list.
  CUDA_KERNELS_CHECK(fit != preference + kCount, "cuda_kernels.matmul: no float32 configuration fits in ", limit,
                     " bytes of shared memory per block (the smem_limit_bytes knob caps it; the smallest needs ",
                     kFp32Configs[preference[kCount - 1]].smem[b_k_major], ")");
  return kFp32Configs[*fit];
}

}  // namespace

void launch_06_async_pipeline(const Args& args) {
  const int64_t M = args.M, N = args.N, K = args.K;
  // b K-major (kKMajorB: sb0 == 1, its column pitch sb1 >= K > 1), else row-major (sb0 == N, sb1 == 1): args.h.
  const bool b_k_major = args.sb1 != 1;
  CUDA_KERNELS_CHECK(b_k_major ? args.sb0 == 1 && args.sb1 >= K && K > 1 : args.sb0 == N,
                     "cuda_kernels.matmul: 06_async_pipeline got b strides (", args.sb0, ", ", args.sb1,
                     "), neither row-major nor K-major (an internal error: dispatch.cpp passes one of the two)");
  // 16-byte stores of C and (row-major B) copies of B: float32, rows of b and c 16-byte aligned. A and a K-major B
  // are copied by element.
  const bool vec =
      args.dtype == Dtype::kFloat32 && N % 4 == 0 && (b_k_major || is_aligned(args.b, 16)) && is_aligned(args.c, 16);
  if (!vec) {
    dispatch_dtype(args.dtype, [&](auto t) {
      if (b_k_major) {
        launch_config<ScalarConfig, decltype(t), false, true>(args, 1);
      } else {
        launch_config<ScalarConfig, decltype(t), false, false>(args, 1);
      }
    });
    return;
  }
  const int device = args.device;
  const int sms = sm_count(device);
  const size_t limit = smem_limit(device);
  // The tuning knobs config06 and splits06 (cuda/matmul/tuning.h) force a configuration and a split-K factor.
  const Tuning& knobs = tuning();
  const Fp32Config* cfg = nullptr;
  if (const std::string& forced = knobs.config06; !forced.empty()) {
    for (const Fp32Config& candidate : kFp32Configs) {
      if (forced == candidate.name) cfg = &candidate;
    }
    CUDA_KERNELS_CHECK(cfg != nullptr, "cuda_kernels.matmul: tuning knob config06=", forced,
                       " is not a compiled configuration; available: ", fp32_config_names());
    CUDA_KERNELS_CHECK(cfg->smem[b_k_major] <= limit, "cuda_kernels.matmul: tuning knob config06=", forced, " needs ",
                       cfg->smem[b_k_major], " bytes of shared memory per block; device ", device, " allows ", limit,
                       " (the device's opt-in limit, capped by the smem_limit_bytes knob when set)");
  } else if (M <= kSkinnyMaxM) {
    cfg = &first_that_fits(kSkinnyPreference, limit, b_k_major);
  } else if (M <= kSmallProblemMaxM || ceil_div<int64_t>(M, BigConfig::kBM) * ceil_div<int64_t>(N, BigConfig::kBN) *
                                               args.batch * max_splits(K, BigConfig::kBK) <
                                           sms) {
    cfg = &first_that_fits(kSmallProblemPreference, limit, b_k_major);
  } else {
    cfg = &first_that_fits(kGeneralPreference, limit, b_k_major);
  }
  // A batch's matrices are tiles too: they fill the SMs together.
  const int64_t tiles = ceil_div<int64_t>(M, cfg->bm) * ceil_div<int64_t>(N, cfg->bn) * args.batch;
  int64_t splits = choose_splits(tiles, K, cfg->bk, cfg->min_blocks, sms);
  if (knobs.splits06 > 0) splits = std::min<int64_t>(knobs.splits06, K);
  cfg->launch[b_k_major](args, splits);
}

}  // namespace cuda_kernels::matmul_ladder
