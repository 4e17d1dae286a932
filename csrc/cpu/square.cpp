// square(x) on the CPU. Contiguous input: the at::vec::Vectorized kernel of square_kernel.h, compiled once per CPU
// capability (DEFAULT, AVX2, AVX512; square_kernel_<isa>.cpp) and picked at run time the way torch picks its own
// (cpu::capability(), capability.h). Non-contiguous input: a strided odometer loop over the input (no copy).
// Both split the elements across torch's threads (torch::stable::parallel_for) with torch's grain size.
#include <torch/csrc/stable/ops.h>

#include <vector>

#include "capability.h"
#include "checks.h"
#include "kernel_api.h"
#include "ops.h"

namespace cuda_kernels {

// The builds of square_kernel.h's entry point, one per capability: same signature, one namespace each.
namespace cpu::DEFAULT {
void square_contiguous(ScalarType dtype, const void* in, void* out, int64_t n, const cpu::Parallel& par);
}
#if CUDA_KERNELS_CPU_X86_KERNELS
namespace cpu::AVX2 {
void square_contiguous(ScalarType dtype, const void* in, void* out, int64_t n, const cpu::Parallel& par);
}
namespace cpu::AVX512 {
void square_contiguous(ScalarType dtype, const void* in, void* out, int64_t n, const cpu::Parallel& par);
}
#endif

namespace {

// Elements per parallel task of the strided loop: torch's grain (at::internal::GRAIN_SIZE), as in the contiguous
// kernel.
constexpr int64_t kGrainSize = 32768;

using ContiguousKernel = void (*)(ScalarType, const void*, void*, int64_t, const cpu::Parallel&);

// The contiguous kernel built for the capability this process runs with.
ContiguousKernel square_contiguous_kernel() {
  switch (cpu::capability()) {
#if CUDA_KERNELS_CPU_X86_KERNELS
    case cpu::Capability::kAvx512:
      return cpu::AVX512::square_contiguous;
    case cpu::Capability::kAvx2:
      return cpu::AVX2::square_contiguous;
#endif
    default:
      return cpu::DEFAULT::square_contiguous;
  }
}

// The arithmetic type of scalar_t: float for float16/bfloat16 (squared in float, rounded once), itself otherwise.
template <typename scalar_t>
using opmath_t = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;

template <typename scalar_t>
void square_strided(const Tensor& x, scalar_t* out) {
  const scalar_t* in = x.const_data_ptr<scalar_t>();
  const int64_t ndim = x.dim();
  const std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
  const std::vector<int64_t> strides(x.strides().begin(), x.strides().end());
  torch::stable::parallel_for(0, x.numel(), kGrainSize, [&](int64_t begin, int64_t end) {
    // Odometer over the multi-index of element `begin` (row-major order of the output).
    std::vector<int64_t> index(ndim, 0);
    int64_t offset = 0;
    for (int64_t d = ndim - 1, rest = begin; d >= 0; --d) {
      index[d] = rest % sizes[d];
      rest /= sizes[d];
      offset += index[d] * strides[d];
    }
    for (int64_t i = begin; i < end; ++i) {
      const auto v = static_cast<opmath_t<scalar_t>>(in[offset]);
      out[i] = static_cast<scalar_t>(v * v);
      // Advance the odometer: bump the last dim, carry into earlier dims.
      for (int64_t d = ndim - 1; d >= 0; --d) {
        offset += strides[d];
        if (++index[d] < sizes[d]) break;
        offset -= strides[d] * sizes[d];
        index[d] = 0;
      }
    }
  });
}

}  // namespace

Tensor square_cpu(const Tensor& x) {
  check_square_input(x);
  Tensor out = new_output(x, x.sizes());
  if (x.numel() == 0) return out;
  if (x.is_contiguous()) {
    square_contiguous_kernel()(x.scalar_type(), x.const_data_ptr(), out.mutable_data_ptr(), x.numel(),
                               cpu::torch_threads());
    return out;
  }
  cpu::dispatch_float(x.scalar_type(), [&](auto t) {
    using scalar_t = decltype(t);
    square_strided(x, out.mutable_data_ptr<scalar_t>());
  });
  return out;
}

}  // namespace cuda_kernels
