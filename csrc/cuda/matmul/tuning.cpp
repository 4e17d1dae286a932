// The matmul tuning knobs (tuning.h): one process-wide set, written by cuda_kernels::_matmul_tuning.
#include "cuda/matmul/tuning.h"

#include <cstdlib>

#include "cuda/errors.h"

namespace cuda_kernels::matmul_ladder {
namespace {

Tuning g_tuning;

std::string text_of(int64_t v) {
  return v == 0 ? "" : std::to_string(v);
}

int64_t positive_int(const std::string& name, const std::string& value) {
  if (value.empty()) return 0;
  char* end = nullptr;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  CUDA_KERNELS_CHECK(*end == '\0' && v > 0, "cuda_kernels.matmul_tuning: ", name, "=", value,
                     " is not a positive integer");
  return v;
}

}  // namespace

const Tuning& tuning() {
  return g_tuning;
}

std::string set_tuning(const std::string& name, const std::string& value) {
  Tuning& t = g_tuning;
  std::string* text = name == "config06"      ? &t.config06
                      : name == "config08"    ? &t.config08
                      : name == "config_fp64" ? &t.config_fp64
                      : name == "stream_k12"  ? &t.stream_k12
                                              : nullptr;
  if (text != nullptr) {
    CUDA_KERNELS_CHECK(name != "stream_k12" || value.empty() || value == "on" || value == "off",
                       "cuda_kernels.matmul_tuning: stream_k12=", value, " is not 'on' or 'off'");
    std::string previous = *text;
    *text = value;
    return previous;
  }
  int64_t* number = name == "splits06"                ? &t.splits06
                    : name == "smem_limit_bytes"      ? &t.smem_limit_bytes
                    : name == "matvec_blocks_per_sm"  ? &t.matvec_blocks_per_sm
                    : name == "matvec_mma_min_rows"   ? &t.matvec_mma_min_rows
                    : name == "matvec_cluster_splits" ? &t.matvec_cluster_splits
                    : name == "block_n12"             ? &t.block_n12
                    : name == "k_splits12"            ? &t.k_splits12
                    : name == "block_m12"             ? &t.block_m12
                                                      : nullptr;
  CUDA_KERNELS_CHECK(number != nullptr, "cuda_kernels.matmul_tuning: unknown knob '", name,
                     "'; known: config06, splits06, smem_limit_bytes, config08, config_fp64, matvec_blocks_per_sm, "
                     "matvec_mma_min_rows, matvec_cluster_splits, block_n12, stream_k12, k_splits12, block_m12");
  const int64_t parsed = positive_int(name, value);
  CUDA_KERNELS_CHECK(name != "block_n12" || parsed == 0 || parsed == 64 || parsed == 128 || parsed == 256,
                     "cuda_kernels.matmul_tuning: block_n12=", value, " is not 64, 128 or 256");
  CUDA_KERNELS_CHECK(name != "block_m12" || parsed == 0 || parsed == 64 || parsed == 128,
                     "cuda_kernels.matmul_tuning: block_m12=", value, " is not 64 or 128");
  CUDA_KERNELS_CHECK(name != "k_splits12" || parsed == 0 || parsed == 1 || parsed == 2 || parsed == 4 || parsed == 8,
                     "cuda_kernels.matmul_tuning: k_splits12=", value, " is not 1, 2, 4 or 8");
  std::string previous = text_of(*number);
  *number = parsed;
  return previous;
}

}  // namespace cuda_kernels::matmul_ladder
