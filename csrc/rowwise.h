// Host-side helpers of the row-wise ops (rms_norm, and those `python -m cuda_kernels.new NAME --kind rowwise`
// writes), shared by their CPU and CUDA functions: how a tensor of any shape and strides becomes rows of its last
// dimension. The CUDA kernels' side of the pattern is csrc/cuda/rowwise.cuh; docs/rowwise.md has both.
#pragma once

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <cstdint>
#include <optional>

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

}  // namespace cuda_kernels
