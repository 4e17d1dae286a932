// Standalone harness for ladder step 13 (csrc/cuda/matmul/13_tf32_wgmma.cu, float32 as TF32): correctness of
// every operand layout against an fp64 reference (relative to sum |a b|, with a guard region after C), a probe of
// how ours and cuBLAS round an input to TF32, and timing against cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32
// (interleaved, median of 30), without torch (CUDA_KERNELS_MATMUL_STANDALONE leaves out the at::Tensor entry point).
//
// Build and run on a compute-9.0 GPU (cuBLAS from the CUDA toolkit):
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Icsrc -o /tmp/tf32_gemm_bench \
//        scripts/tf32_gemm_bench.cu -lcublas
//   /tmp/tf32_gemm_bench test     # correctness and the rounding probe
//   /tmp/tf32_gemm_bench small    # the small shapes only (for compute-sanitizer)
//   /tmp/tf32_gemm_bench bench    # timing against cuBLAS TF32
// docs/matmul.md ("Hopper tuning log") has what it measured.
#include <cstdio>
#define CUDA_KERNELS_MATMUL_STANDALONE
#include <cublas_v2.h>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>
#include "cuda/matmul/13_tf32_wgmma.cu"
using cuda_kernels::hopper::Operand;
namespace w13 = cuda_kernels::matmul_ladder::wgmma13;
#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)
static int g_sms;
static cublasHandle_t g_h;

__global__ void fill(float* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    p[i] = (h & 0xFFFFFF) / float(0x1000000) * 2.f - 1.f;
  }
}
// element (i, k) of A: a_mn ? A[k * lda + i] : A[i * lda + k]; B (k, j): b_kmaj ? B[j * ldb + k] : B[k * ldb + j]
__global__ void ref_kernel(const float* A, const float* B, const float* C, int M, int N, int K, int64_t lda,
                           int64_t ldb, bool a_mn, bool b_kmaj, double* worst) {
  int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= M || j >= N) return;
  double s = 0, sa = 0;
  for (int k = 0; k < K; ++k) {
    double a = a_mn ? A[k * lda + i] : A[i * lda + k];
    double b = b_kmaj ? B[j * ldb + k] : B[k * ldb + j];
    s += a * b;
    sa += fabs(a * b);
  }
  double err = fabs(C[int64_t(i) * N + j] - s) / (sa + 1e-30);
  if (!(err <= 1.0)) err = 1e9;  // NaN
  unsigned long long* w = reinterpret_cast<unsigned long long*>(worst);
  atomicMax(w, __double_as_longlong(err));
}

static bool test(int M, int N, int K, bool a_mn, bool b_kmaj, int block_y = 0, int max_blocks = 0) {
  int64_t lda = a_mn ? ((M + 3) / 4 * 4) : ((K + 3) / 4 * 4);
  int64_t ldb = b_kmaj ? ((K + 3) / 4 * 4) : ((N + 3) / 4 * 4);
  int64_t na = a_mn ? lda * K : lda * M, nb = b_kmaj ? ldb * N : ldb * K;
  float *A, *B, *C;
  double* worst;
  CK(cudaMalloc(&A, na * 4));
  CK(cudaMalloc(&B, nb * 4));
  CK(cudaMalloc(&C, int64_t(M) * N * 4 + 4096));
  CK(cudaMalloc(&worst, 8));
  fill<<<1024, 256>>>(A, na, 1);
  fill<<<1024, 256>>>(B, nb, 2);
  CK(cudaMemset(C, 0xFF, int64_t(M) * N * 4 + 4096));
  CK(cudaMemset(worst, 0, 8));
  Operand oa{A, lda, a_mn}, ob{B, ldb, !b_kmaj};
  w13::LaunchOptions o;
  o.block_y = block_y;
  o.max_blocks = max_blocks;
  float* ws;
  CK(cudaMalloc(&ws, w13::workspace_floats(M, N, K, ob) * 4 + 16));
  cudaError_t e = w13::launch(M, N, K, oa, ob, C, g_sms, 0, ws, o);
  if (e != cudaSuccess) {
    printf("launch %dx%dx%d a_mn=%d b_kmaj=%d: %s\n", M, N, K, a_mn, b_kmaj, cudaGetErrorString(e));
    return false;
  }
  CK(cudaDeviceSynchronize());
  // guard after C untouched
  std::vector<uint32_t> guard(1024);
  CK(cudaMemcpy(guard.data(), C + int64_t(M) * N, 4096, cudaMemcpyDeviceToHost));
  bool guard_ok = std::all_of(guard.begin(), guard.end(), [](uint32_t v) { return v == 0xFFFFFFFFu; });
  dim3 blk(16, 16), grd((N + 15) / 16, (M + 15) / 16);
  ref_kernel<<<grd, blk>>>(A, B, C, M, N, K, lda, ldb, a_mn, b_kmaj, worst);
  double w;
  CK(cudaMemcpy(&w, worst, 8, cudaMemcpyDeviceToHost));
  const double bound = std::ldexp(1.0, -10) + std::ldexp(1.0, -21) +
                       std::min(double(K), 6 * std::sqrt(double(K))) * std::ldexp(1.0, -24);
  bool ok = w <= bound && guard_ok;
  printf("%s %5dx%5dx%5d a_mn=%d b_kmaj=%d by=%d blocks=%d worst |err|/S = %.3g (bound %.3g) guard %s\n",
         ok ? "ok  " : "FAIL", M, N, K, a_mn, b_kmaj, block_y, max_blocks, w, bound, guard_ok ? "ok" : "BAD");
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  cudaFree(worst);
  cudaFree(ws);
  return ok;
}

static void probe() {
  // K = 1, a = 1 + 0.75 * 2^-10 (between TF32 values 1 and 1 + 2^-10), b = 1: rna gives 1 + 2^-10, truncation 1.
  const float v = 1.0f + 0.75f * std::ldexp(1.0f, -10);
  float *A, *B, *C;
  CK(cudaMalloc(&A, 64 * 4));
  CK(cudaMalloc(&B, 64 * 4));
  CK(cudaMalloc(&C, 64 * 4));
  std::vector<float> h(64, 1.0f);
  // A (1 x 4, padded K=4 but K=1 used) row-major, B (1 x 1)
  auto run = [&](float av, float bv, const char* what) {
    std::vector<float> ha(64, 0.f), hb(64, 0.f);
    ha[0] = av;
    hb[0] = bv;
    CK(cudaMemcpy(A, ha.data(), 256, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(B, hb.data(), 256, cudaMemcpyHostToDevice));
    float ours, cub;
    Operand oa{A, 4, false}, ob{B, 4, true};  // B row-major (K=1, N=1)
    w13::LaunchOptions o;
    float* ws;
    CK(cudaMalloc(&ws, 64));
    CK(w13::launch(1, 1, 1, oa, ob, C, g_sms, 0, ws, o));
    cudaFree(ws);
    CK(cudaMemcpy(&ours, C, 4, cudaMemcpyDeviceToHost));
    float alpha = 1, beta = 0;
    cublasGemmEx(g_h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &alpha, B, CUDA_R_32F, 1, A, CUDA_R_32F, 1, &beta, C,
                 CUDA_R_32F, 1, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
    CK(cudaMemcpy(&cub, C, 4, cudaMemcpyDeviceToHost));
    printf("probe %s: input %.10f -> ours %.10f cuBLAS-TF32 %.10f (rna %.10f, trunc %.10f)\n", what, double(av * bv),
           ours, cub, 1.0 + std::ldexp(1.0, -10), 1.0);
  };
  run(v, 1.0f, "A (Y operand in NN)");
  run(1.0f, v, "B (X operand in NN)");
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  // cuBLAS on a size that runs its tensor-core kernels: C = A @ I (256^3), A all v, then C = I @ A^T-ish: B all v.
  const int n = 512;
  float *dA, *dI, *dC;
  CK(cudaMalloc(&dA, n * n * 4));
  CK(cudaMalloc(&dI, n * n * 4));
  CK(cudaMalloc(&dC, n * n * 4));
  std::vector<float> hv(n * n, v), hi(n * n, 0.f), hc(n * n);
  for (int i = 0; i < n; ++i) hi[i * n + i] = 1.f;
  CK(cudaMemcpy(dA, hv.data(), n * n * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dI, hi.data(), n * n * 4, cudaMemcpyHostToDevice));
  float alpha = 1, beta = 0;
  // row-major C = V @ I: col-major call C^T = I^T V^T -> gemm(N, N, n, n, n, I, V)
  cublasGemmEx(g_h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, dI, CUDA_R_32F, n, dA, CUDA_R_32F, n, &beta, dC,
               CUDA_R_32F, n, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
  CK(cudaMemcpy(hc.data(), dC, n * n * 4, cudaMemcpyDeviceToHost));
  printf("probe cuBLAS-TF32 512^3 row-major V @ I (V the A operand): C[0][0] = %.10f\n", hc[0]);
  cublasGemmEx(g_h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, dA, CUDA_R_32F, n, dI, CUDA_R_32F, n, &beta, dC,
               CUDA_R_32F, n, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
  CK(cudaMemcpy(hc.data(), dC, n * n * 4, cudaMemcpyDeviceToHost));
  printf("probe cuBLAS-TF32 512^3 row-major I @ V (V the B operand): C[0][0] = %.10f\n", hc[0]);
  // NT: B given K-major
  cublasGemmEx(g_h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &alpha, dA, CUDA_R_32F, n, dI, CUDA_R_32F, n, &beta, dC,
               CUDA_R_32F, n, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
  CK(cudaMemcpy(hc.data(), dC, n * n * 4, cudaMemcpyDeviceToHost));
  printf("probe cuBLAS-TF32 512^3 I @ V^T (V K-major B): C[0][0] = %.10f\n", hc[0]);
  cudaFree(dA);
  cudaFree(dI);
  cudaFree(dC);
}

static void bench(int M, int N, int K, bool b_kmaj, int reps = 30) {
  w13::LaunchOptions o;
  float *A, *B, *C;
  CK(cudaMalloc(&A, int64_t(M) * K * 4));
  CK(cudaMalloc(&B, int64_t(K) * N * 4));
  CK(cudaMalloc(&C, int64_t(M) * N * 4));
  fill<<<1024, 256>>>(A, int64_t(M) * K, 1);
  fill<<<1024, 256>>>(B, int64_t(K) * N, 2);
  Operand oa{A, K, false}, ob{B, b_kmaj ? K : N, !b_kmaj};
  float alpha = 1, beta = 0;
  float* ws;
  CK(cudaMalloc(&ws, w13::workspace_floats(M, N, K, ob) * 4 + 16));
  auto ours = [&] { CK(w13::launch(M, N, K, oa, ob, C, g_sms, 0, ws, o)); };
  auto cub = [&] {
    if (b_kmaj)
      cublasGemmEx(g_h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, B, CUDA_R_32F, K, A, CUDA_R_32F, K, &beta, C,
                   CUDA_R_32F, N, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
    else
      cublasGemmEx(g_h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, B, CUDA_R_32F, N, A, CUDA_R_32F, K, &beta, C,
                   CUDA_R_32F, N, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
  };
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> to, tc;
  for (int w = 0; w < 5; ++w) {
    ours();
    cub();
  }
  for (int r = 0; r < reps; ++r) {
    for (int which = 0; which < 2; ++which) {
      bool o = (r + which) % 2 == 0;
      cudaEventRecord(e0);
      if (o)
        ours();
      else
        cub();
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      (o ? to : tc).push_back(ms);
    }
  }
  std::sort(to.begin(), to.end());
  std::sort(tc.begin(), tc.end());
  double mo = to[to.size() / 2], mc = tc[tc.size() / 2], fl = 2.0 * M * N * K;
  printf("bench %5dx%5dx%5d %s: ours %.4f ms (%.0f TFLOP/s) cuBLAS-TF32 %.4f ms (%.0f) ratio %.3f\n", M, N, K,
         b_kmaj ? "NT" : "NN", mo, fl / mo / 1e9, mc, fl / mc / 1e9, mc / mo);
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  cudaFree(ws);
}

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "all";
  cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, 0);
  cublasCreate(&g_h);
  if (mode == "all" || mode == "test" || mode == "small") {
    int fails = 0;
    int shapes[][3] = {{128, 256, 32}, {256, 256, 256}, {1, 1, 1},          {1, 1000, 77},     {1000, 1, 77},
                       {129, 257, 33}, {777, 555, 333}, {1024, 1024, 1024}, {4096, 4096, 512}, {300, 4000, 65}};
    for (auto& s : shapes)
      for (int l = 0; l < 3; ++l) {
        if (mode == "small" && double(s[0]) * s[1] * s[2] > 2e8) continue;
        bool a_mn = l == 2, b_kmaj = l >= 1;  // NN, NT (B K-major), TT (A MN, B K-major)
        fails += !test(s[0], s[1], s[2], a_mn, b_kmaj);
      }
    fails += !test(777, 555, 333, false, false, 128);
    fails += !test(777, 555, 333, false, true, 128);
    fails += !test(1024, 1000, 1000, false, false, 0, 2);  // few blocks: each rounds many units of Y
    fails += !test(1000, 1024, 999, false, true, 128, 1);
    if (mode != "small") fails += !test(64, 64, 70000, false, false);
    printf("tests: %d failed\n", fails);
    probe();
  }
  if (mode == "all" || mode == "bench") {
    for (int r = 0; r < 2; ++r) {
      bench(4096, 4096, 4096, false);
      bench(4096, 4096, 4096, true);
      bench(8192, 8192, 8192, false, 10);
      bench(2048, 2048, 2048, false);
      bench(8192, 1024, 4096, false);
      bench(4000, 4000, 4000, false);
    }
  }
  return 0;
}
