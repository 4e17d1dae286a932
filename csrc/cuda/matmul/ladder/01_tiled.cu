// Ladder step 1: shared-memory tiling.
//
// Each block computes a kTile x kTile tile of C, one element per thread. The K dimension is walked in
// kTile-wide slabs: the block loads a kTile x kTile tile of A and of B into shared memory (each element read
// from global memory once per block instead of once per thread), synchronizes, and every thread does kTile
// multiply-adds from shared memory. Reads go through strides, so transposed and other views need no copy. A batch
// of products is one launch: blockIdx.z picks the matrix (batches beyond kMaxGridZ in more launches).
#include <algorithm>

#include "cuda/matmul/args.h"
#include "cuda/utils.cuh"

namespace cuda_kernels::matmul_ladder {
namespace {

constexpr int kTile = 32;         // tile edge; a block is kTile x kTile threads
constexpr int kMaxGridY = 65535;  // CUDA's limit on gridDim.y; larger M loops over row tiles

template <typename scalar_t>
__global__ void __launch_bounds__(kTile* kTile)
    matmul_kernel_01_tiled(const scalar_t* __restrict__ A, const scalar_t* __restrict__ B, scalar_t* __restrict__ C,
                           int64_t M, int64_t N, int64_t K, int64_t sa0, int64_t sa1, int64_t sb0, int64_t sb1,
                           int64_t sa_batch, int64_t sb_batch) {
  using acc_t = opmath_type<scalar_t>;
  A += blockIdx.z * sa_batch;
  B += blockIdx.z * sb_batch;
  C += blockIdx.z * M * N;
  // +1 column of padding: threads of a warp reading a column of As hit 32 different banks.
  __shared__ acc_t As[kTile][kTile + 1];
  __shared__ acc_t Bs[kTile][kTile + 1];
  const int tx = threadIdx.x;  // column inside the tile (fastest-varying: coalesced B loads and C stores)
  const int ty = threadIdx.y;  // row inside the tile
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + tx;
  const int64_t m_tiles = ceil_div<int64_t>(M, kTile);
  for (int64_t tile_m = blockIdx.y; tile_m < m_tiles; tile_m += gridDim.y) {
    const int64_t row = tile_m * kTile + ty;
    acc_t acc = 0;
    for (int64_t k0 = 0; k0 < K; k0 += kTile) {
      // Thread (ty, tx) loads A(row, k0 + tx) and B(k0 + ty, col); out-of-range elements load as 0.
      const int64_t ka = k0 + tx, kb = k0 + ty;
      As[ty][tx] = (row < M && ka < K) ? static_cast<acc_t>(A[row * sa0 + ka * sa1]) : acc_t(0);
      Bs[ty][tx] = (kb < K && col < N) ? static_cast<acc_t>(B[kb * sb0 + col * sb1]) : acc_t(0);
      __syncthreads();
#pragma unroll
      for (int k = 0; k < kTile; ++k) acc += As[ty][k] * Bs[k][tx];
      __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = static_cast<scalar_t>(acc);
  }
}

}  // namespace

void launch_01_tiled(const Args& args) {
  const int64_t M = args.M, N = args.N, K = args.K;
  const dim3 block(kTile, kTile);
  dispatch_dtype(args.dtype, [&](auto t) {
    using scalar_t = decltype(t);
    for (int64_t first = 0; first < args.batch; first += kMaxGridZ) {
      const dim3 grid(static_cast<unsigned>(ceil_div<int64_t>(N, kTile)),
                      static_cast<unsigned>(std::min<int64_t>(ceil_div<int64_t>(M, kTile), kMaxGridY)),
                      static_cast<unsigned>(std::min<int64_t>(args.batch - first, kMaxGridZ)));
      matmul_kernel_01_tiled<scalar_t><<<grid, block, 0, args.stream>>>(
          args.a_ptr<scalar_t>() + first * args.sa_batch, args.b_ptr<scalar_t>() + first * args.sb_batch,
          args.c_ptr<scalar_t>() + first * M * N, M, N, K, args.sa0, args.sa1, args.sb0, args.sb1, args.sa_batch,
          args.sb_batch);
      CUDA_KERNELS_LAUNCH_CHECK();
    }
  });
}

}  // namespace cuda_kernels::matmul_ladder
