// Input validation shared by the CPU and CUDA implementations, so both devices give the same clear errors.
// Every message starts with the op's name, e.g. "cuda_kernels.matmul: ...". And named<op, fn>, which makes an
// error raised below an op name it too.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <c10/util/safe_numerics.h>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

namespace cuda_kernels {

// named<kOp, fn>: fn, registered for the op named kOp (csrc/api.cpp). An error raised below it that does not name
// the op (the allocator out of memory, a failed kernel launch) gets "(raised inside cuda_kernels.<op>)" added;
// `throw;` rethrows the original object, so Python still sees its type (e.g. torch.OutOfMemoryError).
template <const char* kOp, auto kFn>
struct Named;
template <const char* kOp, typename R, typename... Args, R (*kFn)(Args...)>
struct Named<kOp, kFn> {
  static R call(Args... args) {
    try {
      return kFn(std::forward<Args>(args)...);
    } catch (c10::Error& e) {
      if (e.msg().find(kOp) == std::string::npos) e.add_context(std::string("raised inside ") + kOp);
      throw;
    }
  }
};
template <const char* kOp, auto kFn>
constexpr auto named = &Named<kOp, kFn>::call;

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

}  // namespace cuda_kernels
