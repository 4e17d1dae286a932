// linear(x, weight, bias, activation) on the CPU: z = x @ weight.T by the CPU matmul kernel (matmul.cpp), then the
// epilogue (csrc/epilogue.h) in a loop over z's rows, in torch's threads. 16-bit inputs are multiplied as float32
// (exact: the products are accumulated in float32 either way), so that z is not rounded before the activation and
// the result is rounded once, as on CUDA. The CPU path is for correctness everywhere, not speed.
#include <torch/csrc/stable/ops.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <optional>
#include <string>

#include "checks.h"
#include "cpu/kernel_api.h"
#include "cuda/opmath.h"
#include "ops.h"
#include "rowwise.h"  // parallel_grain

namespace cuda_kernels {
namespace {

// out (M x cols, contiguous, T) from z (M x N, contiguous, A = opmath_type<T>) and bias (N of T, or nullptr): the
// elementwise activation (cols = N), or swiglu (cols = N / 2).
template <typename T, typename A>
void epilogue(const A* z, int64_t M, int64_t N, const T* bias, Activation act, T* out) {
  const bool swiglu = act == Activation::kSwiglu;
  const int64_t cols = swiglu ? N / 2 : N;
  const auto b = [&](int64_t n) { return bias != nullptr ? static_cast<A>(bias[n]) : A(0); };
  with_activation(act, [&](auto a) {
    torch::stable::parallel_for(0, M, parallel_grain(N), [&](int64_t begin, int64_t end) {
      for (int64_t m = begin; m < end; ++m) {
        const A* zr = z + m * N;
        T* outr = out + m * cols;
        for (int64_t n = 0; n < cols; ++n) {
          outr[n] = static_cast<T>(swiglu ? activate<Activation::kSilu>(zr[n] + b(n)) * (zr[n + cols] + b(n + cols))
                                          : activate<a.value>(zr[n] + b(n)));
        }
      }
    });
  });
}

}  // namespace

Tensor linear_cpu(const Tensor& x, const Tensor& weight, const OptTensor& bias_in,
                  const std::optional<std::string>& activation, bool /*allow_tf32: float32 only on CUDA*/) {
  const LinearCall call = check_linear_inputs(x, weight, bias_in, activation);
  const int64_t M = call.M, N = call.N, K = call.K;
  Tensor out = new_output(x, call.out);
  if (M == 0 || N == 0) return out;
  const ScalarType dtype = x.scalar_type();
  const ScalarType acc = dtype == ScalarType::Double ? ScalarType::Double : ScalarType::Float;
  const int64_t z_shape[2] = {M, N};
  Tensor z;
  if (K == 0) {
    z = torch::stable::new_zeros(x, z_shape, acc);  // an empty sum is 0; the epilogue still applies
  } else {
    const int64_t x_shape[2] = {M, K};
    const Tensor a = torch::stable::to(torch::stable::reshape(x, x_shape), acc);
    const Tensor b = torch::stable::to(torch::stable::transpose(weight, 0, 1), acc);
    z = matmul_cpu(a, b, 0, false);
  }
  const std::optional<Tensor> bias = contiguous_or_none(bias_in);
  cpu::dispatch_float(dtype, [&](auto t) {
    using T = decltype(t);
    using A = opmath_type<T>;
    epilogue<T, A>(z.const_data_ptr<A>(), M, N, data_or_null<T>(bias), call.act, out.mutable_data_ptr<T>());
  });
  return out;
}

}  // namespace cuda_kernels
