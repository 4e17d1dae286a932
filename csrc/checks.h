// Input validation shared by the CPU and CUDA implementations, so both devices give the same clear errors.
// Every message starts with the op's name, e.g. "cuda_kernels.matmul: ...". And named<op, fn>, which makes an
// error raised below an op name it too.
//
// Host code is written on the LibTorch stable ABI (torch/csrc/stable/, torch/headeronly/): the binary calls torch
// only through its C shim, so one build loads under every torch from TORCH_TARGET_VERSION on (docs/debugging.md,
// "The stable ABI").
#pragma once

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/macros.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "epilogue.h"
#include "fail.h"

namespace cuda_kernels {

using torch::stable::Tensor;
using OptTensor = std::optional<Tensor>;   // an optional input (Tensor? in the schema)
using Grads = std::tuple<Tensor, Tensor>;  // a row-wise backward's (dx, dweight)
using ScalarType = torch::headeronly::ScalarType;

// named<kOp, fn>: fn, registered for the op named kOp (csrc/api.cpp). An error raised below it that does not name
// the op (the allocator out of memory, a failed kernel launch) gets "(raised inside cuda_kernels.<op>)" added.
template <const char* kOp, auto kFn>
struct Named;
template <const char* kOp, typename R, typename... Args, R (*kFn)(Args...)>
struct Named<kOp, kFn> {
  static R call(Args... args) {
    try {
      return kFn(std::forward<Args>(args)...);
    } catch (const std::exception& e) {
      const std::string what = e.what();
      if (what.find(kOp) != std::string::npos) throw;
      throw std::runtime_error(what + " (raised inside " + kOp + ")");
    }
  }
};
template <const char* kOp, auto kFn>
constexpr auto named = &Named<kOp, kFn>::call;

// A tensor's shape as torch prints it: "[3, 4]".
inline std::string shape_str(const Tensor& t) {
  std::ostringstream out;
  out << "[";
  for (int64_t d = 0; d < t.dim(); ++d) out << (d ? ", " : "") << t.size(d);
  out << "]";
  return out.str();
}

// A tensor's device as torch prints it: "cpu", "cuda:0".
inline std::string device_str(const Tensor& t) {
  if (t.is_cpu()) return "cpu";
  return (t.is_cuda() ? std::string("cuda:") : std::string("device:")) + std::to_string(t.get_device_index());
}

// Torch's message for the shim call that just failed, or nullptr: torch_exception_get_what_without_backtrace came
// in torch 2.13, after this build's target, so it is looked up at run time (as the stable ABI's own
// TORCH_DYNAMIC_VERSION_CALL does, a macro that torch 2.11's headers lack); older torches print the message to stderr.
inline const char* torch_error_message() {
  using Getter = const char* (*)();
  static const auto getter =
      reinterpret_cast<Getter>(dlsym(RTLD_DEFAULT, "torch_exception_get_what_without_backtrace"));
  return getter != nullptr ? getter() : nullptr;
}

// Raises the error of an output that torch's allocator refused (out of memory, usually), naming its shape, bytes and
// device, with torch's own message where the running torch passes it on.
[[noreturn]] inline void output_allocation_failed(const Tensor& like, const std::vector<int64_t>& size) {
  const char* message = torch_error_message();
  int64_t bytes = static_cast<int64_t>(like.element_size());
  for (const int64_t s : size) bytes *= s;
  std::ostringstream shape;
  shape << "[";
  for (size_t d = 0; d < size.size(); ++d) shape << (d ? ", " : "") << size[d];
  shape << "]";
  fail("could not allocate the output (shape ", shape.str(), ", ", bytes, " bytes on ", device_str(like), "): ",
       message != nullptr ? message
                          : "torch's allocator failed; its message is on stderr (torch < 2.13 keeps it there)");
}

// A new contiguous tensor of `sizes` with like's dtype and device, uninitialized: torch::stable::new_empty without its
// trip through the dispatcher (a boxed call of aten::new_empty), through the C shim's allocator entry point, which on
// tiny tensors is a visible share of an op's host time (docs/benchmarks.md, "Host time per call").
template <typename Sizes>
Tensor new_output(const Tensor& like, const Sizes& sizes) {
  int32_t dtype = 0, device_type = 0, device_index = 0;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(like.get(), &dtype));
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(like.get(), &device_type));
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_index(like.get(), &device_index));
  const std::vector<int64_t> size(std::begin(sizes), std::end(sizes));
  std::vector<int64_t> strides(size.size(), 1);
  for (int64_t d = static_cast<int64_t>(size.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * std::max<int64_t>(size[d + 1], 1);
  }
  AtenTensorHandle out = nullptr;
  if (aoti_torch_empty_strided(static_cast<int64_t>(size.size()), size.data(), strides.data(), dtype, device_type,
                               device_index, &out) != AOTI_TORCH_SUCCESS) {
    output_allocation_failed(like, size);
  }
  return Tensor(out);
}

inline bool is_supported_float(ScalarType t) {
  return t == ScalarType::Float || t == ScalarType::Double || t == ScalarType::Half || t == ScalarType::BFloat16;
}

inline void check_float_input(const char* op, const char* name, const Tensor& t) {
  CUDA_KERNELS_CHECK(t.defined(), op, ": ", name, " is an undefined tensor");
  CUDA_KERNELS_CHECK(is_supported_float(t.scalar_type()), op, ": ", name,
                     " must be float32, float64, float16 or bfloat16, got ", t.scalar_type());
}

// t (called `name`) is a float tensor with first's dtype and device (first, called first_name, is checked already):
// the inputs of an op that computes in one dtype on one device. An optional input (Tensor? in the schema) is checked
// when it is given.
inline void check_float_like(const char* op, const char* first_name, const Tensor& first, const char* name,
                             const Tensor& t) {
  check_float_input(op, name, t);
  CUDA_KERNELS_CHECK(t.scalar_type() == first.scalar_type(), op, ": ", first_name, " and ", name,
                     " must have the same dtype, got ", first.scalar_type(), " and ", t.scalar_type());
  CUDA_KERNELS_CHECK(t.device() == first.device(), op, ": ", first_name, " and ", name,
                     " must be on the same device, got ", device_str(first), " and ", device_str(t));
}
inline void check_float_like(const char* op, const char* first_name, const Tensor& first, const char* name,
                             const std::optional<Tensor>& t) {
  if (t.has_value()) check_float_like(op, first_name, first, name, *t);
}

// An optional input made contiguous (the tensor itself when it is), for kernels that index it as one flat array.
inline std::optional<Tensor> contiguous_or_none(const std::optional<Tensor>& t) {
  if (!t.has_value()) return std::nullopt;
  return torch::stable::contiguous(*t);
}

// An optional input's data as a kernel takes it: nullptr when the input is not given.
template <typename T>
const T* data_or_null(const std::optional<Tensor>& t) {
  return t.has_value() ? t->const_data_ptr<T>() : nullptr;
}

// The output (sizes, elements of `itemsize` bytes) must fit in one tensor: its byte count must fit in int64.
// Huge sizes come from expanded (stride-0) or meta inputs; without this check the error would come from the
// allocator and not name the op.
template <typename Sizes>
void check_output_fits(const char* op, const Sizes& sizes, int64_t itemsize) {
  uint64_t bytes = static_cast<uint64_t>(itemsize);
  bool overflow = false;
  for (const int64_t s : sizes) overflow = overflow || __builtin_mul_overflow(bytes, static_cast<uint64_t>(s), &bytes);
  overflow = overflow || bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (!overflow) return;
  std::ostringstream shape;
  shape << "[";
  for (auto it = std::begin(sizes); it != std::end(sizes); ++it) shape << (it == std::begin(sizes) ? "" : ", ") << *it;
  shape << "]";
  fail(op, ": the output would have shape ", shape.str(), " (", itemsize,
       " bytes per element): more bytes than a tensor can hold (2^63 - 1)");
}

inline void check_square_input(const Tensor& x) {
  check_float_input("cuda_kernels.square", "x", x);
  check_output_fits("cuda_kernels.square", x.sizes(), static_cast<int64_t>(x.element_size()));
}

// matmul's output shape for checked operands: (M, N), or (batch, M, N).
inline std::vector<int64_t> matmul_output_shape(const Tensor& a, const Tensor& b) {
  if (a.dim() == 3) return {a.size(0), a.size(1), b.size(2)};
  return {a.size(0), b.size(1)};
}

// matmul's operands: a (M, K) and b (K, N), or a batch of them, a (batch, M, K) and b (batch, K, N) (the Python
// wrapper broadcasts torch.matmul's other shapes to these).
inline void check_matmul_inputs(const Tensor& a, const Tensor& b) {
  constexpr const char* op = "cuda_kernels.matmul";
  check_float_input(op, "a", a);
  check_float_input(op, "b", b);
  CUDA_KERNELS_CHECK(a.dim() == 2 || a.dim() == 3, op, ": a must be 2-D (M, K) or 3-D (batch, M, K), got ", a.dim(),
                     "-D with shape ", shape_str(a));
  CUDA_KERNELS_CHECK(b.dim() == a.dim(), op, ": b must be ", a.dim() == 2 ? "2-D (K, N)" : "3-D (batch, K, N)",
                     " as a is ", a.dim(), "-D, got ", b.dim(), "-D with shape ", shape_str(b));
  CUDA_KERNELS_CHECK(a.scalar_type() == b.scalar_type(), op, ": a and b must have the same dtype, got ",
                     a.scalar_type(), " and ", b.scalar_type());
  CUDA_KERNELS_CHECK(a.device() == b.device(), op, ": a and b must be on the same device, got ", device_str(a), " and ",
                     device_str(b));
  const int64_t d = a.dim() - 2;  // the first matrix dimension
  CUDA_KERNELS_CHECK(d == 0 || a.size(0) == b.size(0), op, ": a and b must have the same batch size, got ",
                     shape_str(a), " and ", shape_str(b));
  CUDA_KERNELS_CHECK(a.size(d + 1) == b.size(d), op, ": inner dimensions differ: a is ", shape_str(a), " and b is ",
                     shape_str(b), " (a.shape[-1] must equal b.shape[-2])");
  check_output_fits(op, matmul_output_shape(a, b), static_cast<int64_t>(a.element_size()));
}

// A row-wise op's inputs (rms_norm's, and those `python -m cuda_kernels.new --kind rowwise` writes): x of at least
// one dim, its rows the last dim; weight none, or 1-D of the row length with x's dtype and device. `what`: what the
// op does over the last dim, as the 0-d error says it.
inline void check_rowwise_inputs(const char* op, const char* what, const Tensor& x, const OptTensor& weight) {
  check_float_input(op, "x", x);
  CUDA_KERNELS_CHECK(x.dim() >= 1, op, ": x must have at least 1 dimension (it ", what, " over the last), got a 0-d ",
                     "tensor");
  if (weight.has_value()) {
    const Tensor& w = *weight;
    check_float_input(op, "weight", w);
    CUDA_KERNELS_CHECK(w.scalar_type() == x.scalar_type(), op, ": weight must have x's dtype (", x.scalar_type(),
                       "), got ", w.scalar_type());
    CUDA_KERNELS_CHECK(w.device() == x.device(), op, ": weight must be on x's device (", device_str(x), "), got ",
                       device_str(w));
    CUDA_KERNELS_CHECK(w.dim() == 1 && w.size(0) == x.size(x.dim() - 1), op,
                       ": weight must be 1-D with x.shape[-1] = ", x.size(x.dim() - 1), " elements, got shape ",
                       shape_str(w));
  }
  check_output_fits(op, x.sizes(), static_cast<int64_t>(x.element_size()));
}

// A row-wise backward's grad (`op`: the backward's name): x's shape, dtype and device.
inline void check_rowwise_grad(const char* op, const Tensor& grad, const Tensor& x) {
  check_float_input(op, "grad", grad);
  CUDA_KERNELS_CHECK(grad.scalar_type() == x.scalar_type() && grad.device() == x.device(), op,
                     ": grad must have x's dtype and device (", x.scalar_type(), " on ", device_str(x), "), got ",
                     grad.scalar_type(), " on ", device_str(grad));
  CUDA_KERNELS_CHECK(shape_str(grad) == shape_str(x), op, ": grad must have x's shape ", shape_str(x), ", got ",
                     shape_str(grad));
}

// rms_norm(x, weight, eps).
inline void check_rms_norm_inputs(const Tensor& x, const std::optional<Tensor>& weight) {
  check_rowwise_inputs("cuda_kernels.rms_norm", "normalizes", x, weight);
}

// rms_norm_backward(grad, x, weight, eps): the forward's checks, and grad of x's shape, dtype and device.
inline void check_rms_norm_backward_inputs(const Tensor& grad, const Tensor& x, const std::optional<Tensor>& weight) {
  check_rms_norm_inputs(x, weight);
  check_rowwise_grad("cuda_kernels.rms_norm_backward", grad, x);
}

// linear(x, weight, bias, activation): what the CPU and CUDA functions need once the inputs are checked.
struct LinearCall {
  int64_t M = 0;             // rows: the product of x's leading dims (1 for a 1-D x)
  int64_t K = 0;             // x.shape[-1] = weight.shape[1]
  int64_t N = 0;             // weight.shape[0]: columns of x @ weight.T
  std::vector<int64_t> out;  // the result's shape: x's leading dims, then N (N / 2 for swiglu)
  Activation act = Activation::kNone;
};

// The activation named `name` (None: kNone); anything else is an error that quotes it.
inline Activation parse_activation(const char* op, const std::optional<std::string>& name) {
  if (!name.has_value()) return Activation::kNone;
  for (int i = 1; i < static_cast<int>(std::size(kActivationNames)); ++i) {
    if (*name == kActivationNames[i]) return static_cast<Activation>(i);
  }
  fail(op, ": unknown activation '", *name, "'; use None, 'relu', 'gelu', 'gelu_tanh', 'silu' or 'swiglu'");
}

inline LinearCall check_linear_inputs(const Tensor& x, const Tensor& weight, const OptTensor& bias,
                                      const std::optional<std::string>& activation) {
  constexpr const char* op = "cuda_kernels.linear";
  LinearCall call;
  call.act = parse_activation(op, activation);
  check_float_input(op, "x", x);
  CUDA_KERNELS_CHECK(x.dim() >= 1, op, ": x must have at least 1 dimension (..., in_features), got a 0-d tensor");
  check_float_like(op, "x", x, "weight", weight);
  CUDA_KERNELS_CHECK(weight.dim() == 2, op, ": weight must be 2-D (out_features, in_features), got ", weight.dim(),
                     "-D with shape ", shape_str(weight));
  call.K = x.size(x.dim() - 1);
  call.N = weight.size(0);
  CUDA_KERNELS_CHECK(weight.size(1) == call.K, op, ": x's last dim (", call.K,
                     ") must equal weight's in_features (weight.shape[1] = ", weight.size(1), "); x is ", shape_str(x),
                     ", weight ", shape_str(weight));
  if (bias.has_value()) {
    check_float_like(op, "x", x, "bias", *bias);
    CUDA_KERNELS_CHECK(bias->dim() == 1 && bias->size(0) == call.N, op, ": bias must have shape [", call.N,
                       "] (weight's out_features), got ", shape_str(*bias));
  }
  CUDA_KERNELS_CHECK(call.act != Activation::kSwiglu || call.N % 2 == 0, op,
                     ": swiglu needs an even out_features (the gate rows, then the up rows of weight), got ", call.N);
  call.M = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) {
    call.M *= x.size(d);
    call.out.push_back(x.size(d));
  }
  call.out.push_back(call.act == Activation::kSwiglu ? call.N / 2 : call.N);
  check_output_fits(op, call.out, static_cast<int64_t>(x.element_size()));
  const int64_t z[2] = {call.M, call.N};  // x @ weight.T before swiglu halves it
  check_output_fits(op, z, static_cast<int64_t>(x.element_size()));
  return call;
}

// cuda_kernels.new: input checks above this line

}  // namespace cuda_kernels
