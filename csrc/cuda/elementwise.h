// What the host side of an elementwise op (elementwise_cuda in csrc/cuda/ops.cpp) hands its kernel launcher besides
// the pointers: the input's layout when it is not dense. No ATen here, so that kernel files can include it and stay
// quick to compile (csrc/cuda/square.h says why that matters).
#pragma once

#include <cstdint>

namespace cuda_kernels {

constexpr int kMaxDims = 8;  // strided kernels: an input with more (non-mergeable) dims is copied to contiguous first

// Sizes and strides (in elements) of a non-contiguous input, innermost dim last, after merging mergeable dims.
struct StridedLayout {
  int ndim;
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims];
};

}  // namespace cuda_kernels
