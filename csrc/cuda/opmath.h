// opmath_type<T>: the type a kernel computes T in, as at::opmath_type without ATen's headers (see
// csrc/cuda/matmul/args.h for why kernel files go without): float for c10::Half and c10::BFloat16, T otherwise.
// square and the matmul ladder share it.
#pragma once

#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

namespace cuda_kernels {

template <typename T>
struct OpMath {
  using type = T;
};
template <>
struct OpMath<c10::Half> {
  using type = float;
};
template <>
struct OpMath<c10::BFloat16> {
  using type = float;
};
template <typename T>
using opmath_type = typename OpMath<T>::type;

}  // namespace cuda_kernels
