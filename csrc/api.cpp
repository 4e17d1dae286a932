// The op registry: every op's schema and its implementation per dispatch key. The implementations are declared in
// csrc/ops.h; fake (meta) kernels for torch.compile and matmul's autograd formula are registered in Python
// (cuda_kernels/ops.py). named<op, fn> (csrc/checks.h) makes errors from below an op name it.
#include <torch/library.h>

#include "checks.h"
#include "ops.h"

namespace cuda_kernels {
namespace {
constexpr char kSquare[] = "cuda_kernels.square";
constexpr char kMatmul[] = "cuda_kernels.matmul";
// cuda_kernels.new: op names above this line
}  // namespace

TORCH_LIBRARY(cuda_kernels, m) {
  m.def("square(Tensor x) -> Tensor");
  m.def("matmul(Tensor a, Tensor b, int variant=0) -> Tensor");
  // cuda_kernels.new: schemas above this line

  // Private: what the Python package asks the binary (cuda_kernels.build_info(), the doctor, the tests, tuning).
  m.def("_build_info() -> str[]", &build_info);
  m.def("_cpu_capability() -> str", &cpu_capability);
  m.def("_matmul_kernels() -> (int[], str[], str[])", &matmul_kernels);
  m.def("_matmul_default_kernel(str dtype, int device=-1) -> (int, str, str)", &matmul_default_kernel);
  m.def("_matmul_unmet_need(int variant, str dtype, int device=-1) -> str", &matmul_unmet_need);
  m.def("_matmul_tuning(str knob, str value) -> str", &matmul_tuning);
}

TORCH_LIBRARY_IMPL(cuda_kernels, CPU, m) {
  m.impl("square", named<kSquare, square_cpu>);
  m.impl("matmul", named<kMatmul, matmul_cpu>);
  // cuda_kernels.new: CPU registrations above this line
}

#if CUDA_KERNELS_WITH_CUDA
TORCH_LIBRARY_IMPL(cuda_kernels, CUDA, m) {
  m.impl("square", named<kSquare, square_cuda>);
  m.impl("matmul", named<kMatmul, matmul_cuda>);
  // cuda_kernels.new: CUDA registrations above this line
}
#endif

// square's gradient is recorded in C++ (csrc/autograd.cpp says why); matmul's in Python (cuda_kernels/ops.py).
TORCH_LIBRARY_IMPL(cuda_kernels, Autograd, m) {
  m.impl("square", &square_autograd);
}

}  // namespace cuda_kernels
