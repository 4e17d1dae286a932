// Errors of the ops: CUDA_KERNELS_CHECK(cond, parts...) throws std::runtime_error with the parts written one after
// another, as torch's TORCH_CHECK words a message (Python sees a RuntimeError). Header-only and free of torch, so
// host files (on the stable ABI) and kernel files (no torch header at all) use the same one. Unlike the stable
// ABI's STD_TORCH_CHECK it does not prefix the function, file and line: the message is what the user reads.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace cuda_kernels {

// Throws std::runtime_error with the parts written one after another (with operator<<).
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  throw std::runtime_error(out.str());
}

}  // namespace cuda_kernels

// When cond is false, raises the message parts written one after another; they are evaluated only then. E.g.
//   CUDA_KERNELS_CHECK(tiles <= kMaxGridX, "cuda_kernels.matmul: ", M, " x ", N, " output has too many tiles");
#define CUDA_KERNELS_CHECK(cond, ...)               \
  do {                                              \
    if (!(cond)) ::cuda_kernels::fail(__VA_ARGS__); \
  } while (0)
