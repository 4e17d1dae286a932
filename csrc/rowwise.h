// Host-side helpers of the row-wise ops (rms_norm, and those `python -m cuda_kernels.new NAME --kind rowwise`
// writes), shared by their CPU and CUDA functions: how a tensor of any shape and strides becomes rows of its last
// dimension. The CUDA kernels' side of the pattern is csrc/cuda/rowwise.cuh; docs/rowwise.md has both.
#pragma once

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <tuple>

#include "checks.h"          // new_output
#include "cpu/kernel_api.h"  // dispatch_float

namespace cuda_kernels {

// x as rows of its last dimension: `rows` rows (the product of the leading dims; 1 for a 1-D x) of `n` elements,
// each contiguous, `stride` elements apart.
struct RowView {
  int64_t rows = 0;
  int64_t n = 0;
  int64_t stride = 0;
};

// x's rows when they can be read in place: the last dimension has unit stride (or one element) and the leading
// dimensions step through memory as one (size-1 dims are skipped). nullopt otherwise.
inline std::optional<RowView> row_view(const torch::stable::Tensor& x) {
  const int64_t d = x.dim();
  RowView v;
  v.n = x.size(d - 1);
  v.rows = 1;
  for (int64_t i = 0; i + 1 < d; ++i) v.rows *= x.size(i);
  if (v.n > 1 && x.stride(d - 1) != 1) return std::nullopt;
  // Walk the leading dims from the innermost: each (of size > 1) must be exactly `size * stride` of the one
  // inside it, the row stride being the innermost one's.
  v.stride = v.n;
  bool found = false;
  int64_t span = 0;  // elements one step of the dim just visited covers
  for (int64_t i = d - 2; i >= 0; --i) {
    if (x.size(i) == 1) continue;
    if (!found) {
      v.stride = x.stride(i);
      span = x.stride(i) * x.size(i);
      found = true;
    } else {
      if (x.stride(i) != span) return std::nullopt;
      span *= x.size(i);
    }
  }
  // Rows must not overlap (a stride below n, e.g. an expanded x): such rows are copied first.
  if (v.rows > 1 && v.stride < v.n) return std::nullopt;
  return v;
}

// Items per parallel task of a CPU loop whose items (rows, or columns) touch `per_item` elements each: about torch's
// grain (at::internal::GRAIN_SIZE) of elements a task, at least one item.
inline int64_t parallel_grain(int64_t per_item) {
  constexpr int64_t kGrainElements = 32768;
  return std::max<int64_t>(1, kGrainElements / std::max<int64_t>(per_item, 1));
}

// x itself when row_view reads it in place, else its contiguous copy; `view` gets its rows.
inline torch::stable::Tensor as_rows(const torch::stable::Tensor& x, RowView& view) {
  if (const auto v = row_view(x)) {
    view = *v;
    return x;
  }
  torch::stable::Tensor c = torch::stable::contiguous(x);
  view = *row_view(c);
  return c;
}

// The eps torch's rms_norm uses when none is given: the dtype's machine epsilon (torch.finfo(dtype).eps).
inline double default_eps(torch::headeronly::ScalarType dtype) {
  using torch::headeronly::ScalarType;
  switch (dtype) {
    case ScalarType::Double:
      return 2.220446049250313e-16;  // 2^-52
    case ScalarType::Half:
      return 0.0009765625;  // 2^-10
    case ScalarType::BFloat16:
      return 0.0078125;  // 2^-7
    default:
      return 1.1920928955078125e-07;  // float: 2^-23
  }
}

// The host side every row-wise forward y = f(x, weight) shares, on the CPU and on CUDA (whose function takes its
// device guard and stream first): a contiguous y of x's shape, nothing more for an empty x, x's rows (a copy only
// when they cannot be read in place), a contiguous weight, the dtype switch, then
// f(x, w, y, rows) with typed pointers (w: nullptr without a weight). Returns y.
template <typename F>
torch::stable::Tensor rowwise_forward(const torch::stable::Tensor& x_in,
                                      const std::optional<torch::stable::Tensor>& weight, const F& f) {
  torch::stable::Tensor y = new_output(x_in, x_in.sizes());
  if (x_in.numel() == 0) return y;
  RowView rows;
  const torch::stable::Tensor x = as_rows(x_in, rows);
  const std::optional<torch::stable::Tensor> w = contiguous_or_none(weight);
  cpu::dispatch_float(x.scalar_type(), [&](auto t) {
    using T = decltype(t);
    f(x.const_data_ptr<T>(), w ? w->const_data_ptr<T>() : nullptr, y.mutable_data_ptr<T>(), rows);
  });
  return y;
}

// The host side every row-wise backward shares: dx (contiguous, x's shape) and dweight (n elements with a weight,
// else empty: [0]); for an empty x, dweight is zeros (a sum over no rows). x and grad are read with one row stride
// (when their layouts differ, both as contiguous copies); then the dtype switch and
// f(grad, x, w, dx, dw, rows) with typed pointers (w and dw: nullptr without a weight). Returns (dx, dweight).
template <typename F>
std::tuple<torch::stable::Tensor, torch::stable::Tensor> rowwise_backward(
    const torch::stable::Tensor& grad, const torch::stable::Tensor& x_in,
    const std::optional<torch::stable::Tensor>& weight, const F& f) {
  torch::stable::Tensor dx = new_output(x_in, x_in.sizes());
  const int64_t dw_size[1] = {weight ? x_in.size(x_in.dim() - 1) : 0};
  torch::stable::Tensor dw = new_output(x_in, dw_size);
  if (x_in.numel() == 0) {
    if (weight) torch::stable::zero_(dw);
    return {dx, dw};
  }
  RowView rows, grad_rows;
  torch::stable::Tensor x = as_rows(x_in, rows);
  torch::stable::Tensor g = as_rows(grad, grad_rows);
  if (grad_rows.stride != rows.stride) {
    x = torch::stable::contiguous(x_in);
    g = torch::stable::contiguous(grad);
    rows = *row_view(x);
  }
  const std::optional<torch::stable::Tensor> w = contiguous_or_none(weight);
  cpu::dispatch_float(x.scalar_type(), [&](auto t) {
    using T = decltype(t);
    f(g.const_data_ptr<T>(), x.const_data_ptr<T>(), w ? w->const_data_ptr<T>() : nullptr, dx.mutable_data_ptr<T>(),
      w ? dw.mutable_data_ptr<T>() : nullptr, rows);
  });
  return {dx, dw};
}

}  // namespace cuda_kernels
