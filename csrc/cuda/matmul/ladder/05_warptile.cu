// Ladder step 5: warp tiling.
//
// In steps 3-4 thread t owns the contiguous patch rows [8 * (t / 16), +8) x columns [8 * (t % 16), +8). The 16
// threads of a warp that share a row read B at 16 addresses 32 bytes apart, which fall on only 8 of the 32 banks:
// each 16-byte shared load of B takes 4 passes (wavefronts) instead of 1, and shared memory, not the FMA units,
// sets the pace. Here the block tile is split into warp tiles (kWM x kWN) and each thread's 8 x 8 outputs are
// 2 x 2 sub-tiles of 4 x 4 spread over the warp tile: for one k the 32 lanes (kLanesM x kLanesN = 4 x 8) read
// A at 4 adjacent 16-byte addresses and B at 8 adjacent ones, so each load is one conflict-free wavefront and
// all lanes of a warp row get their A value by broadcast. The warp's outputs also form a compact 32 x 64 block,
// which keeps the A and B values it needs per k at 32 + 64 instead of 16 + 128 (steps 3-4).
// 16-byte C stores of a warp now cover whole 128-byte rows. Global loads and double buffering are step 4's.
#include <algorithm>

#include "cuda/matmul/args.h"
#include "cuda/matmul/pack4.cuh"
#include "cuda/utils.cuh"

namespace cuda_kernels::matmul_ladder {
namespace {

constexpr int kBM = 128;  // block tile rows
constexpr int kBN = 128;  // block tile columns
constexpr int kBK = 8;    // slab depth along K
constexpr int kWM = 32;   // warp tile rows
constexpr int kWN = 64;   // warp tile columns
constexpr int kTM = 8;    // rows of C per thread: kTM / 4 sub-tiles of 4 rows
constexpr int kTN = 8;    // columns of C per thread: kTN / 4 sub-tiles of 4 columns
constexpr int kAPad = 4;  // extra words per As row: keeps 16-byte alignment, spreads transposing stores over banks
constexpr int kLanesM = kWM / kTM;                    // 4 lanes of a warp along M ...
constexpr int kLanesN = kWN / kTN;                    // ... times 8 along N
constexpr int kWarpsN = kBN / kWN;                    // 2 warps along N ...
constexpr int kThreads = 32 * (kBM / kWM) * kWarpsN;  // ... times 4 along M: 256 threads
static_assert(kLanesM * kLanesN == 32, "a warp tile must hold exactly 32 thread patches");
constexpr int kMaxGridY = 65535;

// Reads p[0 .. 3] as acc_t: four consecutive elements of one row of a row-major matrix, zeros for those
// outside it. line_ok says whether the row exists; element i exists when pos + i < limit, pos being p[0]'s index
// along the row and limit the row length. kVec (float32, limit % 4 == 0, pos % 4 == 0, p 16-byte aligned): the
// four are all in or all out, and come in one 16-byte load.
template <bool kVec, typename acc_t, typename scalar_t>
__device__ __forceinline__ Pack4<acc_t> load4(const scalar_t* p, bool line_ok, int64_t pos, int64_t limit) {
  Pack4<acc_t> out;
  if constexpr (kVec) {
    static_assert(std::is_same_v<scalar_t, float>, "16-byte loads are only used for float32");
    const float4 v = line_ok && pos < limit ? *reinterpret_cast<const float4*>(p) : make_float4(0, 0, 0, 0);
    out.v[0] = v.x, out.v[1] = v.y, out.v[2] = v.z, out.v[3] = v.w;
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) out.v[i] = line_ok && pos + i < limit ? static_cast<acc_t>(p[i]) : acc_t(0);
  }
  return out;
}

// Writes v[0 .. 3] to p[0 .. 3], skipping elements outside the matrix (same arguments as load4).
template <bool kVec, typename acc_t, typename scalar_t>
__device__ __forceinline__ void store4(scalar_t* p, bool line_ok, int64_t pos, int64_t limit, const acc_t* v) {
  if (!line_ok) return;
  if constexpr (kVec) {
    if (pos < limit) *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (pos + i < limit) p[i] = static_cast<scalar_t>(v[i]);
    }
  }
}

// minBlocks = 1: up to 255 registers. Capping at 128 (two blocks per SM) spilled: the 64 accumulators, the
// staging registers and the fragments of the unrolled k loop need ~150 (step 6 drops the staging registers).
template <typename scalar_t, bool kVec>
__global__ void __launch_bounds__(kThreads, 1)
    matmul_kernel_05_warptile(const scalar_t* __restrict__ A, const scalar_t* __restrict__ B, scalar_t* __restrict__ C,
                              int64_t M, int64_t N, int64_t K) {
  using acc_t = opmath_type<scalar_t>;
  constexpr int kALoads = kBM * kBK / 4 / kThreads;  // four-wide chunks of the A slab per thread
  constexpr int kBLoads = kBK * kBN / 4 / kThreads;  // ... of the B slab
  static_assert(kALoads * kThreads * 4 == kBM * kBK && kBLoads * kThreads * 4 == kBK * kBN);
  __shared__ alignas(sizeof(Pack4<acc_t>)) acc_t As[2][kBK][kBM + kAPad];  // two transposed A slabs
  __shared__ alignas(sizeof(Pack4<acc_t>)) acc_t Bs[2][kBK][kBN];          // two B slabs
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  // This thread's rows are wm0 + i * 4 * kLanesM + [0, 4) for sub-tile i < kTM / 4, and its columns
  // wn0 + j * 4 * kLanesN + [0, 4) for j < kTN / 4, where wm0/wn0 place the lane inside its warp's tile.
  const int wm0 = (warp / kWarpsN) * kWM + (lane / kLanesN) * 4;
  const int wn0 = (warp % kWarpsN) * kWN + (lane % kLanesN) * 4;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kBN;
  const int64_t m_tiles = ceil_div<int64_t>(M, kBM);
  const int64_t k_tiles = ceil_div<int64_t>(K, kBK);
  // Chunk l of this thread: A chunk e = tid + l * kThreads is row e / (kBK/4), k offset 4 * (e % (kBK/4));
  // B chunk e is row e / (kBN/4), column 4 * (e % (kBN/4)) (a warp reads 512 contiguous bytes).
  int a_r[kALoads], a_c[kALoads], b_r[kBLoads], b_c[kBLoads];
#pragma unroll
  for (int l = 0; l < kALoads; ++l)
    a_r[l] = (tid + l * kThreads) / (kBK / 4), a_c[l] = 4 * ((tid + l * kThreads) % (kBK / 4));
#pragma unroll
  for (int l = 0; l < kBLoads; ++l)
    b_r[l] = (tid + l * kThreads) / (kBN / 4), b_c[l] = 4 * ((tid + l * kThreads) % (kBN / 4));
  // Where the chunks of slab 0 start (the row or column clamped into the matrix so the pointer stays valid;
  // load4's checks zero what lies outside). Slab k0 adds k0 to the A pointers and k0 * N to the B pointers.
  const scalar_t* a_src[kALoads];
  const scalar_t* b_src[kBLoads];
  bool a_row_ok[kALoads], b_col_ok[kBLoads];
#pragma unroll
  for (int l = 0; l < kBLoads; ++l) {
    const int64_t col = col0 + b_c[l];
    b_col_ok[l] = col < N;
    b_src[l] = B + static_cast<int64_t>(b_r[l]) * N + (b_col_ok[l] ? col : 0);
  }
  Pack4<acc_t> a_stage[kALoads], b_stage[kBLoads];  // the next slab, in flight from global memory
  for (int64_t tile_m = blockIdx.y; tile_m < m_tiles; tile_m += gridDim.y) {
    const int64_t row0 = tile_m * kBM;
#pragma unroll
    for (int l = 0; l < kALoads; ++l) {
      const int64_t row = row0 + a_r[l];
      a_row_ok[l] = row < M;
      a_src[l] = A + (a_row_ok[l] ? row : 0) * K + a_c[l];
    }
    auto load_global = [&](int64_t k0) {
#pragma unroll
      for (int l = 0; l < kALoads; ++l) a_stage[l] = load4<kVec, acc_t>(a_src[l] + k0, a_row_ok[l], k0 + a_c[l], K);
#pragma unroll
      for (int l = 0; l < kBLoads; ++l) {
        b_stage[l] = load4<kVec, acc_t>(b_src[l] + k0 * N, k0 + b_r[l] < K && b_col_ok[l], col0 + b_c[l], N);
      }
    };
    auto store_shared = [&](int buf) {
#pragma unroll
      for (int l = 0; l < kALoads; ++l) {
#pragma unroll
        for (int i = 0; i < 4; ++i) As[buf][a_c[l] + i][a_r[l]] = a_stage[l].v[i];  // transpose into As[k][row]
      }
#pragma unroll
      for (int l = 0; l < kBLoads; ++l) write4(&Bs[buf][b_r[l]][b_c[l]], b_stage[l]);
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
        for (int i = 0; i < kTM / 4; ++i) a_frag[i] = read4(&As[cur][k][wm0 + i * 4 * kLanesM]);
#pragma unroll
        for (int j = 0; j < kTN / 4; ++j) b_frag[j] = read4(&Bs[cur][k][wn0 + j * 4 * kLanesN]);
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
    // acc[i][j] is C(row0 + wm0 + (i / 4) * 4 * kLanesM + i % 4, col0 + wn0 + (j / 4) * 4 * kLanesN + j % 4).
#pragma unroll
    for (int i = 0; i < kTM; ++i) {
      const int64_t row = row0 + wm0 + (i / 4) * 4 * kLanesM + i % 4;
#pragma unroll
      for (int j = 0; j < kTN; j += 4) {
        const int64_t col = col0 + wn0 + (j / 4) * 4 * kLanesN;
        store4<kVec>(C + row * N + col, row < M, col, N, &acc[i][j]);
      }
    }
  }
}

}  // namespace

void launch_05_warptile(const Args& args) {
  const int64_t M = args.M, N = args.N, K = args.K;
  const dim3 grid(static_cast<unsigned>(ceil_div<int64_t>(N, kBN)),
                  static_cast<unsigned>(std::min<int64_t>(ceil_div<int64_t>(M, kBM), kMaxGridY)));
  dispatch_vec4(args, [&](auto zero, auto vec) {
    using scalar_t = decltype(zero);
    matmul_kernel_05_warptile<scalar_t, decltype(vec)::value><<<grid, kThreads, 0, args.stream>>>(
        args.a_ptr<scalar_t>(), args.b_ptr<scalar_t>(), args.c_ptr<scalar_t>(), M, N, K);
  });
  CUDA_KERNELS_LAUNCH_CHECK();
}

}  // namespace cuda_kernels::matmul_ladder
