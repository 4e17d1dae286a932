// Ladder step 12's launcher: the kernels and how a call is planned are in 12_hopper_gemm.cuh, instantiated per
// dtype in 12_hopper_gemm_bf16.cu and 12_hopper_gemm_fp16.cu.
#include "cuda/matmul/args.h"
#include "cuda/matmul/ladder/12_hopper_gemm.cuh"
#include "cuda/matmul/tuning.h"
#include "cuda/utils.cuh"

namespace cuda_kernels::matmul_ladder {

bool wgmma_available(int device);  // defined with step 9

void launch_12_hopper_gemm(const Args& args) {
  const hopper::Call call = hopper::prepare_call("12_hopper_gemm", args, &wgmma_available);
  const int sms = sm_count(call.device);
  // The tuning knobs block_n12, stream_k12, k_splits12 and block_m12 (cuda/matmul/tuning.h) force the tile width,
  // stream-K, the split-K clusters and the tile rows.
  wgmma12::LaunchOptions opt;
  opt.block_n = static_cast<int>(tuning().block_n12);
  opt.k_splits = static_cast<int>(tuning().k_splits12);
  opt.block_m = static_cast<int>(tuning().block_m12);
  CUDA_KERNELS_CHECK(opt.block_m != wgmma12::Short::kBM || opt.block_n == 0 || opt.block_n == wgmma12::Short::BN,
                     "cuda_kernels.matmul: step 12: the tuning knobs block_m12=", opt.block_m,
                     " and block_n12=", opt.block_n, " name no tile (64-row tiles are 64 wide)");
  opt.stream_k = tuning().stream_k12 == "on" ? 1 : tuning().stream_k12 == "off" ? 0 : -1;
  CUDA_KERNELS_CHECK(opt.block_n != wgmma12::Wide::BN || call.batch == 1 || wgmma12::Wide::kBatches,
                     "cuda_kernels.matmul: step 12: the tuning knob block_n12=", opt.block_n,
                     " takes one product, not a batch of ", call.batch,
                     " (its tile is not compiled for batches); use "
                     "64 or 128");
  // Stream-K scratch from the call's workspace (torch's caching allocator: stream-ordered, so concurrent calls never
  // share it; under graph capture it is the graph's own), only for shapes that use stream-K.
  wgmma12::Workspace ws;
  if (opt.stream_k == 1 || (opt.stream_k < 0 && wgmma12::wants_workspace(call.M, call.N, call.K, call.batch, sms,
                                                                         opt.block_n, opt.k_splits, opt.block_m))) {
    ws.bytes = wgmma12::workspace_bytes(sms);
    ws.ptr = args.workspace->alloc(ws.bytes);
  }
  const bool pairs = args.bias != nullptr && call.N % 2 == 0 && reinterpret_cast<uintptr_t>(args.bias) % 4 == 0;
  const wgmma12::Epilogue epi{static_cast<const uint16_t*>(args.bias), args.activation, pairs};
  hopper::check_launch("12_hopper_gemm", wgmma12::launch(call.bf16, call.M, call.N, call.K, call.batch, call.a, call.b,
                                                         call.c, sms, call.stream, opt, ws, epi));
}

}  // namespace cuda_kernels::matmul_ladder
