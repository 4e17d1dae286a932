// Input validation shared by the CPU and CUDA implementations, so both devices give the same clear errors.
// Every message starts with the op's name, e.g. "cuda_kernels.matmul: ...".
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <c10/util/safe_numerics.h>

#include <cstdint>
#include <limits>
#include <string>

#include "cuda/matmul/ladder.h"

#ifndef CUDA_KERNELS_ARCHS
#define CUDA_KERNELS_ARCHS none
#endif

namespace cuda_kernels {

inline bool is_supported_float(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

inline void check_float_input(const char* op, const char* name, const at::Tensor& t) {
  TORCH_CHECK(t.defined(), op, ": ", name, " is an undefined tensor");
  TORCH_CHECK(is_supported_float(t.scalar_type()), op, ": ", name,
              " must be float32, float64, float16 or bfloat16, got ", t.scalar_type());
}

// The output (sizes, elements of `itemsize` bytes) must fit in one tensor: its byte count must fit in int64.
// Huge sizes come from expanded (stride-0) or meta inputs; without this check the error would come from
// the allocator and not name the op.
inline void check_output_fits(const char* op, c10::IntArrayRef sizes, int64_t itemsize) {
  uint64_t numel = 0, nbytes = 0;
  const bool overflow = c10::safe_multiplies_u64(sizes, &numel) ||
                        c10::mul_overflows(numel, static_cast<uint64_t>(itemsize), &nbytes) ||
                        nbytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  TORCH_CHECK(!overflow, op, ": the output would have shape ", sizes, " (", itemsize,
              " bytes per element): more bytes than a tensor can hold (2^63 - 1)");
}

inline void check_square_input(const at::Tensor& x) {
  check_float_input("cuda_kernels.square", "x", x);
  check_output_fits("cuda_kernels.square", x.sizes(), static_cast<int64_t>(x.element_size()));
}

inline void check_matmul_inputs(const at::Tensor& a, const at::Tensor& b) {
  constexpr const char* op = "cuda_kernels.matmul";
  check_float_input(op, "a", a);
  check_float_input(op, "b", b);
  TORCH_CHECK(a.dim() == 2, op, ": a must be 2-D (M, K), got ", a.dim(), "-D with shape ", a.sizes());
  TORCH_CHECK(b.dim() == 2, op, ": b must be 2-D (K, N), got ", b.dim(), "-D with shape ", b.sizes());
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), op, ": a and b must have the same dtype, got ", a.scalar_type(),
              " and ", b.scalar_type());
  TORCH_CHECK(a.device() == b.device(), op, ": a and b must be on the same device, got ", a.device(), " and ",
              b.device());
  TORCH_CHECK(a.size(1) == b.size(0), op, ": inner dimensions differ: a is ", a.sizes(), " and b is ", b.sizes(),
              " (a.shape[1] must equal b.shape[0])");
  check_output_fits(op, {a.size(0), b.size(1)}, static_cast<int64_t>(a.element_size()));
}

// ---------------------------------------------------------------------------------------------------------------
// matmul's variant argument on CUDA: which ladder step runs, and whether it can (csrc/cuda/matmul/ladder.h).

// The ladder's Dtype (csrc/cuda/matmul/args.h) of a dtype is_supported_float accepts.
inline matmul_ladder::Dtype ladder_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return matmul_ladder::Dtype::kFloat32;
    case at::kDouble:
      return matmul_ladder::Dtype::kFloat64;
    case at::kHalf:
      return matmul_ladder::Dtype::kFloat16;
    case at::kBFloat16:
      return matmul_ladder::Dtype::kBFloat16;
    default:
      TORCH_CHECK(false, "cuda_kernels.matmul: the kernel ladder does not compute ", t);
  }
}

// The torch dtype of a ladder Dtype (ladder_dtype's inverse).
inline at::ScalarType scalar_type_of(matmul_ladder::Dtype d) {
  switch (d) {
    case matmul_ladder::Dtype::kFloat32:
      return at::kFloat;
    case matmul_ladder::Dtype::kFloat64:
      return at::kDouble;
    case matmul_ladder::Dtype::kFloat16:
      return at::kHalf;
    case matmul_ladder::Dtype::kBFloat16:
      return at::kBFloat16;
  }
  return at::kFloat;
}

// torch's name of a dtype ("float32", not ScalarType's "Float"), as users write it.
inline const char* matmul_dtype_name(at::ScalarType t) {
  return is_supported_float(t) ? matmul_ladder::dtype_name(ladder_dtype(t)) : c10::toString(t);
}

// The CUDA archs this binary was compiled for, from the build's arch tag (cuda_kernels/_build_config.py arch_tag:
// "80__90a" for "8.0;9.0a", "90_PTX" for "9.0+PTX"), written as "sm_80, sm_90a".
inline std::string built_archs() {
#define CUDA_KERNELS_CHECKS_STR_(x) #x
#define CUDA_KERNELS_CHECKS_STR(x) CUDA_KERNELS_CHECKS_STR_(x)
  const std::string tag = CUDA_KERNELS_CHECKS_STR(CUDA_KERNELS_ARCHS);
#undef CUDA_KERNELS_CHECKS_STR
#undef CUDA_KERNELS_CHECKS_STR_
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

// t's bit in a step's `dtypes` mask; 0 for dtypes the ladder does not know.
inline unsigned ladder_dtype_bit(at::ScalarType t) {
  return is_supported_float(t) ? matmul_ladder::dtype_bit(ladder_dtype(t)) : 0u;
}

// What ladder step `step` needs that a call with `dtype` on `gpu` does not have, as the end of a sentence that
// starts with the step ("supports float16 and bfloat16, got float32"); empty when it can run.
// tf32: whether torch allows TF32 for float32 matmul now (at::globalContext().allowTF32CuBLAS()).
inline std::string matmul_step_unmet_need(const matmul_ladder::Step& step, at::ScalarType dtype,
                                          const matmul_ladder::GpuInfo& gpu, bool tf32) {
  if (!(step.dtypes & ladder_dtype_bit(dtype))) {
    std::string takes;
    const at::ScalarType all[] = {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16};
    int n = 0, count = 0;
    for (const at::ScalarType t : all) count += (step.dtypes & ladder_dtype_bit(t)) ? 1 : 0;
    for (const at::ScalarType t : all) {
      if (!(step.dtypes & ladder_dtype_bit(t))) continue;
      takes += std::string(n == 0 ? "" : n == count - 1 ? " and " : ", ") + matmul_dtype_name(t);
      ++n;
    }
    return "supports " + takes + ", got " + matmul_dtype_name(dtype);
  }
  if ((step.requirements & matmul_ladder::kTf32Math) && !tf32) {
    return "computes float32 in TF32, which torch does not allow now: set torch.backends.cuda.matmul.allow_tf32 = "
           "True (or torch.set_float32_matmul_precision(\"high\"))";
  }
  const auto cc_text = [](int cc) { return std::to_string(cc / 10) + "." + std::to_string(cc % 10); };
  if (gpu.cc < step.min_cc) {
    return "needs compute capability >= " + cc_text(step.min_cc) + ", this GPU (" + gpu.name + ") is " +
           cc_text(gpu.cc);
  }
  if (step.available && !step.available(gpu.device)) {
    return std::string("needs ") + (step.needs ? step.needs : "what this binary or GPU lacks") +
           " (this binary was built for " + built_archs() + "; this GPU (" + gpu.name + ") is compute " +
           cc_text(gpu.cc) + ")";
  }
  return "";
}

// variant = 0 (auto) or a step of `ladder` that can run `dtype` on `gpu`; anything else is an error naming the op,
// the step and why, e.g. "cuda_kernels.matmul: variant 7 (07_mma_sync) supports float16 and bfloat16, got float32".
inline void check_matmul_variant(int64_t variant, c10::ArrayRef<matmul_ladder::Step> ladder, at::ScalarType dtype,
                                 const matmul_ladder::GpuInfo& gpu, bool tf32) {
  constexpr const char* op = "cuda_kernels.matmul";
  if (variant < 0 || variant > static_cast<int64_t>(ladder.size())) {
    std::string known;
    for (const matmul_ladder::Step& s : ladder)
      known += (known.empty() ? "" : ", ") + std::to_string(s.variant) + " (" + s.name + ")";
    TORCH_CHECK(false, op, ": unknown variant ", variant, "; use 0 (auto) or one of ", known);
  }
  if (variant == 0) return;
  const matmul_ladder::Step& step = ladder[variant - 1];
  const std::string why_not = matmul_step_unmet_need(step, dtype, gpu, tf32);
  TORCH_CHECK(why_not.empty(), op, ": variant ", variant, " (", step.name, ") ", why_not);
}

}  // namespace cuda_kernels
