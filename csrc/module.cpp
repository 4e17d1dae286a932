// Makes the library importable as the Python module cuda_kernels._C: importing it runs the op registrations of
// csrc/api.cpp. It defines no Python functions; everything is reached through torch.ops.cuda_kernels.
#include <pybind11/pybind11.h>

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "cuda_kernels C++/CUDA ops; use them through the cuda_kernels package or torch.ops.cuda_kernels";
}
