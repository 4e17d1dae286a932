// Ladder step 10: step 9 + 2-block clusters sharing B through TMA multicast.
//
// Step 9's 128 x 256 tiles need 48 KB from L2 per 64-deep k slab (16 KB of A, 32 KB of B) for 4.2 MFLOP: with
// all 132 SMs at tensor-core speed that is ~8 TB/s of L2 -> SM traffic, a large share of what the L2 delivers.
// (Measured on the H100, this step alone runs within noise of step 9: the stores of the epilogue, which step 11
// moves to TMA, weigh more; the two together beat either alone.)
// Here blocks run in clusters of two that own vertically adjacent tiles (rows 256p + [0, 128) and + [128, 256), the
// same 256 columns): they need the same B slab. Each block loads its own A and HALF of the B slab, with TMA multicast
// writing that half into both blocks' shared memory (and signalling both blocks' "full" barriers). Per block that is 16
// + 16 KB from L2 instead of 16 + 32 KB: a third less traffic for the same work. The cost is coupling: a slot may be
// refilled only when the consumers of BOTH blocks are done with it (the peer writes into it too), so each consumer
// warpgroup arrives on the "empty" barrier of both blocks (a remote mbarrier arrive through the cluster's shared-memory
// window), and those barriers count 4 arrivals. The pair walks the same sequence of 256 x BN super-tiles; when M has an
// odd number of row tiles, the second block of the last pair computes zeros from TMA's out-of-bounds fill and stores
// nothing. Blocks meet at cluster barriers after initializing their mbarriers (the peer's multicast may signal them)
// and before exiting (the peer may still arrive on them). The persistent grid is capped at the clusters the GPU can
// hold at once (cudaOccupancyMaxActiveClusters), so no cluster waits for another to finish. Everything else (warp
// specialization, ring, setmaxnreg, layouts, epilogue) is step 9's.
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "cuda/matmul/hopper.cuh"

namespace cuda_kernels::matmul_ladder {
namespace wgmma10 {

constexpr int kBM = 128;                      // rows of a block tile: 64 per consumer warpgroup (wgmma's M)
constexpr int kBK = 64;                       // k per ring slot: one 128-byte swizzle row of 16-bit elements
[[maybe_unused]] constexpr int kWgmmaK = 16;  // k per wgmma instruction
constexpr int kSwizzleCols = 64;              // elements in one 128-byte swizzled row
constexpr int kConsumers = 2;                 // consumer warpgroups
constexpr int kThreads = 128 * (1 + kConsumers);
[[maybe_unused]] constexpr int kProducerRegs = 40;  // setmaxnreg budgets: 128 * 40 + 256 * 232 = 384 * 168
[[maybe_unused]] constexpr int kConsumerRegs = 232;
static_assert(hopper::setmaxnreg_fits(kThreads, kProducerRegs, kConsumerRegs),
              "the warpgroups' register budgets fit the block's launch allocation");
constexpr uint32_t kSwizzleAtom = 1024;  // bytes of 8 swizzled 128-byte rows: the pattern's period
constexpr int kDefaultGroupM = 8;        // super-tile rows (pairs of row tiles) per group in the tile order
constexpr int kClusterM = 2;             // blocks per cluster, stacked along M

// Ring depth by tile width: as many slots as fit in the 227 KB of shared memory a block may use.
template <int BN>
struct Tile {
  static constexpr int kBN = BN;
  static constexpr uint32_t kABytes = kBM * kBK * 2;  // A slot: 128 rows x 64 k
  static constexpr uint32_t kBBytes = BN * kBK * 2;   // B slot: 64 k x BN columns
  static constexpr uint32_t kStageBytes = kABytes + kBBytes;
  static constexpr int kStages = BN == 256 ? 4 : 6;
  static constexpr size_t kSmemBytes = kStages * kStageBytes + kSwizzleAtom;  // + slack to align the ring
  static constexpr int kAcc = BN / 2;  // fp32 accumulators per consumer thread: 64 x BN / 128
};

using hopper::Operand;

template <int BN, bool kBf16, int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_tile(float (&d)[BN / 2], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (BN == 256) {
    hopper::wgmma_m64n256k16<kBf16, kTransA, kTransB>(d, desc_a, desc_b, scale_d);
  } else {
    static_assert(BN == 128, "tile widths 128 and 256 are instantiated");
    hopper::wgmma_m64n128k16<kBf16, kTransA, kTransB>(d, desc_a, desc_b, scale_d);
  }
}

// C (M x N, row-major, 16-bit bits) = A @ B. kAMN: A is MN-major (stored as (K, M), m contiguous), else K-major
// ((M, K), k contiguous). kBK_: B is K-major ((N, K), k contiguous), else MN-major ((K, N), n contiguous).
// Tensor maps: A K-major {K, M} boxes {64, 128}; A MN-major {M, K} boxes {64, 64}; B MN-major {N, K} boxes
// {64, 64}; B K-major {K, N} boxes {64, BN}.
template <int BN, bool kBf16, bool kAMN, bool kBKMaj>
__global__ void __launch_bounds__(kThreads, 1)
    matmul_kernel_10_cluster_multicast(const __grid_constant__ CUtensorMap tm_a,
                                       const __grid_constant__ CUtensorMap tm_b, uint16_t* __restrict__ C, int M, int N,
                                       int K, int group_m) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = Tile<BN>;
  constexpr int S = T::kStages;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full_bar[S];
  __shared__ __align__(8) uint64_t empty_bar[S];
  // The ring: S A slots, then S B slots, 1024-byte aligned (the swizzle pattern repeats every 1024 bytes and
  // TMA and wgmma agree on it only from such a boundary).
  const uint32_t ring = (hopper::smem_u32(smem_raw) + kSwizzleAtom - 1) & ~(kSwizzleAtom - 1);
  const uint32_t a_ring = ring, b_ring = ring + S * T::kABytes;

  hopper::init_ring(full_bar, empty_bar, S, kConsumers * kClusterM);
  hopper::cluster_sync();  // the peer's multicast and arrivals may target our barriers from now on

  const uint32_t rank = hopper::cluster_rank();
  const int64_t cluster_id = blockIdx.x / kClusterM, clusters = gridDim.x / kClusterM;
  const int m_tiles = (M + kBM - 1) / kBM, n_tiles = (N + BN - 1) / BN;
  const int m_pairs = (m_tiles + kClusterM - 1) / kClusterM;  // super-tile rows: kClusterM row tiles each
  const int64_t tiles = int64_t{m_pairs} * n_tiles;
  const int k_slabs = (K + kBK - 1) / kBK;
  const int wg = threadIdx.x / 128;

  if (wg == 0) {
    // Producer: one thread fills slots in ring order, the same tile sequence as the consumers.
    hopper::setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) {
      int s = 0;
      uint32_t phase = 0;
      for (int64_t tile = cluster_id; tile < tiles; tile += clusters) {
        int tp, tn;
        hopper::grouped_tile(tile, m_pairs, n_tiles, group_m, tp, tn);
        const int m0 = (tp * kClusterM + rank) * kBM, n0 = tn * BN;
        for (int kb = 0; kb < k_slabs; ++kb) {
          const int k0 = kb * kBK;
          hopper::mbar_wait(hopper::smem_u32(&empty_bar[s]), phase ^ 1);
          const uint32_t full = hopper::smem_u32(&full_bar[s]);
          hopper::mbar_arrive_expect_tx(full, T::kStageBytes);
          const uint32_t a_dst = a_ring + s * T::kABytes, b_dst = b_ring + s * T::kBBytes;
          if constexpr (kAMN) {
            // Two 64 m x 64 k boxes, one per consumer, 8 KB apart.
            for (int c = 0; c < kBM / kSwizzleCols; ++c)
              hopper::tma_load_2d(a_dst + c * kSwizzleCols * kBK * 2, &tm_a, m0 + c * kSwizzleCols, k0, full);
          } else {
            hopper::tma_load_2d(a_dst, &tm_a, k0, m0, full);
          }
          // This block's half of the B slab (columns n0 + rank * BN / 2 + [0, BN / 2)), into both blocks.
          constexpr uint16_t kBoth = (1u << kClusterM) - 1;
          constexpr int kHalf = BN / kClusterM;
          if constexpr (kBKMaj) {
            // Rows of 64 k, 128 bytes each: the half starts kHalf rows in.
            hopper::tma_load_2d_multicast(b_dst + rank * kHalf * kBK * 2, &tm_b, k0, n0 + rank * kHalf, full, kBoth);
          } else {
            // Boxes of 64 n x 64 k, 8 KB apart (the LBO of the MN-major descriptor): the kHalf / 64 consecutive
            // boxes of this block's half.
            for (int c = 0; c < kHalf / kSwizzleCols; ++c) {
              const int box = rank * (kHalf / kSwizzleCols) + c;
              hopper::tma_load_2d_multicast(b_dst + box * kSwizzleCols * kBK * 2, &tm_b, n0 + box * kSwizzleCols, k0,
                                            full, kBoth);
            }
          }
          if (++s == S) s = 0, phase ^= 1;
        }
      }
    }
  } else {
    hopper::setmaxnreg_inc<kConsumerRegs>();
    const int consumer = wg - 1;
    const int t = threadIdx.x % 128;
    const int warp = t / 32, lane = t % 32;
    // This consumer's 64 rows of the A slot: rows [64c, 64c + 64) (K-major) or the c-th 64 m x 64 k box
    // (MN-major); both start 8 KB into the slot.
    const uint32_t a_off = consumer * 64 * kBK * 2;
    // Descriptor strides (bytes). K-major: 8-row groups 1024 apart; each k16 step moves 32 bytes along the row.
    // MN-major: 8-k groups 1024 apart, 64-wide M/N blocks 8 KB apart (one box); each k16 step moves 16 rows.
    constexpr uint32_t kMnBlock = kSwizzleCols * kBK * 2;
    constexpr uint32_t kAStep = kAMN ? kWgmmaK * 128 : kWgmmaK * 2;
    constexpr uint32_t kBStep = kBKMaj ? kWgmmaK * 2 : kWgmmaK * 128;
    constexpr uint32_t kALbo = kAMN ? kMnBlock : 16, kBLbo = kBKMaj ? 16 : kMnBlock;

    // Frees a slot in both blocks of the cluster: both producers write into it.
    const auto release = [&](int slot) {
      const uint32_t bar = hopper::smem_u32(&empty_bar[slot]);
#pragma unroll
      for (uint32_t r = 0; r < kClusterM; ++r) {
        if (r == rank) {
          hopper::mbar_arrive(bar);
        } else {
          hopper::mbar_arrive_cluster(hopper::cluster_map(bar, r));
        }
      }
    };
    float acc[T::kAcc];
    int s = 0;
    uint32_t phase = 0;
    for (int64_t tile = cluster_id; tile < tiles; tile += clusters) {
      int tp, tn;
      hopper::grouped_tile(tile, m_pairs, n_tiles, group_m, tp, tn);
      const int tm = tp * kClusterM + static_cast<int>(rank);
      int prev = -1;
      for (int kb = 0; kb < k_slabs; ++kb) {
        hopper::mbar_wait(hopper::smem_u32(&full_bar[s]), phase);
        hopper::wgmma_fence();
        const uint32_t a_base = a_ring + s * T::kABytes + a_off, b_base = b_ring + s * T::kBBytes;
#pragma unroll
        for (int k = 0; k < kBK / kWgmmaK; ++k) {
          const uint64_t da = hopper::make_smem_desc(a_base + k * kAStep, kALbo, kSwizzleAtom);
          const uint64_t db = hopper::make_smem_desc(b_base + k * kBStep, kBLbo, kSwizzleAtom);
          // The first wgmma of a tile overwrites the accumulators (scale-d = 0) instead of adding.
          wgmma_tile<BN, kBf16, kAMN ? 1 : 0, kBKMaj ? 0 : 1>(acc, da, db, (kb | k) != 0);
        }
        hopper::wgmma_commit();
        // The batch issued before this one is done: its slot can be refilled.
        hopper::wgmma_wait<1>();
        if (prev >= 0 && t == 0) release(prev);
        prev = s;
        if (++s == S) s = 0, phase ^= 1;
      }
      hopper::wgmma_wait<0>();
      if (t == 0) release(prev);
#pragma unroll
      for (int i = 0; i < T::kAcc; ++i) hopper::reg_fence(acc[i]);

      // Epilogue. wgmma's accumulator layout: acc[4j + h] (j < BN / 8) is row 16 * warp + lane / 4 (+ 8 for
      // h >= 2), column 8j + 2 * (lane % 4) + h % 2 of this consumer's 64 x BN tile.
      const int row0 = tm * kBM + consumer * 64 + warp * 16 + lane / 4;
      const int col0 = tn * BN + 2 * (lane % 4);
      const bool full_tile = tm * kBM + kBM <= M && tn * BN + BN <= N && N % 2 == 0;
      if (full_tile) {
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int64_t idx = int64_t{row0 + 8 * h} * N + col0 + 8 * j;
            *reinterpret_cast<uint32_t*>(C + idx) = hopper::pack2<kBf16>(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
          }
        }
      } else {
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = row0 + 8 * h, col = col0 + 8 * j;
            if (row >= M || col >= N) continue;
            const int64_t idx = int64_t{row} * N + col;
            if (col + 1 < N && N % 2 == 0) {
              *reinterpret_cast<uint32_t*>(C + idx) = hopper::pack2<kBf16>(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
            } else {
              C[idx] = hopper::pack1<kBf16>(acc[4 * j + 2 * h]);
              if (col + 1 < N) C[idx + 1] = hopper::pack1<kBf16>(acc[4 * j + 2 * h + 1]);
            }
          }
        }
      }
    }
  }
  hopper::cluster_sync();  // the peer may still arrive on our barriers until it is done
#endif
}

struct LaunchOptions {
  int block_n = 0;  // 0: by shape; else 128 or 256
  int group_m = kDefaultGroupM;
  int max_blocks = 0;  // 0: the SM count
};

template <int BN, bool kBf16, bool kAMN, bool kBKMaj>
cudaError_t launch_typed(int M, int N, int K, const Operand& a, const Operand& b, void* c, int sms, int group_m,
                         cudaStream_t stream) {
  using T = Tile<BN>;
  constexpr auto* kernel = &matmul_kernel_10_cluster_multicast<BN, kBf16, kAMN, kBKMaj>;
  int device = 0;
  cudaError_t err = hopper::opt_in_smem<kernel>(T::kSmemBytes, device);
  if (err != cudaSuccess) return err;
  CUtensorMap map_a, map_b;
  const bool ok_a = kAMN ? hopper::encode_tensor_map_2d(&map_a, kBf16, a.ptr, M, K, a.ld, kSwizzleCols, kBK)
                         : hopper::encode_tensor_map_2d(&map_a, kBf16, a.ptr, K, M, a.ld, kSwizzleCols, kBM);
  const bool ok_b = kBKMaj
                        ? hopper::encode_tensor_map_2d(&map_b, kBf16, b.ptr, K, N, b.ld, kSwizzleCols, BN / kClusterM)
                        : hopper::encode_tensor_map_2d(&map_b, kBf16, b.ptr, N, K, b.ld, kSwizzleCols, kBK);
  if (!ok_a || !ok_b) return cudaErrorInvalidValue;
  // Clusters the GPU holds at once (SMs pair up within GPCs only), read once per device.
  static std::atomic<int> max_clusters[hopper::kMaxDevices] = {};
  int fit = device < hopper::kMaxDevices ? max_clusters[device].load(std::memory_order_relaxed) : 0;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = kClusterM;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = T::kSmemBytes;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (fit == 0) {
    cfg.gridDim = dim3(sms / kClusterM * kClusterM);
    err = cudaOccupancyMaxActiveClusters(&fit, kernel, &cfg);
    if (err != cudaSuccess) return err;
    if (fit < 1) return cudaErrorInvalidConfiguration;
    if (device < hopper::kMaxDevices) max_clusters[device].store(fit, std::memory_order_relaxed);
  }
  const int64_t super_tiles = int64_t{(M + kClusterM * kBM - 1) / (kClusterM * kBM)} * ((N + BN - 1) / BN);
  const int64_t clusters = std::min<int64_t>({super_tiles, int64_t{fit}, int64_t{sms / kClusterM}});
  cfg.gridDim = dim3(static_cast<unsigned>(clusters * kClusterM));
  return cudaLaunchKernelEx(&cfg, kernel, map_a, map_b, static_cast<uint16_t*>(c), M, N, K, group_m);
}

template <bool kBf16, bool kAMN, bool kBKMaj>
cudaError_t launch_layout(int M, int N, int K, const Operand& a, const Operand& b, void* c, int sms,
                          const LaunchOptions& opt, cudaStream_t stream) {
  int bn = opt.block_n;
  if (bn == 0) {
    // 128 x 256 tiles unless they leave more than half the SMs idle.
    const int64_t wide_tiles = int64_t{(M + kClusterM * kBM - 1) / (kClusterM * kBM)} * kClusterM * ((N + 255) / 256);
    bn = 2 * wide_tiles < sms ? 128 : 256;
  }
  const int blocks = opt.max_blocks > 0 ? opt.max_blocks : sms;
  if (bn == 128) return launch_typed<128, kBf16, kAMN, kBKMaj>(M, N, K, a, b, c, blocks, opt.group_m, stream);
  return launch_typed<256, kBf16, kAMN, kBKMaj>(M, N, K, a, b, c, blocks, opt.group_m, stream);
}

// C (M x N, row-major, contiguous) = A @ B for 16-bit A, B, C (bf16 when bf16, else fp16), fp32 accumulation.
// 1 <= M, N, K < 2^31. The caller guarantees the Operand requirements.
inline cudaError_t launch(bool bf16, int M, int N, int K, const Operand& a, const Operand& b, void* c, int sms,
                          cudaStream_t stream, const LaunchOptions& opt = {}) {
  if (bf16) {
    if (a.mn_major) {
      return b.mn_major ? launch_layout<true, true, false>(M, N, K, a, b, c, sms, opt, stream)
                        : launch_layout<true, true, true>(M, N, K, a, b, c, sms, opt, stream);
    }
    return b.mn_major ? launch_layout<true, false, false>(M, N, K, a, b, c, sms, opt, stream)
                      : launch_layout<true, false, true>(M, N, K, a, b, c, sms, opt, stream);
  }
  if (a.mn_major) {
    return b.mn_major ? launch_layout<false, true, false>(M, N, K, a, b, c, sms, opt, stream)
                      : launch_layout<false, true, true>(M, N, K, a, b, c, sms, opt, stream);
  }
  return b.mn_major ? launch_layout<false, false, false>(M, N, K, a, b, c, sms, opt, stream)
                    : launch_layout<false, false, true>(M, N, K, a, b, c, sms, opt, stream);
}

}  // namespace wgmma10
}  // namespace cuda_kernels::matmul_ladder

#include "cuda/matmul/args.h"
#include "cuda/utils.cuh"

namespace cuda_kernels::matmul_ladder {

bool wgmma_available(int device);  // defined with step 9

void launch_10_cluster_multicast(const Args& args) {
  const hopper::Call call = hopper::prepare_call("10_cluster_multicast", args, &wgmma_available);
  hopper::check_launch("10_cluster_multicast", wgmma10::launch(call.bf16, call.M, call.N, call.K, call.a, call.b,
                                                               call.c, sm_count(call.device), call.stream));
}

}  // namespace cuda_kernels::matmul_ladder
