// matmul special case tf32_wgmma (variant 13; float32 inputs while TF32 is allowed): Hopper tensor cores on
// float32 data, as TF32.
//
// torch.mm runs float32 on the tensor cores when torch.backends.cuda.matmul.allow_tf32 (or
// torch.set_float32_matmul_precision("high")) allows it: each input keeps 10 explicit mantissa bits (TF32), the
// products are accumulated in fp32. wgmma does this at half its bf16 rate (m64nNk8 per instruction: the same 32
// bytes of k as bf16's k16), so the plan of step 9 carries over (TMA into a 128-byte-swizzled ring, a producer
// warpgroup and two consumers, a persistent grid) with one difference that shapes the whole kernel:
//  - wgmma has no transpose for 32-bit types: an operand it reads from shared memory must be K-major (k
//    contiguous). C = A @ B with row-major A and B has one K-major operand (A) and one MN-major (B, n contiguous).
//  - wgmma's first operand may come from registers instead, and registers can be loaded from any layout. So the
//    kernel computes D = X * Y^T, with Y the K-major operand (read by wgmma from shared memory, up to 256 rows
//    a tile) and X the other one (128 rows a tile, 64 per consumer), which each consumer loads from its shared-
//    memory slot into wgmma's register fragment, rounding to TF32 on the way. No pass over memory transposes B.
//    Row-major A and B: Y = A (rows m), X = B^T (rows n), so D = C^T and the epilogue stores it transposed.
//    B given K-major (a transposed view, as in x @ w.t()): Y = B^T, X = A, D = C.
//    A and B both MN-major: the at::Tensor launcher copies A into a row-major buffer first.
//  - X's fragments are loaded while the previous slab's wgmma run: two register buffers alternate, and a slot is
//    released once the batch after it was issued (wgmma.wait_group 1), as in step 9.
// Rounding: cuBLAS rounds both operands to TF32 to nearest, so do we. X's elements are rounded (cvt.rna) as they
// are loaded into registers. wgmma reading Y from shared memory would truncate it (it drops the low 13 bits of each
// float32), and rounding Y in shared memory costs more shared-memory bandwidth than the main loop leaves
// (docs/matmul.md, "Tried and not kept"). So Y is rounded into a scratch buffer in global memory, which TMA then reads,
// by the producer warpgroup's three idle warps while the consumers compute: the blocks share out small units of Y (32
// rows x 64 k) in the order the tiles need them, and the TMA thread waits on a per-(tile row, k chunk) counter before
// it loads a Y slab. The pass over Y thus overlaps the GEMM instead of running before it (a separate pass kernel cost
// the time of reading and writing Y once). Units are claimed dynamically, so the blocks that run do all the rounding
// between them: no block waits on one that has not started. Epilogue: fp32 accumulators stored straight to global
// memory; both orientations write whole 32-byte sectors (4 lanes x 8 bytes along a row of C, or 8 lanes x 4 bytes along
// a column of D).
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "cuda/matmul/hopper.cuh"

namespace cuda_kernels::matmul_ladder {
namespace wgmma13 {

constexpr int kXRows = 128;     // X rows of a block tile: 64 per consumer warpgroup
constexpr int kBK = 32;         // k per ring slot: one 128-byte swizzle row of fp32
constexpr int kWgmmaK = 8;      // k per tf32 wgmma instruction
constexpr int kRowFloats = 32;  // floats in one 128-byte swizzled row
// Used only in the sm_90a pass of the kernel:
[[maybe_unused]] constexpr int kKSteps = kBK / kWgmmaK;                  // wgmma per slab and consumer
[[maybe_unused]] constexpr uint32_t kRowBytes = 128;                     // bytes of one swizzled row
[[maybe_unused]] constexpr uint32_t kMnBoxBytes = kRowFloats * kBK * 4;  // a 32-x by 32-k box of an MN-major X slot
constexpr int kConsumers = 2;                                            // consumer warpgroups
constexpr int kThreads = 128 * (1 + kConsumers);
[[maybe_unused]] constexpr int kProducerRegs = 40;  // setmaxnreg budgets: 128 * 40 + 256 * 232 = 384 * 168
[[maybe_unused]] constexpr int kConsumerRegs = 232;
static_assert(hopper::setmaxnreg_fits(kThreads, kProducerRegs, kConsumerRegs),
              "the warpgroups' register budgets fit the block's launch allocation");
constexpr uint32_t kSwizzleAtom = 1024;  // bytes of 8 swizzled 128-byte rows: the pattern's period
constexpr int kDefaultGroup = 16;        // X-row tiles per group in the tile order

// Rounding Y (see the top of the file). A unit is kRoundRows rows x kRoundK k of Y: one warp rounds it, each lane
// kRoundRows / 2 float4 (half a warp per 256-byte row segment), kRoundBatch loads in flight.
constexpr int kRoundRows = 32;
constexpr int kRoundK = 64;                    // a whole number of slabs, so a slab lies in one unit
constexpr int kSlabsPerChunk = kRoundK / kBK;  // slabs covered by one counter
constexpr int kRoundBatch = 4;                 // fits the producer's 40 registers
constexpr int kSyncHeader = 2;                 // sync[0]: next unit to claim; sync[1]: units finished
static_assert(kRoundK % kBK == 0 && kRoundRows % 2 == 0 && kRoundK == 4 * 16, "half a warp covers kRoundK floats");

// Y as given and its rounded copy: src (ld floats a row) is rounded into dst (pitch floats a row), which the Y
// tensor map reads; sync holds the claim and done counters (zeroed before the launch).
struct RoundY {
  const float* src;
  int64_t ld;
  float* dst;
  int64_t pitch;
  int* sync;
};

// How Y's units are ordered: by block of tile rows (the Y tiles the first wave of blocks needs, then the next
// ones), within a block by k chunk, then tile row, then row group. Done counter of (tile row p, chunk c):
// sync[kSyncHeader + p * chunks + c], complete at `groups`.
struct RoundPlan {
  int chunks;          // k chunks of kRoundK
  int groups;          // row groups (units) per tile row and chunk: YN / kRoundRows
  int rows_per_block;  // Y tile rows per block of the order
  int y_tiles;
  int units;  // y_tiles * chunks * groups
  __device__ RoundPlan(int yn, int K, int x_tiles, int y_tiles_, int group, int grid) {
    chunks = (K + kRoundK - 1) / kRoundK;
    groups = yn / kRoundRows;
    y_tiles = y_tiles_;
    // Tile t of the first group has Y tile row t / min(x_tiles, group) (hopper::grouped_tile), so the first wave
    // (tiles 0 .. grid - 1) needs this many Y tile rows.
    rows_per_block = min(y_tiles, (grid - 1) / min(x_tiles, group) + 1);
    units = y_tiles * chunks * groups;
  }
  __device__ void coords(int u, int& p, int& c, int& r) const {
    const int block_units = rows_per_block * chunks * groups;
    const int b = u / block_units;
    const int first = b * rows_per_block;
    const int per_chunk = min(rows_per_block, y_tiles - first) * groups;  // units of one chunk in this block
    const int local = u - b * block_units;
    c = local / per_chunk;
    p = first + (local % per_chunk) / groups;
    r = local % groups;
  }
};

__device__ __forceinline__ float4 to_tf32x4(float4 v) {
  return make_float4(__uint_as_float(hopper::to_tf32(v.x)), __uint_as_float(hopper::to_tf32(v.y)),
                     __uint_as_float(hopper::to_tf32(v.z)), __uint_as_float(hopper::to_tf32(v.w)));
}

// A producer warp's share of the rounding: claims units until none are left, rounds each (to nearest, as
// cvt.rna does), then publishes it (fence, then the done counter).
template <int YN>
__device__ __forceinline__ void round_y_units(const RoundY& ry, const RoundPlan& plan, int ys, int K, int lane) {
  int* claim = ry.sync;
  int* finished = ry.sync + 1;
  int* done = ry.sync + kSyncHeader;
  int u = __shfl_sync(~0u, lane == 0 ? atomicAdd(claim, 1) : 0, 0);
  while (u < plan.units) {
    const int next = lane == 0 ? atomicAdd(claim, 1) : 0;  // in flight while this unit is rounded
    int p, c, r;
    plan.coords(u, p, c, r);
    // Lane: float4 column lane % 16 of the unit, rows lane / 16 + 2 i.
    const int row0 = p * YN + r * kRoundRows + lane / 16;
    const int col = c * kRoundK + 4 * (lane % 16);
    const float* in = ry.src + int64_t{row0} * ry.ld + col;
    float* out = ry.dst + int64_t{row0} * ry.pitch + col;
    const int rows = min(kRoundRows / 2, (ys - row0 + 1) / 2);  // this lane's rows inside Y
    if (col + 4 <= K && rows == kRoundRows / 2) {
      // The common case: whole float4s on every row.
#pragma unroll
      for (int i0 = 0; i0 < kRoundRows / 2; i0 += kRoundBatch) {
        float4 v[kRoundBatch];
#pragma unroll
        for (int j = 0; j < kRoundBatch; ++j)
          v[j] = __ldcs(reinterpret_cast<const float4*>(in + 2 * (i0 + j) * ry.ld));  // read once: streamed
#pragma unroll
        for (int j = 0; j < kRoundBatch; ++j)
          *reinterpret_cast<float4*>(out + 2 * (i0 + j) * ry.pitch) = to_tf32x4(v[j]);
      }
    } else if (col < K) {
      // Tiles at Y's edges: rows past ys skipped, never a read past column K - 1 (the next row, or the end of the
      // allocation); dst rows are padded to a multiple of 4 floats, so a whole float4 is stored.
      for (int i = 0; i < rows; ++i) {
        const float* row_in = in + 2 * i * ry.ld;
        float4 v = make_float4(row_in[0], 0.f, 0.f, 0.f);
        if (col + 1 < K) v.y = row_in[1];
        if (col + 2 < K) v.z = row_in[2];
        if (col + 3 < K) v.w = row_in[3];
        *reinterpret_cast<float4*>(out + 2 * i * ry.pitch) = to_tf32x4(v);
      }
    }
    __threadfence();  // this lane's stores, at GPU scope, before the counters below
    __syncwarp();
    if (lane == 0) {
      atomicAdd(&done[p * plan.chunks + c], 1);
      atomicAdd(finished, 1);
    }
    u = __shfl_sync(~0u, next, 0);
  }
}

// Y rows per block tile: 256, or 128 for outputs with few tiles. The ring is as deep as shared memory allows.
template <int YN>
struct Tile {
  static constexpr int kYRows = YN;
  static constexpr uint32_t kXBytes = kXRows * kBK * 4;  // X slot: 128 rows x 32 k
  static constexpr uint32_t kYBytes = YN * kBK * 4;      // Y slot: YN rows x 32 k
  static constexpr uint32_t kStageBytes = kXBytes + kYBytes;
  static constexpr int kStages = YN == 256 ? 4 : 6;
  static constexpr size_t kSmemBytes = kStages * kStageBytes + kSwizzleAtom;  // + slack to align the ring
  static constexpr int kAcc = YN / 2;  // fp32 accumulators per consumer thread: 64 x YN / 128
};

template <int YN>
__device__ __forceinline__ void wgmma_tile(float (&d)[YN / 2], const uint32_t (&x)[4], uint64_t desc_y, int scale_d) {
  if constexpr (YN == 256) {
    hopper::wgmma_m64n256k8_tf32_rs(d, x, desc_y, scale_d);
  } else {
    static_assert(YN == 128, "tile widths 128 and 256 are instantiated");
    hopper::wgmma_m64n128k8_tf32_rs(d, x, desc_y, scale_d);
  }
}

// Byte offset, in an X slot, of element (x, k) (x < 128 rows of the tile, k < 32 of the slab).
// K-major slot (one TMA box of 128 rows x 32 k): row x at x * 128; its 16-byte chunks (4 k each) XOR-swizzled
// with x % 8. MN-major slot (four boxes of 32 k rows x 32 x, 4 KB each): box x / 32, row k at k * 128; the chunks
// (4 x each) XOR-swizzled with k % 8.
template <bool kXMN>
__device__ __forceinline__ uint32_t x_offset(int x, int k) {
  if constexpr (kXMN) {
    return (x / kRowFloats) * kMnBoxBytes + k * kRowBytes + ((((x % kRowFloats) / 4) ^ (k % 8)) << 4) + (x % 4) * 4;
  } else {
    return x * kRowBytes + (((k / 4) ^ (x % 8)) << 4) + (k % 4) * 4;
  }
}

// C (row-major, ldc floats a row) from D = X * Y^T over xs x ys: C[x][y] = D (kTransposeOut false: X = A, Y = B^T)
// or C[y][x] = D (true: X = B^T, Y = A). X is MN-major in memory when kXMN (x contiguous), else K-major; Y is
// K-major. Tensor maps: X K-major {K, xs} boxes {32, 128}; X MN-major {xs, K} boxes {32, 32}; Y {K, ys} boxes
// {32, YN}.
template <int YN, bool kXMN, bool kTransposeOut>
__global__ void __launch_bounds__(kThreads, 1)
    matmul_kernel_tf32_wgmma(const __grid_constant__ CUtensorMap tm_x, const __grid_constant__ CUtensorMap tm_y,
                             float* __restrict__ C, int xs, int ys, int K, int ldc, int group, RoundY ry) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = Tile<YN>;
  constexpr int S = T::kStages;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full_bar[S];
  __shared__ __align__(8) uint64_t empty_bar[S];
  // The ring: S X slots, then S Y slots, 1024-byte aligned (TMA and wgmma agree on the swizzle only from such a
  // boundary). The consumers read X slots through a generic pointer (ordinary loads), wgmma reads Y slots by address.
  const uint32_t raw = hopper::smem_u32(smem_raw);
  const uint32_t ring = (raw + kSwizzleAtom - 1) & ~(kSwizzleAtom - 1);
  const uint32_t x_ring = ring, y_ring = ring + S * T::kXBytes;
  const unsigned char* x_ring_ptr = smem_raw + (ring - raw);

  hopper::init_ring(full_bar, empty_bar, S, kConsumers);
  __syncthreads();

  const int x_tiles = (xs + kXRows - 1) / kXRows, y_tiles = (ys + YN - 1) / YN;
  const int64_t tiles = int64_t{x_tiles} * y_tiles;
  const int k_slabs = (K + kBK - 1) / kBK;
  const int wg = threadIdx.x / 128;

  if (wg == 0) {
    // Producer: one thread fills slots in ring order, the same tile sequence as the consumers; warps 1-3 round Y.
    hopper::setmaxnreg_dec<kProducerRegs>();
    const RoundPlan plan(YN, K, x_tiles, y_tiles, group, gridDim.x);
    if (threadIdx.x >= 32) {
      round_y_units<YN>(ry, plan, ys, K, threadIdx.x % 32);
    } else if (threadIdx.x == 0) {
      const int* finished = ry.sync + 1;
      const int* done = ry.sync + kSyncHeader;
      bool all_rounded = false;  // once every unit is done, the per-chunk counters need no more reads
      int s = 0;
      uint32_t phase = 0;
      for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int tx, ty;
        hopper::grouped_tile(tile, x_tiles, y_tiles, group, tx, ty);
        const int x0 = tx * kXRows, y0 = ty * YN;
        if (!all_rounded && hopper::ld_acquire_gpu(finished) == plan.units) {
          all_rounded = true;
          hopper::fence_proxy_async_global();
        }
        for (int kb = 0; kb < k_slabs; ++kb) {
          const int k0 = kb * kBK;
          if (!all_rounded && kb % kSlabsPerChunk == 0) {
            // Y's rounded rows of this chunk must be written before TMA reads them.
            const int* ready = done + ty * plan.chunks + kb / kSlabsPerChunk;
            while (hopper::ld_acquire_gpu(ready) < plan.groups) __nanosleep(32);
            hopper::fence_proxy_async_global();
          }
          hopper::mbar_wait(hopper::smem_u32(&empty_bar[s]), phase ^ 1);
          const uint32_t full = hopper::smem_u32(&full_bar[s]);
          hopper::mbar_arrive_expect_tx(full, T::kStageBytes);
          const uint32_t x_dst = x_ring + s * T::kXBytes;
          if constexpr (kXMN) {
            for (int c = 0; c < kXRows / kRowFloats; ++c)
              hopper::tma_load_2d(x_dst + c * kMnBoxBytes, &tm_x, x0 + c * kRowFloats, k0, full);
          } else {
            hopper::tma_load_2d(x_dst, &tm_x, k0, x0, full);
          }
          hopper::tma_load_2d(y_ring + s * T::kYBytes, &tm_y, k0, y0, full);
          if (++s == S) s = 0, phase ^= 1;
        }
      }
    }
  } else {
    hopper::setmaxnreg_inc<kConsumerRegs>();
    const int consumer = wg - 1;
    const int t = threadIdx.x % 128;
    const int warp = t / 32, lane = t % 32;
    // This thread's X rows in the tile (fragment rows lane / 4 and + 8 of its warp's 16) and k column in a k8
    // step (lane % 4, and + 4).
    const int x_row = consumer * 64 + warp * 16 + lane / 4;
    const int k_col = lane % 4;

    float acc[T::kAcc];
    uint32_t frag0[kKSteps][4], frag1[kKSteps][4];  // X fragments of two slabs: one loading, one in flight
    int s = 0;
    uint32_t phase = 0;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      int tx, ty;
      hopper::grouped_tile(tile, x_tiles, y_tiles, group, tx, ty);
      int prev = -1;
      // One slab: wait for its slot, load X's fragments (rounded to TF32), issue its wgmma on Y's slot, then
      // release the slot of the slab before, whose wgmma have now finished.
      const auto slab = [&](uint32_t (&frag)[kKSteps][4], int kb) {
        hopper::mbar_wait(hopper::smem_u32(&full_bar[s]), phase);
        const unsigned char* x_slot = x_ring_ptr + s * T::kXBytes;
#pragma unroll
        for (int i = 0; i < kKSteps; ++i) {
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const int x = x_row + 8 * (r % 2), k = i * kWgmmaK + k_col + 4 * (r / 2);
            frag[i][r] = hopper::to_tf32(*reinterpret_cast<const float*>(x_slot + x_offset<kXMN>(x, k)));
          }
        }
        hopper::wgmma_fence();
        const uint32_t y_base = y_ring + s * T::kYBytes;
#pragma unroll
        for (int i = 0; i < kKSteps; ++i) {
          // K-major Y: 8-row groups 1024 bytes apart; each k8 step moves 32 bytes along the 128-byte rows.
          const uint64_t dy = hopper::make_smem_desc(y_base + i * kWgmmaK * 4, 16, kSwizzleAtom);
          // The first wgmma of a tile overwrites the accumulators (scale-d = 0) instead of adding.
          wgmma_tile<YN>(acc, frag[i], dy, (kb | i) != 0);
        }
        hopper::wgmma_commit();
        hopper::wgmma_wait<1>();
        if (prev >= 0 && t == 0) hopper::mbar_arrive(hopper::smem_u32(&empty_bar[prev]));
        prev = s;
        if (++s == S) s = 0, phase ^= 1;
      };
      int kb = 0;
      for (; kb + 1 < k_slabs; kb += 2) {
        slab(frag0, kb);
        slab(frag1, kb + 1);
      }
      if (kb < k_slabs) slab(frag0, kb);
      hopper::wgmma_wait<0>();
      if (t == 0) hopper::mbar_arrive(hopper::smem_u32(&empty_bar[prev]));
#pragma unroll
      for (int i = 0; i < T::kAcc; ++i) hopper::reg_fence(acc[i]);

      // Epilogue. wgmma's accumulator layout: acc[4j + h] (j < YN / 8) is D's row x_row (+ 8 for h >= 2),
      // column 8j + 2 * (lane % 4) + h % 2 of the tile.
      const int x_first = tx * kXRows + x_row;
      const int y_first = ty * YN + 2 * (lane % 4);
      if constexpr (kTransposeOut) {
        // C[y][x]: for one register, the 8 lanes of a quad column write 8 consecutive x of one row of C.
#pragma unroll
        for (int j = 0; j < YN / 8; ++j) {
#pragma unroll
          for (int h = 0; h < 4; ++h) {
            const int x = x_first + 8 * (h / 2), y = y_first + 8 * j + h % 2;
            if (x < xs && y < ys) C[int64_t{y} * ldc + x] = acc[4 * j + h];
          }
        }
      } else {
        // C[x][y]: pairs of adjacent y as one 8-byte store where the row allows it.
        const bool full_tile = tx * kXRows + kXRows <= xs && ty * YN + YN <= ys && ldc % 2 == 0;
#pragma unroll
        for (int j = 0; j < YN / 8; ++j) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int x = x_first + 8 * h, y = y_first + 8 * j;
            float* out = C + int64_t{x} * ldc + y;
            if (full_tile) {
              *reinterpret_cast<float2*>(out) = make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
            } else if (x < xs && y < ys) {
              out[0] = acc[4 * j + 2 * h];
              if (y + 1 < ys) out[1] = acc[4 * j + 2 * h + 1];
            }
          }
        }
      }
    }
  }
#endif
}

struct LaunchOptions {
  int block_y = 0;  // 0: by shape; else 128 or 256
  int group = kDefaultGroup;
  int max_blocks = 0;  // 0: the SM count
};

template <int YN, bool kXMN, bool kTransposeOut>
cudaError_t launch_typed(int xs, int ys, int K, const hopper::Operand& x, const RoundY& ry, float* c, int ldc, int sms,
                         int group, cudaStream_t stream) {
  using T = Tile<YN>;
  constexpr auto* kernel = &matmul_kernel_tf32_wgmma<YN, kXMN, kTransposeOut>;
  int device = 0;
  cudaError_t err = hopper::opt_in_smem<kernel>(T::kSmemBytes, device);
  if (err != cudaSuccess) return err;
  CUtensorMap map_x, map_y;
  constexpr bool kFp32 = true;
  const bool ok_x = kXMN ? hopper::encode_tensor_map_2d(&map_x, false, x.ptr, xs, K, x.ld, kRowFloats, kBK, kFp32)
                         : hopper::encode_tensor_map_2d(&map_x, false, x.ptr, K, xs, x.ld, kRowFloats, kXRows, kFp32);
  const bool ok_y = hopper::encode_tensor_map_2d(&map_y, false, ry.dst, K, ys, ry.pitch, kRowFloats, YN, kFp32);
  if (!ok_x || !ok_y) return cudaErrorInvalidValue;
  const int64_t tiles = int64_t{(xs + kXRows - 1) / kXRows} * ((ys + YN - 1) / YN);
  const int grid = static_cast<int>(std::min<int64_t>(tiles, sms));
  kernel<<<grid, kThreads, T::kSmemBytes, stream>>>(map_x, map_y, c, xs, ys, K, ldc, group, ry);
  return cudaGetLastError();
}

// Floats of Y's rounded copy (rows padded to a multiple of 4, 16 bytes) and ints of the sync counters.
inline int64_t y_pitch(int K) {
  return (int64_t{K} + 3) / 4 * 4;
}
inline int64_t sync_ints(int ys, int K) {
  constexpr int kNarrowestTile = 128;
  return kSyncHeader + int64_t{(ys + kNarrowestTile - 1) / kNarrowestTile} * ((K + kRoundK - 1) / kRoundK);
}

template <bool kXMN, bool kTransposeOut>
cudaError_t launch_roles(int xs, int ys, int K, const hopper::Operand& x, const hopper::Operand& y_in, float* c,
                         int ldc, int sms, const LaunchOptions& opt, float* workspace, cudaStream_t stream) {
  // The workspace: Y's rounded copy, then the sync counters, zeroed here (stream-ordered, so CUDA graphs replay it).
  const int64_t pitch = y_pitch(K);
  int* sync = reinterpret_cast<int*>(workspace + int64_t{ys} * pitch);
  cudaError_t err = cudaMemsetAsync(sync, 0, sync_ints(ys, K) * sizeof(int), stream);
  if (err != cudaSuccess) return err;
  const RoundY ry{static_cast<const float*>(y_in.ptr), y_in.ld, workspace, pitch, sync};
  int yn = opt.block_y;
  if (yn == 0) {
    // 256-row Y tiles unless they leave more than half the SMs idle.
    const int64_t wide_tiles = int64_t{(xs + kXRows - 1) / kXRows} * ((ys + 255) / 256);
    yn = 2 * wide_tiles < sms ? 128 : 256;
  }
  const int blocks = opt.max_blocks > 0 ? opt.max_blocks : sms;
  if (yn == 128) return launch_typed<128, kXMN, kTransposeOut>(xs, ys, K, x, ry, c, ldc, blocks, opt.group, stream);
  return launch_typed<256, kXMN, kTransposeOut>(xs, ys, K, x, ry, c, ldc, blocks, opt.group, stream);
}

// The floats of scratch launch() needs for M, N, K with these operands: Y (B^T when B is K-major, else A), rounded,
// with rows padded to a multiple of 4, then the sync counters.
inline int64_t workspace_floats(int M, int N, int K, const hopper::Operand& b) {
  const int ys = b.mn_major ? M : N;
  return int64_t{ys} * y_pitch(K) + sync_ints(ys, K);
}

// C (M x N, row-major, contiguous, float32) = A @ B for float32 A, B in TF32 math (both rounded to TF32 to nearest,
// as cuBLAS does), fp32 accumulation. 1 <= M, N, K < 2^31. The caller guarantees the Operand requirements, that A
// or B is K-major (!a.mn_major or !b.mn_major; cudaErrorInvalidValue otherwise), and workspace_floats() floats of
// scratch at `workspace` (16-byte aligned, not shared with a concurrent call).
inline cudaError_t launch(int M, int N, int K, const hopper::Operand& a, const hopper::Operand& b, float* c, int sms,
                          cudaStream_t stream, float* workspace, const LaunchOptions& opt = {}) {
  if (!b.mn_major) {
    // Y = B^T (N rows, K-major), X = A: D = C.
    return a.mn_major ? launch_roles<true, false>(M, N, K, a, b, c, N, sms, opt, workspace, stream)
                      : launch_roles<false, false>(M, N, K, a, b, c, N, sms, opt, workspace, stream);
  }
  // Y = A (M rows, K-major), X = B^T (N rows, MN-major: B is row-major): D = C^T.
  if (a.mn_major) return cudaErrorInvalidValue;
  return launch_roles<true, true>(N, M, K, b, a, c, N, sms, opt, workspace, stream);
}

}  // namespace wgmma13
}  // namespace cuda_kernels::matmul_ladder

#include "cuda/matmul/args.h"
#include "cuda/utils.cuh"

namespace cuda_kernels::matmul_ladder {

bool wgmma_available(int device);  // defined with step 9

void launch_tf32_wgmma(const Args& args) {
  hopper::Call call = hopper::prepare_call("tf32_wgmma", args, &wgmma_available, /*float32=*/true);
  if (call.a.mn_major && call.b.mn_major) {
    // Neither operand is K-major (A a transposed view, B row-major): A is copied row-major, padded to a pitch
    // TMA can address.
    constexpr int64_t kPitchFloats = 4;  // 16 bytes
    const int64_t pitch = (call.K + kPitchFloats - 1) / kPitchFloats * kPitchFloats;
    call.a = {args.workspace->copy_2d(args.a, args.dtype, call.M, call.K, args.sa0, args.sa1, pitch), pitch, false};
  }
  // Scratch for the rounded Y from the call's workspace (stream-ordered: concurrent calls never share it).
  auto* scratch = static_cast<float*>(
      args.workspace->alloc(sizeof(float) * wgmma13::workspace_floats(call.M, call.N, call.K, call.b)));
  hopper::check_launch("tf32_wgmma",
                       wgmma13::launch(call.M, call.N, call.K, call.a, call.b, static_cast<float*>(call.c),
                                       sm_count(call.device), call.stream, scratch));
}

}  // namespace cuda_kernels::matmul_ladder
