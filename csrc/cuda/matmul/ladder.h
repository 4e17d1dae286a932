// The matmul kernel ladder: one file per step in csrc/cuda/matmul/, each a launcher that computes
// c = a @ b on the current stream for all four dtypes (accumulating in fp32, fp64 for fp64).
//
// Contract of every launcher: a is (M, K), b is (K, N), c is a freshly allocated row-major (M, N) tensor;
// M, N, K >= 1; all on the current device. What each step accepts beyond that is in `requirements`,
// and csrc/cuda/matmul.cu makes the inputs fit (a .contiguous() copy) before calling it.
#pragma once

#include <ATen/core/Tensor.h>

namespace cuda_kernels::matmul_ladder {

enum Requirement : unsigned {
  kAnyStrides = 0,            // reads a and b through their strides (transposed views, expanded, ...)
  kRowMajorInputs = 1u << 0,  // a and b contiguous (row-major); dispatch copies them otherwise
};

struct Step {
  int variant;            // the number users pass as matmul(..., variant=N)
  const char* name;       // e.g. "01_tiled"; also the suffix of its kernel's name
  unsigned requirements;  // Requirement bits
  void (*launch)(const at::Tensor& a, const at::Tensor& b, at::Tensor& c);
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

}  // namespace cuda_kernels::matmul_ladder
