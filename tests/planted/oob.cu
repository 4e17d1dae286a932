// A deliberately broken kernel for tests/tools/test_sanitize.py ONLY: it proves that
// `compute-sanitizer --tool memcheck` (and so `make sanitize`) catches an out-of-bounds write. It is not part of
// the cuda_kernels ops, setup.py or csrc/; tests/planted/oob_loader.py builds it into a temporary folder.
//
// fill(y, n, planted_bug) writes y[i] = i for i < n. With planted_bug the bounds check is off by one (i <= n), so
// one thread writes y[n]: 4 bytes past the end of the allocation.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kThreads = 256;

__global__ void planted_oob_kernel(float* y, int64_t n, bool planted_bug) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool in_bounds = planted_bug ? i <= n : i < n;  // the planted off-by-one
  if (in_bounds) y[i] = static_cast<float>(i);
}

}  // namespace

// Plain C entry point, called through ctypes: the test needs no pybind11 or torch headers (a fast build).
// Returns the cudaError_t of the launch.
extern "C" int planted_oob_fill(float* y, int64_t n, int planted_bug) {
  // n + 1 threads at least, so that the buggy bound reaches y[n].
  const int blocks = static_cast<int>((n + 1 + kThreads - 1) / kThreads);
  planted_oob_kernel<<<blocks, kThreads>>>(y, n, planted_bug != 0);
  return static_cast<int>(cudaGetLastError());
}
