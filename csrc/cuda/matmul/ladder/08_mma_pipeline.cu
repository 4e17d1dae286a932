// Ladder step 8: the Ampere-style tensor-core fast path: step 7's mma.sync and ldmatrix, fed by a multi-stage
// cp.async pipeline through swizzled shared memory (float16 / bfloat16, sm_80+). The default float16/bfloat16
// kernel on sm_80..sm_89 GPUs, and on sm_90 when the binary has no sm_90a (wgmma) code.
//
// Step 7 is latency-bound: every slab is load -> barrier -> mma -> barrier, the loads pass through registers, and
// one block of 8 warps waits for global memory with nothing to do. What this step changes:
//  - cp.async pipeline (as step 6): slabs are copied global -> shared with 16-byte cp.async, kStages deep (3 slabs
//    of 64 k), so the copies of slabs t + 1 .. t + kStages - 1 are in flight while the tensor cores work on slab t.
//    Edges are zero-filled by the copy itself (src-size 0).
//  - Bigger tiles: 128 x 256 per block and 64 x 64 per warp (4 x 8 mma tiles, 128 accumulators per lane). Per
//    16-deep k step a warp issues 8 ldmatrix.x4 for 32 mma: shared-memory bandwidth per mma is half of step 7's
//    (32 x 64 warp tiles: 6 ldmatrix for 16 mma).
//  - Swizzled instead of padded shared memory: a cp.async chunk must land on a 16-byte boundary and a slab should
//    stay dense (3 stages of 48 KB fill 144 KB), so instead of padding rows, the 16-byte chunks of each row are
//    permuted by XOR-ing the chunk index with bits of the row index (swizzle below). Both the cp.async
//    writes (8 chunks of one 128-byte span per phase) and the ldmatrix reads (8 rows of one chunk column) then hit
//    8 different 16-byte bank groups: no bank conflicts on either side.
//  - Fragment double buffering: the fragments of the next 16-deep k step are loaded (ldmatrix) while the mma of
//    the current one run, across the slab boundary too, so the tensor cores never wait on shared memory.
//  - Grouped tile order (as step 6): blocks walk the output in groups of kGroupM row tiles for L2 reuse.
// Like step 7: float32 accumulators, output rounded once to the input dtype; any M, N, K >= 1; 16-byte copies
// only when every row of A and B is 16-byte aligned (K % 8 == 0, N % 8 == 0, aligned bases), else the same
// chunks are gathered with 2-byte loads and stored to the same swizzled places (correct, not fast).

#include <string>

#include "cuda/matmul/args.h"
#include "cuda/matmul/mma_sm80.cuh"
#include "cuda/matmul/tuning.h"
#include "cuda/utils.cuh"

namespace cuda_kernels::matmul_ladder {
namespace {

using namespace sm80;

constexpr int kMmaM = 16, kMmaN = 8, kMmaK = 16;  // the shape of one mma.sync.m16n8k16
constexpr int kGroupM = 8;                        // row tiles per group in the block order (L2 reuse)
constexpr int kChunk = 8;                         // 16-bit elements per 16-byte chunk
constexpr int kElemBytes = 2;

// Swizzled byte offset of chunk c (16 bytes = 8 elements) of row r in a row-major tile whose rows are
// kChunksPerRow chunks long. A 128-byte span covers all 32 banks once, so "no bank conflict" means that the 8
// chunks a phase touches sit at 8 different positions modulo 128 bytes.
//  - Rows of >= 8 chunks (B's 256 or 128 columns, A with 64-deep slabs): chunk c of row r is stored at
//    c ^ (r % 8), which permutes the chunks within each aligned group of 8 (one span). ldmatrix reads chunk c of
//    8 consecutive rows r0..r0+7 (r0 % 8 == 0): positions c ^ 0 .. c ^ 7, the 8 chunks of one span. A cp.async
//    phase writes 8 consecutive chunks of one row: again a permutation of one span.
//  - Rows of 4 chunks (A with 32-deep slabs, 64 bytes): two rows share a span; chunk c of row r is stored at
//    c ^ ((r / 2) % 4). ldmatrix's 8 rows r0..r0+7: r % 2 picks the half of the span, (r / 2) % 4 takes 4 values
//    for each half, so the 8 chunks land on 8 different quarter-spans. A cp.async phase writes the 4 chunks of rows
//    2i and 2i + 1 (same XOR term): a permutation of one span.
template <int kChunksPerRow>
__device__ __forceinline__ uint32_t swizzle(int r, int c) {
  static_assert(kChunksPerRow == 4 || kChunksPerRow % 8 == 0, "no swizzle for this row width");
  if constexpr (kChunksPerRow == 4) {
    return r * 64 + ((c ^ ((r >> 1) & 3)) << 4);
  } else {
    return r * (kChunksPerRow * 16) + ((c ^ (r & 7)) << 4);
  }
}

// A tile configuration: kBM x kBN outputs per block, kBK-deep slabs, kWM x kWN per warp, kStages slabs in shared
// memory, kMinBlocks resident blocks per SM for __launch_bounds__.
template <int BM, int BN, int BK, int WM, int WN, int Stages, int MinBlocks>
struct Config {
  static constexpr int kBM = BM, kBN = BN, kBK = BK, kWM = WM, kWN = WN, kStages = Stages, kMinBlocks = MinBlocks;
  static constexpr int kWarpsN = BN / WN;
  static constexpr int kThreads = 32 * (BM / WM) * kWarpsN;
  static constexpr int kTilesM = WM / kMmaM, kTilesN = WN / kMmaN;  // mma tiles per warp
  static constexpr int kKSteps = BK / kMmaK;                        // mma k steps per slab
  // A slab is kBM rows of kBK elements, B one of kBK rows of kBN elements; a stage holds one of each.
  static constexpr int kAChunksPerRow = BK / kChunk, kBChunksPerRow = BN / kChunk;
  static constexpr int kAStageBytes = BM * BK * kElemBytes, kStageBytes = kAStageBytes + BK * BN * kElemBytes;
  static constexpr size_t kSmemBytes = static_cast<size_t>(Stages) * kStageBytes;
  // Copies per thread per slab, and how far (in rows) a thread's consecutive copies are apart.
  static constexpr int kACopies = BM * kAChunksPerRow / kThreads, kBCopies = BK * kBChunksPerRow / kThreads;
  static constexpr int kARowsPerPass = kThreads / kAChunksPerRow, kBRowsPerPass = kThreads / kBChunksPerRow;
  static_assert(BM % WM == 0 && BN % WN == 0 && WM % kMmaM == 0 && WN % (2 * kMmaN) == 0 && BK % kMmaK == 0);
  static_assert(kThreads % kAChunksPerRow == 0 && kThreads % kBChunksPerRow == 0, "fixed chunk column per thread");
  static_assert(kACopies * kThreads == BM * kAChunksPerRow && kBCopies * kThreads == BK * kBChunksPerRow);
  static_assert(Stages >= 2);
};

// Per-thread state of the slab copies of one block tile. Thread tid copies A chunks (rows tid / kAChunksPerRow +
// i * kARowsPerPass, chunk tid % kAChunksPerRow) and B chunks (rows tid / kBChunksPerRow + i * kBRowsPerPass, chunk
// tid % kBChunksPerRow): consecutive threads take consecutive 16-byte pieces of a row, so each warp reads whole
// row segments from global memory. A thread's chunk column is fixed, so the swizzled offsets are computed once.
template <class Cfg, bool kVec, typename T>
struct SlabCopier {
  static constexpr int kACopies = Cfg::kACopies, kBCopies = Cfg::kBCopies;
  const T* a_src;                             // this thread's first A chunk of the next slab
  const T* b_src;                             // this thread's B column (row 0)
  int64_t a_k;                                // the K index of this thread's A chunks in the next slab
  int64_t b_k;                                // the K index (row of B) of this thread's first B chunk in the next slab
  int a_rows_valid;                           // how many of this thread's kACopies A rows exist (row < M)
  int b_cols_left;                            // columns of B from this thread's chunk on (<= 0: the chunk is outside)
  uint32_t a_dst[kACopies], b_dst[kBCopies];  // swizzled byte offsets within a stage

  __device__ __forceinline__ SlabCopier(const T* A, const T* B, int64_t M, int64_t N, int64_t K, int64_t row0,
                                        int64_t col0) {
    const int tid = threadIdx.x;
    const int ar = tid / Cfg::kAChunksPerRow, ac = tid % Cfg::kAChunksPerRow;
    const int br = tid / Cfg::kBChunksPerRow, bc = tid % Cfg::kBChunksPerRow;
    a_k = ac * kChunk;
    b_k = br;
    const int64_t rows_left = M - row0 - ar;  // rows of A from this thread's first row on
    a_rows_valid = rows_left <= 0 ? 0 : static_cast<int>(ceil_div<int64_t>(rows_left, Cfg::kARowsPerPass));
    const int64_t cols_left = N - col0 - bc * kChunk;
    b_cols_left = static_cast<int>(cols_left < kChunk ? cols_left : kChunk);
    // Pointers stay inside the matrices even for chunks that are skipped: those read from the base instead.
    a_src = A + (rows_left > 0 ? (row0 + ar) * K + a_k : 0);
    b_src = B + (b_cols_left > 0 ? col0 + bc * kChunk : 0);
#pragma unroll
    for (int i = 0; i < kACopies; ++i) a_dst[i] = swizzle<Cfg::kAChunksPerRow>(ar + i * Cfg::kARowsPerPass, ac);
#pragma unroll
    for (int i = 0; i < kBCopies; ++i)
      b_dst[i] = Cfg::kAStageBytes + swizzle<Cfg::kBChunksPerRow>(br + i * Cfg::kBRowsPerPass, bc);
  }

  // Copies the next slab into the stage at shared address `stage` and moves on by kBK.
  __device__ __forceinline__ void copy_next(uint32_t stage, const T* A, const T* B, int64_t N, int64_t K) {
    const int64_t a_k_left = K - a_k;  // <= 0: past the end of K
#pragma unroll
    for (int i = 0; i < kACopies; ++i) {
      const bool row_ok = i < a_rows_valid;
      const T* src = a_src + i * Cfg::kARowsPerPass * K;
      if constexpr (kVec) {
        const bool ok = row_ok && a_k_left > 0;  // K % 8 == 0: a chunk is wholly inside or outside
        cp_async16_zfill(stage + a_dst[i], ok ? src : A, ok);
      } else {
        const int n = row_ok && a_k_left > 0 ? static_cast<int>(a_k_left < kChunk ? a_k_left : kChunk) : 0;
        st_shared16(stage + a_dst[i], gather8(n > 0 ? src : A, n));
      }
    }
#pragma unroll
    for (int i = 0; i < kBCopies; ++i) {
      const int64_t k = b_k + i * Cfg::kBRowsPerPass;
      const bool ok = k < K && b_cols_left > 0;
      const T* src = b_src + k * N;
      if constexpr (kVec) {
        cp_async16_zfill(stage + b_dst[i], ok ? src : B, ok);
      } else {
        st_shared16(stage + b_dst[i], gather8(ok ? src : B, ok ? b_cols_left : 0));
      }
    }
    a_src += Cfg::kBK;
    a_k += Cfg::kBK;
    b_k += Cfg::kBK;
  }
};

// One 16-deep k step's fragments for the warp: A for its kTilesM mma rows, B for its kTilesN mma columns.
template <class Cfg>
struct Frags {
  uint32_t a[Cfg::kTilesM][4];
  uint32_t b[Cfg::kTilesN][2];
};

// Loads the fragments of k step ks of the slab in `stage`. Lane l supplies ldmatrix row addresses as in step 7:
// A: row l % 16 of mma tile i, chunk 2 ks + l / 16; B: k row 16 ks + l % 16, chunk (wn + 8 j) / 8 + l / 16 (one
// x4 load covers mma columns j and j + 1). The swizzle depends only on the row's low 3 bits, which the tile
// offsets (multiples of 16 rows) do not change.
template <class Cfg>
__device__ __forceinline__ void load_frags(Frags<Cfg>& f, uint32_t stage, int ks, int lane, int wm, int wn) {
#pragma unroll
  for (int i = 0; i < Cfg::kTilesM; ++i)
    ldmatrix_x4(f.a[i], stage + swizzle<Cfg::kAChunksPerRow>(wm + i * kMmaM + lane % 16, 2 * ks + lane / 16));
#pragma unroll
  for (int j = 0; j < Cfg::kTilesN; j += 2) {
    uint32_t r[4];
    ldmatrix_x4_trans(r,
                      stage + Cfg::kAStageBytes +
                          swizzle<Cfg::kBChunksPerRow>(ks * kMmaK + lane % 16, (wn + j * kMmaN) / kChunk + lane / 16));
    f.b[j][0] = r[0], f.b[j][1] = r[1], f.b[j + 1][0] = r[2], f.b[j + 1][1] = r[3];
  }
}

template <class Cfg, bool kBf16, bool kVec>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks)
    matmul_kernel_08_mma_pipeline(const typename Elem<kBf16>::type* __restrict__ A,
                                  const typename Elem<kBf16>::type* __restrict__ B, typename Elem<kBf16>::type* C,
                                  int64_t M, int64_t N, int64_t K) {
#if CUDA_KERNELS_SM80_UNSUPPORTED
  __trap();  // the launcher never runs this on pre-sm_80 GPUs
#else
  using T = typename Elem<kBf16>::type;
  constexpr int kStages = Cfg::kStages, kKSteps = Cfg::kKSteps, kStageBytes = Cfg::kStageBytes;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t smem0 = smem_addr(smem);

  int64_t tm, tn;
  grouped_tile<kGroupM>(blockIdx.x, ceil_div<int64_t>(M, Cfg::kBM), ceil_div<int64_t>(N, Cfg::kBN), tm, tn);
  const int64_t row0 = tm * Cfg::kBM, col0 = tn * Cfg::kBN;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  // The warp tile's offset in the block tile.
  const int wm = warp / Cfg::kWarpsN * Cfg::kWM, wn = warp % Cfg::kWarpsN * Cfg::kWN;

  SlabCopier<Cfg, kVec, T> copier(A, B, M, N, K, row0, col0);
  const int64_t slabs = ceil_div<int64_t>(K, Cfg::kBK);

  // Prologue: slabs 0 .. kStages - 2 in flight, one commit group each (empty groups past the end keep the
  // count uniform: slab s is always group s).
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < slabs) copier.copy_next(smem0 + s * kStageBytes, A, B, N, K);
    cp_async_commit();
  }

  float acc[Cfg::kTilesM][Cfg::kTilesN][4] = {};
  Frags<Cfg> frag[2];
  cp_async_wait<kStages - 2>();  // slab 0 has landed (for this thread's copies) ...
  __syncthreads();               // ... and for everyone's
  int read_stage = 0, write_stage = kStages - 1;
  load_frags<Cfg>(frag[0], smem0, 0, lane, wm, wn);

  for (int64_t slab = 0; slab < slabs; ++slab) {
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
      if (ks == kKSteps - 1) {
        // The last k step's prefetch reads the next slab: wait for it. Groups committed so far: kStages - 1 +
        // (slab + 1); allowing kStages - 2 pending means slabs 0 .. slab + 1 are complete. The barrier makes
        // everyone's copies visible, and it is also the point after which no warp reads this slab's stage any
        // more (all its fragments are loaded): the next iteration's copies may overwrite it.
        cp_async_wait<kStages - 2>();
        __syncthreads();
        read_stage = read_stage == kStages - 1 ? 0 : read_stage + 1;
      }
      // Register double buffering: fragments of the next k step (possibly the next slab's first) go into the
      // other buffer while this step's mma run.
      load_frags<Cfg>(frag[(ks + 1) % 2], smem0 + read_stage * kStageBytes, (ks + 1) % kKSteps, lane, wm, wn);
      if (ks == 0) {
        // The stage written now held slab - 1, whose last reads happened before the barrier of the previous
        // iteration.
        if (slab + kStages - 1 < slabs) copier.copy_next(smem0 + write_stage * kStageBytes, A, B, N, K);
        cp_async_commit();
        write_stage = write_stage == kStages - 1 ? 0 : write_stage + 1;
      }
      const Frags<Cfg>& f = frag[ks % 2];
#pragma unroll
      for (int i = 0; i < Cfg::kTilesM; ++i)
#pragma unroll
        for (int j = 0; j < Cfg::kTilesN; ++j) mma_m16n8k16<kBf16>(acc[i][j], f.a[i], f.b[j]);
    }
  }
  cp_async_wait<0>();  // no copy may still be writing shared memory when the block exits

  // Accumulator (i, j) of this lane holds D[g][2t, 2t+1] and D[g+8][2t, 2t+1] of its 16 x 8 tile (g = lane / 4,
  // t = lane % 4), stored as 4-byte pairs when the row pitch keeps pairs aligned.
  const int g = lane / 4, t = lane % 4;
  const bool full = row0 + Cfg::kBM <= M && col0 + Cfg::kBN <= N;
  const bool pairs = N % 2 == 0;
#pragma unroll
  for (int i = 0; i < Cfg::kTilesM; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = row0 + wm + i * kMmaM + g + 8 * h;
      if (!full && row >= M) continue;
      T* crow = C + row * N;
#pragma unroll
      for (int j = 0; j < Cfg::kTilesN; ++j) {
        const int64_t col = col0 + wn + j * kMmaN + 2 * t;
        const float lo = acc[i][j][2 * h], hi = acc[i][j][2 * h + 1];
        if (pairs && (full || col + 1 < N)) {
          *reinterpret_cast<uint32_t*>(crow + col) = Elem<kBf16>::pack(lo, hi);
        } else {
          if (col < N) crow[col] = Elem<kBf16>::from_float(lo);
          if (col + 1 < N) crow[col + 1] = Elem<kBf16>::from_float(hi);
        }
      }
    }
#endif
}

template <class Cfg, bool kBf16, bool kVec>
void launch_typed(const Args& args) {
  using T = typename Elem<kBf16>::type;
  const int64_t M = args.M, N = args.N, K = args.K;
  constexpr auto* kernel = &matmul_kernel_08_mma_pipeline<Cfg, kBf16, kVec>;
  opt_in_dynamic_smem<kernel>(Cfg::kSmemBytes, args.device);
  const int64_t tiles = ceil_div<int64_t>(M, Cfg::kBM) * ceil_div<int64_t>(N, Cfg::kBN);
  CUDA_KERNELS_CHECK(tiles <= kMaxGridX, "cuda_kernels.matmul: ", M, " x ", N,
                     " output has too many tiles for one launch");
  const cudaStream_t stream = args.stream;
  kernel<<<static_cast<unsigned>(tiles), Cfg::kThreads, Cfg::kSmemBytes, stream>>>(args.a_ptr<T>(), args.b_ptr<T>(),
                                                                                   args.c_ptr<T>(), M, N, K);
  CUDA_KERNELS_LAUNCH_CHECK();
}

// The configurations the launcher uses. BigConfig: 128 x 256 x 64 tiles, 8 warps of 64 x 64, 3 stages: 144 KB of
// shared memory (sm_80, sm_90: up to 163 / 227 KB per block); 64-deep slabs halve the barriers and pipeline waits
// per mma against 32-deep ones, and this was the fastest configuration on the H100. SmallConfig: 128 x 256 x 32,
// 4 stages, 96 KB: for GPUs that allow less (sm_86, sm_89: 99 KB per block) and for the scalar (unaligned) path.
using BigConfig = Config<128, 256, 64, 64, 64, 3, 1>;
using SmallConfig = Config<128, 256, 32, 64, 64, 4, 1>;

struct TunedConfig {
  const char* name;  // BMxBNxBK_wWMxWN_s<stages>_b<min blocks per SM>, as the config08 tuning knob takes it
  void (*launch[2])(const Args&);  // [bf16], 16-byte copies only
  size_t smem;
};
template <class Cfg>
constexpr TunedConfig tuned_config(const char* name) {
  return {name, {&launch_typed<Cfg, false, true>, &launch_typed<Cfg, true, true>}, Cfg::kSmemBytes};
}
// Candidates compiled with -DCUDA_KERNELS_MATMUL_TUNING (or _08_TUNING for this step alone), forced with the
// config08 tuning knob (cuda/matmul/tuning.h).
#if defined(CUDA_KERNELS_MATMUL_TUNING) || defined(CUDA_KERNELS_MATMUL_08_TUNING)
const TunedConfig kTuningConfigs[] = {
    tuned_config<SmallConfig>("128x256x32_w64x64_s4_b1"),
    tuned_config<Config<128, 256, 64, 64, 64, 4, 1>>("128x256x64_w64x64_s4_b1"),
    tuned_config<Config<128, 256, 32, 64, 64, 6, 1>>("128x256x32_w64x64_s6_b1"),
    tuned_config<Config<256, 128, 32, 64, 64, 4, 1>>("256x128x32_w64x64_s4_b1"),
    tuned_config<Config<128, 128, 32, 64, 64, 4, 2>>("128x128x32_w64x64_s4_b2"),
    tuned_config<Config<128, 128, 64, 64, 64, 3, 2>>("128x128x64_w64x64_s3_b2"),
};
#endif

}  // namespace

void launch_08_mma_pipeline(const Args& args) {
  const bool bf16 = args.dtype == Dtype::kBFloat16;
  CUDA_KERNELS_CHECK(bf16 || args.dtype == Dtype::kFloat16,
                     "cuda_kernels.matmul: 08_mma_pipeline takes float16 or bfloat16");
  // 16-byte copies need every row of A and B to start on a 16-byte boundary.
  const bool vec = args.K % kChunk == 0 && args.N % kChunk == 0 && is_aligned(args.a, 16) && is_aligned(args.b, 16);
#if defined(CUDA_KERNELS_MATMUL_TUNING) || defined(CUDA_KERNELS_MATMUL_08_TUNING)
  if (const std::string& forced = tuning().config08; vec && !forced.empty()) {
    for (const TunedConfig& cfg : kTuningConfigs) {
      if (forced == cfg.name) return cfg.launch[bf16](args);
    }
    fail("cuda_kernels.matmul: tuning knob config08=", forced, " is not compiled in");
  }
#endif
  if (!vec) {
    bf16 ? launch_typed<SmallConfig, true, false>(args) : launch_typed<SmallConfig, false, false>(args);
    return;
  }
  const auto smem_optin =
      static_cast<size_t>(detail::cached_device_attribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>(args.device));
  if (smem_optin >= BigConfig::kSmemBytes) {
    bf16 ? launch_typed<BigConfig, true, true>(args) : launch_typed<BigConfig, false, true>(args);
  } else {
    bf16 ? launch_typed<SmallConfig, true, true>(args) : launch_typed<SmallConfig, false, true>(args);
  }
}

}  // namespace cuda_kernels::matmul_ladder
