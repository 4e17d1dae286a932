// The CUDA host functions of the elementwise ops (square, and every op `python -m cuda_kernels.new` adds), as
// registered in csrc/api.cpp: validation, device guard and output allocation (host code built by the C++ compiler),
// then the op's kernel launcher in csrc/cuda/<op>.cu, which includes no ATen header. matmul's host function is in
// csrc/cuda/matmul/dispatch.cpp.
#include <cuda_runtime_api.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/ops.h>

#include <algorithm>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "checks.h"
#include "cpu/kernel_api.h"  // dispatch_float
#include "cuda/elementwise.h"
#include "cuda/rms_norm.h"
#include "cuda/square.h"
#include "cuda/stream.h"
#include "cuda/utils.cuh"
#include "ops.h"
#include "rowwise.h"
// The kernel headers of the ops `python -m cuda_kernels.new` added (it keeps them sorted, as clang-format would):
// cuda_kernels.new: kernel headers above this line

namespace cuda_kernels {

namespace {

// Drops size-1 dims and merges dim d into d+1 when they step through memory as one dim.
// Returns ndim > kMaxDims (and no sizes) when even the merged layout does not fit.
StridedLayout coalesce(const Tensor& x) {
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
// no torch header, and this, with torch's stable-ABI headers, is compiled once for every op.
template <typename Launch>
Tensor elementwise_cuda(const Tensor& x_in, int threads, const Launch& launch) {
  const int device = x_in.get_device_index();
  const torch::stable::accelerator::DeviceGuard guard(device);
  Tensor out = new_output(x_in, x_in.sizes());
  if (x_in.numel() == 0) return out;
  StridedLayout layout = x_in.is_contiguous() ? StridedLayout{} : coalesce(x_in);
  // Rare: more non-mergeable dims than the strided kernel carries; copy to contiguous first.
  const bool too_many_dims = layout.ndim > kMaxDims;
  const Tensor x = too_many_dims ? torch::stable::contiguous(x_in) : x_in;
  // Dense from its data pointer: contiguous, or every dim merged into one unit-stride dim.
  const bool dense = too_many_dims || x.is_contiguous() || (layout.ndim == 1 && layout.strides[0] == 1);
  // 32-bit indices while every index and offset fits (with headroom for base + u * threads); 64-bit beyond.
  int64_t max_offset = 0;  // the largest element offset from the data pointer that the kernel reads
  for (int64_t d = 0; d < x.dim(); ++d) max_offset += (x.size(d) - 1) * x.stride(d);
  const bool index32 = std::max(x.numel(), max_offset) < (int64_t{1} << 30);
  const int64_t wave = blocks_per_wave(device, threads);
  const cudaStream_t stream = current_stream(device);
  // (The op's input check has rejected other dtypes.)
  cpu::dispatch_float(x.scalar_type(), [&](auto t) {
    using scalar_t = decltype(t);
    CUDA_KERNELS_CUDA_CHECK(launch(x.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), x.numel(),
                                   dense ? nullptr : &layout, index32, wave, stream));
  });
  return out;
}

}  // namespace

// An elementwise op's CUDA function: its input check, then elementwise_cuda with the op's launcher (a generic lambda:
// elementwise_cuda calls it with each dtype's pointers).
Tensor square_cuda(const Tensor& x) {
  check_square_input(x);
  namespace kernels = square_launch;  // csrc/cuda/square.h
  const auto launch = [](const auto* in, auto* out, auto... rest) { return kernels::launch(in, out, rest...); };
  return elementwise_cuda(x, kernels::kThreads, launch);
}

namespace {

// A row-wise backward's `partial` (csrc/cuda/rowwise.cuh, write_partial_row): `parts` rows of n sums in the
// arithmetic type A, on like's device, kept alive by `holder` until the kernels that use it are queued.
template <typename A>
A* new_partial(const Tensor& like, int64_t parts, int64_t n, Tensor& holder) {
  const int64_t shape[2] = {parts, n};
  holder = torch::stable::new_empty(like, shape, sizeof(A) == 8 ? ScalarType::Double : ScalarType::Float);
  return holder.mutable_data_ptr<A>();
}

}  // namespace

// rms_norm's CUDA functions: checks, device guard and stream, then csrc/rowwise.h's host side (outputs, rows, weight,
// dtype switch) around the launchers of csrc/cuda/rms_norm.cu.
Tensor rms_norm_cuda(const Tensor& x, const std::optional<Tensor>& weight, std::optional<double> eps) {
  check_rms_norm_inputs(x, weight);
  const int device = x.get_device_index();
  const torch::stable::accelerator::DeviceGuard guard(device);
  const cudaStream_t stream = current_stream(device);
  const double e = eps.value_or(default_eps(x.scalar_type()));
  return rowwise_forward(x, weight, [&](const auto* xp, const auto* wp, auto* yp, const RowView& view) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(xp)>>;
    const rowwise::Rows rows = rowwise::kernel_rows(view, sizeof(T), {xp, wp, yp});
    CUDA_KERNELS_CUDA_CHECK(rms_norm_launch::forward<T>(xp, wp, yp, rows, e, device, stream));
  });
}

std::tuple<Tensor, Tensor> rms_norm_backward_cuda(const Tensor& grad, const Tensor& x,
                                                  const std::optional<Tensor>& weight, std::optional<double> eps) {
  check_rms_norm_backward_inputs(grad, x, weight);
  const int device = x.get_device_index();
  const torch::stable::accelerator::DeviceGuard guard(device);
  const cudaStream_t stream = current_stream(device);
  const double e = eps.value_or(default_eps(x.scalar_type()));
  return rowwise_backward(
      grad, x, weight, [&](const auto* dy, const auto* xp, const auto* wp, auto* dx, auto* dw, const RowView& view) {
        using T = std::remove_cv_t<std::remove_pointer_t<decltype(xp)>>;
        const rowwise::Rows rows = rowwise::kernel_rows(view, sizeof(T), {xp, dy, wp, dx});
        Tensor partial;  // the per-block sums of dw (rms_norm.h), freed with the tensor
        opmath_type<T>* sums =
            wp ? new_partial<opmath_type<T>>(x, rms_norm_launch::partial_rows<T>(rows, device), view.n, partial)
               : nullptr;
        CUDA_KERNELS_CUDA_CHECK(rms_norm_launch::backward<T>(dy, xp, wp, dx, dw, sums, rows, e, device, stream));
      });
}

// cuda_kernels.new: CUDA host functions above this line

}  // namespace cuda_kernels
