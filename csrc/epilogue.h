// What linear's epilogue applies to each output z = (x @ weight.T)[m][n] + bias[n], on the host (the CPU kernel) and
// on the GPU (the matmul kernels that fuse it, csrc/cuda/matmul/epilogue.cu for the others): one definition, so every
// path rounds the same math once. No torch header: the kernel files include it.
#pragma once

#include <cmath>
#include <type_traits>

#if defined(__CUDACC__)
#define CUDA_KERNELS_HOST_DEVICE __host__ __device__
#else
#define CUDA_KERNELS_HOST_DEVICE
#endif

namespace cuda_kernels {

// linear's activation argument. kSwiglu is not elementwise: the output's column n is silu(z[n]) * z[n + N / 2] (the
// weight holds the gate rows, then the up rows), so it has half of z's columns.
enum class Activation : int { kNone = 0, kRelu, kGelu, kGeluTanh, kSilu, kSwiglu };

// The names users pass (cuda_kernels.linear's `activation`), in enum order; kNone is Python's None.
inline constexpr const char* kActivationNames[] = {"none", "relu", "gelu", "gelu_tanh", "silu", "swiglu"};

// z / (1 + exp(-t)) = z * sigmoid(t) in the arithmetic type: silu is t = z, gelu_tanh t = 2u (below). On the GPU in
// float with the fast exp and division (a few ulps relative, which a 16-bit output cannot see; the accurate ones made
// the fused epilogue a third of the product's time); the result has no cancellation, unlike 1 + tanh(u) near -1.
template <typename A>
CUDA_KERNELS_HOST_DEVICE inline A times_sigmoid(A z, A t) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<A, float>) {
    return __fdividef(z, 1.0f + __expf(-t));
  } else {
    return z / (A(1) + exp(-t));
  }
#else
  return z / (A(1) + std::exp(-t));
#endif
}

// act(z) in the arithmetic type A (float, or double for float64), as torch defines each: relu keeps NaN, gelu is the
// erf form, gelu_tanh torch's approximate="tanh" form 0.5 z (1 + tanh(u)), u = sqrt(2 / pi) (z + 0.044715 z^3),
// computed as z * sigmoid(2u) (the same function).
template <Activation kAct, typename A>
CUDA_KERNELS_HOST_DEVICE inline A activate(A z) {
  static_assert(kAct != Activation::kSwiglu, "swiglu pairs two columns: use silu on the gate");
  constexpr A kHalf = A(0.5), kOne = A(1);
  constexpr A kInvSqrt2 = A(0.70710678118654752440);
  constexpr A kSqrt2OverPi = A(0.79788456080286535588), kCubic = A(0.044715);
  if constexpr (kAct == Activation::kRelu) {
    return z < A(0) ? A(0) : z;
  } else if constexpr (kAct == Activation::kGelu) {
#if defined(__CUDA_ARCH__)
    return kHalf * z * (kOne + erf(z * kInvSqrt2));
#else
    return kHalf * z * (kOne + std::erf(z * kInvSqrt2));
#endif
  } else if constexpr (kAct == Activation::kGeluTanh) {
    return times_sigmoid(z, A(2) * kSqrt2OverPi * (z + kCubic * z * z * z));
  } else if constexpr (kAct == Activation::kSilu) {
    return times_sigmoid(z, z);
  } else {
    return z;
  }
}

// Calls f(std::integral_constant<Activation, act>{}) for an elementwise act (kNone .. kSilu; kSwiglu calls it with
// kNone), so that a kernel's loop over its outputs is compiled once per activation with no branch inside.
template <typename F>
CUDA_KERNELS_HOST_DEVICE inline void with_activation(Activation act, F&& f) {
  switch (act) {
    case Activation::kRelu:
      return f(std::integral_constant<Activation, Activation::kRelu>{});
    case Activation::kGelu:
      return f(std::integral_constant<Activation, Activation::kGelu>{});
    case Activation::kGeluTanh:
      return f(std::integral_constant<Activation, Activation::kGeluTanh>{});
    case Activation::kSilu:
      return f(std::integral_constant<Activation, Activation::kSilu>{});
    default:
      return f(std::integral_constant<Activation, Activation::kNone>{});
  }
}

}  // namespace cuda_kernels
