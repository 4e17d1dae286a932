// Makes the library importable as a Python module, cuda_kernels._C or cuda_kernels._C_cuda (TORCH_EXTENSION_NAME,
// which the build sets per library): importing it runs the op registrations of csrc/api.cpp. It defines no Python
// functions (everything is reached through torch.ops.cuda_kernels) and uses only Python's limited API, so one
// binary serves every Python from 3.10 on (an abi3 wheel).
#include <Python.h>

#define CUDA_KERNELS_CONCAT_(a, b) a##b
#define CUDA_KERNELS_CONCAT(a, b) CUDA_KERNELS_CONCAT_(a, b)
#define CUDA_KERNELS_STR_(x) #x
#define CUDA_KERNELS_STR(x) CUDA_KERNELS_STR_(x)

extern "C" PyMODINIT_FUNC CUDA_KERNELS_CONCAT(PyInit_, TORCH_EXTENSION_NAME)(void) {
  static PyModuleDef module = {PyModuleDef_HEAD_INIT, "cuda_kernels." CUDA_KERNELS_STR(TORCH_EXTENSION_NAME),
                               "cuda_kernels' ops, registered with torch.ops.cuda_kernels on import", -1, nullptr};
  return PyModule_Create(&module);
}
