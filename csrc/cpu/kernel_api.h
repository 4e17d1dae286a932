// What a CPU kernel file gets from the host side instead of ATen's runtime: torch's thread pool (Parallel) and a
// dtype switch. The kernel files (<op>_kernel_<isa>.cpp) are compiled without the stable ABI's TORCH_TARGET_VERSION,
// because at::vec needs ATen's headers; so they may use only header-only code (at::vec, c10's scalar types), and
// reach torch's threads through the function the host side (square.cpp, matmul.cpp, on the stable ABI) hands them.
// tests/tools/test_stable_abi.py fails on a binary that references a torch C++ symbol.
#pragma once

#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <cstdint>
#include <functional>

namespace cuda_kernels::cpu {

struct Parallel {
  // Calls f(b, e) on chunks [b, e) of [begin, end), each at least `grain` long (but the last), on torch's
  // intra-op threads: what at::parallel_for does (torch::stable::parallel_for on the host side).
  void (*parallel_for)(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& f);
  int64_t num_threads;  // torch.get_num_threads()
};

// torch's thread pool, for the host side to hand to a kernel (csrc/cpu/parallel.cpp; not callable from the kernel
// files themselves, which are not built on the stable ABI).
Parallel torch_threads();

// The calling thread alone: for work too small to pay for waking torch's threads (each parallel_for that hands out
// chunks costs microseconds before any of them runs).
inline void run_inline(int64_t begin, int64_t end, int64_t /*grain*/, const std::function<void(int64_t, int64_t)>& f) {
  if (begin < end) f(begin, end);
}
inline constexpr Parallel kCallingThread{&run_inline, 1};

// Calls f(scalar_t{}) with the C++ type of one of the four float dtypes: float, double, c10::Half, c10::BFloat16
// (the types ATen's dispatch macros give). The host side has checked the dtype.
template <typename F>
void dispatch_float(torch::headeronly::ScalarType dtype, F&& f) {
  using torch::headeronly::ScalarType;
  switch (dtype) {
    case ScalarType::Double:
      return f(double{});
    case ScalarType::Half:
      return f(c10::Half{});
    case ScalarType::BFloat16:
      return f(c10::BFloat16{});
    default:
      return f(float{});
  }
}

}  // namespace cuda_kernels::cpu
