// matmul(a, b) on the CPU: the blocked, packed kernel of matmul_kernel.h (Goto-style: packed B panels, packed A
// blocks, a register-tiled at::vec micro-kernel, torch's threads over tiles of C), compiled once per CPU capability
// (DEFAULT, AVX2, AVX512; matmul_kernel_<isa>.cpp) and picked at run time as square's kernel is (cpu::capability()).
// Any strides for a and b (packing reads them as they are); accumulates in fp32 (fp64 for fp64).
#include <torch/csrc/stable/ops.h>

#include "capability.h"
#include "checks.h"
#include "kernel_api.h"
#include "ops.h"

namespace cuda_kernels {

// The builds of matmul_kernel.h's entry point, one per capability: same signature, one namespace each.
namespace cpu::DEFAULT {
void matmul_kernel(ScalarType dtype, const void* a, int64_t sa0, int64_t sa1, const void* b, int64_t sb0, int64_t sb1,
                   void* c, int64_t M, int64_t N, int64_t K, const cpu::Parallel& par);
}
#if CUDA_KERNELS_CPU_X86_KERNELS
namespace cpu::AVX2 {
void matmul_kernel(ScalarType dtype, const void* a, int64_t sa0, int64_t sa1, const void* b, int64_t sb0, int64_t sb1,
                   void* c, int64_t M, int64_t N, int64_t K, const cpu::Parallel& par);
}
namespace cpu::AVX512 {
void matmul_kernel(ScalarType dtype, const void* a, int64_t sa0, int64_t sa1, const void* b, int64_t sb0, int64_t sb1,
                   void* c, int64_t M, int64_t N, int64_t K, const cpu::Parallel& par);
}
#endif

namespace {

using Kernel = void (*)(ScalarType, const void*, int64_t, int64_t, const void*, int64_t, int64_t, void*, int64_t,
                        int64_t, int64_t, const cpu::Parallel&);

// The kernel built for the capability this process runs with.
Kernel matmul_kernel() {
  switch (cpu::capability()) {
#if CUDA_KERNELS_CPU_X86_KERNELS
    case cpu::Capability::kAvx512:
      return cpu::AVX512::matmul_kernel;
    case cpu::Capability::kAvx2:
      return cpu::AVX2::matmul_kernel;
#endif
    default:
      return cpu::DEFAULT::matmul_kernel;
  }
}

}  // namespace

Tensor matmul_cpu(const Tensor& a, const Tensor& b, int64_t variant, bool /*allow_tf32: float32 only on CUDA*/) {
  check_matmul_inputs(a, b);
  CUDA_KERNELS_CHECK(variant >= 0, "cuda_kernels.matmul: unknown variant ", variant,
                     "; use 0 (auto) or, for CUDA tensors, a kernel of the ladder (>= 1)");
  CUDA_KERNELS_CHECK(variant == 0, "cuda_kernels.matmul: variant ", variant,
                     " is a CUDA kernel; the CPU has a single kernel (variant=0)");
  // A batch (3-D a and b) is one product per matrix, each spread over torch's threads.
  const bool batched = a.dim() == 3;
  const int64_t d = batched ? 1 : 0, batch = batched ? a.size(0) : 1;
  const int64_t M = a.size(d), K = a.size(d + 1), N = b.size(d + 1);
  const std::vector<int64_t> shape = matmul_output_shape(a, b);
  if (K == 0) return torch::stable::new_zeros(a, shape);  // an empty sum is 0, as in torch.mm
  Tensor c = new_output(a, shape);
  if (batch == 0 || M == 0 || N == 0) return c;
  const int64_t size = static_cast<int64_t>(a.element_size());
  const auto* a0 = static_cast<const char*>(a.const_data_ptr());
  const auto* b0 = static_cast<const char*>(b.const_data_ptr());
  auto* c0 = static_cast<char*>(c.mutable_data_ptr());
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t ia = batched ? i * a.stride(0) : 0, ib = batched ? i * b.stride(0) : 0;
    matmul_kernel()(a.scalar_type(), a0 + ia * size, a.stride(d), a.stride(d + 1), b0 + ib * size, b.stride(d),
                    b.stride(d + 1), c0 + i * M * N * size, M, N, K, cpu::torch_threads());
  }
  return c;
}

}  // namespace cuda_kernels
