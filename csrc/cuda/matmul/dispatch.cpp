// matmul on CUDA, host side: everything that decides which kernel runs a call, in one file.
//
//  - kKernels: the table of kernels, in ladder order. Variants 1-12 are the ladder's rungs (csrc/cuda/matmul/ladder/,
//    one idea per file, 12_hopper_gemm the shipping float16/bfloat16 kernel on the H100); 13-15 are kernels for
//    special cases (tf32_wgmma.cu, matvec.cu, fp64_dmma.cu). Each row says what the kernel needs.
//  - pick_kernel: what variant=0 runs for a dtype, shape and GPU, and why.
//  - matmul_cuda: the op's CUDA function (checks, device guard, output), which turns the tensors into the launchers'
//    raw-pointer Args (args.h) and calls one; linear_cuda, the same for x @ weight.T with bias and activation (fused
//    by kernels with kFusedEpilogue, else applied by csrc/cuda/matmul/epilogue.cu).
//  - the answers to the Python package's questions (csrc/api.cpp registers them as private ops): the kernels,
//    which one runs here and why (cuda_kernels.build_info(), the doctor, the tests), and the tuning knobs.
// It holds no kernel, so the host compiler alone builds it, once; the kernel files include no torch header.
#include <cuda_runtime_api.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/ops.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "checks.h"
#include "cuda/errors.h"
#include "cuda/matmul/args.h"
#include "cuda/matmul/tuning.h"
#include "cuda/stream.h"
#include "ops.h"

#ifndef CUDA_KERNELS_ARCHS
#define CUDA_KERNELS_ARCHS none
#endif

namespace cuda_kernels {
namespace {

using matmul_ladder::Dtype;

// ---------------------------------------------------------------------------------------------------------------
// The table of kernels
// ---------------------------------------------------------------------------------------------------------------

// What a kernel takes beyond its dtypes and GPU.
enum Requirement : unsigned {
  kAnyStrides = 0,            // reads a and b through their strides (transposed views, expanded, ...)
  kRowMajorInputs = 1u << 0,  // a and b contiguous (row-major); the call copies them otherwise
  kTf32Math = 1u << 1,        // computes float32 in TF32: runs only while torch allows TF32 for matmul
  kSkinnyShapes = 1u << 2,    // made for outputs with M or N <= kSkinnyMaxSide: variant 0 takes it only for those
  kFusedEpilogue = 1u << 3,   // applies linear's bias and activation as it stores C (Args::bias, Args::activation)
  kBatched = 1u << 4,         // runs a batch of products in one launch (Args::batch); others run once per matrix
  kKMajorB = 1u << 5,         // with kRowMajorInputs: also reads a K-major b as it is (b = W.t() of a weight W
                              // stored (N, K): Args::sb0 == 1, sb1 its column pitch) when M < kKMajorBMaxM
};
constexpr int64_t kSkinnyMaxSide = 16;
// Except float32 (TF32 off) with kFp32TiledMinRows to kSkinnyMaxSide rows against fewer than kFp32TiledMaxWeight
// elements of b: step 6's 16-row tiles run those faster than matvec; with fewer rows, or a b that takes longer to
// read than to multiply, matvec is faster (docs/matmul.md has the timings).
constexpr int64_t kFp32TiledMinRows = 8;
constexpr int kFp32TiledMaxWeightLog2 = 25;
constexpr int64_t kFp32TiledMaxWeight = int64_t{1} << kFp32TiledMaxWeightLog2;
// Step 6 reads a K-major b a few percent slower than a row-major one; a copy of b costs about as much as a product
// of 2048 rows gains from it (docs/matmul.md): from that many rows on, b is copied to row-major first.
constexpr int64_t kKMajorBMaxM = 2048;

// The dtypes a kernel computes, as a bit mask: bit i is Dtype i (args.h).
constexpr unsigned dtype_bit(Dtype d) {
  return 1u << static_cast<int>(d);
}
constexpr unsigned kFloat32 = dtype_bit(Dtype::kFloat32), kFloat64 = dtype_bit(Dtype::kFloat64);
constexpr unsigned kHalfDtypes = dtype_bit(Dtype::kFloat16) | dtype_bit(Dtype::kBFloat16);  // the tensor-core steps
constexpr unsigned kAllDtypes = kFloat32 | kFloat64 | kHalfDtypes;

// One row of the table. A kernel runs only when the dtype is in `dtypes`, TF32 is allowed if it has kTf32Math,
// the GPU's compute capability is at least `min_cc`, and `available` (if set) says yes; unmet_need turns each unmet
// need into the end of an error message, and variant 0 picks the last kernel of the ladder whose needs are met.
struct Kernel {
  int variant;            // the number users pass as matmul(..., variant=N)
  const char* name;       // e.g. "01_tiled"; also the suffix of its CUDA kernels' names
  unsigned requirements;  // Requirement bits
  unsigned dtypes;        // dtype_bit mask
  int min_cc;             // lowest compute capability, as 10 * major + minor (80 = 8.0); 0 = any CUDA GPU
  // A check only the running binary and GPU can answer (nullptr: none); `needs` says what it checks, for errors.
  bool (*available)(int device);
  const char* needs;
  void (*launch)(const matmul_ladder::Args& args);
};

constexpr const char* kSm90aNeeds = "an sm_90a build on a compute-9.0 GPU";
using namespace matmul_ladder;  // the launchers (args.h)
// clang-format off
constexpr Kernel kKernels[] = {
    // The ladder: CUDA cores (FFMA), every dtype.
    {1, "01_tiled", kAnyStrides | kBatched, kAllDtypes, 0, nullptr, nullptr, &launch_01_tiled},
    {2, "02_blocktile_2d", kRowMajorInputs, kAllDtypes, 0, nullptr, nullptr, &launch_02_blocktile_2d},
    {3, "03_vectorized", kRowMajorInputs, kAllDtypes, 0, nullptr, nullptr, &launch_03_vectorized},
    {4, "04_double_buffer", kRowMajorInputs, kAllDtypes, 0, nullptr, nullptr, &launch_04_double_buffer},
    {5, "05_warptile", kRowMajorInputs, kAllDtypes, 0, nullptr, nullptr, &launch_05_warptile},
    {6, "06_async_pipeline", kRowMajorInputs | kKMajorB | kBatched, kAllDtypes, 0, nullptr, nullptr,
     &launch_06_async_pipeline},
    // The ladder: tensor cores, float16/bfloat16. mma.sync from sm_80, then Hopper's wgmma fed by TMA.
    {7, "07_mma_sync", kRowMajorInputs, kHalfDtypes, 80, nullptr, nullptr, &launch_07_mma_sync},
    {8, "08_mma_pipeline", kRowMajorInputs, kHalfDtypes, 80, nullptr, nullptr, &launch_08_mma_pipeline},
    {9, "09_wgmma_tma", kAnyStrides, kHalfDtypes, 90, &wgmma_available, kSm90aNeeds, &launch_09_wgmma_tma},
    {10, "10_cluster_multicast", kAnyStrides, kHalfDtypes, 90, &wgmma_available, kSm90aNeeds,
     &launch_10_cluster_multicast},
    {11, "11_tma_store", kAnyStrides, kHalfDtypes, 90, &wgmma_available, kSm90aNeeds, &launch_11_tma_store},
    {12, "12_hopper_gemm", kAnyStrides | kFusedEpilogue | kBatched, kHalfDtypes, 90, &wgmma_available, kSm90aNeeds,
     &launch_12_hopper_gemm},
    // Special cases, apart from the ladder.
    {13, "tf32_wgmma", kAnyStrides | kTf32Math, kFloat32, 90, &wgmma_available, kSm90aNeeds, &launch_tf32_wgmma},
    {14, "matvec", kAnyStrides | kSkinnyShapes | kBatched, kAllDtypes, 0, nullptr, nullptr, &launch_matvec},
    {15, "fp64_dmma", kRowMajorInputs | kBatched, kFloat64, 80, nullptr, nullptr, &launch_fp64_dmma},
};
// clang-format on
constexpr int kNumKernels = static_cast<int>(std::size(kKernels));
static_assert(kKernels[kNumKernels - 1].variant == kNumKernels, "variant N is row N of the table");

// ---------------------------------------------------------------------------------------------------------------
// Dtypes, the GPU, and what a kernel needs that a call lacks
// ---------------------------------------------------------------------------------------------------------------

// The launchers' Dtype of a dtype check_matmul_inputs accepts, and back.
Dtype ladder_dtype(ScalarType t) {
  switch (t) {
    case ScalarType::Float:
      return Dtype::kFloat32;
    case ScalarType::Double:
      return Dtype::kFloat64;
    case ScalarType::Half:
      return Dtype::kFloat16;
    case ScalarType::BFloat16:
      return Dtype::kBFloat16;
    default:
      CUDA_KERNELS_CHECK(false, "cuda_kernels.matmul: the CUDA kernels do not compute ", t);
  }
}
ScalarType scalar_type_of(Dtype d) {
  switch (d) {
    case Dtype::kFloat32:
      return ScalarType::Float;
    case Dtype::kFloat64:
      return ScalarType::Double;
    case Dtype::kFloat16:
      return ScalarType::Half;
    case Dtype::kBFloat16:
      return ScalarType::BFloat16;
  }
  return ScalarType::Float;
}
constexpr ScalarType kAllScalarTypes[] = {ScalarType::Float, ScalarType::Double, ScalarType::Half,
                                          ScalarType::BFloat16};

// t's bit in a kernel's `dtypes` mask; 0 for dtypes the kernels do not know.
unsigned dtype_bit_of(ScalarType t) {
  return is_supported_float(t) ? dtype_bit(ladder_dtype(t)) : 0u;
}

// torch's name of a dtype ("float32", not ScalarType's "Float"), as users write it.
const char* dtype_name_of(ScalarType t) {
  return is_supported_float(t) ? matmul_ladder::dtype_name(ladder_dtype(t)) : toString(t);
}

// The GPU a call runs on, as the kernels' needs see it.
struct GpuInfo {
  int device;        // CUDA device index
  int cc;            // compute capability as 10 * major + minor
  std::string name;  // e.g. "NVIDIA H100 80GB HBM3"
};

// The GPU at `device` (-1: the current one), read once per device (every matmul call asks).
const GpuInfo& gpu_info(int64_t device) {
  int count = 0;
  CUDA_KERNELS_CUDA_CHECK(cudaGetDeviceCount(&count));
  CUDA_KERNELS_CHECK(device >= -1 && device < count, "cuda_kernels.matmul: no CUDA device ", device, " (", count,
                     " visible)");
  int index = static_cast<int>(device);
  if (device == -1) CUDA_KERNELS_CUDA_CHECK(cudaGetDevice(&index));
  constexpr int kMaxDevices = 64;
  static std::once_flag read[kMaxDevices];
  static GpuInfo cache[kMaxDevices];
  static thread_local GpuInfo uncached;  // devices beyond kMaxDevices: read every time
  const auto read_into = [index](GpuInfo& info) {
    cudaDeviceProp prop;
    CUDA_KERNELS_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    info = {index, prop.major * 10 + prop.minor, prop.name};
  };
  if (index >= kMaxDevices) {
    read_into(uncached);
    return uncached;
  }
  std::call_once(read[index], read_into, std::ref(cache[index]));
  return cache[index];
}

// The CUDA archs this binary was compiled for, from the build's arch tag (cuda_kernels/tools/build_config.py
// arch_tag: "80__90a" for "8.0;9.0a", "90_PTX" for "9.0+PTX"), written as "sm_80, sm_90a".
std::string built_archs() {
  const std::string tag = cuda_archs_tag();
  if (tag == "native" || tag == "none") return tag == "native" ? "the build machine's GPU" : "no CUDA arch";
  std::string out;
  for (size_t start = 0; start <= tag.size();) {
    size_t end = tag.find("__", start);
    if (end == std::string::npos) end = tag.size();
    std::string arch = tag.substr(start, end - start);
    const size_t ptx = arch.find("_PTX");
    if (ptx != std::string::npos) arch = arch.substr(0, ptx) + " + PTX";
    out += (out.empty() ? "sm_" : ", sm_") + arch;
    start = end + 2;
  }
  return out;
}

// What `kernel` needs that a call with `dtype` on `gpu` does not have, as the end of a sentence that starts with
// the kernel ("supports float16 and bfloat16, got float32"); empty when it can run.
// tf32: whether torch allows TF32 for float32 matmul now.
std::string unmet_need(const Kernel& kernel, ScalarType dtype, const GpuInfo& gpu, bool tf32) {
  if (!(kernel.dtypes & dtype_bit_of(dtype))) {
    std::string takes;
    int n = 0, count = 0;
    for (const ScalarType t : kAllScalarTypes) count += (kernel.dtypes & dtype_bit_of(t)) ? 1 : 0;
    for (const ScalarType t : kAllScalarTypes) {
      if (!(kernel.dtypes & dtype_bit_of(t))) continue;
      takes += std::string(n == 0 ? "" : n == count - 1 ? " and " : ", ") + dtype_name_of(t);
      ++n;
    }
    return "supports " + takes + ", got " + dtype_name_of(dtype);
  }
  if ((kernel.requirements & kTf32Math) && !tf32) {
    return "computes float32 in TF32, which torch does not allow now: set torch.backends.cuda.matmul.allow_tf32 = "
           "True (or torch.set_float32_matmul_precision(\"high\"))";
  }
  const auto cc_text = [](int cc) { return std::to_string(cc / 10) + "." + std::to_string(cc % 10); };
  if (gpu.cc < kernel.min_cc) {
    return "needs compute capability >= " + cc_text(kernel.min_cc) + ", this GPU (" + gpu.name + ") is " +
           cc_text(gpu.cc);
  }
  if (kernel.available && !kernel.available(gpu.device)) {
    return std::string("needs ") + (kernel.needs ? kernel.needs : "what this binary or GPU lacks") +
           " (this binary was built for " + built_archs() + "; this GPU (" + gpu.name + ") is compute " +
           cc_text(gpu.cc) + ")";
  }
  return "";
}

// variant = 0 (auto) or a kernel that can run `dtype` on `gpu`; anything else is an error naming the op, the
// kernel and why, e.g. "cuda_kernels.matmul: variant 7 (07_mma_sync) supports float16 and bfloat16, got float32".
void check_variant(int64_t variant, ScalarType dtype, const GpuInfo& gpu, bool tf32) {
  constexpr const char* op = "cuda_kernels.matmul";
  if (variant < 0 || variant > kNumKernels) {
    std::string known;
    for (const Kernel& k : kKernels)
      known += (known.empty() ? "" : ", ") + std::to_string(k.variant) + " (" + k.name + ")";
    CUDA_KERNELS_CHECK(false, op, ": unknown variant ", variant, "; use 0 (auto) or one of ", known);
  }
  if (variant == 0) return;
  const Kernel& kernel = kKernels[variant - 1];
  const std::string why_not = unmet_need(kernel, dtype, gpu, tf32);
  CUDA_KERNELS_CHECK(why_not.empty(), op, ": variant ", variant, " (", kernel.name, ") ", why_not);
}

// ---------------------------------------------------------------------------------------------------------------
// The pick for variant=0
// ---------------------------------------------------------------------------------------------------------------

// By shape, then the last kernel of the ladder that can run this dtype on this GPU:
//  - Outputs with M or N <= kSkinnyMaxSide (matrix-vector products and the like): matvec, which streams the big
//    operand once; the tiled kernels leave most of each tile empty there. Not float32 (TF32 off) with 8-16 rows
//    and a small b (kFp32TiledMinRows): step 6 has a 16-row tile for those.
//  - Otherwise the table is ordered by speed, so the last kernel whose needs are met:
//    - float16 / bfloat16: 12_hopper_gemm where the binary and GPU allow wgmma (sm_90a code, compute 9.0), else
//      08_mma_pipeline (mma.sync tensor cores) on compute >= 8.0, else 06_async_pipeline;
//    - float32 while TF32 is allowed: tf32_wgmma where the binary and GPU allow wgmma, as torch.mm then runs
//      cuBLAS's TF32 kernels;
//    - float64 on compute >= 8.0: fp64_dmma (the tensor cores' float64 mma), else 06_async_pipeline;
//    - float32 otherwise: 06_async_pipeline, the fastest CUDA-core step at every shape measured (docs/matmul.md).
// A batch of products takes the kernel one of its matrices would; one without kBatched runs a batch one matrix at
// a time (launch below).
// shape: the product's (M, N, K), or nullptr to ask about large outputs (build_info, the doctor).
// *reason (when given) gets what was skipped on the way and why, for cuda_kernels.build_info() / the doctor.
const Kernel& pick_kernel(ScalarType dtype, const GpuInfo& gpu, bool tf32, const int64_t* shape, std::string* reason) {
  const bool fp32_exact = dtype == ScalarType::Float && !tf32;  // where the few-row exception to matvec applies
  const bool fp32_tiled = shape != nullptr && fp32_exact && shape[0] >= kFp32TiledMinRows &&
                          shape[1] > kSkinnyMaxSide && shape[1] * shape[2] < kFp32TiledMaxWeight;
  const bool skinny = shape != nullptr && std::min(shape[0], shape[1]) <= kSkinnyMaxSide && !fp32_tiled;
  // The kernel made for skinny outputs that runs here (nullptr: none): skinny outputs take it; the reason names it
  // for the others.
  const Kernel* skinny_kernel = nullptr;
  for (const Kernel& k : kKernels) {
    if ((k.requirements & kSkinnyShapes) && unmet_need(k, dtype, gpu, tf32).empty()) skinny_kernel = &k;
  }
  const std::string where = "compute " + std::to_string(gpu.cc / 10) + "." + std::to_string(gpu.cc % 10) + " (" +
                            gpu.name + "), " + dtype_name_of(dtype) +
                            (dtype == ScalarType::Float && tf32 ? " (TF32 allowed)" : "");
  const std::string max_side = std::to_string(kSkinnyMaxSide);
  if (skinny && skinny_kernel != nullptr) {
    if (reason) *reason = where + ", M or N <= " + max_side + ": the kernel for such outputs";
    return *skinny_kernel;
  }
  std::string skipped;
  for (int i = kNumKernels - 1; i >= 0; --i) {
    const Kernel& k = kKernels[i];
    if (k.requirements & kSkinnyShapes) continue;
    const std::string why_not = unmet_need(k, dtype, gpu, tf32);
    if (why_not.empty()) {
      if (reason) {
        *reason =
            where + ": the fastest kernel that runs here" + (skipped.empty() ? "" : "; skipped " + skipped) +
            (skinny_kernel == nullptr ? "" : "; outputs with M or N <= " + max_side + " take " + skinny_kernel->name) +
            (fp32_exact && skinny_kernel != nullptr
                 ? " (but " + std::to_string(kFp32TiledMinRows) + "-" + max_side +
                       " rows against a b of fewer than 2^" + std::to_string(kFp32TiledMaxWeightLog2) +
                       " elements take this kernel)"
                 : "");
      }
      return k;
    }
    // Kernels that never take this dtype are not worth naming; one that takes it but cannot run here is.
    if (k.dtypes & dtype_bit_of(dtype))
      skipped += (skipped.empty() ? "" : ", ") + std::string(k.name) + " (" + why_not + ")";
  }
  // Unreachable: 01_tiled takes every dtype on every GPU.
  CUDA_KERNELS_CHECK(false, "cuda_kernels.matmul: no kernel can run ", dtype, " here: ", skipped);
  return kKernels[0];
}

// ---------------------------------------------------------------------------------------------------------------
// The call
// ---------------------------------------------------------------------------------------------------------------

// Workspace (args.h) from torch's caching allocator: each buffer is a tensor kept until the call returns, when the
// allocator takes it back for later work on the same stream.
class TensorWorkspace final : public matmul_ladder::Workspace {
 public:
  explicit TensorWorkspace(const Tensor& like) : like_(like) {}

  void* alloc(std::size_t bytes) override {
    const int64_t size[1] = {static_cast<int64_t>(bytes)};
    keep_.push_back(torch::stable::new_empty(like_, size, ScalarType::Byte));
    return keep_.back().mutable_data_ptr();
  }

  void* copy_3d(const void* src, Dtype dtype, int64_t batch, int64_t rows, int64_t cols, int64_t s_batch, int64_t s0,
                int64_t s1, int64_t pitch) override {
    CUDA_KERNELS_CHECK(pitch >= cols, "cuda_kernels.matmul: a copy's pitch ", pitch, " is less than its ", cols,
                       " columns");
    const ScalarType type = scalar_type_of(dtype);
    // A view of src (read below; the copy is an ordinary torch copy on the current stream).
    const int64_t sizes[3] = {batch, rows, cols}, strides[3] = {s_batch, s0, s1}, padded[3] = {batch, rows, pitch};
    const Tensor from = torch::stable::from_blob(const_cast<void*>(src), sizes, strides, like_.device(), type);
    keep_.push_back(torch::stable::new_empty(like_, padded, type));
    Tensor into = torch::stable::narrow(keep_.back(), 2, 0, cols);
    torch::stable::copy_(into, from);
    return keep_.back().mutable_data_ptr();
  }

 private:
  Tensor like_;  // the output: the workspace's device
  std::vector<Tensor> keep_;
};

// Runs `kernel` (its needs checked) on a (M, K) and b (K, N) into c, a contiguous M x N elements (only its data and
// device are read), or on a batch: a (batch, M, K), b (batch, K, N), c (batch, M, N); M, N, K >= 1. Copies a and b to
// row-major first when the kernel needs it (a broadcast operand, batch stride 0, stays one matrix; a K-major b stays as
// it is for kKMajorB). A kernel without kBatched runs a batch one matrix at a time. bias (contiguous, N elements) and
// act: linear's epilogue, only for kernels with kFusedEpilogue.
void launch(const Tensor& a_in, const Tensor& b_in, Tensor& c, const Kernel& kernel, const void* bias = nullptr,
            Activation act = Activation::kNone) {
  const bool row_major = kernel.requirements & kRowMajorInputs;
  const int64_t d = a_in.dim() - 2;  // the first matrix dimension
  const int64_t batch = d == 1 ? a_in.size(0) : 1;
  const int64_t M = a_in.size(d), K = a_in.size(d + 1), N = b_in.size(d + 1);
  // b K-major: k its fastest dimension, its columns apart by at least K (no overlap). K, N > 1, so a b that is
  // row-major too (a size-1 dimension's stride means nothing) is taken as row-major.
  const bool b_k_major = row_major && (kernel.requirements & kKMajorB) && M < kKMajorBMaxM && K > 1 && N > 1 &&
                         b_in.stride(d) == 1 && b_in.stride(d + 1) >= K;
  const bool b_as_is = !row_major || b_k_major;
  // An operand as the kernel reads it, and its batch stride (elements).
  const auto operand = [&](const Tensor& t, bool as_it_is) -> std::pair<Tensor, int64_t> {
    const bool broadcast = batch > 1 && t.stride(0) == 0;
    if (as_it_is) return {t, batch > 1 ? t.stride(0) : 0};
    if (broadcast) return {torch::stable::contiguous(torch::stable::select(t, 0, 0)), 0};
    return {torch::stable::contiguous(t), t.size(d) * t.size(d + 1)};
  };
  const auto [a, sa_batch] = operand(a_in, !row_major);
  const auto [b, sb_batch] = operand(b_in, b_as_is);
  const int64_t da = a.dim() - 2, db = b.dim() - 2;  // a broadcast operand is 2-D now
  const int device = c.get_device_index();
  TensorWorkspace workspace(c);
  matmul_ladder::Args args{
      ladder_dtype(a.scalar_type()), a.const_data_ptr(), b.const_data_ptr(), c.mutable_data_ptr(), M, N, K,
      // Row-major kernels are promised the row-major strides, even where a size-1 dim of a contiguous tensor carries
      // another stride; a K-major b keeps its own (1 and its column pitch).
      row_major ? K : a.stride(da), row_major ? 1 : a.stride(da + 1), b_as_is ? b.stride(db) : N,
      b_as_is ? b.stride(db + 1) : 1, device, current_stream(device), &workspace};
  args.bias = bias;
  args.activation = act;
  if (batch == 1 || (kernel.requirements & kBatched)) {
    args.batch = batch;
    args.sa_batch = sa_batch;
    args.sb_batch = sb_batch;
    kernel.launch(args);
    return;
  }
  const int64_t size = static_cast<int64_t>(c.element_size());
  for (int64_t i = 0; i < batch; ++i) {
    // A workspace per matrix: one for the whole batch would keep every matrix's copies and scratch until the last
    // launch (the caching allocator is stream-ordered, so each is free for the next once its launch is queued).
    TensorWorkspace matrix_workspace(c);
    args.workspace = &matrix_workspace;
    args.a = static_cast<const char*>(a.const_data_ptr()) + i * sa_batch * size;
    args.b = static_cast<const char*>(b.const_data_ptr()) + i * sb_batch * size;
    args.c = static_cast<char*>(c.mutable_data_ptr()) + i * M * N * size;
    kernel.launch(args);
  }
}

// A dtype name of the queries as (dtype, TF32 allowed): "float32+tf32" is float32 with TF32 allowed (the Python
// package names float32 so when torch allows TF32; the binary cannot ask torch).
std::pair<ScalarType, bool> parse_dtype(const std::string& name_in) {
  std::string name = name_in.rfind("torch.", 0) == 0 ? name_in.substr(6) : name_in;
  constexpr const char* kTf32Suffix = "+tf32";
  const bool tf32_suffix = name == std::string("float32") + kTf32Suffix;
  if (tf32_suffix) name = "float32";
  const bool tf32 = tf32_suffix;
  if (name == "float32" || name == "float") return {ScalarType::Float, tf32};
  if (name == "float64" || name == "double") return {ScalarType::Double, tf32};
  if (name == "float16" || name == "half") return {ScalarType::Half, tf32};
  if (name == "bfloat16") return {ScalarType::BFloat16, tf32};
  CUDA_KERNELS_CHECK(false, "cuda_kernels.matmul: unknown dtype name '", name_in,
                     "'; use float32, float32+tf32, float64, float16 or bfloat16");
  return {ScalarType::Float, tf32};
}

}  // namespace

Tensor matmul_cuda(const Tensor& a, const Tensor& b, int64_t variant, bool allow_tf32) {
  check_matmul_inputs(a, b);
  const GpuInfo& gpu = gpu_info(a.get_device_index());
  const bool tf32 = a.scalar_type() == ScalarType::Float && allow_tf32;
  check_variant(variant, a.scalar_type(), gpu, tf32);
  const torch::stable::accelerator::DeviceGuard guard(a.get_device_index());
  const int64_t d = a.dim() - 2;  // the first matrix dimension (1 for a batch)
  const int64_t M = a.size(d), K = a.size(d + 1), N = b.size(d + 1);
  const int64_t batch = d == 1 ? a.size(0) : 1;
  const std::vector<int64_t> shape = matmul_output_shape(a, b);
  // K = 0 never reaches a kernel (they assume K >= 1): an empty sum is 0, as in torch.mm.
  if (K == 0) return torch::stable::new_zeros(a, shape);
  Tensor c = new_output(a, shape);
  if (batch > 0 && M > 0 && N > 0) {
    const int64_t mnk[3] = {M, N, K};
    const Kernel& kernel = variant == 0 ? pick_kernel(a.scalar_type(), gpu, tf32, mnk, nullptr) : kKernels[variant - 1];
    launch(a, b, c, kernel);
  }
  return c;
}

Tensor linear_cuda(const Tensor& x, const Tensor& weight, const OptTensor& bias_in,
                   const std::optional<std::string>& activation, bool allow_tf32) {
  const LinearCall call = check_linear_inputs(x, weight, bias_in, activation);
  const GpuInfo& gpu = gpu_info(x.get_device_index());
  const bool tf32 = x.scalar_type() == ScalarType::Float && allow_tf32;
  const torch::stable::accelerator::DeviceGuard guard(x.get_device_index());
  const int64_t M = call.M, N = call.N, K = call.K;
  Tensor out = new_output(x, call.out);
  if (M == 0 || N == 0) return out;
  const bool swiglu = call.act == Activation::kSwiglu;
  const int64_t z_shape[2] = {M, N};
  // z = x @ weight.T (+ bias, and the activation where the kernel fuses them): the output itself (launch reads only
  // its data and device: a contiguous (..., N) is (M, N) as it lies), or for swiglu a temporary that the gating
  // pass halves. Each torch::stable view is a boxed call costing the calling thread a microsecond or more, so none
  // is made that the kernel does not need.
  Tensor z = swiglu ? new_output(x, z_shape) : out;
  const std::optional<Tensor> bias = contiguous_or_none(bias_in);
  const void* bias_ptr = bias.has_value() ? bias->const_data_ptr() : nullptr;
  const Activation elementwise = swiglu ? Activation::kNone : call.act;
  bool fused = false;
  if (K == 0) {
    torch::stable::zero_(z);  // an empty sum is 0; the epilogue below still applies
  } else {
    const int64_t mnk[3] = {M, N, K};
    const Kernel& kernel = pick_kernel(x.scalar_type(), gpu, tf32, mnk, nullptr);
    // x as (M, K): a view when its leading dims fold into one; weight.T as (K, N), a view (K-major B).
    const int64_t x_shape[2] = {M, K};
    const Tensor a = x.dim() == 2 ? x : torch::stable::reshape(x, x_shape);
    const Tensor b = torch::stable::transpose(weight, 0, 1);
    fused = kernel.requirements & kFusedEpilogue;
    launch(a, b, z, kernel, fused ? bias_ptr : nullptr, fused ? elementwise : Activation::kNone);
  }
  const Dtype dtype = ladder_dtype(x.scalar_type());
  cudaStream_t stream = current_stream(x.get_device_index());
  if (swiglu) {
    // The gating pass adds the bias itself where the kernel did not.
    matmul_ladder::apply_swiglu(dtype, z.const_data_ptr(), M, N, fused ? nullptr : bias_ptr, out.mutable_data_ptr(),
                                stream);
  } else if (!fused) {
    matmul_ladder::apply_epilogue(dtype, z.mutable_data_ptr(), M, N, bias_ptr, elementwise, stream);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// The Python package's questions (private ops, csrc/api.cpp)
// ---------------------------------------------------------------------------------------------------------------

std::tuple<std::vector<int64_t>, std::vector<std::string>, std::vector<std::string>> matmul_kernels() {
  std::tuple<std::vector<int64_t>, std::vector<std::string>, std::vector<std::string>> out;
  auto& [variants, names, dtypes] = out;
  for (const Kernel& k : kKernels) {
    variants.push_back(k.variant);
    names.emplace_back(k.name);
    std::string takes;
    for (const ScalarType t : kAllScalarTypes) {
      if (k.dtypes & dtype_bit_of(t)) takes += (takes.empty() ? "" : ",") + std::string(dtype_name_of(t));
    }
    dtypes.push_back(takes);
  }
  return out;
}

std::tuple<int64_t, std::string, std::string> matmul_default_kernel(std::string dtype_name, int64_t device) {
  std::string reason;
  const auto [dtype, tf32] = parse_dtype(dtype_name);
  const Kernel& kernel = pick_kernel(dtype, gpu_info(device), tf32, nullptr, &reason);
  return {kernel.variant, kernel.name, reason};
}

std::string matmul_unmet_need(int64_t variant, std::string dtype_name, int64_t device) {
  CUDA_KERNELS_CHECK(variant >= 1 && variant <= kNumKernels, "cuda_kernels.matmul: unknown variant ", variant);
  const auto [dtype, tf32] = parse_dtype(dtype_name);
  return unmet_need(kKernels[variant - 1], dtype, gpu_info(device), tf32);
}

std::string matmul_tuning(std::string knob, std::string value) {
  return matmul_ladder::set_tuning(knob, value);
}

std::string cuda_build_version() {
  // CUDART_VERSION is e.g. 13000 for 13.0.
  return std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10);
}

std::string cuda_archs_tag() {
#define CUDA_KERNELS_STR_(x) #x
#define CUDA_KERNELS_STR(x) CUDA_KERNELS_STR_(x)
  return CUDA_KERNELS_STR(CUDA_KERNELS_ARCHS);
#undef CUDA_KERNELS_STR
#undef CUDA_KERNELS_STR_
}

}  // namespace cuda_kernels
