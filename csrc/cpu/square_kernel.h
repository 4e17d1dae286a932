// square's contiguous kernel, written once with at::vec::Vectorized and compiled once per CPU capability:
// square_kernel_default.cpp, square_kernel_avx2.cpp and square_kernel_avx512.cpp include it between
// vec_isa_begin.h and vec_isa_end.h, which set CPU_CAPABILITY (this file's namespace) and the instruction set.
// square.cpp picks one build at run time (cpu::capability()).
//
// Vectorized<T> is one SIMD register of T: 16 floats / 8 doubles / 32 halves or bfloat16s with AVX-512, half that
// with AVX2; the DEFAULT build gets at::vec's portable version (a small array the compiler vectorizes itself).
// No #pragma once: included once by each capability's translation unit.

namespace cuda_kernels::cpu::CPU_CAPABILITY {

// Minimum elements per parallel task: torch's own grain (at::internal::GRAIN_SIZE, which TensorIterator kernels like
// torch.square use), so a tensor is split across threads the same way: min(threads, ceil(n / 32768)) equal tasks.
// Written out, as in csrc/cpu/square.cpp: its header, ATen/TensorIterator.h, took 1.5 s of each capability's compile.
constexpr int64_t kGrainSize = 32768;

// One register's worth squared. For float16/bfloat16, at::vec's operator* widens to two registers of float (their
// opmath type), multiplies there and rounds back once to nearest-even: what torch.square computes (and exact: an
// 11- or 8-bit significand squared fits in float's 24 bits before the one rounding). Widening by hand instead
// (convert_to_float, lo * lo, hi * hi, convert_from_float) was slower for bfloat16 at 2^20 elements
// (docs/benchmarks.md, "square's launch shape").
template <typename scalar_t>
at::vec::Vectorized<scalar_t> square_vec(const at::vec::Vectorized<scalar_t>& v) {
  return v * v;
}

// out[i] = in[i]^2 for i in [0, n): float/double two registers per iteration (both loads issued before either
// store, as torch's vectorized loop does), then single registers, then one partial register for the last
// n % size() elements. float16/bfloat16 go one register at a time: two at once made bfloat16 slower on both a
// 16-core and a 2-core AVX-512 machine (docs/benchmarks.md, "square's launch shape").
template <typename scalar_t>
void square_span(const scalar_t* in, scalar_t* out, int64_t n) {
  using Vec = at::vec::Vectorized<scalar_t>;
  constexpr int64_t kLanes = Vec::size();
  constexpr bool kTwoRegisters = !at::vec::is_reduced_floating_point_v<scalar_t>;
  int64_t i = 0;
  for (; kTwoRegisters && i + 2 * kLanes <= n; i += 2 * kLanes) {
    const Vec a = Vec::loadu(in + i);
    const Vec b = Vec::loadu(in + i + kLanes);
    square_vec(a).store(out + i);
    square_vec(b).store(out + i + kLanes);
  }
  for (; i + kLanes <= n; i += kLanes) {
    square_vec(Vec::loadu(in + i)).store(out + i);
  }
  if (i < n) {
    const int64_t rest = n - i;  // 1 .. kLanes-1: loadu/store with a count touch only those elements
    square_vec(Vec::loadu(in + i, rest)).store(out + i, rest);
  }
}

// Entry point for square.cpp (declared there once per capability). in/out: n >= 1 elements of `dtype`, dense.
void square_contiguous(torch::headeronly::ScalarType dtype, const void* in, void* out, int64_t n, const Parallel& par) {
  dispatch_float(dtype, [&](auto t) {
    using scalar_t = decltype(t);
    const auto* src = static_cast<const scalar_t*>(in);
    auto* dst = static_cast<scalar_t*>(out);
    par.parallel_for(0, n, kGrainSize,
                     [&](int64_t begin, int64_t end) { square_span(src + begin, dst + begin, end - begin); });
  });
}

}  // namespace cuda_kernels::cpu::CPU_CAPABILITY
