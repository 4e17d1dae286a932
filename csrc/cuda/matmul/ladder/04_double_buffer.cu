// Ladder step 4: double buffering.
//
// In step 3 every slab goes global memory -> shared memory -> __syncthreads -> FMAs -> __syncthreads: while a
// block waits for its global loads (hundreds of cycles) it has no arithmetic to do, and with one block of 256
// threads per SM (the register budget allows no more) the SM idles. Here the loads of slab t + 1 are issued into
// registers before the FMAs of slab t, so their latency hides behind 512 FMAs per thread; after the FMAs the
// registers go to the second shared-memory buffer. Two buffers also drop one of the two barriers per slab: a
// buffer is only rewritten after the barrier that ends the slab that read it.
// Tile shapes, the transposed A slab and the 16-byte accesses are those of step 3.
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

// minBlocks = 1 lets ptxas use up to 255 registers (the staging registers add to step 3's).
template <typename scalar_t, bool kVec>
__global__ void __launch_bounds__(kThreads, 1)
    matmul_kernel_04_double_buffer(const scalar_t* __restrict__ A, const scalar_t* __restrict__ B,
                                   scalar_t* __restrict__ C, int64_t M, int64_t N, int64_t K) {
  using acc_t = opmath_type<scalar_t>;
  constexpr int kALoads = kBM * kBK / 4 / kThreads;  // four-wide chunks of the A slab per thread
  constexpr int kBLoads = kBK * kBN / 4 / kThreads;  // ... of the B slab
  static_assert(kALoads * kThreads * 4 == kBM * kBK && kBLoads * kThreads * 4 == kBK * kBN);
  __shared__ alignas(sizeof(Pack4<acc_t>)) acc_t As[2][kBK][kBM + kAPad];  // two transposed A slabs
  __shared__ alignas(sizeof(Pack4<acc_t>)) acc_t Bs[2][kBK][kBN];          // two B slabs
  const int tid = threadIdx.x;
  const int tn = tid % kThreadsN;  // patch columns [tn * kTN, +kTN)
  const int tm = tid / kThreadsN;  // patch rows [tm * kTM, +kTM)
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kBN;
  const int64_t m_tiles = ceil_div<int64_t>(M, kBM);
  const int64_t k_tiles = ceil_div<int64_t>(K, kBK);
  // Chunk l of this thread: A chunk e = tid + l * kThreads is row e / (kBK/4), k offset 4 * (e % (kBK/4));
  // B chunk e is row e / (kBN/4), column 4 * (e % (kBN/4)) (a warp reads 512 contiguous bytes).
  Pack4<acc_t> a_stage[kALoads], b_stage[kBLoads];  // the next slab, in flight from global memory
  for (int64_t tile_m = blockIdx.y; tile_m < m_tiles; tile_m += gridDim.y) {
    const int64_t row0 = tile_m * kBM;
    auto load_global = [&](int64_t k0) {
#pragma unroll
      for (int l = 0; l < kALoads; ++l) {
        const int e = tid + l * kThreads;
        a_stage[l] = load4<kVec, acc_t>(A, row0 + e / (kBK / 4), k0 + 4 * (e % (kBK / 4)), M, K);
      }
#pragma unroll
      for (int l = 0; l < kBLoads; ++l) {
        const int e = tid + l * kThreads;
        b_stage[l] = load4<kVec, acc_t>(B, k0 + e / (kBN / 4), col0 + 4 * (e % (kBN / 4)), K, N);
      }
    };
    auto store_shared = [&](int buf) {
#pragma unroll
      for (int l = 0; l < kALoads; ++l) {
        const int e = tid + l * kThreads;
        const int r = e / (kBK / 4), c = 4 * (e % (kBK / 4));
#pragma unroll
        for (int i = 0; i < 4; ++i) As[buf][c + i][r] = a_stage[l].v[i];  // transpose into As[k][row]
      }
#pragma unroll
      for (int l = 0; l < kBLoads; ++l) {
        const int e = tid + l * kThreads;
        write4(&Bs[buf][e / (kBN / 4)][4 * (e % (kBN / 4))], b_stage[l]);
      }
    };

    acc_t acc[kTM][kTN] = {};
    load_global(0);
    store_shared(0);
    __syncthreads();
    for (int64_t kt = 0; kt < k_tiles; ++kt) {
      const int cur = static_cast<int>(kt & 1);
      const bool has_next = kt + 1 < k_tiles;
      if (has_next) load_global((kt + 1) * kBK);  // in flight while the FMAs below run
#pragma unroll
      for (int k = 0; k < kBK; ++k) {
        Pack4<acc_t> a_frag[kTM / 4], b_frag[kTN / 4];
#pragma unroll
        for (int i = 0; i < kTM / 4; ++i) a_frag[i] = read4(&As[cur][k][tm * kTM + 4 * i]);
#pragma unroll
        for (int j = 0; j < kTN / 4; ++j) b_frag[j] = read4(&Bs[cur][k][tn * kTN + 4 * j]);
#pragma unroll
        for (int i = 0; i < kTM; ++i) {
#pragma unroll
          for (int j = 0; j < kTN; ++j) acc[i][j] += a_frag[i / 4].v[i % 4] * b_frag[j / 4].v[j % 4];
        }
      }
      // The other buffer was last read in slab kt - 1, which every thread finished before the barrier that
      // ended it, so it can be overwritten now; the barrier below publishes it for slab kt + 1.
      if (has_next) store_shared(cur ^ 1);
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

void launch_04_double_buffer(const Args& args) {
  const int64_t M = args.M, N = args.N, K = args.K;
  const dim3 grid(static_cast<unsigned>(ceil_div<int64_t>(N, kBN)),
                  static_cast<unsigned>(std::min<int64_t>(ceil_div<int64_t>(M, kBM), kMaxGridY)));
  dispatch_vec4(args, [&](auto zero, auto vec) {
    using scalar_t = decltype(zero);
    matmul_kernel_04_double_buffer<scalar_t, decltype(vec)::value><<<grid, kThreads, 0, args.stream>>>(
        args.a_ptr<scalar_t>(), args.b_ptr<scalar_t>(), args.c_ptr<scalar_t>(), M, N, K);
  });
  CUDA_KERNELS_LAUNCH_CHECK();
}

}  // namespace cuda_kernels::matmul_ladder
