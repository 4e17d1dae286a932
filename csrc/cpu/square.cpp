// square(x) on the CPU: contiguous chunks split across threads with at::parallel_for; a strided odometer loop
// for non-contiguous input (no copy).
//
// The contiguous loop is a plain loop that GCC/Clang auto-vectorize, compiled in several versions
// (target_clones: AVX-512, AVX2, baseline) with the best one picked at load time for the CPU it runs on, the
// way torch dispatches its own kernels by CPU capability. float16 needs the F16C conversion instructions, which
// the compiler does not generate from c10::Half's software conversion: an AVX2+F16C intrinsics loop where the CPU
// has them (checked once at run time), else at::vec::Vectorized.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/ops/empty.h>

#include <type_traits>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <vector>

#include "checks.h"
#include "ops.h"

namespace cuda_kernels {
namespace {

// Elements per parallel task: big enough that a task amortizes its scheduling, small enough to split 2^20.
constexpr int64_t kGrainSize = 32768;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CUDA_KERNELS_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CUDA_KERNELS_CPU_CLONES
#endif

// out[i] = in[i]^2 computed in opmath (float for bfloat16), one auto-vectorized pass.
template <typename scalar_t>
CUDA_KERNELS_CPU_CLONES void square_span(const scalar_t* __restrict__ in, scalar_t* __restrict__ out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const auto v = static_cast<at::opmath_type<scalar_t>>(in[i]);
    out[i] = static_cast<scalar_t>(v * v);
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// float16: 8 halves -> 8 floats (vcvtph2ps), square, round back to nearest even (vcvtps2ph).
__attribute__((target("avx2,f16c"))) void square_span_f16c(const at::Half* in, at::Half* out, int64_t n) {
  constexpr int64_t kLanes = 8;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    const __m128i r = _mm256_cvtps_ph(_mm256_mul_ps(v, v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), r);
  }
  for (; i < n; ++i) out[i] = static_cast<at::Half>(static_cast<float>(in[i]) * static_cast<float>(in[i]));
}
bool cpu_has_f16c() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return has;
}
#else
void square_span_f16c(const at::Half*, at::Half*, int64_t) {}
bool cpu_has_f16c() {
  return false;
}
#endif

template <typename scalar_t>
void square_contiguous(const scalar_t* in, scalar_t* out, int64_t n) {
  at::parallel_for(0, n, kGrainSize, [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<scalar_t, at::Half>) {
      if (cpu_has_f16c()) {
        square_span_f16c(in + begin, out + begin, end - begin);
      } else {
        using Vec = at::vec::Vectorized<scalar_t>;  // widens to float for the multiply, like torch.square
        at::vec::map([](Vec v) { return v * v; }, out + begin, in + begin, end - begin);
      }
    } else {
      square_span(in + begin, out + begin, end - begin);
    }
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
