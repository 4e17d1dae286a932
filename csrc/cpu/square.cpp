// square(x) on the CPU: at::vec::Vectorized loads/stores over contiguous chunks, split across threads with
// at::parallel_for; a strided odometer loop for non-contiguous input (no copy).
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/ops/empty.h>

#include <vector>

#include "checks.h"
#include "ops.h"

namespace cuda_kernels {
namespace {

// Elements per parallel task: big enough that a task amortizes its scheduling, small enough to split 2^20.
constexpr int64_t kGrainSize = 32768;

template <typename scalar_t>
void square_contiguous(const scalar_t* in, scalar_t* out, int64_t n) {
  using Vec = at::vec::Vectorized<scalar_t>;
  at::parallel_for(0, n, kGrainSize, [&](int64_t begin, int64_t end) {
    // at::vec::map widens float16/bfloat16 to float for the multiply, like torch.square.
    at::vec::map([](Vec v) { return v * v; }, out + begin, in + begin, end - begin);
  });
}

template <typename scalar_t>
void square_strided(const at::Tensor& x, scalar_t* out) {
  const scalar_t* in = x.const_data_ptr<scalar_t>();
  const int64_t ndim = x.dim();
  const auto sizes = x.sizes();
  const auto strides = x.strides();
  at::parallel_for(0, x.numel(), kGrainSize, [&](int64_t begin, int64_t end) {
    // Odometer over the multi-index of element `begin` (row-major order of the output).
    std::vector<int64_t> index(ndim, 0);
    int64_t offset = 0;
    for (int64_t d = ndim - 1, rest = begin; d >= 0; --d) {
      index[d] = rest % sizes[d];
      rest /= sizes[d];
      offset += index[d] * strides[d];
    }
    for (int64_t i = begin; i < end; ++i) {
      const auto v = static_cast<at::opmath_type<scalar_t>>(in[offset]);
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

at::Tensor square_cpu(const at::Tensor& x) {
  check_square_input(x);
  at::Tensor out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  if (x.numel() == 0) return out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "cuda_kernels.square", [&] {
    if (x.is_contiguous()) {
      square_contiguous(x.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), x.numel());
    } else {
      square_strided(x, out.mutable_data_ptr<scalar_t>());
    }
  });
  return out;
}

}  // namespace cuda_kernels
