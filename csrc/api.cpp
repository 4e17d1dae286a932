// The one place where ops are defined and bound.
//
//  1. TORCH_LIBRARY declares each op's schema in the namespace `cuda_kernels`
//     (callable as torch.ops.cuda_kernels.<op>).
//  2. TORCH_LIBRARY_IMPL registers one implementation per dispatch key (CPU, CUDA), and square's autograd
//     kernel (Autograd). Fake (meta) implementations, and matmul's autograd formula, are registered in Python:
//     cuda_kernels/ops.py. Why square's autograd is here: see SquareFunction below.
//  3. PYBIND11_MODULE makes this a Python module (cuda_kernels._C); importing it runs the registrations.
// Only the headers this file uses (not torch/extension.h, which pulls in all of torch's C++ API and doubles
// this file's compile time, the longest of the build).
#include <ATen/TensorOperators.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>
#include <torch/version.h>

#include "cpu/capability.h"
#include "ops.h"

#ifndef CUDA_KERNELS_WITH_CUDA
#define CUDA_KERNELS_WITH_CUDA 0
#endif
#ifndef CUDA_KERNELS_DEBUG
#define CUDA_KERNELS_DEBUG 0
#endif
#ifndef CUDA_KERNELS_ARCHS
#define CUDA_KERNELS_ARCHS none
#endif
#define CUDA_KERNELS_STR_(x) #x
#define CUDA_KERNELS_STR(x) CUDA_KERNELS_STR_(x)

#if CUDA_KERNELS_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

TORCH_LIBRARY(cuda_kernels, m) {
  m.def("square(Tensor x) -> Tensor");
  m.def("matmul(Tensor a, Tensor b, int variant=0) -> Tensor");
  // cuda_kernels.new: schemas above this line
}

namespace {

// Runs an op's implementation; an error raised below it that does not name the op (the allocator out of
// memory, a failed kernel launch) gets "(raised inside cuda_kernels.<op>)" appended. `throw;` rethrows the
// original object, so Python still sees its type (e.g. torch.OutOfMemoryError).
template <typename F>
at::Tensor naming_errors(const char* op, F&& run) {
  try {
    return run();
  } catch (c10::Error& e) {
    if (e.msg().find(op) == std::string::npos) e.add_context(std::string("raised inside ") + op);
    throw;
  }
}

at::Tensor square_cpu(const at::Tensor& x) {
  return naming_errors("cuda_kernels.square", [&] { return cuda_kernels::square_cpu(x); });
}
at::Tensor matmul_cpu(const at::Tensor& a, const at::Tensor& b, int64_t variant) {
  return naming_errors("cuda_kernels.matmul", [&] { return cuda_kernels::matmul_cpu(a, b, variant); });
}
// cuda_kernels.new: CPU wrappers above this line
#if CUDA_KERNELS_WITH_CUDA
at::Tensor square_cuda(const at::Tensor& x) {
  return naming_errors("cuda_kernels.square", [&] { return cuda_kernels::square_cuda(x); });
}
at::Tensor matmul_cuda(const at::Tensor& a, const at::Tensor& b, int64_t variant) {
  return naming_errors("cuda_kernels.matmul", [&] { return cuda_kernels::matmul_cuda(a, b, variant); });
}
// cuda_kernels.new: CUDA wrappers above this line
#endif

// square's autograd kernel. matmul's formula is registered in Python (torch.library.register_autograd in
// cuda_kernels/ops.py), the simplest way and the one to start from. square's is here because that Python layer
// runs on every call, gradients or not: about 4 us plus the thread-pool and cache effects of leaving C++ between
// calls. CPU square at 2^20 float32 took 34.6 us through it against 24.9 us for torch.square on the 16-core H100
// host (0.72x; 0.97x with the autograd layers skipped), docs/benchmarks.md. A C++ kernel for the Autograd key
// costs well under a microsecond. torch.compile and opcheck still use the fake kernel in ops.py.
//
// Calls square's CPU/CUDA kernel through the dispatcher; the caller holds an AutoDispatchBelowADInplaceOrView.
at::Tensor square_below_autograd(const at::Tensor& x) {
  static const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("cuda_kernels::square", "").typed<at::Tensor(const at::Tensor&)>();
  return op.call(x);
}

class SquareFunction : public torch::autograd::Function<SquareFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    ctx->save_for_backward({x});
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return square_below_autograd(x);
  }
  // d(x^2)/dx = 2x, written with differentiable ATen ops so that double backward works (gradgradcheck).
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    return {grads[0] * 2 * x};
  }
};

at::Tensor square_autograd(const at::Tensor& x) {
  // square(None) lands here (no tensor to dispatch on): say so before autograd asks the tensor for its device.
  TORCH_CHECK(x.defined(), "cuda_kernels.square: x is an undefined tensor");
  const bool record = torch::autograd::GradMode::is_enabled() && x.requires_grad();
  if (!record && !x._fw_grad(/*level=*/0).defined()) {
    // No graph to record (and no forward-mode tangent, which SquareFunction would reject): skip building an
    // autograd node, ~0.7 us a call, as torch's own kernels do.
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return square_below_autograd(x);
  }
  return SquareFunction::apply(x);
}

}  // namespace

TORCH_LIBRARY_IMPL(cuda_kernels, Autograd, m) {
  m.impl("square", &square_autograd);
}

TORCH_LIBRARY_IMPL(cuda_kernels, CPU, m) {
  m.impl("square", &square_cpu);
  m.impl("matmul", &matmul_cpu);
  // cuda_kernels.new: CPU registrations above this line
}

#if CUDA_KERNELS_WITH_CUDA
TORCH_LIBRARY_IMPL(cuda_kernels, CUDA, m) {
  m.impl("square", &square_cuda);
  m.impl("matmul", &matmul_cuda);
  // cuda_kernels.new: CUDA registrations above this line
}
#endif

namespace {

// How this binary was built; cuda_kernels.build_info() adds the Python-side fields.
pybind11::dict build_info() {
  pybind11::dict info;
  info["cuda"] = static_cast<bool>(CUDA_KERNELS_WITH_CUDA);
  info["debug"] = static_cast<bool>(CUDA_KERNELS_DEBUG);
  info["archs_tag"] = CUDA_KERNELS_STR(CUDA_KERNELS_ARCHS);
  info["torch_version"] = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
                          std::to_string(TORCH_VERSION_PATCH);
#if CUDA_KERNELS_WITH_CUDA
  // CUDART_VERSION is e.g. 13000 for 13.0.
  info["cuda_version"] = std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10);
#else
  info["cuda_version"] = pybind11::none();
#endif
  return info;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "cuda_kernels C++/CUDA ops; use them through the cuda_kernels package or torch.ops.cuda_kernels";
  m.def("_build_info", &build_info, "How this extension binary was built");
  m.def(
      "_matmul_variants",
      [] {
#if CUDA_KERNELS_WITH_CUDA
        return cuda_kernels::matmul_cuda_variants();
#else
        return std::vector<std::pair<int64_t, std::string>>{};
#endif
      },
      "The CUDA matmul ladder's steps as [(variant, name)]; variant=0 picks one automatically");
  m.def(
      "_matmul_default_step",
      [](const std::string& dtype_name, int64_t device) {
#if CUDA_KERNELS_WITH_CUDA
        return cuda_kernels::matmul_cuda_default_step_info(dtype_name, device);
#else
        return std::tuple<int64_t, std::string, std::string>{0, "", "the extension was built without CUDA"};
#endif
      },
      pybind11::arg("dtype_name"), pybind11::arg("device_index") = -1,
      "The CUDA matmul step that variant=0 runs for a dtype ('bfloat16', 'float32', ...) on a CUDA device (-1: the "
      "current one), as (variant, name, reason); (0, '', why) in a CPU-only build");
  m.def(
      "_matmul_variant_unmet_need",
      [](int64_t variant, const std::string& dtype_name, int64_t device) {
#if CUDA_KERNELS_WITH_CUDA
        return cuda_kernels::matmul_cuda_variant_unmet_need(variant, dtype_name, device);
#else
        TORCH_CHECK(false, "cuda_kernels.matmul: variant ", variant, " is a CUDA kernel; this build has none");
        return std::string();
#endif
      },
      pybind11::arg("variant"), pybind11::arg("dtype_name"), pybind11::arg("device_index") = -1,
      "Why ladder step `variant` cannot run dtype_name on the CUDA device ('' when it can)");
  m.def(
      "_matmul_variant_dtypes",
      [] {
#if CUDA_KERNELS_WITH_CUDA
        return cuda_kernels::matmul_cuda_variant_dtypes();
#else
        return std::vector<std::pair<int64_t, std::vector<std::string>>>{};
#endif
      },
      "The dtypes each CUDA matmul ladder step takes, as [(variant, [dtype names])]");
  m.def(
      "_cpu_capability", [] { return cuda_kernels::cpu::capability_name(cuda_kernels::cpu::capability()); },
      "The build of the CPU kernels this process runs: DEFAULT, AVX2 or AVX512 (csrc/cpu/capability.h)");
}
