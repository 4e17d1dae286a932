// Ladder step 7: tensor cores through the warp-level mma.sync instruction (float16 / bfloat16, sm_80+).
//
// Steps 1-6 compute with FFMA: one multiply-add per thread per instruction. A tensor-core instruction is issued
// by a whole warp and does a small matrix product: mma.sync.m16n8k16 multiplies a 16 x 16 tile of A by a 16 x 8
// tile of B into a 16 x 8 float32 accumulator, 2048 multiply-adds per instruction where an FFMA warp instruction
// does 32. On the H100 the float16/bfloat16 tensor-core rate is about 15x the float32 FFMA rate (and mma.sync
// reaches roughly 2/3 of Hopper's tensor-core peak; its wgmma instruction gets the rest). What changes in the
// code:
//  - A thread no longer owns a patch of C that it can index freely: the operands and the accumulator of an mma
//    are "fragments" spread over the 32 lanes in a fixed layout (mma_m16n8k16 in mma_sm80.cuh spells it out).
//    A warp tile of 32 x 64 outputs is 2 x 8 such 16 x 8 accumulators, 64 floats per lane.
//  - Fragments are read from shared memory with ldmatrix: one instruction loads four 8 x 8 matrices of 16-bit
//    values, each lane supplying the address of one 16-byte row and receiving exactly the elements its fragment
//    needs. B is stored (k, n) row-major but mma wants each lane's two B values to be consecutive k of one column,
//    so B is read with ldmatrix's .trans variant, which transposes every 8 x 8 matrix on the way.
//  - ldmatrix reads 8 rows of 16 bytes at once; rows of 64 or 256 bytes would all start in the same banks, so each
//    shared-memory row is padded by 16 bytes (kPad), which shifts consecutive rows by 4 banks: conflict-free.
// The rest is step 1's plan on bigger tiles: load a slab of A and B into shared memory, barrier, compute, barrier,
// with plain (synchronous) loads and no pipelining. Step 8 adds what the SIMT ladder learned in steps 4-6
// (cp.async, a multi-stage pipeline) plus what tensor cores need on top (swizzled layouts, fragment double
// buffering, bigger warp tiles).
//
// Accumulation is in float32; the output is rounded to the input dtype once. Any M, N, K >= 1: tiles at the edges
// are zero-filled in shared memory, so the mma instructions need no bounds checks. 16-byte global loads are used
// when every row of A and B starts 16-byte aligned (K % 8 == 0, N % 8 == 0, aligned base pointers), else the
// same tiles are gathered element by element.

#include "cuda/matmul/args.h"
#include "cuda/matmul/mma_sm80.cuh"
#include "cuda/utils.cuh"

namespace cuda_kernels::matmul_ladder {
namespace {

using namespace sm80;

constexpr int kBM = 128, kBN = 128, kBK = 32;  // block tile: kBM x kBN outputs, K walked in kBK-deep slabs
constexpr int kWM = 32, kWN = 64;              // warp tile: 2 x 8 mma tiles of 16 x 8
constexpr int kWarpsM = kBM / kWM, kWarpsN = kBN / kWN;
constexpr int kThreads = 32 * kWarpsM * kWarpsN;  // 256
constexpr int kMmaM = 16, kMmaN = 8, kMmaK = 16;  // the shape of one mma.sync.m16n8k16
constexpr int kTilesM = kWM / kMmaM, kTilesN = kWN / kMmaN;
constexpr int kChunk = 8;  // 16-bit elements per 16-byte chunk (one ldmatrix row, one vector load)
constexpr int kPad = 8;    // elements added to every shared row: 16 bytes, see the header
constexpr int kAStride = kBK + kPad, kBStride = kBN + kPad;  // shared row pitches in elements
static_assert(kTilesN % 2 == 0, "B fragments are loaded two 8-column tiles per ldmatrix.x4");
static_assert((kBM * kBK / kChunk) % kThreads == 0 && (kBK * kBN / kChunk) % kThreads == 0);

// Copies one kRows x kCols tile of a row-major (rows, cols) matrix with row pitch ld, starting at (r0, c0), into
// shared memory with row pitch kStride, zero-filling what lies outside the matrix. The tile is cut in 16-byte
// chunks (8 consecutive columns), handed out to the threads in row-major order so a warp reads whole rows.
template <int kRows, int kCols, int kStride, bool kVec, typename T>
__device__ __forceinline__ void load_tile(T* dst, const T* src, int64_t rows, int64_t cols, int64_t ld, int64_t r0,
                                          int64_t c0) {
  constexpr int kChunksPerRow = kCols / kChunk;
#pragma unroll
  for (int i = 0; i < kRows * kChunksPerRow / kThreads; ++i) {
    const int e = threadIdx.x + i * kThreads;
    const int r = e / kChunksPerRow, c = (e % kChunksPerRow) * kChunk;
    const int64_t gr = r0 + r, gc = c0 + c;
    // Columns left in this row from gc on, capped at one chunk (<= 0: the chunk lies outside the matrix).
    const int64_t left = gr < rows ? cols - gc : 0;
    const int n = static_cast<int>(left < kChunk ? (left > 0 ? left : 0) : kChunk);
    uint4 v;
    if constexpr (kVec) {
      // kVec: cols % 8 == 0, so a chunk is either wholly inside or wholly outside.
      v = n > 0 ? *reinterpret_cast<const uint4*>(src + gr * ld + gc) : make_uint4(0, 0, 0, 0);
    } else {
      v = gather8(src + (n > 0 ? gr * ld + gc : 0), n);
    }
    *reinterpret_cast<uint4*>(dst + r * kStride + c) = v;
  }
}

template <bool kBf16, bool kVec>
__global__ void __launch_bounds__(kThreads)
    matmul_kernel_07_mma_sync(const typename Elem<kBf16>::type* __restrict__ A,
                              const typename Elem<kBf16>::type* __restrict__ B, typename Elem<kBf16>::type* C,
                              int64_t M, int64_t N, int64_t K) {
#if CUDA_KERNELS_SM80_UNSUPPORTED
  __trap();  // the launcher never runs this on pre-sm_80 GPUs
#else
  using T = typename Elem<kBf16>::type;
  __shared__ alignas(16) T As[kBM * kAStride];  // As[m][k]
  __shared__ alignas(16) T Bs[kBK * kBStride];  // Bs[k][n]

  // Output tiles in row-major order, one per block (a 1-D grid: no limit on the number of row tiles).
  const int64_t tiles_n = ceil_div<int64_t>(N, kBN);
  const int64_t row0 = blockIdx.x / tiles_n * kBM, col0 = blockIdx.x % tiles_n * kBN;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wm = warp / kWarpsN * kWM, wn = warp % kWarpsN * kWN;  // the warp tile's offset in the block tile

  float acc[kTilesM][kTilesN][4] = {};

  for (int64_t k0 = 0; k0 < K; k0 += kBK) {
    load_tile<kBM, kBK, kAStride, kVec>(As, A, M, K, K, row0, k0);
    load_tile<kBK, kBN, kBStride, kVec>(Bs, B, K, N, N, k0, col0);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; kk += kMmaK) {
      // A fragment of mma tile i (rows wm + 16i .. +15, k kk .. kk+15) with ldmatrix.x4: matrices 0..3 are
      // (rows +0..7, k +0..7), (rows +8..15, k +0..7), (rows +0..7, k +8..15), (rows +8..15, k +8..15), which is
      // the order of a[0..3]. Lane l addresses row l % 16 of the tile at k offset 8 * (l / 16): lanes 0-7 give the
      // rows of matrix 0, 8-15 of matrix 1, 16-23 of matrix 2, 24-31 of matrix 3.
      uint32_t a[kTilesM][4];
#pragma unroll
      for (int i = 0; i < kTilesM; ++i)
        ldmatrix_x4(a[i], smem_addr(&As[(wm + i * kMmaM + lane % 16) * kAStride + kk + lane / 16 * 8]));
      // B fragments of mma tiles j and j + 1 (columns wn + 8j .. +15) with one ldmatrix.x4.trans: matrices 0..3 are
      // (k +0..7, cols +0..7), (k +8..15, cols +0..7), (k +0..7, cols +8..15), (k +8..15, cols +8..15), i.e.
      // b[0], b[1] of tile j, then b[0], b[1] of tile j + 1. Lane l addresses k row l % 16 at column offset
      // 8 * (l / 16); .trans hands lane l the k pair (2 (l % 4), +1) of column l / 4, as mma's b operand wants.
      uint32_t b[kTilesN][2];
#pragma unroll
      for (int j = 0; j < kTilesN; j += 2) {
        uint32_t r[4];
        ldmatrix_x4_trans(r, smem_addr(&Bs[(kk + lane % 16) * kBStride + wn + j * kMmaN + lane / 16 * 8]));
        b[j][0] = r[0], b[j][1] = r[1], b[j + 1][0] = r[2], b[j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < kTilesM; ++i)
#pragma unroll
        for (int j = 0; j < kTilesN; ++j) mma_m16n8k16<kBf16>(acc[i][j], a[i], b[j]);
    }
    __syncthreads();  // the next slab overwrites As / Bs
  }

  // Accumulator (i, j) of this lane holds D[g][2t, 2t+1] and D[g+8][2t, 2t+1] of its 16 x 8 tile (g = lane / 4,
  // t = lane % 4): two pairs of adjacent outputs, stored as one 4-byte pair when the row pitch keeps pairs aligned.
  const int g = lane / 4, t = lane % 4;
  const bool pairs = N % 2 == 0;
#pragma unroll
  for (int i = 0; i < kTilesM; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = row0 + wm + i * kMmaM + g + 8 * h;
      if (row >= M) continue;
#pragma unroll
      for (int j = 0; j < kTilesN; ++j) {
        const int64_t col = col0 + wn + j * kMmaN + 2 * t;
        const float lo = acc[i][j][2 * h], hi = acc[i][j][2 * h + 1];
        T* dst = C + row * N + col;
        if (pairs && col + 1 < N) {
          *reinterpret_cast<uint32_t*>(dst) = Elem<kBf16>::pack(lo, hi);
        } else {
          if (col < N) dst[0] = Elem<kBf16>::from_float(lo);
          if (col + 1 < N) dst[1] = Elem<kBf16>::from_float(hi);
        }
      }
    }
#endif
}

template <bool kBf16, bool kVec>
void launch_typed(const Args& args) {
  using T = typename Elem<kBf16>::type;
  const int64_t M = args.M, N = args.N, K = args.K;
  const int64_t tiles = ceil_div<int64_t>(M, kBM) * ceil_div<int64_t>(N, kBN);
  CUDA_KERNELS_CHECK(tiles <= kMaxGridX, "cuda_kernels.matmul: ", M, " x ", N,
                     " output has too many tiles for one launch");
  const cudaStream_t stream = args.stream;
  matmul_kernel_07_mma_sync<kBf16, kVec><<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(
      args.a_ptr<T>(), args.b_ptr<T>(), args.c_ptr<T>(), M, N, K);
  CUDA_KERNELS_LAUNCH_CHECK();
}

}  // namespace

void launch_07_mma_sync(const Args& args) {
  const bool bf16 = args.dtype == Dtype::kBFloat16;
  CUDA_KERNELS_CHECK(bf16 || args.dtype == Dtype::kFloat16,
                     "cuda_kernels.matmul: 07_mma_sync takes float16 or bfloat16");
  // 16-byte loads need every row of A and B to start on a 16-byte boundary.
  const bool vec = args.K % kChunk == 0 && args.N % kChunk == 0 && is_aligned(args.a, 16) && is_aligned(args.b, 16);
  if (bf16) {
    vec ? launch_typed<true, true>(args) : launch_typed<true, false>(args);
  } else {
    vec ? launch_typed<false, true>(args) : launch_typed<false, false>(args);
  }
}

}  // namespace cuda_kernels::matmul_ladder
