// The CUDA ops as registered in csrc/api.cpp: validation, device guard and output allocation (host code built by
// the C++ compiler), then the kernel launchers of csrc/cuda/*.cu, which include no ATen header.
#include <ATen/Context.h>
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "checks.h"
#include "cuda/elementwise.h"
#include "cuda/square.h"
#include "cuda/utils.cuh"
#include "ops.h"
// The kernel headers of the ops `python -m cuda_kernels.new` added (it keeps them sorted, as clang-format would):
// cuda_kernels.new: kernel headers above this line

namespace cuda_kernels {

namespace {

// Drops size-1 dims and merges dim d into d+1 when they step through memory as one dim.
// Returns ndim > kMaxDims (and no sizes) when even the merged layout does not fit.
StridedLayout coalesce(const at::Tensor& x) {
  std::vector<int64_t> sizes, strides;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (x.size(d) == 1) continue;
    if (!sizes.empty() && strides.back() == x.stride(d) * x.size(d)) {
      sizes.back() *= x.size(d);
      strides.back() = x.stride(d);
    } else {
      sizes.push_back(x.size(d));
      strides.push_back(x.stride(d));
    }
  }
  StridedLayout out{};
  out.ndim = static_cast<int>(sizes.size());
  for (int d = 0; d < out.ndim && d < kMaxDims; ++d) {
    out.sizes[d] = sizes[d];
    out.strides[d] = strides[d];
  }
  return out;
}

// The host side of an elementwise op whose input passed its checks (square, and every op `python -m
// cuda_kernels.new` adds): device guard, a contiguous output, the input's layout, 32- or 64-bit indexing, the dtype
// switch, then launch(in, out, n, strided, index32, blocks_per_wave, stream) with typed pointers, which the op's
// launcher template in csrc/cuda/<op>.h takes (`threads`: its block size, for the wave). The kernel file then needs
// no ATen, and this, with ATen's headers, is compiled once for every op.
template <typename Launch>
at::Tensor elementwise_cuda(const at::Tensor& x_in, int threads, const Launch& launch) {
  const c10::cuda::CUDAGuard guard(x_in.device());
  at::Tensor out = at::empty(x_in.sizes(), x_in.options().memory_format(at::MemoryFormat::Contiguous));
  if (x_in.numel() == 0) return out;
  StridedLayout layout = x_in.is_contiguous() ? StridedLayout{} : coalesce(x_in);
  // Rare: more non-mergeable dims than the strided kernel carries; copy to contiguous first.
  const bool too_many_dims = layout.ndim > kMaxDims;
  const at::Tensor x = too_many_dims ? x_in.contiguous() : x_in;
  // Dense from its data pointer: contiguous, or every dim merged into one unit-stride dim.
  const bool dense = too_many_dims || x.is_contiguous() || (layout.ndim == 1 && layout.strides[0] == 1);
  // 32-bit indices while every index and offset fits (with headroom for base + u * threads); 64-bit beyond.
  int64_t max_offset = 0;  // the largest element offset from the data pointer that the kernel reads
  for (int64_t d = 0; d < x.dim(); ++d) max_offset += (x.size(d) - 1) * x.stride(d);
  const bool index32 = std::max(x.numel(), max_offset) < (int64_t{1} << 30);
  const int64_t wave = blocks_per_wave(x.get_device(), threads);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(x.get_device()).stream();
  // (The op's input check has rejected other dtypes, so the switch's own error, which names it, is not reached.)
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "cuda_kernels elementwise op", [&] {
    C10_CUDA_CHECK(launch(x.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), x.numel(),
                          dense ? nullptr : &layout, index32, wave, stream));
  });
  return out;
}

}  // namespace

// An elementwise op's CUDA function: its input check, then elementwise_cuda with the op's launcher (a generic lambda:
// elementwise_cuda calls it with each dtype's pointers).
at::Tensor square_cuda(const at::Tensor& x) {
  check_square_input(x);
  namespace kernels = square_launch;  // csrc/cuda/square.h
  const auto launch = [](const auto* in, auto* out, auto... rest) { return kernels::launch(in, out, rest...); };
  return elementwise_cuda(x, kernels::kThreads, launch);
}

// cuda_kernels.new: CUDA host functions above this line

std::vector<std::pair<int64_t, std::string>> matmul_cuda_variants() {
  std::vector<std::pair<int64_t, std::string>> out;
  for (const matmul_ladder::Step& s : matmul_cuda_ladder()) out.emplace_back(s.variant, s.name);
  return out;
}

namespace {

// The GPU at `device` (-1: the current one) as the ladder's checks see it, read once per device (every matmul call
// asks).
const matmul_ladder::GpuInfo& gpu_info(int64_t device) {
  const int64_t count = c10::cuda::device_count();
  TORCH_CHECK(device >= -1 && device < count, "cuda_kernels.matmul: no CUDA device ", device, " (", count, " visible)");
  const int index = device == -1 ? c10::cuda::current_device() : static_cast<int>(device);
  constexpr int kMaxDevices = 64;
  static std::once_flag read[kMaxDevices];
  static matmul_ladder::GpuInfo cache[kMaxDevices];
  static thread_local matmul_ladder::GpuInfo uncached;  // devices beyond kMaxDevices: read every time
  const auto read_into = [index](matmul_ladder::GpuInfo& info) {
    cudaDeviceProp prop;
    C10_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    info = {index, prop.major * 10 + prop.minor, prop.name};
  };
  if (index >= kMaxDevices) {
    read_into(uncached);
    return uncached;
  }
  std::call_once(read[index], read_into, std::ref(cache[index]));
  return cache[index];
}

// Whether torch allows TF32 for float32 matmul now (torch.backends.cuda.matmul.allow_tf32, or the float32 matmul
// precision "high"/"medium"): what torch.mm reads before calling cuBLAS.
bool tf32_allowed() {
  return at::globalContext().allowTF32CuBLAS();
}

// A dtype name of the _C queries as (dtype, TF32 allowed): "float32+tf32" is float32 with TF32 allowed, any other
// name takes TF32 as torch allows it now.
std::pair<at::ScalarType, bool> parse_dtype(const std::string& name_in) {
  std::string name = name_in.rfind("torch.", 0) == 0 ? name_in.substr(6) : name_in;
  constexpr const char* kTf32Suffix = "+tf32";
  const bool tf32_suffix = name == std::string("float32") + kTf32Suffix;
  if (tf32_suffix) name = "float32";
  const bool tf32 = tf32_suffix || tf32_allowed();
  if (name == "float32" || name == "float") return {at::kFloat, tf32};
  if (name == "float64" || name == "double") return {at::kDouble, tf32};
  if (name == "float16" || name == "half") return {at::kHalf, tf32};
  if (name == "bfloat16") return {at::kBFloat16, tf32};
  TORCH_CHECK(false, "cuda_kernels.matmul: unknown dtype name '", name_in,
              "'; use float32, float32+tf32, float64, float16 or bfloat16");
  return {at::kFloat, tf32};
}

}  // namespace

std::tuple<int64_t, std::string, std::string> matmul_cuda_default_step_info(const std::string& dtype_name,
                                                                            int64_t device) {
  std::string reason;
  const auto [dtype, tf32] = parse_dtype(dtype_name);
  const matmul_ladder::Step& step = matmul_cuda_default_step(dtype, gpu_info(device), tf32, nullptr, &reason);
  return {step.variant, step.name, reason};
}

std::string matmul_cuda_variant_unmet_need(int64_t variant, const std::string& dtype_name, int64_t device) {
  const auto ladder = matmul_cuda_ladder();
  TORCH_CHECK(variant >= 1 && variant <= static_cast<int64_t>(ladder.size()), "cuda_kernels.matmul: unknown variant ",
              variant);
  const auto [dtype, tf32] = parse_dtype(dtype_name);
  return matmul_step_unmet_need(ladder[variant - 1], dtype, gpu_info(device), tf32);
}

std::vector<std::pair<int64_t, std::vector<std::string>>> matmul_cuda_variant_dtypes() {
  std::vector<std::pair<int64_t, std::vector<std::string>>> out;
  for (const matmul_ladder::Step& s : matmul_cuda_ladder()) {
    std::vector<std::string> names;
    for (const at::ScalarType t : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16})
      if (s.dtypes & ladder_dtype_bit(t)) names.emplace_back(matmul_dtype_name(t));
    out.emplace_back(s.variant, std::move(names));
  }
  return out;
}

at::Tensor matmul_cuda(const at::Tensor& a, const at::Tensor& b, int64_t variant) {
  check_matmul_inputs(a, b);
  const matmul_ladder::GpuInfo& gpu = gpu_info(a.device().index());
  const bool tf32 = a.scalar_type() == at::kFloat && tf32_allowed();
  check_matmul_variant(variant, matmul_cuda_ladder(), a.scalar_type(), gpu, tf32);
  const c10::cuda::CUDAGuard guard(a.device());
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  // K = 0 never reaches a kernel (they assume K >= 1): an empty sum is 0, as in torch.mm.
  if (K == 0) return at::zeros({M, N}, a.options());
  at::Tensor c = at::empty({M, N}, a.options());
  if (M > 0 && N > 0) {
    const int64_t shape[2] = {M, N};
    const matmul_ladder::Step& step = variant == 0
                                          ? matmul_cuda_default_step(a.scalar_type(), gpu, tf32, shape, nullptr)
                                          : matmul_cuda_ladder()[variant - 1];
    matmul_cuda_launch(a, b, c, step);
  }
  return c;
}

}  // namespace cuda_kernels
