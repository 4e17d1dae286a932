// The op registry: every op's schema and its implementation per dispatch key. The implementations are declared in
// csrc/ops.h; fake (meta) kernels for torch.compile and the autograd formulas are registered in Python
// (cuda_kernels/ops.py). named<op, fn> (csrc/checks.h) makes errors from below an op name it.
//
// Two libraries are built from csrc/, so that the same wheel loads under a CPU-only torch: cuda_kernels._C (the
// schemas, the CPU kernels) compiles this file as it is, and cuda_kernels._C_cuda (the CUDA kernels, which Python
// loads only where torch has CUDA) compiles it again with CUDA_KERNELS_CUDA_LIBRARY (cuda_kernels/tools/
// build_config.py). Host code is written on the LibTorch stable ABI: docs/debugging.md, "The stable ABI".
#include <torch/csrc/stable/library.h>

#include "checks.h"
#include "ops.h"

namespace cuda_kernels {
namespace {
constexpr char kSquare[] = "cuda_kernels.square";
constexpr char kMatmul[] = "cuda_kernels.matmul";
constexpr char kRmsNorm[] = "cuda_kernels.rms_norm";
constexpr char kRmsNormBackward[] = "cuda_kernels.rms_norm_backward";
constexpr char kLinear[] = "cuda_kernels.linear";
// cuda_kernels.new: op names above this line
}  // namespace

#if !CUDA_KERNELS_CUDA_LIBRARY

STABLE_TORCH_LIBRARY(cuda_kernels, m) {
  m.def("square(Tensor x) -> Tensor");
  m.def("matmul(Tensor a, Tensor b, int variant=0, bool allow_tf32=False) -> Tensor");
  m.def("rms_norm(Tensor x, Tensor? weight=None, float? eps=None) -> Tensor");
  m.def("rms_norm_backward(Tensor grad, Tensor x, Tensor? weight, float? eps) -> (Tensor, Tensor)");
  m.def("linear(Tensor x, Tensor weight, Tensor? bias=None, str? activation=None, bool allow_tf32=False) -> Tensor");
  // cuda_kernels.new: schemas above this line

  // Private: what the Python package asks the binary (cuda_kernels.build_info(), the doctor, the tests).
  m.def("_build_info() -> str[]");
  m.def("_cpu_capability(str torch_choice=\"\") -> str");
}

STABLE_TORCH_LIBRARY_IMPL(cuda_kernels, CPU, m) {
  m.impl("square", TORCH_BOX((named<kSquare, square_cpu>)));
  m.impl("matmul", TORCH_BOX((named<kMatmul, matmul_cpu>)));
  m.impl("rms_norm", TORCH_BOX((named<kRmsNorm, rms_norm_cpu>)));
  m.impl("rms_norm_backward", TORCH_BOX((named<kRmsNormBackward, rms_norm_backward_cpu>)));
  m.impl("linear", TORCH_BOX((named<kLinear, linear_cpu>)));
  // cuda_kernels.new: CPU registrations above this line
}

STABLE_TORCH_LIBRARY_IMPL(cuda_kernels, CompositeExplicitAutograd, m) {
  m.impl("_build_info", TORCH_BOX(&build_info));
  m.impl("_cpu_capability", TORCH_BOX(&cpu_capability));
}

#else  // the CUDA library

STABLE_TORCH_LIBRARY_IMPL(cuda_kernels, CUDA, m) {
  m.impl("square", TORCH_BOX((named<kSquare, square_cuda>)));
  m.impl("matmul", TORCH_BOX((named<kMatmul, matmul_cuda>)));
  m.impl("rms_norm", TORCH_BOX((named<kRmsNorm, rms_norm_cuda>)));
  m.impl("rms_norm_backward", TORCH_BOX((named<kRmsNormBackward, rms_norm_backward_cuda>)));
  m.impl("linear", TORCH_BOX((named<kLinear, linear_cuda>)));
  // cuda_kernels.new: CUDA registrations above this line
}

// Private, CUDA library only: the CUDA matmul's kernels and tuning knobs, the toolkit and archs it was built with.
STABLE_TORCH_LIBRARY_FRAGMENT(cuda_kernels, m) {
  m.def("_cuda_build_version() -> str");
  m.def("_cuda_archs() -> str");
  m.def("_matmul_kernels() -> (int[], str[], str[])");
  m.def("_matmul_default_kernel(str dtype, int device=-1) -> (int, str, str)");
  m.def("_matmul_unmet_need(int variant, str dtype, int device=-1) -> str");
  m.def("_matmul_tuning(str knob, str value) -> str");
}

STABLE_TORCH_LIBRARY_IMPL(cuda_kernels, CompositeExplicitAutograd, m) {
  m.impl("_cuda_build_version", TORCH_BOX(&cuda_build_version));
  m.impl("_cuda_archs", TORCH_BOX(&cuda_archs_tag));
  m.impl("_matmul_kernels", TORCH_BOX(&matmul_kernels));
  m.impl("_matmul_default_kernel", TORCH_BOX(&matmul_default_kernel));
  m.impl("_matmul_unmet_need", TORCH_BOX(&matmul_unmet_need));
  m.impl("_matmul_tuning", TORCH_BOX(&matmul_tuning));
}

#endif

}  // namespace cuda_kernels
