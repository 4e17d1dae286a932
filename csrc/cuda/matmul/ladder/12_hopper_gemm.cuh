// Ladder step 12: step 11 with the tile chosen by shape, a stmatrix epilogue, and stream-K for a mostly idle
// last wave.
//
// Steps 9-11 run one 128 x 256 tile per block whatever the problem: a 1024 x 1024 output has only 32 such tiles
// for 132 SMs, and a persistent grid cannot fill SMs that have no tile. This step instantiates the kernel for
// tiles 128 x 64, 128 x 128 and 128 x 256 (wgmma m64nNk16 with N = 64, 128, 256; the ring as deep as shared
// memory allows for each) and the launcher picks, per shape, the widest tile that still gives (nearly) every SM
// work. The 128 x 64 tile runs without the 2-CTA cluster: half of a 64-wide B slab is narrower than one
// 128-byte swizzle row, and small problems read little from L2 anyway. A 64 x 64 tile of one consumer warpgroup
// (Short) doubles the tiles of a few-hundred-row product where 128 x 64 ones would leave SMs idle or split a short K.
// The epilogue writes the accumulators to shared memory with stmatrix (four 8 x 8 matrices per instruction, in
// wgmma's fragment layout as it is: a quarter of step 11's st.shared instructions); the narrower tiles' buffers
// hold the consumer's whole tile, so TMA stores it in one go. The 128 x 256 tile keeps a 4-deep ring and a
// 64 x 128 buffer written in two passes: a 3-deep ring with a whole-tile buffer measured slower. Its second pass is
// woven into the next tile's main loop (kept in 32 registers, its stmatrix between the wgmma of the tile's second
// k-slab), where the tensor cores hide it; and a data-parallel launch of it uses as few clusters as give the same
// number of waves (4096^3: 64 clusters, 4 waves, as on 66).
// Stream-K: a persistent grid over T tiles on C clusters takes ceil(T / C) tile-times; when the last wave is
// less than about half full (8192^3: 1024 super-tiles on 66 clusters, 15.5 waves) the full waves stay
// data-parallel and the last wave's k-slabs are spread evenly over all clusters (for_each_work): clusters that
// hold the later k-slabs of a tile write fp32 partial sums to a workspace and raise a flag, and the cluster that
// holds the tile's first k-slab adds them before its epilogue. With a nearly full last wave (4096^3: 3.88
// waves) it measured slower than leaving the wave as it is: the split tiles' k-slabs are read at different
// times by different clusters, losing the L2 reuse that tiles started together have, and the partial sums'
// round trip costs too.
// Split-K in a cluster: a problem with few tiles and a long K (256 x 256 x 4096: 8 tiles of 128 x 64 for 132 SMs,
// 64 k-slabs each) gives each tile a cluster of 2, 4 or 8 blocks (plan_tiles), each taking an equal share of
// the k-slabs; the blocks put their fp32 sums in their own shared memory and each adds up a share of the tile over
// the whole cluster, reading the others' through distributed shared memory in rank order, and stores it: more SMs
// load and multiply, nothing goes through global memory, one launch.
// Everything else (producer warpgroup, mbarrier ring, setmaxnreg, persistent grouped order, B multicast in
// 2-CTA clusters for the wider tiles, TMA store, direct stores when N % 8 != 0) is step 11's.
// linear's epilogue (Epilogue: bias and an activation, csrc/epilogue.h) is applied to the fp32 accumulators in every
// store path, so cuda_kernels.linear rounds once; it costs the tensor cores the time both consumers spend on it
// (docs/matmul.md, "torch.matmul's shapes and linear").
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "cuda/matmul/hopper.cuh"
#include "cuda/matmul/mma_sm80.cuh"  // l2_evict_first_policy
#include "cuda/utils.cuh"            // ceil_div
#include "epilogue.h"

namespace cuda_kernels::matmul_ladder {
namespace wgmma12 {

constexpr int kBM = 128;                      // rows of the block tile of two consumer warpgroups (64 each: wgmma's M)
constexpr int kBK = 64;                       // k per ring slot: one 128-byte swizzle row of 16-bit elements
[[maybe_unused]] constexpr int kWgmmaK = 16;  // k per wgmma instruction
constexpr int kSwizzleCols = 64;              // elements in one 128-byte swizzled row
[[maybe_unused]] constexpr uint32_t kBoxBytes = 64 * kSwizzleCols * 2;  // one 64 x 64 box of 16-bit elements: 8 KB
constexpr int kMaxConsumers = 2;  // consumer warpgroups of every configuration but Short's (the stream-K workspace's)
[[maybe_unused]] constexpr int kProducerRegs = 40;  // setmaxnreg budgets: 128 * 40 + 256 * 232 = 384 * 168
[[maybe_unused]] constexpr int kConsumerRegs = 232;
constexpr uint32_t kSwizzleAtom = 1024;                // bytes of 8 swizzled 128-byte rows: the pattern's period
constexpr int kSwizzleRows = 8;                        // rows of that period
constexpr size_t kMaxSmem = 227 * 1024;                // dynamic shared memory one block may opt into on the H100
constexpr uint32_t kSplitBarrier = 1 + kMaxConsumers;  // named barrier of both consumers (1 + c: consumer c alone)
[[maybe_unused]] constexpr int kGroupRows =
    16;  // row tiles per group of the tile order (group_m = kGroupRows / cluster)

// One kernel configuration: tile width BN, blocks per cluster CM (1, or 2 stacked along M sharing B by
// multicast), ring depth S, and the consumer's output buffer width OutCols (BN: whole tile; less: BN / OutCols
// passes, each waiting until TMA has read the previous one). Woven (with more than one pass): the last pass of a
// tile stored by TMA is kept in registers and written to the buffer between the wgmma of the next tile's second
// k-slab (see the consumer's main loop). Consumers: consumer warpgroups, 64 tile rows each (wgmma's M).
// RuntimeCM: CM is the most, and each launch says whether its blocks stack (the kernel's cm_arg, 1 or CM): one
// kernel for the tiles with multicast and without (split-K clusters), whose code differs only in the producer's loads
// and the tile indices, instead of two (a fifth of step 12's code, nearly a third of its build time: docs/matmul.md).
template <int BN_, int CM_, int S_, int OutCols_, bool Woven_ = false, int Consumers_ = kMaxConsumers,
          bool RuntimeCM_ = false>
struct Config {
  static constexpr int BN = BN_, CM = CM_, S = S_, kOutCols = OutCols_;
  static constexpr bool kRuntimeCM = RuntimeCM_ && CM_ > 1;
  static constexpr int kConsumers = Consumers_;
  static constexpr int kBM = 64 * kConsumers;              // rows of a block tile
  static constexpr int kThreads = 128 * (1 + kConsumers);  // the producer warpgroup and the consumers
  // Two consumers move registers from the producer (setmaxnreg); one has enough at launch (255 a thread) and does not.
  static constexpr bool kSetMaxNReg = kConsumers > 1;
  static_assert(kConsumers == 1 || kConsumers == kMaxConsumers,
                "one or two consumers (the stream-K workspace holds two a block)");
  static_assert(!kSetMaxNReg || hopper::setmaxnreg_fits(kThreads, kProducerRegs, kConsumerRegs),
                "the warpgroups' register budgets fit the block's launch allocation");
  static constexpr int kPasses = BN / OutCols_;
  static constexpr bool kWoven = Woven_ && kPasses > 1;
  // Whether it runs a batch of products (batch > 1). Not the woven configuration: its consumers' registers are
  // all taken (the accumulators and the woven pass, 160 of 168), and the matrix index beside its tile made it
  // spill; a batch runs on the narrower tiles (plan_tiles).
  static constexpr bool kBatches = !kWoven;
  static constexpr int kMapRank = kBatches ? 3 : 2;  // its tensor maps: 3-D (the matrix of a batch third), or 2-D
  static_assert(BN == 64 || BN == 128 || BN == 256, "wgmma widths 64, 128, 256 are instantiated");
  // A block's share of the B slab (cluster of CM): BN / CM rows of a K-major slab, kBK / CM k rows of every box of
  // an MN-major one; either way whole 8-row periods of the 128-byte swizzle.
  static_assert(CM == 1 || ((BN / CM) % 8 == 0 && (kBK / CM) % 8 == 0), "B shares are whole swizzle periods");
  static_assert(BN % kOutCols == 0 && kOutCols % kSwizzleCols == 0, "the buffer holds whole boxes");
  static constexpr uint32_t kABytes = kBM * kBK * 2;  // A slot: kBM rows x 64 k
  static constexpr uint32_t kBBytes = BN * kBK * 2;   // B slot: 64 k x BN columns
  static constexpr uint32_t kStageBytes = kABytes + kBBytes;
  static constexpr uint32_t kOutBytes = 64 * kOutCols * 2;  // one consumer's output buffer
  // The ring, then one output buffer per consumer, + slack to align the ring.
  static constexpr size_t kSmemBytes = S * kStageBytes + kConsumers * kOutBytes + kSwizzleAtom;
  static_assert(kSmemBytes + 1024 <= kMaxSmem, "ring + buffers (+ the static barriers) fit in 227 KB");
  static constexpr int kAcc = BN / 2;  // fp32 accumulators per consumer thread: 64 x BN / 128
};

// The configurations the launcher picks from (by tile width).
using Wide = Config<256, 2, 4, 128, true>;  // 128 x 256, 2-CTA clusters, 4 slots (48 KB each), two passes, woven
// 128 x 128, 6 slots (32 KB each), whole-tile buffer; 2-CTA clusters sharing B, or (cm = 1) none, for split-K clusters
using Mid = Config<128, 2, 6, 128, false, kMaxConsumers, true>;
using Narrow = Config<64, 1, 8, 64>;            // 128 x 64, no cluster, 8 slots (24 KB each), whole-tile buffer
using Short = Config<64, 1, 12, 64, false, 1>;  // 64 x 64, one consumer, 12 slots (16 KB each), whole-tile buffer

using hopper::Operand;

template <int BN, bool kBf16, int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_tile(float (&d)[BN / 2], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (BN == 256) {
    hopper::wgmma_m64n256k16<kBf16, kTransA, kTransB>(d, desc_a, desc_b, scale_d);
  } else if constexpr (BN == 128) {
    hopper::wgmma_m64n128k16<kBf16, kTransA, kTransB>(d, desc_a, desc_b, scale_d);
  } else {
    hopper::wgmma_m64n64k16<kBf16, kTransA, kTransB>(d, desc_a, desc_b, scale_d);
  }
}

// Stream-K bookkeeping: where partial tiles go, and the value that marks one as written in this launch.
struct StreamK {
  float* partials;   // one 128 x 256 fp32 tile per block (2 consumers x 128 threads x 128 values), or null
  uint64_t* flags;   // one per block and consumer: == epoch once that partial tile is written
  uint64_t epoch;    // unique per launch (nonzero); the owner resets the flag to 0 after reading
  int64_t dp_tiles;  // super-tiles [0, dp_tiles) are data-parallel; the rest are split along K
};
constexpr int kPartialFloats = kMaxConsumers * 128 * 128;  // per block: the widest tile's accumulators

// What one cluster does, in order: whole super-tiles cluster_id, cluster_id + clusters, ... below dp_tiles (every
// full wave), then its share of the k-slabs of the remaining super-tiles (fewer than `clusters`: the last,
// partial wave), laid end to end (tile-major) and cut into `clusters` equal ranges, cluster 0 taking the last
// range. A tile of that phase is cut into a head (k-slab 0 on), which ends the range of the cluster that owns
// the tile, and one or more later pieces, each starting (tail) or making up (middle) the range of the clusters
// with the next lower indices. The owner adds their partial sums and stores C; the others only write partial
// sums. An owner waits only on lower-indexed clusters, which the GPU starts no later than the owner, so the wait
// cannot deadlock even when not all clusters are resident at once. The split tiles are in flight together, like
// one wave of data-parallel tiles, but each cluster is at a different k, so they share less of A and B in L2.
enum class Role { kWhole, kOwner, kPartial };
__device__ __forceinline__ int64_t split_range_begin(int64_t cluster, int64_t clusters, int64_t tiles, int64_t dp_tiles,
                                                     int k_slabs) {
  const int64_t sk_slabs = (tiles - dp_tiles) * k_slabs;
  return dp_tiles * k_slabs + sk_slabs * (clusters - 1 - cluster) / clusters;
}
template <class F>
__device__ __forceinline__ void for_each_work(int64_t cluster_id, int64_t clusters, int64_t tiles, int64_t dp_tiles,
                                              int k_slabs, F&& f) {
  for (int64_t tile = cluster_id; tile < dp_tiles; tile += clusters) f(tile, 0, k_slabs, Role::kWhole, 0);
  if (dp_tiles == tiles) return;
  const int64_t begin = split_range_begin(cluster_id, clusters, tiles, dp_tiles, k_slabs);
  const int64_t end =
      cluster_id == 0 ? tiles * k_slabs : split_range_begin(cluster_id - 1, clusters, tiles, dp_tiles, k_slabs);
  for (int64_t it = begin; it < end;) {
    const int64_t tile = it / k_slabs;
    const int kb0 = static_cast<int>(it - tile * k_slabs);
    const int kb1 = static_cast<int>(min(int64_t{k_slabs}, kb0 + (end - it)));
    const Role role = kb0 > 0 ? Role::kPartial : (kb1 < k_slabs ? Role::kOwner : Role::kWhole);
    // An owner's contributors: clusters cluster_id - 1, cluster_id - 2, ... whose ranges start inside the tile
    // (every range holds at least one slab: plan_stream_k).
    int contributors = 0;
    if (role == Role::kOwner) {
      while (cluster_id - 1 - contributors >= 0 && split_range_begin(cluster_id - 1 - contributors, clusters, tiles,
                                                                     dp_tiles, k_slabs) < (tile + 1) * k_slabs)
        ++contributors;
    }
    f(tile, kb0, kb1, role, contributors);
    it += kb1 - kb0;
  }
}

// Stores the pair (x, y) at C[row][col], C[row][col + 1] (16-bit, rounded), what of it lies inside M x N.
template <bool kBf16>
__device__ __forceinline__ void store_pair(uint16_t* C, int M, int N, int row, int col, float x, float y) {
  if (row >= M || col >= N) return;
  const int64_t idx = int64_t{row} * N + col;
  if (col + 1 < N && N % 2 == 0) {
    *reinterpret_cast<uint32_t*>(C + idx) = hopper::pack2<kBf16>(x, y);
  } else {
    C[idx] = hopper::pack1<kBf16>(x);
    if (col + 1 < N) C[idx + 1] = hopper::pack1<kBf16>(y);
  }
}

// linear's fused epilogue (Args::bias, Args::activation): C = act(A @ B + bias) as the tile is stored. bias: N
// 16-bit elements of C's dtype, or nullptr.
struct Epilogue {
  const uint16_t* bias = nullptr;
  Activation act = Activation::kNone;
  bool pairs = false;  // bias readable as 32-bit pairs (N even, bias 4-byte aligned): the kernel stages it
  __host__ __device__ bool active() const { return bias != nullptr || act != Activation::kNone; }
};

constexpr int kBiasLineCols = 64;  // 16-bit bias elements in one 128-byte cache line

// Two 16-bit values packed in a 32-bit word (the first in the low half: a bias pair) as floats.
template <bool kBf16>
__device__ __forceinline__ float2 pair_of_bits(uint32_t bits) {
  if constexpr (kBf16) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&bits));
  } else {
    return __half22float2(*reinterpret_cast<const __half2*>(&bits));
  }
}

// bias[col], bias[col + 1] as floats (0 past N); col is even. One 32-bit load where the pair is 4-byte aligned (N
// even and bias so: a contiguous bias may start at any element).
template <bool kBf16>
__device__ __forceinline__ float2 bias_pair(const uint16_t* bias, int col, int N) {
  uint32_t bits;
  if (col + 1 < N && N % 2 == 0 && reinterpret_cast<uintptr_t>(bias) % 4 == 0) {
    bits = __ldg(reinterpret_cast<const unsigned int*>(bias + col));
  } else {
    bits = (col < N ? bias[col] : 0u) | (col + 1 < N ? uint32_t{bias[col + 1]} << 16 : 0u);
  }
  return pair_of_bits<kBf16>(bits);
}

// Applies the epilogue to accumulator groups of the wgmma layout: acc[4j + h] is in column col0 + 8j + h % 2 (rows
// do not matter: bias is per column). The bias is added in one loop and the activation applied in another, compiled
// once per activation: with the bias inside each activation's loop (its three sources in every copy) and a call per
// store path, the fused epilogue was most of step 12's PTX and of its build time (docs/matmul.md).
// staged: this thread's first bias pair in the tile's copy in shared memory (the next pairs 4 words apart), or
// nullptr to read bias from global memory.
template <bool kBf16, int kN>
__device__ __forceinline__ void apply_epilogue(float (&acc)[kN], const Epilogue& epi, int col0, int N,
                                               const uint32_t* staged = nullptr) {
  if (epi.bias != nullptr) {
#pragma unroll
    for (int j = 0; j < kN / 4; ++j) {
      const float2 b =
          staged != nullptr ? pair_of_bits<kBf16>(staged[4 * j]) : bias_pair<kBf16>(epi.bias, col0 + 8 * j, N);
#pragma unroll
      for (int h = 0; h < 4; ++h) acc[4 * j + h] += h % 2 == 0 ? b.x : b.y;
    }
  }
  if (epi.act == Activation::kNone) return;
  with_activation(epi.act, [&](auto act) {
#pragma unroll
    for (int i = 0; i < kN; ++i) acc[i] = activate<act.value>(acc[i]);
  });
}

// C (M x N, row-major, 16-bit bits) = A @ B. kAMN: A is MN-major (stored as (K, M), m contiguous), else K-major
// ((M, K), k contiguous). kBKMaj: B is K-major ((N, K), k contiguous), else MN-major ((K, N), n contiguous).
// Tensor maps (3-D: the third coordinate is the matrix of a batch): A K-major {K, M} boxes {64, a_rows} (128, or M
// rounded up to 8 when M < 128: the launcher); A MN-major {M, K} boxes {64, 64}; B MN-major {N, K} boxes
// {64, 64 / CM}; B K-major {K, N} boxes {64, BN / CM}; C {N, M} boxes {64, 64}; 3-D maps with the matrix of a batch
// third (Cfg::kMapRank; 2-D where the configuration takes no batch). A batch of `batch` products (configurations with
// kBatches only): tile indices run over every matrix's tiles, matrix by matrix; C's matrices are M * N elements apart;
// bit 0 (A) and bit 1 (B) of `batched` say which operand has a matrix per product (the other's map holds one matrix,
// read for all). k_splits > 1 (only with CM == 1, stream-K off, and one tile per cluster): clusters of k_splits blocks
// split each tile's k-slabs and add up through distributed shared memory.
template <class Cfg, bool kBf16, bool kAMN, bool kBKMaj>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    matmul_kernel_12_hopper_gemm(const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b,
                                 const __grid_constant__ CUtensorMap tm_c, uint16_t* __restrict__ C, bool tma_store,
                                 int M, int N, int K, int batch, int batched, int group_m, StreamK sk, int k_splits,
                                 Epilogue epi, int a_rows, int cm_arg) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int BN = Cfg::BN, S = Cfg::S, BM = Cfg::kBM, kConsumers = Cfg::kConsumers;
  // Blocks stacked along M in a cluster, sharing B (a constant unless the configuration takes it per launch).
  const int CM = Cfg::kRuntimeCM ? cm_arg : Cfg::CM;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full_bar[S];
  __shared__ __align__(8) uint64_t empty_bar[S];
  // The ring: S A slots, then S B slots, then the output buffers, 1024-byte aligned (the swizzle pattern repeats
  // every 1024 bytes and TMA and wgmma agree on it only from such a boundary).
  const uint32_t ring = (hopper::smem_u32(smem_raw) + kSwizzleAtom - 1) & ~(kSwizzleAtom - 1);
  const uint32_t a_ring = ring, b_ring = ring + S * Cfg::kABytes, out_ring = b_ring + S * Cfg::kBBytes;
  // linear's bias for a tile's columns (BN / 2 pairs a consumer), staged under the main loop (Epilogue::pairs), in
  // the slack after the output buffers: it is there whenever the ring needed no alignment (the dynamic region starts
  // 1024-byte aligned), else bias is read from global memory.
  static_assert(kConsumers * BN / 2 * sizeof(uint32_t) <= kSwizzleAtom, "the staged bias fits the slack");
  const uint32_t bias_region = out_ring + kConsumers * Cfg::kOutBytes;
  const bool bias_fits =
      bias_region + kConsumers * BN / 2 * sizeof(uint32_t) <= hopper::smem_u32(smem_raw) + Cfg::kSmemBytes;

  if (threadIdx.x == 0) {
    hopper::prefetch_tensor_map(&tm_a);
    hopper::prefetch_tensor_map(&tm_b);
    if (tma_store) hopper::prefetch_tensor_map(&tm_c);
  }
  hopper::init_ring(full_bar, empty_bar, S, kConsumers * CM);
  // The peer's multicast and arrivals may target our barriers from now on. Blocks that do not multicast (split-K
  // clusters: their peers read this block's shared memory only after a later cluster barrier) need only their own.
  if (CM > 1) {
    hopper::cluster_sync();
  } else {
    __syncthreads();
  }

  const uint32_t rank = CM > 1 ? hopper::cluster_rank() : 0;
  // Blocks of a cluster: CM tiles stacked along M sharing B, or k_splits blocks sharing one tile's k-slabs.
  const int cluster_size = CM * k_splits;
  const int k_rank = k_splits > 1 ? static_cast<int>(hopper::cluster_rank()) : 0;
  const int64_t cluster_id = blockIdx.x / cluster_size, clusters = gridDim.x / cluster_size;
  // This block's share of a tile's k-slabs [kb0, kb1): the k_rank-th of k_splits nearly equal parts.
  // (k_splits is a power of two: shifts, not the divisions that sat on the producer's path to its first load.)
  const int k_shift = __ffs(k_splits) - 1;
  const auto k_share = [&](int& kb0, int& kb1) {
    if (k_splits > 1) {
      const int n = kb1 - kb0, first = kb0;
      kb0 = first + ((n * k_rank) >> k_shift);
      kb1 = first + ((n * (k_rank + 1)) >> k_shift);
    }
  };
  const int m_tiles = ceil_div(M, BM), n_tiles = ceil_div(N, BN);
  const int m_pairs = ceil_div(m_tiles, CM);             // super-tile rows: CM row tiles each
  if constexpr (!Cfg::kBatches) batch = 1, batched = 0;  // the launcher passes one product (kBatches)
  const int64_t tiles = int64_t{m_pairs} * n_tiles * batch;
  const int k_slabs = ceil_div(K, kBK);
  // A super-tile's matrix of the batch, and its row and column in that matrix's grouped order (32-bit divisions,
  // as grouped_tile's: prepare_call keeps tile counts below 2^31).
  const auto locate = [&](int64_t tile, int& tp, int& tn, int& bi) {
    if (!Cfg::kBatches || batch == 1) {
      bi = 0;
      hopper::grouped_tile(tile, m_pairs, n_tiles, group_m, tp, tn);
      return;
    }
    const uint32_t t32 = static_cast<uint32_t>(tile);
    const uint32_t per = static_cast<uint32_t>(m_pairs) * static_cast<uint32_t>(n_tiles);  // one matrix's
    bi = static_cast<int>(t32 / per);
    hopper::grouped_tile(t32 - static_cast<uint32_t>(bi) * per, m_pairs, n_tiles, group_m, tp, tn);
  };
  const int wg = threadIdx.x / 128;

  if (wg == 0) {
    // Producer: one thread fills slots in ring order, the same tile sequence as the consumers.
    if constexpr (Cfg::kSetMaxNReg) hopper::setmaxnreg_dec<kProducerRegs>();
    // Its loop is compiled once per cluster stack (kCM: 1, or Cfg::CM), so that each keeps its loads straight-line
    // where CM is a kernel argument (Config's RuntimeCM).
    const auto produce = [&](auto cm_constant) {
      constexpr int kCM = decltype(cm_constant)::value;
      // The bytes a slot receives: A's box may have fewer rows than the slot (a_rows).
      const uint32_t stage_bytes = Cfg::kStageBytes - static_cast<uint32_t>(BM - a_rows) * kBK * 2;
      int s = 0;
      uint32_t phase = 0;
      for_each_work(cluster_id, clusters, tiles, sk.dp_tiles, k_slabs, [&](int64_t tile, int kb0, int kb1, Role, int) {
        k_share(kb0, kb1);
        int tp, tn, bi;
        locate(tile, tp, tn, bi);
        const int m0 = (tp * kCM + static_cast<int>(rank)) * BM, n0 = tn * BN;
        const int ba = (batched & 1) ? bi : 0, bb = (batched & 2) ? bi : 0;  // the operands' matrices
        for (int kb = kb0; kb < kb1; ++kb) {
          const int k0 = kb * kBK;
          hopper::mbar_wait(hopper::smem_u32(&empty_bar[s]), phase ^ 1);
          const uint32_t full = hopper::smem_u32(&full_bar[s]);
          hopper::mbar_arrive_expect_tx(full, stage_bytes);
          const uint32_t a_dst = a_ring + s * Cfg::kABytes, b_dst = b_ring + s * Cfg::kBBytes;
          // B first: it is multicast, so the peer block's consumers wait for this block's share of it too.
          // This block's share of the B slab goes into every block of the cluster (just this one when CM == 1).
          const auto load_b = [&](uint32_t dst, int c0, int c1) {
            if constexpr (kCM > 1) {
              hopper::tma_load_multicast<Cfg::kMapRank>(dst, &tm_b, c0, c1, bb, full, (1u << kCM) - 1);
            } else {
              hopper::tma_load<Cfg::kMapRank>(dst, &tm_b, c0, c1, bb, full);
            }
          };
          if constexpr (kBKMaj) {
            // Rows of 64 k, 128 bytes each: the share is BN / CM of the slab's BN rows (n), from rank * BN / CM.
            constexpr int kShare = BN / kCM;
            load_b(b_dst + rank * kShare * kBK * 2, k0, n0 + static_cast<int>(rank) * kShare);
          } else {
            // Boxes of 64 n x 64 k, 8 KB apart (the LBO of the MN-major descriptor). The share is the k rows
            // [rank * kBK / CM, (rank + 1) * kBK / CM) of every box, which land that many 128-byte rows into it
            // (a multiple of the 1 KB swizzle period, so the layout is the one a whole box would have). Cut by k
            // rather than by boxes (columns), each block reads rows of all BN columns, as cuBLAS's kernel does:
            // measured faster at 4096^3 (docs/matmul.md).
            constexpr int kRows = kBK / kCM;
            constexpr uint32_t kRowBytes = kSwizzleCols * 2;
            for (int box = 0; box < BN / kSwizzleCols; ++box)
              load_b(b_dst + box * kBoxBytes + rank * kRows * kRowBytes, n0 + box * kSwizzleCols,
                     k0 + static_cast<int>(rank) * kRows);
          }
          if constexpr (kAMN) {
            // 64 m x 64 k boxes, one per consumer, 8 KB apart.
            for (int c = 0; c < BM / kSwizzleCols; ++c)
              hopper::tma_load<Cfg::kMapRank>(a_dst + c * kBoxBytes, &tm_a, m0 + c * kSwizzleCols, k0, ba, full);
          } else {
            hopper::tma_load<Cfg::kMapRank>(a_dst, &tm_a, k0, m0, ba, full);
          }
          if (++s == S) s = 0, phase ^= 1;
        }
      });
    };
    if (threadIdx.x == 0) {
      if constexpr (Cfg::kRuntimeCM) {
        if (CM == 1) {
          produce(std::integral_constant<int, 1>{});
        } else {
          produce(std::integral_constant<int, Cfg::CM>{});
        }
      } else {
        produce(std::integral_constant<int, Cfg::CM>{});
      }
    }
    // The consumers' barrier before the split sums are read (one tile per cluster): every thread of the cluster
    // takes part.
    if (k_splits > 1) hopper::cluster_sync();
  } else {
    if constexpr (Cfg::kSetMaxNReg) hopper::setmaxnreg_inc<kConsumerRegs>();
    const int consumer = wg - 1;
    const int t = threadIdx.x % 128;
    const int warp = t / 32, lane = t % 32;
    // This consumer's 64 rows of the A slot: rows [64c, 64c + 64) (K-major) or the c-th 64 m x 64 k box
    // (MN-major); both start 8 KB into the slot.
    const uint32_t a_off = consumer * kBoxBytes;
    // Descriptor strides (bytes). K-major: 8-row groups 1024 apart; each k16 step moves 32 bytes along the row.
    // MN-major: 8-k groups 1024 apart, 64-wide M/N blocks 8 KB apart (one box); each k16 step moves 16 rows.
    constexpr uint32_t kAStep = kAMN ? kWgmmaK * 128 : kWgmmaK * 2;
    constexpr uint32_t kBStep = kBKMaj ? kWgmmaK * 2 : kWgmmaK * 128;
    constexpr uint32_t kALbo = kAMN ? kBoxBytes : 16, kBLbo = kBKMaj ? 16 : kBoxBytes;

    // Frees a slot in every block of the cluster: all their producers write into it.
    const auto release = [&](int slot) {
      const uint32_t bar = hopper::smem_u32(&empty_bar[slot]);
#pragma unroll
      for (uint32_t r = 0; r < static_cast<uint32_t>(Cfg::CM); ++r) {
        if (r >= static_cast<uint32_t>(CM)) break;
        if (r == rank) {
          hopper::mbar_arrive(bar);
        } else {
          hopper::mbar_arrive_cluster(hopper::cluster_map(bar, r));
        }
      }
    };
    float acc[Cfg::kAcc];
    int s = 0;
    uint32_t phase = 0;

    // The epilogue's buffer and this lane's stmatrix row in it: 64 x 64 boxes 8 KB apart, rows of 128 bytes whose
    // 16-byte chunks are XOR-swizzled with the row index (mod 8), as TMA reads them. stmatrix j-pair (chunks jj,
    // jj + 1): lanes 8i..8i+7 address matrix i = rows 8 * (i % 2) + lane % 8 of the warp's 16, chunk jj + i / 2.
    const uint32_t out_buf = out_ring + consumer * Cfg::kOutBytes;
    const int i_mat = lane / 8;
    const uint32_t row_addr = out_buf + (warp * 16 + (i_mat % 2) * 8 + lane % 8) * 128;
    constexpr int kChunks = Cfg::kOutCols / 8;  // 8-column chunks per pass
    // The address of stmatrix chunk pair jj (< kChunks) of a pass; cc / 8 is the box, the row's swizzle lane % 8.
    const auto chunk_addr = [&](int jj) {
      const uint32_t cc = jj + i_mat / 2;
      return row_addr + (cc / 8) * kBoxBytes + (((cc % 8) ^ (lane % 8)) * 16);
    };
    // The woven pass (Cfg::kWoven): the last pass of the previous tile, rounded to pairs of 16-bit values (chunk
    // pair jj at last[2 * jj .. 2 * jj + 3]), pending until it is stored.
    [[maybe_unused]] uint32_t last[2 * kChunks];
    [[maybe_unused]] bool pending = false;
    [[maybe_unused]] int pend_tm = 0, pend_tn = 0, pend_bi = 0;
    // Hands the buffer (the pending pass in it) to TMA: C is written once and read by nothing here, evict-first, so
    // that it does not push A and B out of L2.
    const auto store_buffer = [&](int tm_, int tn_, int bi_, int pass) {
      hopper::fence_proxy_async_smem();
      hopper::named_barrier_sync(1 + consumer, 128);
      if (t == 0) {
        const uint64_t c_policy = sm80::l2_evict_first_policy();
        const int m0 = tm_ * BM + consumer * 64, n0 = tn_ * BN + pass * Cfg::kOutCols;
#pragma unroll
        for (int box = 0; box < Cfg::kOutCols / kSwizzleCols; ++box)
          hopper::tma_store_hint<Cfg::kMapRank>(&tm_c, out_buf + box * kBoxBytes, n0 + box * kSwizzleCols, m0, bi_,
                                                c_policy);
        hopper::bulk_commit();
      }
    };
    // Waits until TMA has read the buffer (the previous pass's stores), so that it can be written again.
    const auto buffer_free = [&] {
      if (t == 0) hopper::bulk_wait_read();
      hopper::named_barrier_sync(1 + consumer, 128);
    };
    // Register h (< 4) of stmatrix chunk pair jj of pass `pass`: accumulators of chunk pass * kChunks + jj + h / 2,
    // rows r (h even) or r + 8 (h odd) in wgmma's layout (epilogue comment below), rounded to a 16-bit pair.
    const auto pass_reg = [&](const float (&a)[Cfg::kAcc], int pass, int jj, int h) {
      const int j = pass * kChunks + jj + h / 2;
      return hopper::pack2<kBf16>(a[4 * j + 2 * (h % 2)], a[4 * j + 2 * (h % 2) + 1]);
    };
    // One pass through the buffer: wait for it, stmatrix reg(jj, h) for every chunk pair, hand it to TMA.
    const auto store_pass = [&](int tm_, int tn_, int bi_, int pass, auto reg) {
      buffer_free();
#pragma unroll
      for (int jj = 0; jj < kChunks; jj += 2)
        hopper::stmatrix_x4(chunk_addr(jj), reg(jj, 0), reg(jj, 1), reg(jj, 2), reg(jj, 3));
      store_buffer(tm_, tn_, bi_, pass);
    };
    // Stores the pending pass now (where no k-slab is left to hide it in).
    [[maybe_unused]] const auto flush_pending = [&](const uint32_t (&regs)[2 * kChunks]) {
      if constexpr (Cfg::kWoven) {
        if (pending) {
          store_pass(pend_tm, pend_tn, pend_bi, Cfg::kPasses - 1, [&](int jj, int h) { return regs[2 * jj + h]; });
          pending = false;
        }
      }
    };
    // This consumer's slice of a block's partial tile: value i of thread t at [i / 4][t][i % 4] (float4 stores,
    // each warp writing 512 contiguous bytes).
    const auto partial_of = [&](int64_t block) {
      return reinterpret_cast<float4*>(sk.partials + (block * kMaxConsumers + consumer) * (128 * 128)) + t;
    };
    const auto flag_of = [&](int64_t block) { return sk.flags + block * kMaxConsumers + consumer; };
    for_each_work(
        cluster_id, clusters, tiles, sk.dp_tiles, k_slabs,
        [&](int64_t tile, int kb0, int kb1, Role role, int contributors) {
          k_share(kb0, kb1);
          int tp, tn, bi;
          locate(tile, tp, tn, bi);
          const int tm = tp * CM + static_cast<int>(rank);
          // The tile's bias columns into shared memory now (a pair per thread, zeros past N), so that the epilogue
          // reads them there instead of waiting on L2 while the tensor cores idle; Role::kPartial tiles have no
          // epilogue, and split-K clusters apply it group by group. Otherwise into L1.
          const bool stage_bias =
              epi.bias != nullptr && epi.pairs && bias_fits && k_splits == 1 && role != Role::kPartial;
          uint32_t* const bias_stage =
              reinterpret_cast<uint32_t*>(smem_raw + (bias_region - hopper::smem_u32(smem_raw))) + consumer * (BN / 2);
          if (stage_bias) {
            if (t < BN / 2) {
              const int col = tn * BN + 2 * t;
              sm80::cp_async4_zfill(hopper::smem_u32(bias_stage + t), col < N ? epi.bias + col : epi.bias, col < N);
            }
            sm80::cp_async_commit();
          } else if (epi.bias != nullptr && t * kBiasLineCols < BN && tn * BN + t * kBiasLineCols < N) {
            hopper::prefetch_l1(epi.bias + tn * BN + t * kBiasLineCols);
          }
          int prev = -1;
          for (int kb = kb0; kb < kb1; ++kb) {
            hopper::mbar_wait(hopper::smem_u32(&full_bar[s]), phase);
            // Weaving the pending pass into this k-slab (the second of the tile: the previous pass's TMA store has
            // had one slab to read the buffer). Its stmatrix go between the wgmma, which run meanwhile; issued
            // after a slab's wait instead, they held up the tensor cores about as long as at the tile's end. They
            // are predicated rather than branched around: a branch in the wgmma sequence makes ptxas serialize
            // every wgmma (C7518), and so does a second copy of this loop.
            [[maybe_unused]] const bool weave = Cfg::kWoven && pending && kb == kb0 + 1;
            if constexpr (Cfg::kWoven) {
              if (weave) buffer_free();
            }
            hopper::wgmma_fence();
            const uint32_t a_base = a_ring + s * Cfg::kABytes + a_off, b_base = b_ring + s * Cfg::kBBytes;
#pragma unroll
            for (int k = 0; k < kBK / kWgmmaK; ++k) {
              const uint64_t da = hopper::make_smem_desc(a_base + k * kAStep, kALbo, kSwizzleAtom);
              const uint64_t db = hopper::make_smem_desc(b_base + k * kBStep, kBLbo, kSwizzleAtom);
              // The first wgmma of a tile overwrites the accumulators (scale-d = 0) instead of adding.
              wgmma_tile<BN, kBf16, kAMN ? 1 : 0, kBKMaj ? 0 : 1>(acc, da, db, (kb != kb0 || k != 0));
              if constexpr (Cfg::kWoven) {
                constexpr int kPerWgmma = kChunks / 2 / (kBK / kWgmmaK);  // stmatrix after each wgmma
#pragma unroll
                for (int u = 0; u < kPerWgmma; ++u) {
                  const int jj = 2 * (k * kPerWgmma + u);
                  hopper::stmatrix_x4_if(weave, chunk_addr(jj), last[2 * jj], last[2 * jj + 1], last[2 * jj + 2],
                                         last[2 * jj + 3]);
                }
              }
            }
            hopper::wgmma_commit();
            // The batch issued before this one is done: its slot can be refilled.
            hopper::wgmma_wait<1>();
            if (prev >= 0 && t == 0) release(prev);
            prev = s;
            if (++s == S) s = 0, phase ^= 1;
            if constexpr (Cfg::kWoven) {
              if (weave) {
                store_buffer(pend_tm, pend_tn, pend_bi, Cfg::kPasses - 1);
                pending = false;
              }
            }
          }
          hopper::wgmma_wait<0>();
          if (t == 0) release(prev);
#pragma unroll
          for (int i = 0; i < Cfg::kAcc; ++i) hopper::reg_fence(acc[i]);
          flush_pending(last);  // a tile of one k-slab had nowhere to hide it

          if (k_splits > 1) {
            // This block's sums of its k share go to shared memory (the ring: every slab has landed and
            // been read, and the cluster has no other tile), value i of thread t at [i / 4][t][i % 4]
            // (float4 stores, conflict-free).
            static_assert(kConsumers * Cfg::kAcc * 128 * sizeof(float) <= S * Cfg::kStageBytes,
                          "the split sums fit in the ring");
            // Both consumers' wgmma are done reading the ring before either overwrites it.
            hopper::named_barrier_sync(kSplitBarrier, kConsumers * 128);
            const uint32_t sums = ring + consumer * (Cfg::kAcc * 128 * sizeof(float));
#pragma unroll
            for (int q = 0; q < Cfg::kAcc / 4; ++q)
              hopper::st_shared_f4(sums + (q * 128 + t) * 16, acc[4 * q], acc[4 * q + 1], acc[4 * q + 2],
                                   acc[4 * q + 3]);
            hopper::cluster_sync();  // every block's sums are there
            // Block k_rank adds up and stores accumulator groups j (acc[4j .. 4j + 3]: rows r and r + 8,
            // columns c, c + 1, the wgmma layout of the epilogue below) of its k_rank-th share of the
            // groups, over the cluster's blocks in rank order.
            constexpr int kGroups = Cfg::kAcc / 4;
            const int row0 = tm * BM + consumer * 64 + warp * 16 + lane / 4;
            for (int j = kGroups * k_rank / k_splits; j < kGroups * (k_rank + 1) / k_splits; ++j) {
              float v[4] = {0.f, 0.f, 0.f, 0.f};
              for (int r = 0; r < k_splits; ++r) {
                float w[4];
                hopper::ld_shared_cluster_f4(hopper::cluster_map(sums + (j * 128 + t) * 16, r), w);
#pragma unroll
                for (int h = 0; h < 4; ++h) v[h] += w[h];
              }
              const int col = tn * BN + 8 * j + 2 * (lane % 4);
              if (epi.active()) apply_epilogue<kBf16>(v, epi, col, N);
              uint16_t* const Cb = C + int64_t{bi} * M * N;  // this product's C
              store_pair<kBf16>(Cb, M, N, row0, col, v[0], v[1]);
              store_pair<kBf16>(Cb, M, N, row0 + 8, col, v[2], v[3]);
            }
            return;  // the cluster barrier at the kernel's end keeps the sums alive until all are read
          }
          if (role == Role::kPartial) {
            // A later piece of a split tile: hand the partial sums to the tile's owner (a higher-indexed
            // cluster) and publish them with a release after this warpgroup's stores.
            float4* dst = partial_of(blockIdx.x);
#pragma unroll
            for (int q = 0; q < Cfg::kAcc / 4; ++q)
              dst[q * 128] = make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]);
            hopper::named_barrier_sync(1 + consumer, 128);
            if (t == 0) hopper::st_release_gpu(flag_of(blockIdx.x), sk.epoch);
            return;
          }
          if (role == Role::kOwner) {
            // The head of a split tile: add the partial sums of the clusters below whose ranges start inside
            // this tile (the same block rank of each), once each has published them.
            for (int i = 1; i <= contributors; ++i) {
              const int64_t block = (cluster_id - i) * CM + rank;
              if (t == 0) {
                while (hopper::ld_acquire_gpu(flag_of(block)) != sk.epoch) {
                }
                hopper::st_relaxed_gpu(flag_of(block),
                                       0);  // ready for the next launch (read only after this one)
              }
              hopper::named_barrier_sync(1 + consumer, 128);
              const float4* src = partial_of(block);
#pragma unroll
              for (int q = 0; q < Cfg::kAcc / 4; ++q) {
                const float4 v = __ldcg(src + q * 128);
                acc[4 * q] += v.x, acc[4 * q + 1] += v.y, acc[4 * q + 2] += v.z, acc[4 * q + 3] += v.w;
              }
            }
          }

          // Epilogue. wgmma's accumulator layout: acc[4j + h] (j < BN / 8) is row 16 * warp + lane / 4 (+ 8
          // for h >= 2), column 8j + 2 * (lane % 4) + h % 2 of this consumer's 64 x BN tile.
          // Passes of kOutCols columns through the buffer; with Cfg::kWoven the last one is kept for the next
          // tile's main loop (or stored at the end).
          // linear's bias and activation (apply_epilogue) once, before the two store paths: the code of each is
          // large (an unrolled loop per activation).
          const int epi_col0 = tn * BN + 2 * (lane % 4);
          const uint32_t* staged = nullptr;
          if (stage_bias) {
            sm80::cp_async_wait<0>();
            hopper::named_barrier_sync(1 + consumer, 128);  // every thread's pair has landed
            staged = bias_stage + lane % 4;
          }
          // In the TMA path store_pass's barrier keeps the staged pairs until every thread has read them.
          if (epi.active()) apply_epilogue<kBf16>(acc, epi, epi_col0, N, staged);
          if (tma_store) {
#pragma unroll
            for (int pass = 0; pass < Cfg::kPasses; ++pass) {
              if (Cfg::kWoven && pass == Cfg::kPasses - 1) {
#pragma unroll
                for (int jj = 0; jj < kChunks; jj += 2) {
#pragma unroll
                  for (int h = 0; h < 4; ++h) last[2 * jj + h] = pass_reg(acc, pass, jj, h);
                }
                pend_tm = tm, pend_tn = tn, pend_bi = bi, pending = true;
                break;
              }
              store_pass(tm, tn, bi, pass, [&](int jj, int h) { return pass_reg(acc, pass, jj, h); });
            }
            return;
          }
          // The next tile's copies overwrite the staged pairs only after every thread has read them.
          if (stage_bias) hopper::named_barrier_sync(1 + consumer, 128);
          const int row0 = tm * BM + consumer * 64 + warp * 16 + lane / 4;
          const int col0 = tn * BN + 2 * (lane % 4);
          const bool full_tile = tm * BM + BM <= M && tn * BN + BN <= N && N % 2 == 0;
          uint16_t* const Cb = C + int64_t{bi} * M * N;  // this product's C
          if (full_tile) {
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                const int64_t idx = int64_t{row0 + 8 * h} * N + col0 + 8 * j;
                *reinterpret_cast<uint32_t*>(Cb + idx) =
                    hopper::pack2<kBf16>(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
              }
            }
          } else {
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
              for (int h = 0; h < 2; ++h)
                store_pair<kBf16>(Cb, M, N, row0 + 8 * h, col0 + 8 * j, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
            }
          }
        });
    flush_pending(last);  // the last tile's last pass
  }
  if (threadIdx.x % 128 == 0) hopper::bulk_wait();  // the last tile's stores are done before the block exits
  // The peer may still arrive on our barriers, or read the split sums, until it is done (a block of no cluster, or
  // of a one-block one, has no peer).
  if (CM > 1 || k_splits > 1) hopper::cluster_sync();
#endif
}

struct LaunchOptions {
  int block_n = 0;     // 0: by shape; else 64, 128 or 256
  int group_m = 0;     // 0: kGroupRows / cluster size
  int max_blocks = 0;  // 0: the SM count
  int stream_k = -1;   // -1: when it pays (and a workspace is given); 0: never; 1: whenever the tiles allow
  int k_splits = 0;    // split-K clusters (all tiles but 128 x 256): 0 by shape (plan_tiles), 1 off, 2-8
  int block_m = 0;     // 0: by shape; else 64 (Short: 64 x 64 tiles) or 128
};

// Scratch memory for stream-K (may be absent: then every tile is data-parallel). Its contents need no
// initialization: a flag counts only when it holds this launch's epoch, and owners reset the flags they read.
struct Workspace {
  void* ptr = nullptr;
  size_t bytes = 0;
};
// Bytes of workspace a grid of `blocks` blocks uses: a partial tile and a flag per consumer of each block.
inline size_t workspace_bytes(int blocks) {
  return static_cast<size_t>(blocks) * (kPartialFloats * sizeof(float) + kMaxConsumers * sizeof(uint64_t));
}
constexpr int kMinStreamKSlabs = 16;  // shorter K: a tile's fixup (a 128 KB round trip through L2) costs too much
// Stream-K is used when the last wave would leave more than this fraction of the clusters idle (a nearly full
// last wave measured faster data-parallel).
constexpr double kMinIdleFraction = 0.45;

// Fills sk for a grid of `clusters` clusters over `super_tiles` super-tiles of k_slabs slabs: data-parallel
// unless the last wave is partial, then the full waves data-parallel and the last one split along K evenly over
// all clusters (for_each_work). A single wave that leaves clusters idle (fewer super-tiles than clusters) is split
// so only when forced (mode 1: the stream_k12 knob).
inline StreamK plan_stream_k(int64_t super_tiles, int64_t clusters, int k_slabs, int cm, int mode,
                             const Workspace& ws) {
  StreamK sk{nullptr, nullptr, 0, super_tiles};
  const int64_t rest = super_tiles % clusters;
  const bool pays = k_slabs >= kMinStreamKSlabs && rest != 0 && super_tiles > clusters &&
                    static_cast<double>(clusters - rest) > kMinIdleFraction * static_cast<double>(clusters);
  const bool fits = ws.ptr != nullptr && ws.bytes >= workspace_bytes(static_cast<int>(clusters * cm));
  // Every cluster's range must hold a slab (an empty one would publish nothing for its owner to wait on).
  if (mode == 0 || !fits || rest == 0 || rest * k_slabs < clusters || (mode < 0 && !pays)) return sk;
  static std::atomic<uint64_t> launches{0};
  sk.partials = static_cast<float*>(ws.ptr);
  sk.flags = reinterpret_cast<uint64_t*>(static_cast<char*>(ws.ptr) + clusters * cm * kPartialFloats * sizeof(float));
  sk.epoch = launches.fetch_add(1, std::memory_order_relaxed) + 1;
  sk.dp_tiles = super_tiles / clusters * clusters;  // the full waves
  return sk;
}

// Tiles of `rows` x bn over `batch` M x N outputs (rows: kBM for tiles, CM * kBM for super-tiles).
inline int64_t tile_count(int M, int N, int batch, int rows, int bn) {
  return int64_t{ceil_div(M, rows)} * ceil_div(N, bn) * batch;
}

// Split-K clusters: at most this many blocks (the portable cluster size) per tile, and by shape only while every
// block keeps at least kMinSplitSlabs k-slabs: a cluster launch and its exchange cost about what a few slabs do
// (256^3, 4 slabs, measured slower split).
constexpr int kMaxKSplits = 8, kMinSplitSlabs = 8;

// The most split-K blocks per tile (a power of two, at most kMaxKSplits, at least kMinSplitSlabs k-slabs a block)
// that keeps each of `tiles` split tiles' blocks on an SM of their own.
inline int most_k_splits(int64_t tiles, int K, int sms) {
  const int k_slabs = ceil_div(K, kBK);
  int splits = 1;
  while (splits * 2 <= kMaxKSplits && k_slabs >= splits * 2 * kMinSplitSlabs && tiles * splits * 2 <= sms) splits *= 2;
  return splits;
}

template <class Cfg, bool kBf16, bool kAMN, bool kBKMaj>
cudaError_t launch_typed(int M, int N, int K, int batch, const Operand& a, const Operand& b, void* c, int sms,
                         int group_m, cudaStream_t stream, const Workspace& ws = {}, int stream_k = -1,
                         int k_splits = 1, const Epilogue& epi = {}, int cm = Cfg::CM) {
  constexpr int BN = Cfg::BN, BM = Cfg::kBM;
  if (cm != 1 && cm != Cfg::CM) return cudaErrorInvalidValue;
  const int CM = Cfg::kRuntimeCM ? cm : Cfg::CM;  // blocks a cluster stacks along M (Config's RuntimeCM)
  constexpr auto* kernel = &matmul_kernel_12_hopper_gemm<Cfg, kBf16, kAMN, kBKMaj>;
  if (!Cfg::kBatches && batch > 1) return cudaErrorInvalidConfiguration;  // plan_tiles gives a batch other tiles
  int device = 0;
  cudaError_t err = hopper::opt_in_smem<kernel>(Cfg::kSmemBytes, device);
  if (err != cudaSuccess) return err;
  // 3-D maps: an operand with a matrix per product has `batch` of them, one shared by all products has one.
  const int a_batch = a.batch_stride != 0 ? batch : 1, b_batch = b.batch_stride != 0 ? batch : 1;
  const int batched = (a_batch > 1 ? 1 : 0) | (b_batch > 1 ? 2 : 0);
  // A K-major A of fewer than BM rows is read in a box of its rows (rounded up to a swizzle period) rather than
  // one of BM rows that TMA fills past M with zeros, which cost more than reading real rows (docs/matmul.md).
  // The slot's rows past the box keep whatever they held: wgmma computes garbage in rows of C past M, which no
  // store path writes (a row of A @ B depends on that row of A alone).
  const int a_rows = !kAMN && M < BM ? ceil_div(M, kSwizzleRows) * kSwizzleRows : BM;
  CUtensorMap map_a, map_b;
  const bool ok_a = kAMN ? hopper::encode_tensor_map_3d(&map_a, kBf16, a.ptr, M, K, a_batch, a.ld, a.batch_stride,
                                                        kSwizzleCols, kBK, Cfg::kMapRank)
                         : hopper::encode_tensor_map_3d(&map_a, kBf16, a.ptr, K, M, a_batch, a.ld, a.batch_stride,
                                                        kSwizzleCols, a_rows, Cfg::kMapRank);
  const bool ok_b = kBKMaj ? hopper::encode_tensor_map_3d(&map_b, kBf16, b.ptr, K, N, b_batch, b.ld, b.batch_stride,
                                                          kSwizzleCols, BN / CM, Cfg::kMapRank)
                           : hopper::encode_tensor_map_3d(&map_b, kBf16, b.ptr, N, K, b_batch, b.ld, b.batch_stride,
                                                          kSwizzleCols, kBK / CM, Cfg::kMapRank);
  if (!ok_a || !ok_b) return cudaErrorInvalidValue;
  // The output through TMA when its rows are 16-byte multiples (c is a fresh contiguous tensor: aligned base).
  CUtensorMap map_c = {};
  const bool tma_store =
      N % 8 == 0 && reinterpret_cast<uintptr_t>(c) % 16 == 0 &&
      hopper::encode_tensor_map_3d(&map_c, kBf16, c, N, M, batch, N, int64_t{M} * N, kSwizzleCols, 64, Cfg::kMapRank);
  // Split-K clusters: with CM == 1 only, at least one k-slab a block, a power of two (the cache below has a slot
  // per power).
  if (CM > 1 || k_splits < 1) k_splits = 1;
  k_splits = std::min(k_splits, std::min(kMaxKSplits, ceil_div(K, kBK)));
  while ((k_splits & (k_splits - 1)) != 0) k_splits &= k_splits - 1;  // drop the lowest set bit until one is left
  const int cluster_size = CM * k_splits;
  // Clusters the GPU holds at once (SMs group within GPCs only), read once per device and cluster size (CM, or
  // k_splits = 2, 4, 8: slots 1, 2, 3).
  int slot = 0;
  while ((1 << slot) < cluster_size) ++slot;
  static std::atomic<int> max_clusters[4][hopper::kMaxDevices] = {};
  if (slot >= 4) return cudaErrorInvalidValue;
  int fit = device < hopper::kMaxDevices ? max_clusters[slot][device].load(std::memory_order_relaxed) : 0;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster_size;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.blockDim = dim3(Cfg::kThreads);
  cfg.dynamicSmemBytes = Cfg::kSmemBytes;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (fit == 0) {
    cfg.gridDim = dim3(std::max(1, sms / cluster_size) * cluster_size);
    err = cudaOccupancyMaxActiveClusters(&fit, kernel, &cfg);
    if (err != cudaSuccess) return err;
    if (fit < 1) return cudaErrorInvalidConfiguration;
    if (device < hopper::kMaxDevices) max_clusters[slot][device].store(fit, std::memory_order_relaxed);
  }
  const int64_t super_tiles = tile_count(M, N, batch, CM * BM, BN);
  if (k_splits > 1 && super_tiles > fit) {
    // Split tiles run one per cluster, all at once: fewer blocks per tile where the GPU cannot hold them.
    return launch_typed<Cfg, kBf16, kAMN, kBKMaj>(M, N, K, batch, a, b, c, sms, group_m, stream, ws, stream_k,
                                                  k_splits / 2, epi, CM);
  }
  // Clusters the GPU holds at once; stream-K spreads the k-slabs over all of them, data-parallel tiles need at most
  // one each.
  const int64_t resident = std::min<int64_t>(fit, sms / CM);
  if (group_m <= 0) group_m = std::max(1, kGroupRows / CM);
  const StreamK sk = plan_stream_k(super_tiles, resident, ceil_div(K, kBK), CM, k_splits > 1 ? 0 : stream_k, ws);
  int64_t clusters =
      k_splits > 1 ? super_tiles : (sk.partials != nullptr ? resident : std::min<int64_t>(super_tiles, resident));
  if (BN == Wide::BN && k_splits == 1 && sk.partials == nullptr) {
    // Data-parallel 128 x 256 tiles: as few clusters as give the same number of waves (4096^3: 64 instead of 66,
    // 4 waves either way). The SMs left idle draw no power, and under the board's power cap the others then run
    // a little faster.
    const int64_t waves = ceil_div(super_tiles, clusters);
    if (waves > 1) clusters = ceil_div(super_tiles, waves);
  }
  cfg.gridDim = dim3(static_cast<unsigned>(clusters * cluster_size));
  // A cluster of one block is launched as a plain grid (every block is then a cluster of one, so the kernel's
  // cluster barriers still work): the cluster launch path costs about a microsecond more per call, which is most
  // of a small problem's gap to cuBLAS (docs/matmul.md).
  cfg.numAttrs = cluster_size > 1 ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, map_a, map_b, map_c, static_cast<uint16_t*>(c), tma_store, M, N, K, batch,
                            batched, group_m, sk, k_splits, epi, a_rows, CM);
}

// How a call is tiled: the tile width, the blocks that split each tile's K in a cluster, and whether 128 x 128
// tiles share B by multicast (Mid's 2-CTA clusters) or go without (Mid with cm = 1: the form that splits).
struct TilePlan {
  int bn = Wide::BN;
  int k_splits = 1;
  bool multicast = true;
  int bm = kBM;                                                      // tile rows: kBM, or Short's 64
  int cm() const { return bn == Narrow::BN || !multicast ? 1 : 2; }  // blocks a cluster stacks along M
};

// A plan of 128 x 128 tiles for `batch` M x N x K products on `sms` SMs. They share B in 2-CTA clusters only
// with more than two row tiles, and a K of at least kMulticastMinSlabs k-slabs or more tiles than one wave; else they
// go without, as they do where they split K. With one row tile the cluster's second block would have no
// rows; with two (256 rows), or one short wave, the cluster's launch and its blocks' lockstep cost more than the L2
// reads that multicast saves (2048x768x768 12.9 us with it, 11.8 without; 2048x1024x4096 29.5 against 32.6;
// 2048x3072x3072, three waves, 62.1 against 64.2: docs/matmul.md).
constexpr int kMulticastMinRowTiles = 3, kMulticastMinSlabs = 64;
inline TilePlan plan_128(int M, int N, int K, int batch, int sms, int k_splits) {
  const bool multicast = k_splits == 1 && ceil_div(M, kBM) >= kMulticastMinRowTiles &&
                         (ceil_div(K, kBK) >= kMulticastMinSlabs || tile_count(M, N, batch, kBM, Mid::BN) > sms);
  return TilePlan{Mid::BN, k_splits, multicast};
}

// A plan of 128 x 64 tiles, split as few tiles leave SMs idle (most_k_splits).
inline TilePlan plan_64(int M, int N, int K, int batch, int sms) {
  return TilePlan{Narrow::BN, most_k_splits(tile_count(M, N, batch, kBM, Narrow::BN), K, sms), false};
}

// A plan of 64 x 64 tiles (Short), split the same way when forced (block_m12=64); plan_tiles takes them unsplit.
inline TilePlan plan_short(int M, int N, int K, int batch, int sms, bool split = true) {
  const int splits = split ? most_k_splits(tile_count(M, N, batch, Short::kBM, Short::BN), K, sms) : 1;
  return TilePlan{Short::BN, splits, false, Short::kBM};
}

// Where 64 x 64 tiles run unsplit instead of 128 x 64 ones that leave SMs idle (split along K, or too few to fill
// half the SMs with a K too short to split): a K of at most kShortMaxSlabs k-slabs, one wave of 64 x 64 tiles, and
// one row tile of each (M <= 64), or a K too short to split, or 64-row tiles that fill more than half the SMs. Their
// blocks read more of A and B in all (a 64-row tile reads B once per 64 rows) but skip split-K's cluster barriers
// and sums: 256x2048x2048 13.6 -> 12.0 us, 128x4096x4096 20.6 -> 18.0, 32x4096x4096 20.1 -> 17.9, 256x768x768 8.5 ->
// 8.1; at a longer K (256x2048x8192) or with fewer tiles (256x1024x4096 15.7 -> 16.8) the extra reads cost more
// (docs/matmul.md).
constexpr int kShortMaxSlabs = 64;
inline bool short_pays(int M, int N, int K, int batch, int sms, const TilePlan& narrow) {
  const int k_slabs = ceil_div(K, kBK);
  const int64_t short_tiles = tile_count(M, N, batch, Short::kBM, Short::BN);
  const bool unsplittable = k_slabs < 2 * kMinSplitSlabs;  // most_k_splits leaves such a K whole
  const bool idle = narrow.k_splits > 1 || (unsplittable && tile_count(M, N, batch, kBM, Narrow::BN) * 2 <= sms);
  if (!idle || k_slabs > kShortMaxSlabs || short_tiles > sms) return false;
  return M <= Short::kBM || unsplittable || short_tiles * 2 > sms;
}

// Of the SM slots of `waves` full waves of `clusters`, the share that `super_tiles` tiles fill.
inline double wave_fill(int64_t super_tiles, int64_t clusters) {
  const int64_t waves = ceil_div(super_tiles, clusters);
  return static_cast<double>(super_tiles) / static_cast<double>(waves * clusters);
}

// 128 x 128 instead of 128 x 256 tiles where they fill the waves this much better: 2048x3072x3072 has 96 wide
// super-tiles for 66 clusters (73% of two waves' slots; stream-K did not recover the rest) against 192 of 128 x 128
// (97% of three).
constexpr double kMinFillGain = 0.15;
// The k-slabs from which 128 x 128 tiles split K instead of 128 x 64 ones: where 128 x 64 would split 4 ways or
// more (K >= 4096), or not at all (K >= 8192) with more rows than columns: 2048x512x8192 40.4 us split against 47.7
// unsplit 128 x 64, but 256x4096x14336 63.8 against 57.8 and 1024x1024x8192 42.0 against 35.0 (docs/matmul.md).
constexpr int kSplit128MinSlabs = 64, kUnsplit64MinSlabs = 128;

// The plan for `batch` M x N x K products on `sms` SMs (docs/matmul.md has the shapes measured):
// - Width: 128 x 256 when its tiles number at least half the SMs and M has more than one row tile (its 2-CTA
//   cluster stacks two: with one, the second block has no rows and half the SMs idle; batches: not that
//   configuration); else 128 x 128 when its tiles do; else 128 x 64 (fewer busy SMs with 128 x 128 tiles beat
//   twice as many 128 x 64 blocks, which multiply half as much per byte they load), never wider than N needs, and
//   128 x 128 where 128 x 256 would leave much more of its last wave empty (kMinFillGain).
// - Split-K: the 128 x 64 tile splits when few tiles leave SMs idle (most_k_splits). With at least a full row tile
//   and a long K, 128 x 128 tiles split instead, as they read A half as often (kSplit128MinSlabs,
//   kUnsplit64MinSlabs: unsplit 128 x 64 tiles give way only where M > N); where 128 x 64 splits 2 ways, or K is
//   shorter, 128 x 64 measured faster. Where a split 128 x 64 tile would leave SMs idle at a short K, 64 x 64 tiles
//   unsplit (short_pays).
inline TilePlan plan_tiles(int M, int N, int K, int batch, int sms, bool allow_short = true) {
  const auto tiles = [&](int bn) { return tile_count(M, N, batch, kBM, bn); };
  const auto super_tiles = [&](int bn) { return tile_count(M, N, batch, 2 * kBM, bn); };  // of 2-CTA clusters
  const int widest = N <= Narrow::BN ? Narrow::BN : N <= Mid::BN ? Mid::BN : Wide::BN;
  if (widest == Wide::BN && tiles(Wide::BN) * 2 >= sms && M > kBM) {
    const bool fills_worse =
        wave_fill(super_tiles(Mid::BN), sms / 2) >= wave_fill(super_tiles(Wide::BN), sms / 2) + kMinFillGain;
    if ((batch == 1 || Wide::kBatches) && !fills_worse) return TilePlan{};
    return plan_128(M, N, K, batch, sms, 1);
  }
  if (widest >= Mid::BN && tiles(Mid::BN) * 2 >= sms) return plan_128(M, N, K, batch, sms, 1);
  const TilePlan narrow = plan_64(M, N, K, batch, sms);
  if (allow_short && short_pays(M, N, K, batch, sms, narrow)) return plan_short(M, N, K, batch, sms, false);
  if (widest >= Mid::BN && M >= kBM) {
    const int splits = most_k_splits(tiles(Mid::BN), K, sms);
    const int k_slabs = ceil_div(K, kBK);
    const bool fills = tiles(Mid::BN) * splits * 2 > sms;  // more than half the SMs busy
    if ((narrow.k_splits >= 4 && k_slabs >= kSplit128MinSlabs && fills) ||
        (narrow.k_splits == 1 && k_slabs >= kUnsplit64MinSlabs && splits >= 2 && M > N))
      return plan_128(M, N, K, batch, sms, splits);
  }
  return narrow;
}

// plan_tiles with the tuning knobs' overrides (LaunchOptions): the tile rows block_m (64: Short, 128: the others;
// a forced tile splits by shape), the tile width block_n (a forced 128 x 64 tile still splits by shape; with
// block_m 64 only 64) and k_splits (the 128 x 256 tile does not split); 0 leaves plan_tiles's choice.
inline TilePlan plan_forced(int M, int N, int K, int batch, int sms, int block_n, int k_splits, int block_m = 0) {
  // A forced 128-row tile, or a width Short does not have, leaves Short out of plan_tiles's choice.
  const bool allow_short = block_m != kBM && (block_n == 0 || block_n == Short::BN);
  TilePlan plan = plan_tiles(M, N, K, batch, sms, allow_short);
  if (block_m == Short::kBM || plan.bm == Short::kBM) {
    if (plan.bm != Short::kBM) plan = plan_short(M, N, K, batch, sms);
    if (k_splits > 0) plan.k_splits = k_splits;
    return plan;
  }
  if (block_n != 0 && block_n != plan.bn) {
    plan = block_n == Narrow::BN ? plan_64(M, N, K, batch, sms)
           : block_n == Mid::BN  ? plan_128(M, N, K, batch, sms, 1)
                                 : TilePlan{};
  }
  if (k_splits > 0 && plan.bn != Wide::BN)
    plan = plan.bn == Mid::BN ? plan_128(M, N, K, batch, sms, k_splits) : TilePlan{plan.bn, k_splits, false};
  return plan;
}

// Whether launch() with these knobs (block_n, k_splits, block_m: 0 by shape) would want a stream-K workspace for this
// shape on `sms` SMs (assuming every SM holds a block: the grid it plans for); without one it runs data-parallel.
inline bool wants_workspace(int M, int N, int K, int batch, int sms, int block_n = 0, int k_splits = 0,
                            int block_m = 0) {
  const TilePlan plan = plan_forced(M, N, K, batch, sms, block_n, k_splits, block_m);
  if (plan.k_splits > 1) return false;  // split tiles take no stream-K
  const int cm = plan.cm();
  const int64_t super_tiles = tile_count(M, N, batch, cm * plan.bm, plan.bn);
  const Workspace any{reinterpret_cast<void*>(uintptr_t{16}), workspace_bytes(sms)};  // a stand-in: size only
  return plan_stream_k(super_tiles, sms / cm, ceil_div(K, kBK), cm, -1, any).partials != nullptr;
}

template <bool kBf16, bool kAMN, bool kBKMaj>
cudaError_t launch_layout(int M, int N, int K, int batch, const Operand& a, const Operand& b, void* c, int sms,
                          const LaunchOptions& opt, const Workspace& ws, cudaStream_t stream, const Epilogue& epi) {
  const int blocks = opt.max_blocks > 0 ? opt.max_blocks : sms;
  const TilePlan plan = plan_forced(M, N, K, batch, blocks, opt.block_n, opt.k_splits, opt.block_m);
  const int g = opt.group_m, sk = opt.stream_k;
  if (plan.bm == Short::kBM) {
    return launch_typed<Short, kBf16, kAMN, kBKMaj>(M, N, K, batch, a, b, c, blocks, g, stream, ws, sk, plan.k_splits,
                                                    epi);
  }
  if (plan.bn == Narrow::BN) {
    return launch_typed<Narrow, kBf16, kAMN, kBKMaj>(M, N, K, batch, a, b, c, blocks, g, stream, ws, sk, plan.k_splits,
                                                     epi);
  }
  if (plan.bn == Mid::BN) {
    return launch_typed<Mid, kBf16, kAMN, kBKMaj>(M, N, K, batch, a, b, c, blocks, g, stream, ws, sk,
                                                  plan.multicast ? 1 : plan.k_splits, epi, plan.cm());
  }
  return launch_typed<Wide, kBf16, kAMN, kBKMaj>(M, N, K, batch, a, b, c, blocks, g, stream, ws, sk, 1, epi);
}

// launch() for one dtype (bf16 when kBf16, else fp16): the operand layouts' four kernel families.
template <bool kBf16>
cudaError_t launch_dtype(int M, int N, int K, int batch, const Operand& a, const Operand& b, void* c, int sms,
                         cudaStream_t stream, const LaunchOptions& opt, const Workspace& ws, const Epilogue& epi) {
  if (a.mn_major) {
    return b.mn_major ? launch_layout<kBf16, true, false>(M, N, K, batch, a, b, c, sms, opt, ws, stream, epi)
                      : launch_layout<kBf16, true, true>(M, N, K, batch, a, b, c, sms, opt, ws, stream, epi);
  }
  return b.mn_major ? launch_layout<kBf16, false, false>(M, N, K, batch, a, b, c, sms, opt, ws, stream, epi)
                    : launch_layout<kBf16, false, true>(M, N, K, batch, a, b, c, sms, opt, ws, stream, epi);
}

// Each dtype's kernels are instantiated in a translation unit of their own (12_hopper_gemm_bf16.cu and
// 12_hopper_gemm_fp16.cu), so the build compiles them in parallel: with all of them in one file it was the
// build's longest compile. Everywhere else these declarations keep the kernels from being instantiated again.
extern template cudaError_t launch_dtype<true>(int, int, int, int, const Operand&, const Operand&, void*, int,
                                               cudaStream_t, const LaunchOptions&, const Workspace&, const Epilogue&);
extern template cudaError_t launch_dtype<false>(int, int, int, int, const Operand&, const Operand&, void*, int,
                                                cudaStream_t, const LaunchOptions&, const Workspace&, const Epilogue&);

// C (batch x M x N, row-major, contiguous) = A @ B for 16-bit A, B, C (bf16 when bf16, else fp16), fp32
// accumulation, `batch` products (1: one). 1 <= M, N, K < 2^31. The caller guarantees the Operand requirements.
// ws: stream-K scratch (workspace_bytes(sms)), or none. epi: linear's bias and activation, applied as C is stored.
inline cudaError_t launch(bool bf16, int M, int N, int K, int batch, const Operand& a, const Operand& b, void* c,
                          int sms, cudaStream_t stream, const LaunchOptions& opt = {}, const Workspace& ws = {},
                          const Epilogue& epi = {}) {
  return bf16 ? launch_dtype<true>(M, N, K, batch, a, b, c, sms, stream, opt, ws, epi)
              : launch_dtype<false>(M, N, K, batch, a, b, c, sms, stream, opt, ws, epi);
}

}  // namespace wgmma12
}  // namespace cuda_kernels::matmul_ladder
