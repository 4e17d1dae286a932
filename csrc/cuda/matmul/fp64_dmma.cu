// matmul special case fp64_dmma (variant 15): float64 on the tensor cores (DMMA, sm_80+).
//
// Steps 1-6 compute float64 with FMAs on the FP64 units; since the A100, the tensor cores also multiply doubles,
// at twice that rate on the H100 (67 TFLOP/s at boost clock against 34 for the FP64 units), each product exact and
// rounded once as an FMA is: the same numbers as a loop of fma(), in another order of summation. The warp-level
// instruction is mma.sync with .f64 operands:
//  - sm_80 has one shape, m8n8k4 (a warp computes an 8 x 8 tile with k = 4); on the H100 it runs at half the
//    tensor cores' float64 rate. sm_90 adds m16n8k4 (and k8, k16), which run at the full rate. m16n8k4 is two
//    m8n8k4 stacked along M with the same B fragment, so one fragment layout serves both: mma_f64 below issues
//    m16n8k4 on sm_90 and the two m8n8k4 on sm_80.
//  - Fragments (g = lane / 4, t = lane % 4): A holds A[g][t] and A[g + 8][t], B holds B[t][g], the accumulators
//    C[g][2t], C[g][2t + 1], C[g + 8][2t], C[g + 8][2t + 1]. There is no ldmatrix for 8-byte elements, so they
//    are plain 8-byte shared-memory loads.
// Everything around it is step 6's and step 8's plan, in doubles:
//  - 128 x 128 block tiles, 8 warps of 64 x 32 (4 x 4 mma tiles: 64 accumulators per thread), k slabs 32 (or 16)
//    deep (Config below).
//  - A kStages-deep cp.async pipeline (16-byte copies when rows are 16-byte aligned, else 8-byte ones), edges
//    zero-filled by the copy itself.
//  - Shared-memory rows padded so that the fragment loads are free of bank conflicts: 8-byte loads are served
//    per half-warp (16 lanes, 128 bytes = all 32 banks), and a half-warp reads 4 rows x 4 consecutive doubles
//    of A (rows g, columns t) or 4 rows x 4 consecutive doubles of B (rows t, columns g). With a row pitch of
//    4 (mod 16) doubles, word (row * pitch + col) falls in 8-byte bank 4 * row + col (mod 16): 16 different ones.
//  - Grouped tile order for L2 reuse (as steps 6 and 8).

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>

#include "cuda/matmul/args.h"
#include "cuda/matmul/mma_sm80.cuh"
#include "cuda/matmul/tuning.h"
#include "cuda/utils.cuh"

namespace cuda_kernels::matmul_ladder {
namespace {

using sm80::cp_async16_zfill;
using sm80::cp_async_commit;
using sm80::cp_async_wait;
using sm80::smem_addr;

constexpr int kMmaM = 16, kMmaN = 8, kMmaK = 4;  // mma_f64's tile: m16n8k4
constexpr int kBM = 128, kBN = 128;              // block tile
constexpr int kWM = 64, kWN = 32;                // warp tile
constexpr int kWarpsN = kBN / kWN;               // 4 warps along N, 2 along M
constexpr int kThreads = 32 * (kBM / kWM) * kWarpsN;
constexpr int kTilesM = kWM / kMmaM, kTilesN = kWN / kMmaN;  // mma tiles per warp: 4 x 4
constexpr int kPad = 4;                                      // doubles of padding per row (see above)
constexpr int kBPitch = kBN + kPad;                          // B slab: BK rows of kBN doubles, row-major
constexpr int kGroupM = 8;                                   // row tiles per group of the tile order
static_assert(kBPitch % 16 == kPad && (kBPitch * 8) % 16 == 0);

// A pipeline configuration: k-slab depth BK (doubles) and the number of shared-memory stages.
template <int BK, int Stages>
struct Config {
  static constexpr int kBK = BK, kStages = Stages;
  static constexpr int kAPitch = BK + kPad;                              // A slab: kBM rows of BK doubles, row-major
  static constexpr int kAStage = kBM * kAPitch, kBStage = BK * kBPitch;  // doubles per stage
  static constexpr size_t kSmemBytes = static_cast<size_t>(Stages) * (kAStage + kBStage) * sizeof(double);
  static_assert(kAPitch % 16 == kPad, "row pitches of 4 (mod 16) doubles: conflict-free fragment loads");
  static_assert((kAPitch * 8) % 16 == 0, "16-byte cp.async needs 16-byte aligned rows");
  static_assert(BK % kMmaK == 0 && Stages >= 2);
};

// d (16 x 8, fragment layout above) += a (16 x 4) b (4 x 8).
__device__ __forceinline__ void mma_f64(double (&d)[4], const double (&a)[2], double b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
      : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
      : "d"(a[0]), "d"(a[1]), "d"(b));
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
      : "+d"(d[0]), "+d"(d[1])
      : "d"(a[0]), "d"(b));
  asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
      : "+d"(d[2]), "+d"(d[3])
      : "d"(a[1]), "d"(b));
#else
  __trap();  // the launcher never runs this kernel below compute 8.0
#endif
}

// 8 bytes global -> shared (cp.async.ca: 8-byte copies cannot bypass L1); valid = false writes zeros.
__device__ __forceinline__ void cp_async8_zfill(uint32_t dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 8 : 0));
#else
  __trap();
#endif
}

// Copies the slab of k columns [k0, k0 + kBK) of A's rows [row0, row0 + kBM) and the same rows of B's columns
// [col0, col0 + kBN) into one stage. kVec: 16-byte copies of 2 doubles (K and N even, 16-byte aligned bases), so a
// pair is wholly inside or wholly outside the matrix; else one double per copy.
template <class Cfg, bool kVec>
__device__ __forceinline__ void load_slab(double* as, double* bs, const double* __restrict__ A,
                                          const double* __restrict__ B, int64_t M, int64_t N, int64_t K, int64_t row0,
                                          int64_t col0, int64_t k0) {
  constexpr int kBK = Cfg::kBK, kAPitch = Cfg::kAPitch;
  constexpr int kW = kVec ? 2 : 1;  // doubles per copy
  constexpr int kACopies = kBM * kBK / kW, kBCopies = kBK * kBN / kW;
  static_assert(kACopies % kThreads == 0 && kBCopies % kThreads == 0);
#pragma unroll
  for (int i = 0; i < kACopies / kThreads; ++i) {
    const int c = threadIdx.x + i * kThreads;
    const int r = c / (kBK / kW), col = (c % (kBK / kW)) * kW;  // a warp copies whole rows (kBK doubles each)
    const int64_t gr = row0 + r, gk = k0 + col;
    const bool valid = gr < M && gk < K;
    const double* src = valid ? A + gr * K + gk : A;
    if constexpr (kVec) {
      cp_async16_zfill(smem_addr(as + r * kAPitch + col), src, valid);
    } else {
      cp_async8_zfill(smem_addr(as + r * kAPitch + col), src, valid);
    }
  }
#pragma unroll
  for (int i = 0; i < kBCopies / kThreads; ++i) {
    const int c = threadIdx.x + i * kThreads;
    const int r = c / (kBN / kW), col = (c % (kBN / kW)) * kW;
    const int64_t gk = k0 + r, gc = col0 + col;
    const bool valid = gk < K && gc < N;
    const double* src = valid ? B + gk * N + gc : B;
    if constexpr (kVec) {
      cp_async16_zfill(smem_addr(bs + r * kBPitch + col), src, valid);
    } else {
      cp_async8_zfill(smem_addr(bs + r * kBPitch + col), src, valid);
    }
  }
}

// C = A @ B (all row-major float64), one 128 x 128 tile per block, blocks in grouped order; blockIdx.z the matrix
// of a batch (A and B sa_batch and sb_batch elements apart, C M * N).
template <class Cfg, bool kVec>
__global__ void __launch_bounds__(kThreads, 1)
    matmul_kernel_fp64_dmma(const double* __restrict__ A, const double* __restrict__ B, double* __restrict__ C,
                            int64_t M, int64_t N, int64_t K, int64_t sa_batch, int64_t sb_batch) {
  A += blockIdx.z * sa_batch;
  B += blockIdx.z * sb_batch;
  C += blockIdx.z * M * N;
  constexpr int kBK = Cfg::kBK, kStages = Cfg::kStages, kAPitch = Cfg::kAPitch;
  constexpr int kAStage = Cfg::kAStage, kBStage = Cfg::kBStage;
  extern __shared__ __align__(128) unsigned char smem[];
  double* const stages = reinterpret_cast<double*>(smem);  // stage s: A slab at s * (kAStage + kBStage), then B
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // the fragment coordinates (see the top of the file)
  const int wm = (warp / kWarpsN) * kWM, wn = (warp % kWarpsN) * kWN;
  int64_t tm, tn;
  sm80::grouped_tile<kGroupM>(blockIdx.x, ceil_div<int64_t>(M, kBM), ceil_div<int64_t>(N, kBN), tm, tn);
  const int64_t row0 = tm * kBM, col0 = tn * kBN;
  const int64_t k_tiles = ceil_div<int64_t>(K, kBK);

  // Prologue: slabs 0 .. kStages - 2 in flight, one commit group each (possibly empty, to keep the count).
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    double* as = stages + s * (kAStage + kBStage);
    if (s < k_tiles) load_slab<Cfg, kVec>(as, as + kAStage, A, B, M, N, K, row0, col0, int64_t{s} * kBK);
    cp_async_commit();
  }
  double acc[kTilesM][kTilesN][4] = {};
  int read_stage = 0, write_stage = kStages - 1;
  for (int64_t kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<kStages - 2>();  // this thread's copies of slab kt have landed ...
    __syncthreads();               // ... and everyone's; everyone also finished slab kt - 1, whose stage is refilled
    if (kt + kStages - 1 < k_tiles) {
      double* as = stages + write_stage * (kAStage + kBStage);
      load_slab<Cfg, kVec>(as, as + kAStage, A, B, M, N, K, row0, col0, (kt + kStages - 1) * kBK);
    }
    cp_async_commit();
    const double* as = stages + read_stage * (kAStage + kBStage) + (wm + g) * kAPitch + t;          // A[wm + g][t]
    const double* bs = stages + read_stage * (kAStage + kBStage) + kAStage + t * kBPitch + wn + g;  // B[t][wn + g]
#pragma unroll
    for (int kk = 0; kk < kBK; kk += kMmaK) {
      double a[kTilesM][2], b[kTilesN];
#pragma unroll
      for (int i = 0; i < kTilesM; ++i) {
        a[i][0] = as[i * kMmaM * kAPitch + kk];
        a[i][1] = as[(i * kMmaM + 8) * kAPitch + kk];
      }
#pragma unroll
      for (int j = 0; j < kTilesN; ++j) b[j] = bs[kk * kBPitch + j * kMmaN];
#pragma unroll
      for (int i = 0; i < kTilesM; ++i) {
#pragma unroll
        for (int j = 0; j < kTilesN; ++j) mma_f64(acc[i][j], a[i], b[j]);
      }
    }
    read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
    write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
  }
  cp_async_wait<0>();  // nothing is in flight any more (the last groups are empty); for form's sake

  // acc[i][j][h] is C(row0 + wm + 16 i + g + 8 (h / 2), col0 + wn + 8 j + 2 t + h % 2): a 16-byte store per
  // row half when both columns exist and N is even (then every row starts 16-byte aligned).
#pragma unroll
  for (int i = 0; i < kTilesM; ++i) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t row = row0 + wm + i * kMmaM + g + 8 * half;
      if (row >= M) continue;
#pragma unroll
      for (int j = 0; j < kTilesN; ++j) {
        const int64_t col = col0 + wn + j * kMmaN + 2 * t;
        double* dst = C + row * N + col;
        const double v0 = acc[i][j][2 * half], v1 = acc[i][j][2 * half + 1];
        if (kVec && col + 1 < N) {
          *reinterpret_cast<double2*>(dst) = make_double2(v0, v1);
        } else {
          if (col < N) dst[0] = v0;
          if (col + 1 < N) dst[1] = v1;
        }
      }
    }
  }
}

template <class Cfg, bool kVec>
void launch_typed(const Args& args) {
  const int64_t M = args.M, N = args.N, K = args.K;
  constexpr auto* kernel = &matmul_kernel_fp64_dmma<Cfg, kVec>;
  opt_in_dynamic_smem<kernel>(Cfg::kSmemBytes, args.device);
  const int64_t tiles = ceil_div<int64_t>(M, kBM) * ceil_div<int64_t>(N, kBN);
  CUDA_KERNELS_CHECK(tiles <= kMaxGridX, "cuda_kernels.matmul: ", M, " x ", N,
                     " output has too many tiles for one launch");
  // A batch: blockIdx.z is the matrix, kMaxGridZ of them per launch.
  for (int64_t first = 0; first < args.batch; first += kMaxGridZ) {
    const dim3 grid(static_cast<unsigned>(tiles), 1,
                    static_cast<unsigned>(std::min<int64_t>(args.batch - first, kMaxGridZ)));
    kernel<<<grid, kThreads, Cfg::kSmemBytes, args.stream>>>(
        args.a_ptr<double>() + first * args.sa_batch, args.b_ptr<double>() + first * args.sb_batch,
        args.c_ptr<double>() + first * M * N, M, N, K, args.sa_batch, args.sb_batch);
    CUDA_KERNELS_LAUNCH_CHECK();
  }
}

// 16-byte copies and stores when K and N are even and the bases 16-byte aligned, else 8-byte ones (every matrix of
// a batch is then aligned too: row-major, its size a multiple of K or N).
template <class Cfg>
void launch_config(const Args& args) {
  const int64_t N = args.N, K = args.K;
  const bool vec =
      K % 2 == 0 && N % 2 == 0 && is_aligned(args.a, 16) && is_aligned(args.b, 16) && is_aligned(args.c, 16);
  if (vec) {
    launch_typed<Cfg, true>(args);
  } else {
    launch_typed<Cfg, false>(args);
  }
}

struct NamedConfig {
  const char* name;  // the name the config_fp64 tuning knob takes: bk<slab depth>_s<stages>
  size_t smem;       // dynamic shared memory per block, bytes
  void (*launch)(const Args&);
};
template <class Cfg>
constexpr NamedConfig named(const char* name) {
  return {name, Cfg::kSmemBytes, &launch_config<Cfg>};
}
// In the launcher's order of preference, the first that fits the device's shared memory: 32-deep slabs in 3
// stages (207 KiB: the H100's 227), 16-deep in 4 (146 KiB: the A100's 163), 16-deep in 2 (73 KiB: the 99 KiB of
// sm_86 / sm_89). Then the tuning candidates (-DCUDA_KERNELS_MATMUL_TUNING).
constexpr NamedConfig kConfigs[] = {
    named<Config<32, 3>>("bk32_s3"), named<Config<16, 4>>("bk16_s4"), named<Config<16, 2>>("bk16_s2"),
#ifdef CUDA_KERNELS_MATMUL_TUNING
    named<Config<16, 6>>("bk16_s6"), named<Config<32, 2>>("bk32_s2"),
#endif
};
constexpr int kPreferred = 3;  // kConfigs[0 .. kPreferred) are the launcher's choices
static_assert(kConfigs[kPreferred - 1].smem <= 99 * 1024, "the last choice fits every compute >= 8.0 GPU");

std::string config_names() {
  std::string s;
  for (const NamedConfig& cfg : kConfigs) s += (s.empty() ? "" : ", ") + std::string(cfg.name);
  return s;
}

}  // namespace

void launch_fp64_dmma(const Args& args) {
  const int device = args.device;
  const auto optin =
      static_cast<size_t>(detail::cached_device_attribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>(device));
  // The config_fp64 tuning knob (cuda/matmul/tuning.h) forces a configuration.
  if (const std::string& forced = tuning().config_fp64; !forced.empty()) {
    const NamedConfig* cfg =
        std::find_if(std::begin(kConfigs), std::end(kConfigs), [&](const NamedConfig& c) { return forced == c.name; });
    CUDA_KERNELS_CHECK(cfg != std::end(kConfigs), "cuda_kernels.matmul: tuning knob config_fp64=", forced,
                       " is not a compiled configuration; available: ", config_names());
    CUDA_KERNELS_CHECK(cfg->smem <= optin, "cuda_kernels.matmul: tuning knob config_fp64=", forced, " needs ",
                       cfg->smem, " bytes of shared memory per block; device ", device, " allows ", optin);
    cfg->launch(args);
    return;
  }
  for (int i = 0; i < kPreferred; ++i) {
    if (kConfigs[i].smem <= optin) {
      kConfigs[i].launch(args);
      return;
    }
  }
  fail("cuda_kernels.matmul: fp64_dmma needs ", kConfigs[kPreferred - 1].smem,
       " bytes of shared memory per block; device ", device, " allows ", optin);
}

}  // namespace cuda_kernels::matmul_ladder
