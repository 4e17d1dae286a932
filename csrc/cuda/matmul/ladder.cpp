// matmul on CUDA: the ladder of kernels in csrc/cuda/matmul/, the choice of one, and the call of its launcher
// with the tensors turned into raw pointers (args.h). Validation (csrc/checks.h: check_matmul_variant), the device
// guard and allocation happen before, in csrc/cuda/ops.cpp. A .cpp file: it holds no kernel, so the host compiler
// alone builds it, once.
//
// variant = 0 picks a step (pick_step below); variant = N forces ladder step N (tests and the benchmark use this
// to cover and time every step).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include "checks.h"
#include "cuda/matmul/ladder.h"
#include "ops.h"

namespace cuda_kernels {
namespace {

using matmul_ladder::kAllDtypes;
using matmul_ladder::kAnyStrides;
using matmul_ladder::kFloat32;
using matmul_ladder::kFloat64;
using matmul_ladder::kHalfDtypes;
using matmul_ladder::kRowMajorInputs;
using matmul_ladder::kSkinnyShapes;
using matmul_ladder::kTf32Math;
using matmul_ladder::Step;

// The ladder, in order: each step is faster than the one before it on the inputs it takes. Add a step: write
// csrc/cuda/matmul/NN_name.cu, declare its launcher in args.h, and list it here with what it needs.
// Columns: variant, name, input layouts, dtypes, minimum compute capability, runtime check and what it checks,
// launcher.
constexpr const char* kSm90aNeeds = "an sm_90a build on a compute-9.0 GPU";
constexpr Step kLadder[] = {
    {1, "01_tiled", kAnyStrides, kAllDtypes, 0, nullptr, nullptr, &matmul_ladder::launch_01_tiled},
    {2, "02_blocktile_2d", kRowMajorInputs, kAllDtypes, 0, nullptr, nullptr, &matmul_ladder::launch_02_blocktile_2d},
    {3, "03_vectorized", kRowMajorInputs, kAllDtypes, 0, nullptr, nullptr, &matmul_ladder::launch_03_vectorized},
    {4, "04_double_buffer", kRowMajorInputs, kAllDtypes, 0, nullptr, nullptr, &matmul_ladder::launch_04_double_buffer},
    {5, "05_warptile", kRowMajorInputs, kAllDtypes, 0, nullptr, nullptr, &matmul_ladder::launch_05_warptile},
    {6, "06_async_pipeline", kRowMajorInputs, kAllDtypes, 0, nullptr, nullptr,
     &matmul_ladder::launch_06_async_pipeline},
    {7, "07_mma_sync", kRowMajorInputs, kHalfDtypes, 80, nullptr, nullptr, &matmul_ladder::launch_07_mma_sync},
    {8, "08_mma_pipeline", kRowMajorInputs, kHalfDtypes, 80, nullptr, nullptr, &matmul_ladder::launch_08_mma_pipeline},
    {9, "09_wgmma_tma", kAnyStrides, kHalfDtypes, 90, &matmul_ladder::wgmma_available, kSm90aNeeds,
     &matmul_ladder::launch_09_wgmma_tma},
    {10, "10_cluster_multicast", kAnyStrides, kHalfDtypes, 90, &matmul_ladder::wgmma_available, kSm90aNeeds,
     &matmul_ladder::launch_10_cluster_multicast},
    {11, "11_tma_store", kAnyStrides, kHalfDtypes, 90, &matmul_ladder::wgmma_available, kSm90aNeeds,
     &matmul_ladder::launch_11_tma_store},
    {12, "12_tuned_tiles", kAnyStrides, kHalfDtypes, 90, &matmul_ladder::wgmma_available, kSm90aNeeds,
     &matmul_ladder::launch_12_tuned_tiles},
    {13, "13_tf32_wgmma", kAnyStrides | kTf32Math, kFloat32, 90, &matmul_ladder::wgmma_available, kSm90aNeeds,
     &matmul_ladder::launch_13_tf32_wgmma},
    {14, "14_skinny", kAnyStrides | kSkinnyShapes, kAllDtypes, 0, nullptr, nullptr, &matmul_ladder::launch_14_skinny},
    {15, "15_dmma", kRowMajorInputs, kFloat64, 80, nullptr, nullptr, &matmul_ladder::launch_15_dmma},
};
constexpr int kNumSteps = static_cast<int>(std::size(kLadder));

// Variant 0: by shape, then the last step of the ladder that can run this dtype on this GPU.
//  - Outputs with M or N <= kSkinnyMaxSide (matrix-vector products and the like): 14_skinny, which streams the
//    big operand once; the tiled steps leave most of each tile empty there.
//  - Otherwise the ladder is ordered by speed, so the last step whose needs are met:
//    - float16 / bfloat16: 12_tuned_tiles where the binary and GPU allow wgmma (sm_90a code, compute 9.0), else
//      on compute >= 8.0 08_mma_pipeline (mma.sync tensor cores), else 06_async_pipeline;
//    - float32 while TF32 is allowed (torch.backends.cuda.matmul.allow_tf32): 13_tf32_wgmma where the binary and
//      GPU allow wgmma, as torch.mm then runs cuBLAS's TF32 kernels;
//    - float64 on compute >= 8.0: 15_dmma (the tensor cores' float64 mma), else 06_async_pipeline;
//    - float32 otherwise: 06_async_pipeline. Measured on the H100 in float32 (scripts/tune_matmul.py,
//      docs/matmul.md), step 6 is the fastest SIMT step from 256^3 through 8192^3.
// shape: the output's (M, N), or nullptr to ask about large outputs (build_info, the doctor).
// *reason (when given) gets what was skipped on the way and why, for cuda_kernels.build_info() / the doctor.
const Step& pick_step(at::ScalarType dtype, const matmul_ladder::GpuInfo& gpu, bool tf32, const int64_t* shape,
                      std::string* reason) {
  const bool skinny = shape != nullptr && std::min(shape[0], shape[1]) <= matmul_ladder::kSkinnyMaxSide;
  // The step made for skinny outputs that runs here (nullptr: none): skinny outputs take it whatever its place in
  // the ladder; the reason names it for the others.
  const Step* skinny_step = nullptr;
  for (const Step& step : kLadder) {
    if ((step.requirements & kSkinnyShapes) && matmul_step_unmet_need(step, dtype, gpu, tf32).empty()) {
      skinny_step = &step;
    }
  }
  const std::string where = "compute " + std::to_string(gpu.cc / 10) + "." + std::to_string(gpu.cc % 10) + " (" +
                            gpu.name + "), " + matmul_dtype_name(dtype) +
                            (dtype == at::kFloat && tf32 ? " (TF32 allowed)" : "");
  const std::string max_side = std::to_string(matmul_ladder::kSkinnyMaxSide);
  if (skinny && skinny_step != nullptr) {
    if (reason) *reason = where + ", M or N <= " + max_side + ": the fastest ladder step that runs here";
    return *skinny_step;
  }
  std::string skipped;
  for (int i = kNumSteps - 1; i >= 0; --i) {
    const Step& step = kLadder[i];
    if (step.requirements & kSkinnyShapes) continue;
    const std::string why_not = matmul_step_unmet_need(step, dtype, gpu, tf32);
    if (why_not.empty()) {
      if (reason) {
        *reason = where + ": the fastest ladder step that runs here" + (skipped.empty() ? "" : "; skipped " + skipped) +
                  (skinny_step == nullptr ? "" : "; outputs with M or N <= " + max_side + " take " + skinny_step->name);
      }
      return step;
    }
    // Steps that never take this dtype are not worth naming; a step that takes it but cannot run here is.
    if (step.dtypes & ladder_dtype_bit(dtype)) {
      skipped += (skipped.empty() ? "" : ", ") + std::string(step.name) + " (" + why_not + ")";
    }
  }
  // Unreachable: step 1 takes every dtype on every GPU.
  TORCH_CHECK(false, "cuda_kernels.matmul: no ladder step can run ", dtype, " here: ", skipped);
  return kLadder[0];
}

}  // namespace

c10::ArrayRef<Step> matmul_cuda_ladder() {
  return kLadder;
}

const Step& matmul_cuda_default_step(at::ScalarType dtype, const matmul_ladder::GpuInfo& gpu, bool tf32,
                                     const int64_t* shape, std::string* reason) {
  return pick_step(dtype, gpu, tf32, shape, reason);
}

namespace {

// Workspace (args.h) from torch's caching allocator: each buffer is a tensor kept until the call returns, when the
// allocator takes it back for later work on the same stream.
class TensorWorkspace final : public matmul_ladder::Workspace {
 public:
  explicit TensorWorkspace(const at::TensorOptions& options) : options_(options) {}

  void* alloc(std::size_t bytes) override {
    keep_.push_back(at::empty({static_cast<int64_t>(bytes)}, options_.dtype(at::kByte)));
    return keep_.back().mutable_data_ptr();
  }

  void* copy_2d(const void* src, matmul_ladder::Dtype dtype, int64_t rows, int64_t cols, int64_t s0, int64_t s1,
                int64_t pitch) override {
    TORCH_CHECK(pitch >= cols, "cuda_kernels.matmul: a copy's pitch ", pitch, " is less than its ", cols, " columns");
    const at::TensorOptions options = options_.dtype(scalar_type_of(dtype));
    // A view of src (read below; the copy is an ordinary ATen copy on the current stream). Naming its device
    // spares from_blob asking the driver which device owns the pointer (cudaPointerGetAttributes) on every copy.
    const at::Tensor from = at::for_blob(const_cast<void*>(src), {rows, cols})
                                .strides({s0, s1})
                                .options(options)
                                .target_device(options.device())
                                .make_tensor();
    keep_.push_back(at::empty({rows, pitch}, options));
    keep_.back().narrow(1, 0, cols).copy_(from);
    return keep_.back().mutable_data_ptr();
  }

 private:
  at::TensorOptions options_;
  std::vector<at::Tensor> keep_;
};

}  // namespace

void matmul_cuda_launch(const at::Tensor& a_in, const at::Tensor& b_in, at::Tensor& c, const Step& step) {
  const bool row_major = step.requirements & kRowMajorInputs;
  const at::Tensor a = row_major ? a_in.contiguous() : a_in;
  const at::Tensor b = row_major ? b_in.contiguous() : b_in;
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  TensorWorkspace workspace(c.options());
  matmul_ladder::Args args{ladder_dtype(a.scalar_type()), a.const_data_ptr(), b.const_data_ptr(), c.mutable_data_ptr(),
                           M, N, K,
                           // Row-major steps are promised the row-major strides, even where a size-1 dim of a
                           // contiguous tensor carries another stride.
                           row_major ? K : a.stride(0), row_major ? 1 : a.stride(1), row_major ? N : b.stride(0),
                           row_major ? 1 : b.stride(1), c.get_device(),
                           c10::cuda::getCurrentCUDAStream(c.get_device()).stream(), &workspace};
  step.launch(args);
}

}  // namespace cuda_kernels
