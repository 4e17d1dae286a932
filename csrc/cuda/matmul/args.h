// What every matmul kernel's launcher takes: raw pointers, sizes and strides, with no ATen types; and the
// launchers, one per file of csrc/cuda/matmul/ladder/ plus the three special cases.
//
// Why not at::Tensor: every nvcc pass over a .cu file (cudafe++, cicc once per arch, the host compiler) parses its
// headers again, and ATen's headers cost 20-40 s of compile time per kernel file where cuda_runtime.h costs 2 s.
// So the kernel files include only this header (and CUDA's and c10/util's scalar types); csrc/cuda/matmul/dispatch.cpp
// turns tensors into Args and is compiled once, by the host compiler.
#pragma once

#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <cstddef>
#include <cstdint>

#include "cuda/opmath.h"
#include "epilogue.h"

// cudaStream_t is `CUstream_st*`; declared here instead of including cuda_runtime.h because csrc/ops.h reads this
// header in CPU-only builds too, which have no CUDA headers.
struct CUstream_st;

namespace cuda_kernels::matmul_ladder {

enum class Dtype { kFloat32, kFloat64, kFloat16, kBFloat16 };

// torch's name of the dtype ("float32"), for error messages.
constexpr const char* dtype_name(Dtype d) {
  switch (d) {
    case Dtype::kFloat32:
      return "float32";
    case Dtype::kFloat64:
      return "float64";
    case Dtype::kFloat16:
      return "float16";
    case Dtype::kBFloat16:
      return "bfloat16";
  }
  return "?";
}

constexpr int64_t dtype_size(Dtype d) {
  return d == Dtype::kFloat64 ? 8 : d == Dtype::kFloat32 ? 4 : 2;
}

// Calls f(scalar_t{}) with the C++ type of d: float, double, c10::Half or c10::BFloat16 (what ATen's dispatch
// macros would give, so kernels instantiate for the same types). Use: dispatch_dtype(d, [&](auto t) {
// using scalar_t = decltype(t); ... }).
template <typename F>
void dispatch_dtype(Dtype d, F&& f) {
  switch (d) {
    case Dtype::kFloat32:
      return f(float{});
    case Dtype::kFloat64:
      return f(double{});
    case Dtype::kFloat16:
      return f(c10::Half{});
    case Dtype::kBFloat16:
      return f(c10::BFloat16{});
  }
}

// Device memory and copies one call needs beyond its inputs and output (split-K partial sums, operands padded to a
// pitch a kernel can read). dispatch.cpp's TensorWorkspace backs it with torch's caching allocator: memory is valid
// until the launcher returns and may be reused by later work on the same stream only (stream-ordered), so a launcher
// may enqueue kernels that use it and return.
class Workspace {
 public:
  // `bytes` of device memory, 256-byte aligned.
  virtual void* alloc(std::size_t bytes) = 0;
  // A row-major copy of the (rows x cols) matrix of `dtype` at src, whose element (r, c) is src[r * s0 + c * s1],
  // with rows `pitch` >= cols elements apart (the padding is not written), enqueued on the call's stream.
  void* copy_2d(const void* src, Dtype dtype, int64_t rows, int64_t cols, int64_t s0, int64_t s1, int64_t pitch) {
    return copy_3d(src, dtype, 1, rows, cols, 0, s0, s1, pitch);
  }
  // The same for a batch of such matrices, matrix i at src + i * s_batch elements, copied rows * pitch apart.
  virtual void* copy_3d(const void* src, Dtype dtype, int64_t batch, int64_t rows, int64_t cols, int64_t s_batch,
                        int64_t s0, int64_t s1, int64_t pitch) = 0;

 protected:
  ~Workspace() = default;
};

// One call c = a @ b. a is (M, K) with element (m, k) at a[m * sa0 + k * sa1], b (K, N) with (k, n) at
// b[k * sb0 + n * sb1], c a fresh row-major (M, N) matrix; M, N, K >= 1; all of `dtype` on `device`. Kernels that
// list kRowMajorInputs (dispatch.cpp) get sa1 == sb1 == 1, sa0 == K, sb0 == N, except that those that also list
// kKMajorB may get a K-major b as it is: sb0 == 1, sb1 its column pitch (>= K > 1), and N > 1.
// A batch (batch > 1, only for kernels with kBatched in the table): `batch` such products, matrix i of a at
// a + i * sa_batch elements, of b at b + i * sb_batch (0: one matrix for every product, a broadcast operand), of c
// at c + i * M * N (c is (batch, M, N), contiguous). Row-major kernels get sa_batch == M * K, and sb_batch == K * N
// but for a K-major b (kKMajorB), whose batch stride is its own.
struct Args {
  Dtype dtype;
  const void* a;
  const void* b;
  void* c;
  int64_t M, N, K;
  int64_t sa0, sa1, sb0, sb1;
  int device;            // CUDA device index (the current device during the call)
  CUstream_st* stream;   // cudaStream_t: torch's current stream on `device`
  Workspace* workspace;  // never null
  int64_t batch = 1;
  int64_t sa_batch = 0, sb_batch = 0;
  // linear's epilogue, for kernels whose row of the table has kFusedEpilogue (dispatch.cpp): c[m][n] =
  // activation(sum + bias[n]), bias (N elements of `dtype`, contiguous) or nullptr; activation is never kSwiglu
  // here. Other kernels never see anything but the defaults: dispatch applies the epilogue after them.
  const void* bias = nullptr;
  Activation activation = Activation::kNone;

  template <typename T>
  const T* a_ptr() const {
    return static_cast<const T*>(a);
  }
  template <typename T>
  const T* b_ptr() const {
    return static_cast<const T*>(b);
  }
  template <typename T>
  T* c_ptr() const {
    return static_cast<T*>(c);
  }
};

// The ladder's launchers, one per file of csrc/cuda/matmul/ladder/ (the table in dispatch.cpp says what each
// takes).
// Step 1: 32x32 shared-memory tiles, one output per thread.
void launch_01_tiled(const Args& args);
// Step 2: 128x128 block tiles, 8x8 outputs per thread in registers (2-D register blocking).
void launch_02_blocktile_2d(const Args& args);
// Step 3: + 16-byte global loads, A transposed in shared memory, 16-byte shared reads.
void launch_03_vectorized(const Args& args);
// Step 4: + double buffering (next slab loaded into registers during the FMAs).
void launch_04_double_buffer(const Args& args);
// Step 5: + warp tiling (conflict-free, broadcast shared reads).
void launch_05_warptile(const Args& args);
// Step 6: + 3-stage cp.async pipeline, 128x128x32 tiles in dynamic shared memory, 2 blocks per SM, grouped tile
// order, split-K for outputs with few tiles.
void launch_06_async_pipeline(const Args& args);
// Step 7 (float16/bfloat16, sm_80+): tensor cores: warp-level mma.sync.m16n8k16 with float32 accumulators,
// fragments loaded with ldmatrix from padded shared-memory tiles; no pipeline.
void launch_07_mma_sync(const Args& args);
// Step 8 (float16/bfloat16, sm_80+): + 4-stage cp.async pipeline, XOR-swizzled shared memory, 128x256 block and
// 64x64 warp tiles, fragment double buffering, grouped tile order.
void launch_08_mma_pipeline(const Args& args);
// Steps 9-12 (float16/bfloat16, an sm_90a binary on a compute-9.0 GPU; any strides: TMA reads K-major and
// MN-major operands as they are, and a padded copy is made only when a stride or alignment rules TMA out):
// Step 9: warpgroup MMA (wgmma m64n256k16) on operands brought into 128-byte-swizzled shared memory by TMA, a
// producer warpgroup and two consumer warpgroups on a 4-stage mbarrier ring, setmaxnreg, a persistent grid.
void launch_09_wgmma_tma(const Args& args);
// Step 10: + 2-CTA clusters sharing the B tile through TMA multicast.
void launch_10_cluster_multicast(const Args& args);
// Step 11: + C written through shared memory by TMA stores, overlapped with the next tile's main loop.
void launch_11_tma_store(const Args& args);
// Step 12: + the tile (128 x 64, 128 x 128 or 128 x 256) chosen by shape so small outputs fill the SMs, a
// stmatrix epilogue, and stream-K (the last wave's k-slabs spread over all SMs) when that wave is mostly idle.
void launch_12_hopper_gemm(const Args& args);
// The special cases, apart from the ladder (variants 13-15).
// tf32_wgmma (float32 while TF32 is allowed, an sm_90a binary on a compute-9.0 GPU, any strides): step 9's plan on
// float32 as TF32 (wgmma m64n256k8); the K-major operand is read by wgmma from shared memory, the other loaded
// into registers (rounded to TF32), so row-major B needs no transposed copy.
void launch_tf32_wgmma(const Args& args);
// matvec (every dtype, any GPU, any strides; variant 0 takes it when M or N <= 16): the big operand
// streamed once with 16-byte loads (a thread per 16 bytes of its rows, or a warp per few of its columns, by its
// layout; float16/bfloat16 on compute >= 8.0 through mma.sync, the small operand as the A fragment), K split over
// blocks, deterministic reduction of the splits.
void launch_matvec(const Args& args);
// fp64_dmma (float64, sm_80+): float64 on the tensor cores: mma.sync .f64 (m16n8k4 on sm_90, m8n8k4 on sm_80), a
// cp.async pipeline (32-deep slabs in 3 stages where shared memory allows), 128 x 128 block and 64 x 32 warp
// tiles, padded conflict-free shared memory.
void launch_fp64_dmma(const Args& args);
// linear's epilogue as a pass of its own over c (M x N, row-major, contiguous, of `dtype`), for the kernels that do
// not fuse it (csrc/cuda/matmul/epilogue.cu). In place: c = activation(c + bias) (bias nullptr: none; activation
// elementwise). swiglu: out (M x N / 2, contiguous) = silu(z[:, :N/2]) * z[:, N/2:] with z = c + bias.
void apply_epilogue(Dtype dtype, void* c, int64_t M, int64_t N, const void* bias, Activation activation,
                    CUstream_st* stream);
void apply_swiglu(Dtype dtype, const void* c, int64_t M, int64_t N, const void* bias, void* out, CUstream_st* stream);
// True when this binary holds sm_90a code and `device` is compute 9.0 (ladder/09_wgmma_tma.cu).
bool wgmma_available(int device);

}  // namespace cuda_kernels::matmul_ladder
