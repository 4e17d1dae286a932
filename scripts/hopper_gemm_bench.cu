// Standalone harness for the Hopper matmul steps 9-12 (csrc/cuda/matmul/09..12_*.cu): correctness against cuBLAS
// (fp32 output, NaN-poisoned C, a guard region after C) and timing against cublasGemmEx (16-bit in and out, fp32
// compute, same row-major layout), without torch: the kernel files are included with
// CUDA_KERNELS_MATMUL_STANDALONE, which leaves out their at::Tensor entry points. For iterating on a kernel in
// seconds and for timing configurations that the extension does not expose.
//
// Build (the CUDA toolkit's nvcc; cuBLAS from the toolkit or from torch's nvidia/cu13 wheel directory NV):
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Icsrc -I$NV/include -L$NV/lib -l:libcublas.so.13 \
//        -o /tmp/hopper_gemm_bench scripts/hopper_gemm_bench.cu
// Run on a compute-9.0 GPU (LD_LIBRARY_PATH must find libcublas):
//   /tmp/hopper_gemm_bench test 9 10 11 12   # every correctness case for those steps
//   /tmp/hopper_gemm_bench cmp               # steps 11 and 12 vs cuBLAS, six shapes, interleaved rounds
//   /tmp/hopper_gemm_bench explore           # named tile configurations of step 12
//   /tmp/hopper_gemm_bench big               # step 12 at the six target shapes, 15 interleaved rounds
//   /tmp/hopper_gemm_bench cold 16           # step 12, a 128-SM grid, no woven pass; L2 flushed before each call
//   /tmp/hopper_gemm_bench loop 4096 4096 4096 3 [cublas]   # back to back for 3 s (clocks under the power cap)
// docs/matmul.md ("Hopper tuning log") has what each version measured with it.
#include <cstdio>
#define CUDA_KERNELS_MATMUL_STANDALONE
#include "cuda/matmul/09_wgmma_tma.cu"
#include "cuda/matmul/10_cluster_multicast.cu"
#include "cuda/matmul/11_tma_store.cu"
#include "cuda/matmul/12_tuned_tiles.cu"

#include <cublas_v2.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using cuda_kernels::hopper::Operand;
struct LaunchOptions {
  int block_n = 0;
  int group_m = 0;  // 0: the step's default
  int max_blocks = 0;
  int stream_k = -1;
  int k_splits = 0;  // step 12: 0 by shape, 1 off, 2 / 4 / 8
};
static int g_step = 9;
static cuda_kernels::matmul_ladder::wgmma12::Workspace g_ws;
static cudaError_t step_launch(int step, bool bf16, int M, int N, int K, const Operand& a, const Operand& b, void* c,
                               int sms, const LaunchOptions& o) {
  if (step == 9) {
    cuda_kernels::matmul_ladder::wgmma09::LaunchOptions l;
    l.block_n = o.block_n;
    if (o.group_m) l.group_m = o.group_m;
    l.max_blocks = o.max_blocks;
    return cuda_kernels::matmul_ladder::wgmma09::launch(bf16, M, N, K, a, b, c, sms, 0, l);
  }
  if (step == 10) {
    cuda_kernels::matmul_ladder::wgmma10::LaunchOptions l;
    l.block_n = o.block_n;
    if (o.group_m) l.group_m = o.group_m;
    l.max_blocks = o.max_blocks;
    return cuda_kernels::matmul_ladder::wgmma10::launch(bf16, M, N, K, a, b, c, sms, 0, l);
  }
  if (step == 12) {
    cuda_kernels::matmul_ladder::wgmma12::LaunchOptions l;
    l.block_n = o.block_n;
    l.group_m = o.group_m;
    l.max_blocks = o.max_blocks;
    l.stream_k = o.stream_k;
    l.k_splits = o.k_splits;
    if (!g_ws.ptr) {
      g_ws.bytes = cuda_kernels::matmul_ladder::wgmma12::workspace_bytes(sms);
      if (cudaMalloc(&g_ws.ptr, g_ws.bytes) != cudaSuccess) return cudaErrorMemoryAllocation;
      cudaMemset(g_ws.ptr, 0x5A, g_ws.bytes);  // garbage, as from the caching allocator
    }
    return cuda_kernels::matmul_ladder::wgmma12::launch(bf16, M, N, K, a, b, c, sms, 0, l, g_ws);
  }
  cuda_kernels::matmul_ladder::wgmma11::LaunchOptions l;
  l.block_n = o.block_n;
  if (o.group_m) l.group_m = o.group_m;
  l.max_blocks = o.max_blocks;
  return cuda_kernels::matmul_ladder::wgmma11::launch(bf16, M, N, K, a, b, c, sms, 0, l);
}

#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)
#define CB(x)                                                            \
  do {                                                                   \
    cublasStatus_t s_ = (x);                                             \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                   \
      printf("cuBLAS error %d at %s:%d\n", (int)s_, __FILE__, __LINE__); \
      exit(1);                                                           \
    }                                                                    \
  } while (0)

__global__ void fill_kernel(uint16_t* p, size_t n, uint32_t seed, bool bf16) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    float v = ((h & 0xFFFF) / 32768.0f) - 1.0f;
    p[i] = bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v)) : __half_as_ushort(__float2half_rn(v));
  }
}
__global__ void poison_kernel(uint16_t* p, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = 0xFFFF;
}
__device__ float to_f(uint16_t v, bool bf16) {
  return bf16 ? __bfloat162float(__ushort_as_bfloat16(v)) : __half2float(__ushort_as_half(v));
}
// counts[0]: bad elements, counts[1]: guard damage; maxerr (as uint bits of a positive float)
__global__ void check_kernel(const uint16_t* c, const float* ref, size_t n, size_t guard, bool bf16, float atol,
                             float rtol, unsigned long long* counts, unsigned* maxerr) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n + guard; i += (size_t)gridDim.x * blockDim.x) {
    if (i >= n) {
      if (c[i] != 0xFFFF) atomicAdd(&counts[1], 1ull);
      continue;
    }
    float v = to_f(c[i], bf16), r = ref[i];
    float e = fabsf(v - r);
    if (!(e <= atol + rtol * fabsf(r))) atomicAdd(&counts[0], 1ull);
    if (e == e)
      atomicMax(maxerr, __float_as_uint(e / (atol + fabsf(r))));
    else
      atomicMax(maxerr, 0x7f000000u);
  }
}

struct Mat {
  uint16_t* p;
  int64_t ld;
  bool mn;  // Operand::mn_major
};

static int64_t rup(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

// A: mn=false -> (M, K) row-major ld>=K; mn=true -> stored (K, M) ld>=M.
// B: mn=true -> (K, N) row-major ld>=N; mn=false -> stored (N, K) ld>=K.
static Mat make_a(int M, int K, bool mn, int pad, bool bf16, uint32_t seed) {
  Mat m;
  m.mn = mn;
  int64_t rows = mn ? K : M, cols = mn ? M : K;
  m.ld = rup(cols, 8) + pad;
  CK(cudaMalloc(&m.p, rows * m.ld * 2 + 256));
  fill_kernel<<<1024, 256>>>(m.p, rows * m.ld, seed, bf16);
  return m;
}
static Mat make_b(int K, int N, bool mn, int pad, bool bf16, uint32_t seed) {
  Mat m;
  m.mn = mn;
  int64_t rows = mn ? K : N, cols = mn ? N : K;
  m.ld = rup(cols, 8) + pad;
  CK(cudaMalloc(&m.p, rows * m.ld * 2 + 256));
  fill_kernel<<<1024, 256>>>(m.p, rows * m.ld, seed, bf16);
  return m;
}

static cublasHandle_t g_handle;
static int g_sms;

static void cublas_mm(bool bf16, int M, int N, int K, const Mat& a, const Mat& b, void* c, bool c_f32) {
  float alpha = 1.f, beta = 0.f;
  cudaDataType_t t = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  cublasOperation_t opB = b.mn ? CUBLAS_OP_N : CUBLAS_OP_T;
  cublasOperation_t opA = a.mn ? CUBLAS_OP_T : CUBLAS_OP_N;
  CB(cublasGemmEx(g_handle, opB, opA, N, M, K, &alpha, b.p, t, (int)b.ld, a.p, t, (int)a.ld, &beta, c,
                  c_f32 ? CUDA_R_32F : t, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

static cudaError_t ours(bool bf16, int M, int N, int K, const Mat& a, const Mat& b, void* c, const LaunchOptions& o) {
  Operand oa{a.p, a.ld, a.mn}, ob{b.p, b.ld, b.mn};
  return step_launch(g_step, bf16, M, N, K, oa, ob, c, g_sms, o);
}

static int g_fail = 0;
static void test(bool bf16, int M, int N, int K, bool amn, bool bmn, int pad, LaunchOptions o = {}) {
  Mat a = make_a(M, K, amn, pad, bf16, 1234 + M), b = make_b(K, N, bmn, pad, bf16, 999 + N);
  size_t n = (size_t)M * N, guard = 4096;
  float* ref;
  uint16_t* c;
  CK(cudaMalloc(&ref, n * 4));
  CK(cudaMalloc(&c, (n + guard) * 2));
  poison_kernel<<<1024, 256>>>(c, n + guard);
  cublas_mm(bf16, M, N, K, a, b, ref, true);
  cudaError_t e = ours(bf16, M, N, K, a, b, c, o);
  CK(cudaDeviceSynchronize());
  unsigned long long* counts;
  unsigned* maxerr;
  CK(cudaMallocManaged(&counts, 16));
  CK(cudaMallocManaged(&maxerr, 4));
  counts[0] = counts[1] = 0;
  *maxerr = 0;
  float scale = sqrtf((float)K / 3.f) / 3.f;  // ~rms of an element
  check_kernel<<<1024, 256>>>(c, ref, n, guard, bf16, 1e-3f * scale + 1e-3f, bf16 ? 8e-3f : 2e-3f, counts, maxerr);
  CK(cudaDeviceSynchronize());
  float me;
  unsigned mb = *maxerr;
  memcpy(&me, &mb, 4);
  bool ok = e == cudaSuccess && counts[0] == 0 && counts[1] == 0;
  if (!ok) g_fail++;
  printf("s%d %s %s M=%d N=%d K=%d A%s B%s pad=%d bn=%d mb=%d sk=%d: bad=%llu guard=%llu maxrel=%.3g launch=%s\n",
         g_step, ok ? "OK  " : "FAIL", bf16 ? "bf16" : "fp16", M, N, K, amn ? "mn" : "k", bmn ? "mn" : "k", pad,
         o.block_n, o.max_blocks, o.stream_k, counts[0], counts[1], me, cudaGetErrorString(e));
  cudaFree(counts);
  cudaFree(maxerr);
  cudaFree(ref);
  cudaFree(c);
  cudaFree(a.p);
  cudaFree(b.p);
}

template <class F>
static float time_ms(F f, int iters) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < 3; ++i) f();
  cudaEventRecord(e0);
  for (int i = 0; i < iters; ++i) f();
  cudaEventRecord(e1);
  CK(cudaEventSynchronize(e1));
  float ms;
  cudaEventElapsedTime(&ms, e0, e1);
  return ms / iters;
}

static float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static void bench(bool bf16, int M, int N, int K, std::vector<LaunchOptions> opts, bool amn = false, bool bmn = true) {
  Mat a = make_a(M, K, amn, 0, bf16, 7), b = make_b(K, N, bmn, 0, bf16, 8);
  uint16_t* c;
  CK(cudaMalloc(&c, (size_t)M * N * 2));
  double flop = 2.0 * M * N * K;
  int iters = flop > 1e12 ? 10 : (flop > 1e11 ? 30 : 100);
  float tc = time_ms([&] { cublas_mm(bf16, M, N, K, a, b, c, false); }, iters);
  printf("%s %5dx%5dx%5d A%s B%s cuBLAS %7.1f TF", bf16 ? "bf16" : "fp16", M, N, K, amn ? "mn" : "k", bmn ? "mn" : "k",
         flop / tc / 1e9);
  for (auto& o : opts) {
    float t = time_ms([&] { ours(bf16, M, N, K, a, b, c, o); }, iters);
    CK(cudaGetLastError());
    printf(" | s%d bn%d g%d: %7.1f (%.3fx)", g_step, o.block_n, o.group_m, flop / t / 1e9, tc / t);
  }
  printf("\n");
  fflush(stdout);
  cudaFree(c);
  cudaFree(a.p);
  cudaFree(b.p);
}

// Interleaved rounds: cuBLAS and each step in turn, `rounds` times; medians.
static void bench2(bool bf16, int M, int N, int K, std::vector<int> steps, int rounds = 5) {
  Mat a = make_a(M, K, false, 0, bf16, 7), b = make_b(K, N, true, 0, bf16, 8);
  uint16_t* c;
  CK(cudaMalloc(&c, (size_t)M * N * 2));
  double flop = 2.0 * M * N * K;
  int iters = flop > 1e12 ? 10 : (flop > 1e11 ? 30 : 100);
  std::vector<std::vector<float>> t(steps.size() + 1);
  LaunchOptions o;
  for (int r = 0; r < rounds; ++r) {
    t[0].push_back(time_ms([&] { cublas_mm(bf16, M, N, K, a, b, c, false); }, iters));
    for (size_t i = 0; i < steps.size(); ++i) {
      g_step = steps[i];
      t[i + 1].push_back(time_ms([&] { ours(bf16, M, N, K, a, b, c, o); }, iters));
    }
  }
  CK(cudaGetLastError());
  float tc = median(t[0]);
  printf("%s %5dx%5dx%5d cuBLAS %6.1f", bf16 ? "bf16" : "fp16", M, N, K, flop / tc / 1e9);
  for (size_t i = 0; i < steps.size(); ++i) {
    float tt = median(t[i + 1]);
    printf(" | s%d %6.1f (%.3fx)", steps[i], flop / tt / 1e9, tc / tt);
  }
  printf("\n");
  fflush(stdout);
  cudaFree(c);
  cudaFree(a.p);
  cudaFree(b.p);
}

// Exploration: named launchers timed in interleaved rounds against cuBLAS (bf16/fp16, A k-major, B mn-major).
namespace w12 = cuda_kernels::matmul_ladder::wgmma12;
using Launcher = std::function<cudaError_t(bool, int, int, int, const Operand&, const Operand&, void*)>;
template <class Cfg>
static Launcher cfg_launcher(int group_m = 0, int blocks = 0, int sk = 0) {
  return [=](bool bf16, int M, int N, int K, const Operand& a, const Operand& b, void* c) {
    const int sms = blocks > 0 ? blocks : g_sms;
    return bf16 ? w12::launch_typed<Cfg, true, false, false>(M, N, K, a, b, c, sms, group_m, 0, g_ws, sk)
                : w12::launch_typed<Cfg, false, false, false>(M, N, K, a, b, c, sms, group_m, 0, g_ws, sk);
  };
}
static Launcher step_launcher(int step, int k_splits = 0) {
  return [=](bool bf16, int M, int N, int K, const Operand& a, const Operand& b, void* c) {
    LaunchOptions o;
    o.k_splits = k_splits;
    return step_launch(step, bf16, M, N, K, a, b, c, g_sms, o);
  };
}
static void bench3(bool bf16, int M, int N, int K, const std::vector<std::pair<std::string, Launcher>>& ls,
                   int rounds = 5) {
  Mat a = make_a(M, K, false, 0, bf16, 7), b = make_b(K, N, true, 0, bf16, 8);
  Operand oa{a.p, a.ld, a.mn}, ob{b.p, b.ld, b.mn};
  uint16_t* c;
  CK(cudaMalloc(&c, (size_t)M * N * 2));
  double flop = 2.0 * M * N * K;
  int iters = flop > 1e12 ? 10 : (flop > 1e11 ? 30 : 100);
  std::vector<std::vector<float>> t(ls.size() + 1);
  for (int r = 0; r < rounds; ++r) {
    t[0].push_back(time_ms([&] { cublas_mm(bf16, M, N, K, a, b, c, false); }, iters));
    for (size_t i = 0; i < ls.size(); ++i)
      t[i + 1].push_back(time_ms([&] { CK(ls[i].second(bf16, M, N, K, oa, ob, c)); }, iters));
  }
  CK(cudaGetLastError());
  float tc = median(t[0]);
  printf("%s %5dx%5dx%5d cuBLAS %6.1f", bf16 ? "bf16" : "fp16", M, N, K, flop / tc / 1e9);
  for (size_t i = 0; i < ls.size(); ++i) {
    float tt = median(t[i + 1]);
    printf(" | %s %6.1f (%.3fx)", ls[i].first.c_str(), flop / tt / 1e9, tc / tt);
  }
  printf("\n");
  fflush(stdout);
  cudaFree(c);
  cudaFree(a.p);
  cudaFree(b.p);
}

// Median of `calls` per-call times of f (after `warmup` untimed ones), each call after flush(): what a problem
// costs when its operands come from DRAM and its launch cannot overlap the previous call.
static float time_flushed_ms(const std::function<void()>& f, int calls, int warmup,
                             const std::function<void()>& flush) {
  static cudaEvent_t e0 = nullptr, e1 = nullptr;
  if (!e0) {
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
  }
  std::vector<float> t;
  for (int i = 0; i < calls + warmup; ++i) {
    flush();
    cudaEventRecord(e0);
    f();
    cudaEventRecord(e1);
    CK(cudaEventSynchronize(e1));
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    if (i >= warmup) t.push_back(ms);
  }
  return median(t);
}

// time_flushed_ms with a 2 x L2 buffer zeroed before every call (as benchmark.py timed up to commit c2a3f34; it now
// flushes by reading, docs/benchmarks.md, as read_flush below does).
static float time_cold_ms(const std::function<void()>& f, int calls) {
  static void* flush = nullptr;
  static size_t flush_bytes = 0;
  if (!flush) {
    int l2 = 0;
    CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    flush_bytes = 2 * static_cast<size_t>(l2);
    CK(cudaMalloc(&flush, flush_bytes));
  }
  return time_flushed_ms(f, calls, 3, [] { cudaMemsetAsync(flush, 0, flush_bytes); });
}

// Reads the whole buffer (a 2 x L2 flush that leaves clean lines, as benchmark.py's flush_l2 does).
__global__ void read_flush_kernel(const uint4* p, size_t n, unsigned* sink) {
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const uint4 v = __ldcg(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;  // keeps the loads; practically never true
}
static void read_flush() {
  static uint4* flush = nullptr;
  static unsigned* sink = nullptr;
  static size_t flush_n = 0;
  if (!flush) {
    int l2 = 0;
    CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    flush_n = 2 * static_cast<size_t>(l2) / sizeof(uint4);
    CK(cudaMalloc(&flush, flush_n * sizeof(uint4)));
    CK(cudaMemset(flush, 0, flush_n * sizeof(uint4)));
    CK(cudaMalloc(&sink, 4));
  }
  read_flush_kernel<<<4 * g_sms, 512>>>(flush, flush_n, sink);
}

// Small problems: step 12 and narrower-ring configurations against cuBLAS, cold L2 per call, two rounds.
static void bench_small(bool bf16, int M, int N, int K, const std::vector<std::pair<std::string, Launcher>>& ls) {
  Mat a = make_a(M, K, false, 0, bf16, 7), b = make_b(K, N, true, 0, bf16, 8);
  Operand oa{a.p, a.ld, a.mn}, ob{b.p, b.ld, b.mn};
  uint16_t* c;
  CK(cudaMalloc(&c, (size_t)M * N * 2));
  for (int round = 0; round < 2; ++round) {
    const float tc = time_cold_ms([&] { cublas_mm(bf16, M, N, K, a, b, c, false); }, 200);
    printf("%s %5dx%5dx%5d cuBLAS %6.2f us", bf16 ? "bf16" : "fp16", M, N, K, tc * 1e3);
    for (const auto& l : ls) {
      const float t = time_cold_ms([&] { CK(l.second(bf16, M, N, K, oa, ob, c)); }, 200);
      printf(" | %s %6.2f us (%.3fx)", l.first.c_str(), t * 1e3, tc / t);
    }
    printf("\n");
    fflush(stdout);
  }
  cudaFree(c);
  cudaFree(a.p);
  cudaFree(b.p);
}

// Interleaved rounds of cuBLAS and each launcher, every call after an L2 flush by reading (benchmark.py's
// condition); per round the median of `calls` calls, and at the end the median over rounds of each one's ratio
// (cuBLAS time / its time) with the lowest and highest round.
static void bench_cold(bool bf16, int M, int N, int K, const std::vector<std::pair<std::string, Launcher>>& ls,
                       int rounds, int calls) {
  Mat a = make_a(M, K, false, 0, bf16, 7), b = make_b(K, N, true, 0, bf16, 8);
  Operand oa{a.p, a.ld, a.mn}, ob{b.p, b.ld, b.mn};
  uint16_t* c;
  CK(cudaMalloc(&c, (size_t)M * N * 2));
  const auto time_one = [&](const std::function<void()>& f) { return time_flushed_ms(f, calls, 2, read_flush); };
  std::vector<std::vector<float>> ratio(ls.size());
  std::vector<float> tcs;
  for (int r = 0; r < rounds; ++r) {
    const float tc = time_one([&] { cublas_mm(bf16, M, N, K, a, b, c, false); });
    tcs.push_back(tc);
    for (size_t i = 0; i < ls.size(); ++i)
      ratio[i].push_back(tc / time_one([&] { CK(ls[i].second(bf16, M, N, K, oa, ob, c)); }));
  }
  CK(cudaGetLastError());
  const double flop = 2.0 * M * N * K;
  printf("cold %s %5dx%5dx%5d cuBLAS %6.1f TF", bf16 ? "bf16" : "fp16", M, N, K, flop / median(tcs) / 1e9);
  for (size_t i = 0; i < ls.size(); ++i) {
    const auto mm = std::minmax_element(ratio[i].begin(), ratio[i].end());
    printf(" | %s %.3fx [%.3f-%.3f]", ls[i].first.c_str(), median(ratio[i]), *mm.first, *mm.second);
  }
  printf("\n");
  fflush(stdout);
  cudaFree(c);
  cudaFree(a.p);
  cudaFree(b.p);
}

// The tensor-core target shapes of issue 12 (M, N, K), which the cmp and big modes time.
static constexpr int kTargetShapes[][3] = {{4096, 4096, 4096}, {8192, 8192, 8192}, {2048, 2048, 2048},
                                           {4000, 4000, 4000}, {8192, 1024, 4096}, {1024, 1024, 1024}};

// The cuBLAS handle and SM count every mode needs; with_workspace: also step 12's stream-K workspace.
static void init_harness(bool with_workspace) {
  CB(cublasCreate(&g_handle));
  CK(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, 0));
  if (with_workspace) {
    g_ws.bytes = w12::workspace_bytes(g_sms);
    CK(cudaMalloc(&g_ws.ptr, g_ws.bytes));
  }
}

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "all";
  if (mode == "small") {
    init_harness(true);
    using N4 = w12::Config<64, 1, 4, 64>;
    for (int sz : {256, 512, 768, 1024})
      for (bool bf16 : {true, false})
        bench_small(bf16, sz, sz, sz,
                    {{"s12", step_launcher(12)},
                     {"ks1", step_launcher(12, 1)},
                     {"ks2", step_launcher(12, 2)},
                     {"ks4", step_launcher(12, 4)},
                     {"ks8", step_launcher(12, 8)},
                     {"N4", cfg_launcher<N4>(0, 0, 0)}});
    bench_small(true, 256, 256, 4096, {{"s12", step_launcher(12)}, {"ks1", step_launcher(12, 1)}});
    bench_small(true, 128, 4096, 4096, {{"s12", step_launcher(12)}, {"ks1", step_launcher(12, 1)}});
    return 0;
  }
  if (mode == "explore") {
    init_harness(true);
    using W = w12::Wide;
    using W1 = w12::Config<256, 1, 4, 128>;
    using Mi = w12::Mid;
    using Mi1 = w12::Config<128, 1, 6, 128>;
    for (int round = 0; round < 2; ++round)
      for (bool bf16 : {true, false}) {
        // The 128 x 256 tile with and without its 2-CTA cluster (B multicast against a plain launch).
        for (int sz : {4096, 8192, 4000})
          bench3(bf16, sz, sz, sz, {{"s12", step_launcher(12)}, {"W1", cfg_launcher<W1>(0, 0, -1)}}, 9);
        bench3(bf16, 8192, 1024, 4096,
               {{"s11", step_launcher(11)}, {"s12", step_launcher(12)}, {"Wsk1", cfg_launcher<W>(0, 0, 1)}});
        bench3(bf16, 2048, 2048, 2048,
               {{"s11", step_launcher(11)},
                {"s12", step_launcher(12)},
                {"Midsk1", cfg_launcher<Mi>(0, 0, 1)},
                {"Mi1", cfg_launcher<Mi1>(0, 0, -1)}});
        bench3(bf16, 1024, 1024, 1024, {{"s11", step_launcher(11)}, {"s12", step_launcher(12)}});
      }
    return 0;
  }
  if (mode == "cold") {
    // Step 12 as launched, on a 128-SM grid and without its woven epilogue pass, cold L2 per call as
    // benchmark.py times it, after a bit-for-bit check that the variants write what step 12 writes.
    init_harness(true);
    using Unwoven = w12::Config<256, 2, 4, 128, false>;
    const std::vector<std::pair<std::string, Launcher>> ls = {{"s12", step_launcher(12)},
                                                              {"sm128", cfg_launcher<w12::Wide>(0, 128, -1)},
                                                              {"unwoven", cfg_launcher<Unwoven>(0, 0, -1)}};
    for (const auto& sh : std::vector<std::array<int, 3>>{{4096, 4096, 4096},
                                                          {4000, 4000, 4000},
                                                          {1000, 2000, 300},
                                                          {8192, 1024, 4096},
                                                          {300, 5000, 64},
                                                          {2048, 2048, 8192}}) {
      const int M = sh[0], N = sh[1], K = sh[2];
      Mat a = make_a(M, K, false, 0, true, 11), b = make_b(K, N, true, 0, true, 12);
      Operand oa{a.p, a.ld, a.mn}, ob{b.p, b.ld, b.mn};
      const size_t n = (size_t)M * N;
      uint16_t *c0, *c1;
      CK(cudaMalloc(&c0, n * 2));
      CK(cudaMalloc(&c1, n * 2));
      CK(ls[0].second(true, M, N, K, oa, ob, c0));
      std::vector<uint16_t> h0(n), h1(n);
      CK(cudaMemcpy(h0.data(), c0, n * 2, cudaMemcpyDeviceToHost));
      for (size_t i = 1; i < ls.size(); ++i) {
        poison_kernel<<<1024, 256>>>(c1, n);
        CK(ls[i].second(true, M, N, K, oa, ob, c1));
        CK(cudaMemcpy(h1.data(), c1, n * 2, cudaMemcpyDeviceToHost));
        size_t bad = 0;
        for (size_t e = 0; e < n; ++e) bad += h0[e] != h1[e];
        printf("same %s %dx%dx%d: %zu differ%s\n", ls[i].first.c_str(), M, N, K, bad, bad ? "  FAIL" : "");
      }
      cudaFree(c0);
      cudaFree(c1);
      cudaFree(a.p);
      cudaFree(b.p);
    }
    const int rounds = argc > 2 ? atoi(argv[2]) : 8;
    for (int rep = 0; rep < 2; ++rep)
      for (bool bf16 : {true, false}) bench_cold(bf16, 4096, 4096, 4096, ls, rounds, 30);
    for (int rep = 0; rep < 2; ++rep)
      for (bool bf16 : {true, false}) bench_cold(bf16, 8192, 8192, 8192, ls, rounds / 2, 10);
    for (const auto& sh : kTargetShapes)
      if (sh[0] != 1024 && sh[0] != 4096) bench_cold(true, sh[0], sh[1], sh[2], ls, rounds / 2, 20);
    return 0;
  }
  if (mode == "big") {
    // The target shapes of issue 12, step 12 as launched by default, for A/B runs of builds of two versions.
    init_harness(true);
    for (bool bf16 : {true, false})
      for (const auto& sh : kTargetShapes) bench3(bf16, sh[0], sh[1], sh[2], {{"s12", step_launcher(12)}}, 15);
    return 0;
  }
  if (mode == "loop") {
    // loop M N K SECONDS [cublas]: step 12 (or cuBLAS) in bf16 back to back for SECONDS, then the mean time per
    // call: what a build runs at when the board sits at its power cap (sample nvidia-smi clocks and power beside it).
    if (argc < 6) {
      printf("usage: %s loop M N K SECONDS [cublas]\n", argv[0]);
      return 2;
    }
    const int M = atoi(argv[2]), N = atoi(argv[3]), K = atoi(argv[4]);
    const double seconds = atof(argv[5]);
    const bool use_cublas = argc > 6 && std::string(argv[6]) == "cublas";
    init_harness(false);
    g_step = 12;
    Mat a = make_a(M, K, false, 0, true, 7), b = make_b(K, N, true, 0, true, 8);
    uint16_t* c;
    CK(cudaMalloc(&c, (size_t)M * N * 2));
    const auto call = [&] {
      if (use_cublas) {
        cublas_mm(true, M, N, K, a, b, c, false);
      } else {
        CK(ours(true, M, N, K, a, b, c, LaunchOptions{}));
      }
    };
    const float first = time_ms(call, 10);
    const int per_batch = std::max(1, static_cast<int>(50.0 / first));  // ~50 ms of calls between event reads
    int64_t calls = 0;
    float total_ms = 0.f;
    while (total_ms < seconds * 1e3) {
      total_ms += time_ms(call, per_batch) * per_batch;
      calls += per_batch;
    }
    printf("loop %s bf16 %dx%dx%d: %lld calls in %.2f s, %.2f us a call, %.1f TFLOP/s\n", use_cublas ? "cuBLAS" : "s12",
           M, N, K, static_cast<long long>(calls), total_ms / 1e3, total_ms * 1e3 / calls,
           2.0 * M * N * K * calls / (total_ms / 1e3) / 1e12);
    return 0;
  }
  if (mode == "cmp") {
    init_harness(false);
    for (bool bf16 : {true, false})
      for (int round = 0; round < 2; ++round)
        for (const auto& sh : kTargetShapes) bench2(bf16, sh[0], sh[1], sh[2], {11, 12});
    return 0;
  }
  std::vector<int> steps;
  for (int i = 2; i < argc; ++i) steps.push_back(atoi(argv[i]));
  if (steps.empty()) steps = {9, 10};
  init_harness(false);
  printf("SMs %d, probe %d\n", g_sms, (int)cuda_kernels::matmul_ladder::wgmma09::probe_wgmma(0));
  for (int step : steps) {
    g_step = step;
    if (mode == "all" || mode == "test") {
      int shapes[][3] = {{1, 1, 1},       {127, 129, 67},    {1000, 1000, 1000}, {4096, 4096, 4096},
                         {1, 4096, 4096}, {4096, 1, 4096},   {256, 512, 64},     {130, 300, 8},
                         {64, 64, 17},    {777, 1333, 2049}, {2048, 2048, 2048}, {300, 257, 1}};
      for (bool bf16 : {true, false})
        for (auto& s : shapes) test(bf16, s[0], s[1], s[2], false, true, 0);
      // other layouts and pitches
      for (bool amn : {false, true})
        for (bool bmn : {false, true}) {
          test(true, 1000, 1000, 1000, amn, bmn, 8);
          test(true, 127, 129, 67, amn, bmn, 0);
          test(false, 512, 768, 320, amn, bmn, 16);
        }
      for (int bn : g_step == 12 ? std::vector<int>{64, 128, 256} : std::vector<int>{128, 256}) {
        LaunchOptions o;
        o.block_n = bn;
        test(true, 1000, 1000, 1000, false, true, 0, o);
        test(true, 129, 513, 200, true, false, 0, o);
        o.max_blocks = 7;  // many tiles per block: exercises the ring's phase across tiles
        test(true, 1000, 1000, 1000, false, true, 0, o);
      }
      if (step == 12) {
        // Stream-K forced on small grids (many split tiles per launch, 1-3 pieces per tile, empty ranges), every
        // tile width and layout, tails, M/N/K = 1, K of 1-5 slabs.
        LaunchOptions o;
        o.stream_k = 1;
        for (int bn : {64, 128, 256}) {
          o.block_n = bn;
          for (int mb : {4, 7, 10, 40}) {
            o.max_blocks = mb;
            for (bool amn : {false, true})
              for (bool bmn : {false, true}) {
                test(amn == bmn, 1000, 1000, 1000, amn, bmn, 0, o);
                test(amn != bmn, 777, 1333, 2049, amn, bmn, 8, o);
                test(true, 1000, 1000, 130, amn, bmn, 0, o);
              }
            test(true, 1, 4096, 4096, false, true, 0, o);
            test(true, 4096, 1, 4096, false, true, 0, o);
            test(true, 300, 257, 1, false, true, 0, o);
            test(false, 130, 300, 8, false, true, 0, o);
            test(true, 129, 513, 200, true, false, 0, o);
            test(false, 1000, 1000, 300, false, true, 0, o);
          }
        }
        // Split-K clusters forced (every split count, layouts, tails, K of 1-9 slabs, more splits than slabs).
        o = LaunchOptions{};
        o.block_n = 64;
        for (int ks : {2, 4, 8}) {
          o.k_splits = ks;
          for (bool amn : {false, true})
            for (bool bmn : {false, true}) {
              test(amn == bmn, 256, 256, 256, amn, bmn, 0, o);
              test(amn != bmn, 127, 129, 67, amn, bmn, 8, o);
              test(true, 300, 257, 520, amn, bmn, 0, o);
            }
          test(true, 1, 4096, 4096, false, true, 0, o);
          test(false, 300, 257, 1, false, true, 0, o);
          test(true, 513, 1000, 130, false, true, 0, o);
          test(false, 64, 64, 17, false, true, 0, o);
        }
        o = LaunchOptions{};
        for (bool bf16 : {true, false}) {
          test(bf16, 4000, 4000, 4000, false, true, 0, o);
          test(bf16, 8192, 1024, 4096, false, true, 0, o);
          test(bf16, 4096, 4096, 4096, true, false, 0, o);
          test(bf16, 4096, 4096, 4096, false, true, 0, o);
          test(bf16, 1024, 1024, 1024, false, true, 0, o);
          test(bf16, 1024, 1024, 1024, true, true, 8, o);
          test(bf16, 2048, 2048, 2048, false, true, 0, o);
        }
        o.stream_k = 1;
        test(false, 2000, 3000, 5000, false, false, 0, o);
      }
      test(true, 8192, 8192, 8192, false, true, 0);
      printf("FAILURES: %d\n", g_fail);
    }
    if (mode == "all" || mode == "bench") {
      auto O = [](int bn, int g) {
        LaunchOptions o;
        o.block_n = bn;
        o.group_m = g;
        return o;
      };
      const int f = step == 9 ? 1 : 2;  // group_m counts row tiles in step 9, pairs of them in step 10
      for (bool bf16 : {true, false}) {
        bench(bf16, 4096, 4096, 4096, {O(256, 0), O(256, 8 / f), O(256, 32 / f)});
        bench(bf16, 8192, 8192, 8192, {O(256, 0), O(256, 8 / f), O(256, 32 / f)});
        bench(bf16, 2048, 2048, 2048, {O(256, 0), O(128, 0)});
        bench(bf16, 4000, 4000, 4000, {O(256, 0)});
        bench(bf16, 8192, 1024, 4096, {O(256, 0), O(256, 8 / f), O(128, 0)});
        bench(bf16, 1024, 1024, 1024, {O(128, 0)});
      }
      bench(true, 4096, 4096, 4096, {O(0, 0)}, true, false);
      bench(true, 4096, 4096, 4096, {O(0, 0)}, false, false);
    }
  }
  return 0;
}
