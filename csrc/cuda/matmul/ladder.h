// The matmul kernel ladder: one file per step in csrc/cuda/matmul/, each a launcher that computes c = a @ b on
// the current stream (accumulating in fp32, fp64 for fp64).
//
// Contract of every launcher: a is (M, K), b is (K, N), c is a freshly allocated row-major (M, N) tensor;
// M, N, K >= 1; all on the current device; the dtype is one the step lists, and the GPU meets the step's needs
// (csrc/checks.h checks forced variants, the pick of variant 0 skips steps that cannot run). What each step
// accepts beyond that is in `requirements`, and csrc/cuda/matmul.cu makes the inputs fit (a .contiguous() copy)
// before calling it.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace cuda_kernels::matmul_ladder {

enum Requirement : unsigned {
  kAnyStrides = 0,            // reads a and b through their strides (transposed views, expanded, ...)
  kRowMajorInputs = 1u << 0,  // a and b contiguous (row-major); dispatch copies them otherwise
  kTf32Math = 1u << 1,        // computes float32 in TF32: runs only while torch allows TF32 for matmul
  kSkinnyShapes = 1u << 2,    // made for outputs with M or N <= kSkinnyMaxSide: variant 0 takes it only for those
};
constexpr int64_t kSkinnyMaxSide = 16;

// The dtypes a step computes, as a bit mask.
enum DtypeBit : unsigned {
  kFloat32 = 1u << 0,
  kFloat64 = 1u << 1,
  kFloat16 = 1u << 2,
  kBFloat16 = 1u << 3,
  kAllDtypes = kFloat32 | kFloat64 | kFloat16 | kBFloat16,
  kHalfDtypes = kFloat16 | kBFloat16,  // the tensor-core steps
};
inline unsigned dtype_bit(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return kFloat32;
    case at::kDouble:
      return kFloat64;
    case at::kHalf:
      return kFloat16;
    case at::kBFloat16:
      return kBFloat16;
    default:
      return 0;
  }
}

// One row of the ladder (kLadder in csrc/cuda/matmul.cu). A step runs only when the dtype is in `dtypes`, TF32 is
// allowed if it has kTf32Math, the GPU's compute capability is at least `min_cc`, and `available` (if set) says yes;
// csrc/checks.h turns each unmet need into an error naming the step, and variant 0 picks the last step of the ladder
// whose needs are met.
struct Step {
  int variant;            // the number users pass as matmul(..., variant=N)
  const char* name;       // e.g. "01_tiled"; also the suffix of its kernel's name
  unsigned requirements;  // Requirement bits
  unsigned dtypes;        // DtypeBit mask
  int min_cc;             // lowest compute capability, as 10 * major + minor (80 = 8.0); 0 = any CUDA GPU
  // A check only the running binary and GPU can answer (nullptr: none), e.g. "this binary has sm_90a code and the
  // GPU is compute 9.0"; `needs` says what it checks, for the error message ("an sm_90a build on a compute-9.0
  // GPU").
  bool (*available)(int device);
  const char* needs;
  void (*launch)(const at::Tensor& a, const at::Tensor& b, at::Tensor& c);
};

// The GPU a call runs on, as the step checks see it.
struct GpuInfo {
  int device;        // CUDA device index
  int cc;            // compute capability as 10 * major + minor
  std::string name;  // e.g. "NVIDIA H100 80GB HBM3"
};

// Step 1: 32x32 shared-memory tiles, one output per thread.
void launch_01_tiled(const at::Tensor& a, const at::Tensor& b, at::Tensor& c);
// Step 2: 128x128 block tiles, 8x8 outputs per thread in registers (2-D register blocking).
void launch_02_blocktile_2d(const at::Tensor& a, const at::Tensor& b, at::Tensor& c);
// Step 3: + 16-byte global loads, A transposed in shared memory, 16-byte shared reads.
void launch_03_vectorized(const at::Tensor& a, const at::Tensor& b, at::Tensor& c);
// Step 4: + double buffering (next slab loaded into registers during the FMAs).
void launch_04_double_buffer(const at::Tensor& a, const at::Tensor& b, at::Tensor& c);
// Step 5: + warp tiling (conflict-free, broadcast shared reads).
void launch_05_warptile(const at::Tensor& a, const at::Tensor& b, at::Tensor& c);
// Step 6: + 3-stage cp.async pipeline, 128x128x32 tiles in dynamic shared memory, 2 blocks per SM, grouped tile
// order, split-K for outputs with few tiles.
void launch_06_async_pipeline(const at::Tensor& a, const at::Tensor& b, at::Tensor& c);
// Step 7 (float16/bfloat16, sm_80+): tensor cores: warp-level mma.sync.m16n8k16 with float32 accumulators,
// fragments loaded with ldmatrix from padded shared-memory tiles; no pipeline.
void launch_07_mma_sync(const at::Tensor& a, const at::Tensor& b, at::Tensor& c);
// Step 8 (float16/bfloat16, sm_80+): + 4-stage cp.async pipeline, XOR-swizzled shared memory, 128x256 block and
// 64x64 warp tiles, fragment double buffering, grouped tile order.
void launch_08_mma_pipeline(const at::Tensor& a, const at::Tensor& b, at::Tensor& c);
// Steps 9-11 (float16/bfloat16, an sm_90a binary on a compute-9.0 GPU; any strides: TMA reads K-major and
// MN-major operands as they are, and a padded copy is made only when a stride or alignment rules TMA out):
// Step 9: warpgroup MMA (wgmma m64n256k16) on operands brought into 128-byte-swizzled shared memory by TMA, a
// producer warpgroup and two consumer warpgroups on a 4-stage mbarrier ring, setmaxnreg, a persistent grid.
void launch_09_wgmma_tma(const at::Tensor& a, const at::Tensor& b, at::Tensor& c);
// Step 10: + 2-CTA clusters sharing the B tile through TMA multicast.
void launch_10_cluster_multicast(const at::Tensor& a, const at::Tensor& b, at::Tensor& c);
// Step 11: + C written through shared memory by TMA stores, overlapped with the next tile's main loop.
void launch_11_tma_store(const at::Tensor& a, const at::Tensor& b, at::Tensor& c);
// Step 12: + the tile (128 x 64, 128 x 128 or 128 x 256) chosen by shape so small outputs fill the SMs, a
// stmatrix epilogue, and stream-K (the last wave's k-slabs spread over all SMs) when that wave is mostly idle.
void launch_12_tuned_tiles(const at::Tensor& a, const at::Tensor& b, at::Tensor& c);
// Step 13 (float32 while TF32 is allowed, an sm_90a binary on a compute-9.0 GPU, any strides): step 9's plan on
// float32 as TF32 (wgmma m64n256k8); the K-major operand is read by wgmma from shared memory, the other loaded
// into registers (rounded to TF32), so row-major B needs no transposed copy.
void launch_13_tf32_wgmma(const at::Tensor& a, const at::Tensor& b, at::Tensor& c);
// Step 14 (every dtype, any GPU, any strides; variant 0 takes it when M or N <= kSkinnyMaxSide): the big operand
// streamed once with 16-byte loads (a thread per 16 bytes of its rows, or a warp per few of its columns, by its
// layout; float16/bfloat16 on compute >= 8.0 through mma.sync, the small operand as the A fragment), K split over
// blocks, deterministic reduction of the splits.
void launch_14_skinny(const at::Tensor& a, const at::Tensor& b, at::Tensor& c);
// Step 15 (float64, sm_80+): float64 on the tensor cores: mma.sync .f64 (m16n8k4 on sm_90, m8n8k4 on sm_80), a
// cp.async pipeline (32-deep slabs in 3 stages where shared memory allows), 128 x 128 block and 64 x 32 warp
// tiles, padded conflict-free shared memory.
void launch_15_dmma(const at::Tensor& a, const at::Tensor& b, at::Tensor& c);
// True when this binary holds sm_90a code and `device` is compute 9.0 (09_wgmma_tma.cu).
bool wgmma_available(int device);

}  // namespace cuda_kernels::matmul_ladder
