// rms_norm's kernel launchers as its host side (csrc/cuda/ops.cpp) calls them: raw pointers, no ATen (as
// square.h; csrc/cuda/matmul/args.h says why).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/opmath.h"
#include "cuda/rowwise.cuh"

namespace cuda_kernels::rms_norm_launch {

// y = x * rsqrt(mean(x^2) + eps) * w, row by row, computed in opmath_type<T> (float for half and bfloat16) and
// rounded once. x: rows.rows rows of rows.n >= 1 elements, rows.in_stride apart; w: n elements, or nullptr for
// none; y: contiguous. `rows` needs only its first four fields (the launcher chooses the split). Returns the
// launch's error, if any.
template <typename T>
cudaError_t forward(const T* x, const T* w, T* y, const rowwise::Rows& rows, double eps, int device,
                    cudaStream_t stream);

// Rows of opmath_type<T> sums that backward needs as `partial` (partial_rows x n): one per block of its grid.
template <typename T>
int64_t partial_rows(const rowwise::Rows& rows, int device);

// The gradients of forward: dx (contiguous, x's shape) and, when w is given, dw (n elements). dy and x are both
// rows.in_stride apart. dw is reduced without atomics, so it is the same bits every run on the same GPU: each block
// sums its rows' dy * x * rsqrt(...) into its row of `partial` (partial_rows x n, any contents), then a second
// kernel sums those rows in order.
template <typename T>
cudaError_t backward(const T* dy, const T* x, const T* w, T* dx, T* dw, opmath_type<T>* partial,
                     const rowwise::Rows& rows, double eps, int device, cudaStream_t stream);

}  // namespace cuda_kernels::rms_norm_launch
