// matmul(a, b) on the CPU: rows of C split across threads; each task updates kRowBlock rows of C at a time
// from one row of B, so every row of B read from memory is reused kRowBlock times; the inner loop over
// N is unit-stride and vectorizes. Accumulates in fp32 (fp64 for fp64) in a per-task buffer.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <vector>

#include "checks.h"
#include "ops.h"

namespace cuda_kernels {
namespace {

// Rows of C updated together per pass over B.
constexpr int64_t kRowBlock = 4;

template <typename scalar_t>
void matmul_rows(const at::Tensor& a, const at::Tensor& b_acc, at::Tensor& c) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t M = a.size(0), K = a.size(1), N = b_acc.size(1);
  const scalar_t* A = a.const_data_ptr<scalar_t>();
  const int64_t sa0 = a.stride(0), sa1 = a.stride(1);  // any strides for a: element (i, k) is A[i*sa0 + k*sa1]
  const acc_t* B = b_acc.const_data_ptr<acc_t>();      // row-major (K, N) in the accumulation type
  scalar_t* C = c.mutable_data_ptr<scalar_t>();
  // Grain in rows: ~64K multiply-adds per task at least.
  const int64_t grain = std::max<int64_t>(kRowBlock, 65536 / std::max<int64_t>(1, N * K));
  at::parallel_for(0, M, grain, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(kRowBlock * N);
    for (int64_t i0 = begin; i0 < end; i0 += kRowBlock) {
      const int64_t rows = std::min(kRowBlock, end - i0);
      std::fill(acc.begin(), acc.end(), acc_t(0));
      for (int64_t k = 0; k < K; ++k) {
        const acc_t* brow = B + k * N;
        for (int64_t r = 0; r < rows; ++r) {
          const acc_t aik = static_cast<acc_t>(A[(i0 + r) * sa0 + k * sa1]);
          acc_t* crow = acc.data() + r * N;
          for (int64_t j = 0; j < N; ++j) crow[j] += aik * brow[j];
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        scalar_t* out = C + (i0 + r) * N;
        const acc_t* crow = acc.data() + r * N;
        for (int64_t j = 0; j < N; ++j) out[j] = static_cast<scalar_t>(crow[j]);
      }
    }
  });
}

}  // namespace

at::Tensor matmul_cpu(const at::Tensor& a, const at::Tensor& b, int64_t variant) {
  check_matmul_inputs(a, b);
  TORCH_CHECK(variant >= 0, "cuda_kernels.matmul: unknown variant ", variant,
              "; use 0 (auto) or, for CUDA tensors, a kernel of the ladder (>= 1)");
  TORCH_CHECK(variant == 0, "cuda_kernels.matmul: variant ", variant,
              " is a CUDA kernel; the CPU has a single kernel (variant=0)");
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  if (K == 0) return at::zeros({M, N}, a.options());  // an empty sum is 0, as in torch.mm
  at::Tensor c = at::empty({M, N}, a.options());
  if (M == 0 || N == 0) return c;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "cuda_kernels.matmul", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    // B in the accumulation dtype and row-major: one conversion pass, then a unit-stride inner loop.
    const at::Tensor b_acc = b.to(c10::CppTypeToScalarType<acc_t>::value).contiguous();
    matmul_rows<scalar_t>(a, b_acc, c);
  });
  return c;
}

}  // namespace cuda_kernels
