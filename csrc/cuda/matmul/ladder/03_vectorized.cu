// Ladder step 3: 16-byte loads and a transposed A tile in shared memory.
//
// Step 2 issues one load instruction per element, and its inner loop reads A's column As[row][k] with a stride
// of kBK words: eight separate shared loads for the eight A values a thread needs per k. This step:
//  - loads global memory 4 elements at a time (one 16-byte float4 instruction per thread instead of four),
//  - stores the A slab transposed (As[k][row]) so the kTM values a thread needs for one k are contiguous and
//    come in with two 16-byte shared loads, like the B values,
//  - pads each As row by 4 words so the transposing scalar stores of a warp spread over all 32 banks,
//  - writes C with 16-byte stores.
// Fewer, wider instructions leave more issue slots for the FMAs. 16-byte global accesses need float32, row
// pitches (K for a, N for b and c) that are multiples of 4 and 16-byte aligned pointers; other shapes and dtypes
// take the same kernel with scalar, bounds-checked accesses (kVec = false), so any M, N, K works.
#include <algorithm>

#include "cuda/matmul/args.h"
#include "cuda/matmul/pack4.cuh"
#include "cuda/utils.cuh"

namespace cuda_kernels::matmul_ladder {
namespace {

constexpr int kBM = 128;  // block tile rows
constexpr int kBN = 128;  // block tile columns
constexpr int kBK = 8;    // slab depth along K
constexpr int kTM = 8;    // rows of C per thread
constexpr int kTN = 8;    // columns of C per thread
constexpr int kAPad = 4;  // extra words per As row: keeps 16-byte alignment, spreads transposing stores over banks
constexpr int kThreadsN = kBN / kTN;               // 16
constexpr int kThreads = (kBM / kTM) * kThreadsN;  // 256
constexpr int kMaxGridY = 65535;

// minBlocks = 1 lets ptxas use up to 255 registers; with the bare thread count it capped the float32 kernel at
// 128 registers and spilled.
template <typename scalar_t, bool kVec>
__global__ void __launch_bounds__(kThreads, 1)
    matmul_kernel_03_vectorized(const scalar_t* __restrict__ A, const scalar_t* __restrict__ B,
                                scalar_t* __restrict__ C, int64_t M, int64_t N, int64_t K) {
  using acc_t = opmath_type<scalar_t>;
  __shared__ alignas(sizeof(Pack4<acc_t>)) acc_t As[kBK][kBM + kAPad];  // A slab transposed: As[k][row]
  __shared__ alignas(sizeof(Pack4<acc_t>)) acc_t Bs[kBK][kBN];          // B slab as is: Bs[k][col]
  const int tid = threadIdx.x;
  const int tn = tid % kThreadsN;  // patch columns [tn * kTN, +kTN)
  const int tm = tid / kThreadsN;  // patch rows [tm * kTM, +kTM)
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kBN;
  const int64_t m_tiles = ceil_div<int64_t>(M, kBM);
  for (int64_t tile_m = blockIdx.y; tile_m < m_tiles; tile_m += gridDim.y) {
    const int64_t row0 = tile_m * kBM;
    acc_t acc[kTM][kTN] = {};
    for (int64_t k0 = 0; k0 < K; k0 += kBK) {
      // A slab: kBM rows x (kBK / 4) four-wide chunks; chunk e is row e / (kBK/4), k offset 4 * (e % (kBK/4)).
#pragma unroll
      for (int e = tid; e < kBM * kBK / 4; e += kThreads) {
        const int r = e / (kBK / 4), c = 4 * (e % (kBK / 4));
        const Pack4<acc_t> v = load4<kVec, acc_t>(A, row0 + r, k0 + c, M, K);
#pragma unroll
        for (int i = 0; i < 4; ++i) As[c + i][r] = v.v[i];  // transpose: the 4 k values go to 4 rows of As
      }
      // B slab: kBK rows x (kBN / 4) chunks; a warp reads 32 consecutive chunks (512 bytes) of one row.
#pragma unroll
      for (int e = tid; e < kBK * kBN / 4; e += kThreads) {
        const int r = e / (kBN / 4), c = e % (kBN / 4);
        write4(&Bs[r][4 * c], load4<kVec, acc_t>(B, k0 + r, col0 + 4 * c, K, N));
      }
      __syncthreads();
#pragma unroll
      for (int k = 0; k < kBK; ++k) {
        // This thread's kTM A values and kTN B values for this k, each kTM / 4 (kTN / 4) 16-byte reads.
        Pack4<acc_t> a_frag[kTM / 4], b_frag[kTN / 4];
#pragma unroll
        for (int i = 0; i < kTM / 4; ++i) a_frag[i] = read4(&As[k][tm * kTM + 4 * i]);
#pragma unroll
        for (int j = 0; j < kTN / 4; ++j) b_frag[j] = read4(&Bs[k][tn * kTN + 4 * j]);
#pragma unroll
        for (int i = 0; i < kTM; ++i) {
#pragma unroll
          for (int j = 0; j < kTN; ++j) acc[i][j] += a_frag[i / 4].v[i % 4] * b_frag[j / 4].v[j % 4];
        }
      }
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < kTM; ++i) {
#pragma unroll
      for (int j = 0; j < kTN; j += 4) {
        store4<kVec, acc_t>(C, row0 + tm * kTM + i, col0 + tn * kTN + j, M, N, &acc[i][j]);
      }
    }
  }
}

}  // namespace

void launch_03_vectorized(const Args& args) {
  const int64_t M = args.M, N = args.N, K = args.K;
  const dim3 grid(static_cast<unsigned>(ceil_div<int64_t>(N, kBN)),
                  static_cast<unsigned>(std::min<int64_t>(ceil_div<int64_t>(M, kBM), kMaxGridY)));
  dispatch_vec4(args, [&](auto zero, auto vec) {
    using scalar_t = decltype(zero);
    matmul_kernel_03_vectorized<scalar_t, decltype(vec)::value><<<grid, kThreads, 0, args.stream>>>(
        args.a_ptr<scalar_t>(), args.b_ptr<scalar_t>(), args.c_ptr<scalar_t>(), M, N, K);
  });
  CUDA_KERNELS_LAUNCH_CHECK();
}

}  // namespace cuda_kernels::matmul_ladder
