// square's kernel launcher as its host side (csrc/cuda/ops.cpp) calls it: raw pointers, no ATen. square.cu
// includes only this, the project's ATen-free helpers, c10's Half/BFloat16 and the CUDA runtime, so an edit to the
// kernel recompiles in a few seconds; ATen's headers (the tensor checks, the dtype switch) are compiled once, in
// ops.cpp.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/elementwise.h"  // StridedLayout

namespace cuda_kernels::square_launch {

constexpr int kThreads = 128;  // threads per block (the host sizes a wave of blocks with it: blocks_per_wave)

// out[i] = in[i]^2 for the n >= 1 elements of a contiguous output. strided: the input's layout when it is not
// dense from its data pointer, else nullptr. index32: every index and input offset is below 2^30 (32-bit
// arithmetic). blocks_per_wave: blocks of kThreads the GPU runs at once. Returns the launch's error, if any.
// Instantiated for float, double, c10::Half and c10::BFloat16.
template <typename scalar_t>
cudaError_t launch(const scalar_t* in, scalar_t* out, int64_t n, const StridedLayout* strided, bool index32,
                   int64_t blocks_per_wave, cudaStream_t stream);

}  // namespace cuda_kernels::square_launch
