// Ladder step 2: 2-D register blocking.
//
// Step 1 does one multiply-add per two shared-memory loads: shared-memory bandwidth, not arithmetic, is the
// limit. Here each thread computes a kTM x kTN (8 x 8) patch of C held in registers. For every k it loads kTM
// values of A's column and kTN values of B's row into registers and does kTM * kTN multiply-adds with them:
// 64 FMAs per 16 shared loads instead of 1 per 2. The block tile grows to 128 x 128 so each element brought
// into shared memory is reused 128 times (step 1: 32), cutting global-memory traffic by 4x as well.
// Loads are scalar and bounds-checked, so any M, N, K works; a and b must be row-major (the dispatcher copies).
#include <algorithm>

#include "cuda/matmul/args.h"
#include "cuda/utils.cuh"

namespace cuda_kernels::matmul_ladder {
namespace {

constexpr int kBM = 128;                           // block tile rows (of C and A)
constexpr int kBN = 128;                           // block tile columns (of C and B)
constexpr int kBK = 8;                             // depth of one shared-memory slab along K
constexpr int kTM = 8;                             // rows of C per thread
constexpr int kTN = 8;                             // columns of C per thread
constexpr int kThreadsN = kBN / kTN;               // 16 threads across a block tile's columns
constexpr int kThreads = (kBM / kTM) * kThreadsN;  // 256 threads, each owning a kTM x kTN patch
constexpr int kMaxGridY = 65535;                   // CUDA's limit on gridDim.y; larger M loops over row tiles

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    matmul_kernel_02_blocktile_2d(const scalar_t* __restrict__ A, const scalar_t* __restrict__ B,
                                  scalar_t* __restrict__ C, int64_t M, int64_t N, int64_t K) {
  using acc_t = opmath_type<scalar_t>;
  __shared__ acc_t As[kBM][kBK];
  __shared__ acc_t Bs[kBK][kBN];
  const int tid = threadIdx.x;
  const int tn = tid % kThreadsN;  // this thread's patch is columns [tn * kTN, +kTN) of the block tile
  const int tm = tid / kThreadsN;  // ... and rows [tm * kTM, +kTM)
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kBN;
  const int64_t m_tiles = ceil_div<int64_t>(M, kBM);
  for (int64_t tile_m = blockIdx.y; tile_m < m_tiles; tile_m += gridDim.y) {
    const int64_t row0 = tile_m * kBM;
    acc_t acc[kTM][kTN] = {};
    for (int64_t k0 = 0; k0 < K; k0 += kBK) {
      // Element e of the A slab is (e / kBK, e % kBK): consecutive threads read consecutive k of one row.
#pragma unroll
      for (int e = tid; e < kBM * kBK; e += kThreads) {
        const int r = e / kBK, c = e % kBK;
        const int64_t row = row0 + r, k = k0 + c;
        As[r][c] = (row < M && k < K) ? static_cast<acc_t>(A[row * K + k]) : acc_t(0);
      }
      // Element e of the B slab is (e / kBN, e % kBN): a warp reads 32 consecutive columns of one row.
#pragma unroll
      for (int e = tid; e < kBK * kBN; e += kThreads) {
        const int r = e / kBN, c = e % kBN;
        const int64_t k = k0 + r, col = col0 + c;
        Bs[r][c] = (k < K && col < N) ? static_cast<acc_t>(B[k * N + col]) : acc_t(0);
      }
      __syncthreads();
#pragma unroll
      for (int k = 0; k < kBK; ++k) {
        acc_t a_frag[kTM], b_frag[kTN];
#pragma unroll
        for (int i = 0; i < kTM; ++i) a_frag[i] = As[tm * kTM + i][k];
#pragma unroll
        for (int j = 0; j < kTN; ++j) b_frag[j] = Bs[k][tn * kTN + j];
#pragma unroll
        for (int i = 0; i < kTM; ++i) {
#pragma unroll
          for (int j = 0; j < kTN; ++j) acc[i][j] += a_frag[i] * b_frag[j];
        }
      }
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < kTM; ++i) {
      const int64_t row = row0 + tm * kTM + i;
#pragma unroll
      for (int j = 0; j < kTN; ++j) {
        const int64_t col = col0 + tn * kTN + j;
        if (row < M && col < N) C[row * N + col] = static_cast<scalar_t>(acc[i][j]);
      }
    }
  }
}

}  // namespace

void launch_02_blocktile_2d(const Args& args) {
  const int64_t M = args.M, N = args.N, K = args.K;
  const dim3 grid(static_cast<unsigned>(ceil_div<int64_t>(N, kBN)),
                  static_cast<unsigned>(std::min<int64_t>(ceil_div<int64_t>(M, kBM), kMaxGridY)));
  dispatch_dtype(args.dtype, [&](auto t) {
    using scalar_t = decltype(t);
    matmul_kernel_02_blocktile_2d<scalar_t><<<grid, kThreads, 0, args.stream>>>(
        args.a_ptr<scalar_t>(), args.b_ptr<scalar_t>(), args.c_ptr<scalar_t>(), M, N, K);
  });
  CUDA_KERNELS_LAUNCH_CHECK();
}

}  // namespace cuda_kernels::matmul_ladder
