// The matmul kernel ladder: one file per step in csrc/cuda/matmul/, each a launcher that computes c = a @ b on
// the current stream (accumulating in fp32, fp64 for fp64), and the table of them in ladder.cpp.
//
// Contract of every launcher (args.h): a is (M, K), b is (K, N), c is a freshly allocated row-major (M, N) matrix;
// M, N, K >= 1; all on the current device; the dtype is one the step lists, and the GPU meets the step's needs
// (csrc/checks.h checks forced variants, the pick of variant 0 skips steps that cannot run). What each step
// accepts beyond that is in `requirements`, and ladder.cpp makes the inputs fit (a .contiguous() copy) before
// calling it.
#pragma once

#include <string>

#include "cuda/matmul/args.h"

namespace cuda_kernels::matmul_ladder {

enum Requirement : unsigned {
  kAnyStrides = 0,            // reads a and b through their strides (transposed views, expanded, ...)
  kRowMajorInputs = 1u << 0,  // a and b contiguous (row-major); dispatch copies them otherwise
  kTf32Math = 1u << 1,        // computes float32 in TF32: runs only while torch allows TF32 for matmul
  kSkinnyShapes = 1u << 2,    // made for outputs with M or N <= kSkinnyMaxSide: variant 0 takes it only for those
};
constexpr int64_t kSkinnyMaxSide = 16;

// The dtypes a step computes, as a bit mask: bit i is Dtype i (args.h).
enum DtypeBit : unsigned {
  kFloat32 = 1u << static_cast<int>(Dtype::kFloat32),
  kFloat64 = 1u << static_cast<int>(Dtype::kFloat64),
  kFloat16 = 1u << static_cast<int>(Dtype::kFloat16),
  kBFloat16 = 1u << static_cast<int>(Dtype::kBFloat16),
  kAllDtypes = kFloat32 | kFloat64 | kFloat16 | kBFloat16,
  kHalfDtypes = kFloat16 | kBFloat16,  // the tensor-core steps
};
constexpr unsigned dtype_bit(Dtype d) {
  return 1u << static_cast<int>(d);
}

// One row of the ladder (kLadder in csrc/cuda/matmul/ladder.cpp). A step runs only when the dtype is in `dtypes`, TF32
// is allowed if it has kTf32Math, the GPU's compute capability is at least `min_cc`, and `available` (if set) says yes;
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
  void (*launch)(const Args& args);
};

// The GPU a call runs on, as the step checks see it.
struct GpuInfo {
  int device;        // CUDA device index
  int cc;            // compute capability as 10 * major + minor
  std::string name;  // e.g. "NVIDIA H100 80GB HBM3"
};

}  // namespace cuda_kernels::matmul_ladder
