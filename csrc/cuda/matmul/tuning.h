// Overrides of the matmul kernels' own choices (a tile configuration, a split-K factor, ...), for the tests and
// scripts/tune_matmul.py. Python sets them with the context manager cuda_kernels.tools.matmul_tuning(...), through
// the private op cuda_kernels::_matmul_tuning (csrc/api.cpp); the launchers read them here, and nothing reads the
// environment. Every knob is unset (empty / 0: the launcher chooses) unless a test or the tuning script sets it, and
// is set only while no matmul runs.
#pragma once

#include <cstdint>
#include <string>

namespace cuda_kernels::matmul_ladder {

struct Tuning {
  std::string config06;               // step 6: the float32 tile configuration, by name (06_async_pipeline.cu)
  int64_t splits06 = 0;               // step 6: the split-K factor (clamped to K)
  int64_t smem_limit_bytes = 0;       // step 6: shared memory per block it believes the GPU allows (smaller GPUs)
  std::string config08;               // step 8: a configuration of the tuning build (08_mma_pipeline.cu)
  std::string config_fp64;            // fp64_dmma: the pipeline configuration, by name (fp64_dmma.cu)
  int64_t matvec_blocks_per_sm = 0;   // matvec: blocks per SM that its K splits aim at (matvec.cu)
  int64_t matvec_mma_min_rows = 0;    // matvec: fewest rows of a 16-bit product that take its mma kernel
  int64_t matvec_cluster_splits = 0;  // matvec: most K splits in one cluster (1: no clusters; set: no own choice)
  int64_t block_n12 = 0;              // step 12: the tile width, 64, 128 or 256 (12_hopper_gemm.cuh)
  std::string stream_k12;             // step 12: "on" wherever the tiles allow stream-K, "off" never
  int64_t k_splits12 = 0;             // step 12: blocks splitting each tile's K in a cluster, 1 (off), 2, 4 or 8
  int64_t block_m12 = 0;              // step 12: the tile rows, 64 (64 x 64 tiles) or 128
};

// The knobs as set now.
const Tuning& tuning();

// Sets the knob `name` (a field of Tuning) from `value` (empty: unset) and returns its previous value as text
// ("" when it was unset). An unknown name, or a number knob given anything but a positive integer, is an error.
std::string set_tuning(const std::string& name, const std::string& value);

}  // namespace cuda_kernels::matmul_ladder
