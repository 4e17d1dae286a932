// Ladder step 12's float16 kernels (12_hopper_gemm.cuh), in a translation unit of their own so that the build
// compiles them in parallel with the other dtype's.
#include "cuda/matmul/ladder/12_hopper_gemm.cuh"

namespace cuda_kernels::matmul_ladder::wgmma12 {
template cudaError_t launch_dtype<false>(int, int, int, int, const Operand&, const Operand&, void*, int, cudaStream_t,
                                         const LaunchOptions&, const Workspace&, const Epilogue&);
}  // namespace cuda_kernels::matmul_ladder::wgmma12
