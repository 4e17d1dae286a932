// Ladder step 12's float16 kernels, in a translation unit of their own so that the build compiles them in
// parallel with the other dtype's (12_tuned_tiles.cu has the step and says why).
#define CUDA_KERNELS_MATMUL_KERNELS_ONLY
#include "cuda/matmul/12_tuned_tiles.cu"

namespace cuda_kernels::matmul_ladder::wgmma12 {
template cudaError_t launch_dtype<false>(int, int, int, const Operand&, const Operand&, void*, int, cudaStream_t,
                                         const LaunchOptions&, const Workspace&);
}  // namespace cuda_kernels::matmul_ladder::wgmma12
