// rms_norm(x, weight, eps) on the CPU, forward and backward: plain loops over each row in the arithmetic type
// (float for half and bfloat16, as on CUDA; its sums in double), rows split across torch's threads. The CPU path is for
// correctness everywhere, not speed (docs/rowwise.md); the CUDA kernels are csrc/cuda/rms_norm.cu.
#include <torch/csrc/stable/ops.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <cmath>
#include <optional>
#include <tuple>
#include <vector>

#include "checks.h"
#include "cuda/opmath.h"
#include "ops.h"
#include "rowwise.h"

namespace cuda_kernels {
namespace {

// 1 / sqrt(mean(row^2) + eps). The sum is kept in double: a sequential float sum over a long row drifts by about
// sqrt(n) float32 ulps (the CUDA kernels sum in a tree, which does not).
template <typename T>
opmath_type<T> inv_rms(const T* row, int64_t n, opmath_type<T> eps) {
  double sum_sq = 0;
  for (int64_t j = 0; j < n; ++j) {
    const double v = static_cast<double>(static_cast<opmath_type<T>>(row[j]));
    sum_sq += v * v;
  }
  return static_cast<opmath_type<T>>(1.0 / std::sqrt(sum_sq / static_cast<double>(n) + static_cast<double>(eps)));
}

template <typename T>
void forward(const T* x, const T* w, T* y, const RowView& rows, double eps) {
  using A = opmath_type<T>;
  torch::stable::parallel_for(0, rows.rows, parallel_grain(rows.n), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const T* xr = x + i * rows.stride;
      T* yr = y + i * rows.n;
      const A r = inv_rms(xr, rows.n, static_cast<A>(eps));
      for (int64_t j = 0; j < rows.n; ++j) {
        A v = static_cast<A>(xr[j]) * r;
        if (w != nullptr) v *= static_cast<A>(w[j]);
        yr[j] = static_cast<T>(v);
      }
    }
  });
}

// dx row by row; then dw column by column (each a sum over the rows in order, so the result does not depend on the
// thread count), from the rows' rsqrt kept in `inv`.
template <typename T>
void backward(const T* dy, const T* x, const T* w, T* dx, T* dw, const RowView& rows, double eps) {
  using A = opmath_type<T>;
  std::vector<A> inv(rows.rows);
  const A n = static_cast<A>(rows.n);
  torch::stable::parallel_for(0, rows.rows, parallel_grain(rows.n), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const T* xr = x + i * rows.stride;
      const T* gr = dy + i * rows.stride;
      T* dxr = dx + i * rows.n;
      const A r = inv_rms(xr, rows.n, static_cast<A>(eps));
      inv[i] = r;
      double dot = 0;  // sum (dy * w) * x over the row, in double as inv_rms's sum
      for (int64_t j = 0; j < rows.n; ++j) {
        const A g = static_cast<A>(gr[j]) * (w != nullptr ? static_cast<A>(w[j]) : A(1));
        dot += static_cast<double>(g * static_cast<A>(xr[j]));
      }
      const A c = static_cast<A>(dot) * r * r * r / n;
      for (int64_t j = 0; j < rows.n; ++j) {
        const A g = static_cast<A>(gr[j]) * (w != nullptr ? static_cast<A>(w[j]) : A(1));
        dxr[j] = static_cast<T>(g * r - static_cast<A>(xr[j]) * c);
      }
    }
  });
  if (w == nullptr) return;
  torch::stable::parallel_for(0, rows.n, parallel_grain(rows.rows), [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      double sum = 0;
      for (int64_t i = 0; i < rows.rows; ++i) {
        sum += static_cast<double>(static_cast<A>(dy[i * rows.stride + j]) * static_cast<A>(x[i * rows.stride + j]) *
                                   inv[i]);
      }
      dw[j] = static_cast<T>(sum);
    }
  });
}

}  // namespace

// The host side (outputs, rows, weight, dtype switch) is csrc/rowwise.h's, shared with the CUDA functions.
Tensor rms_norm_cpu(const Tensor& x, const std::optional<Tensor>& weight, std::optional<double> eps) {
  check_rms_norm_inputs(x, weight);
  const double e = eps.value_or(default_eps(x.scalar_type()));
  return rowwise_forward(
      x, weight, [&](const auto* xp, const auto* wp, auto* yp, const RowView& rows) { forward(xp, wp, yp, rows, e); });
}

std::tuple<Tensor, Tensor> rms_norm_backward_cpu(const Tensor& grad, const Tensor& x,
                                                 const std::optional<Tensor>& weight, std::optional<double> eps) {
  check_rms_norm_backward_inputs(grad, x, weight);
  const double e = eps.value_or(default_eps(x.scalar_type()));
  return rowwise_backward(grad, x, weight,
                          [&](const auto* dy, const auto* xp, const auto* wp, auto* dx, auto* dw, const RowView& rows) {
                            backward(dy, xp, wp, dx, dw, rows, e);
                          });
}

}  // namespace cuda_kernels
