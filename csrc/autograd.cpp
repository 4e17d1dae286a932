// square's autograd kernel, registered for the Autograd key in csrc/api.cpp.
//
// matmul's formula is registered in Python (torch.library.register_autograd in cuda_kernels/ops.py), the simplest
// way and the one to start from. square's is here because that Python layer runs on every call, gradients or not:
// a few microseconds plus the thread-pool and cache effects of leaving C++ between calls, which a memory-bound op
// on small CPU tensors feels (docs/benchmarks.md). A C++ kernel for the Autograd key costs well under a
// microsecond. torch.compile and opcheck still use the fake kernel in cuda_kernels/ops.py.
#include <ATen/TensorOperators.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/custom_function.h>

#include "ops.h"

namespace cuda_kernels {
namespace {

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

}  // namespace

at::Tensor square_autograd(const at::Tensor& x) {
  // square(None) lands here (no tensor to dispatch on): say so before autograd asks the tensor for its device.
  TORCH_CHECK(x.defined(), "cuda_kernels.square: x is an undefined tensor");
  const bool record = torch::autograd::GradMode::is_enabled() && x.requires_grad();
  if (!record && !x._fw_grad(/*level=*/0).defined()) {
    // No graph to record (and no forward-mode tangent, which SquareFunction would reject): skip building an
    // autograd node, as torch's own kernels do.
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return square_below_autograd(x);
  }
  return SquareFunction::apply(x);
}

}  // namespace cuda_kernels
