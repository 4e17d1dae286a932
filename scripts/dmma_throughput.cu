// Float64 tensor-core (DMMA) throughput on one GPU: every SM runs 2 blocks of 4 or 8 warps, each warp issuing
// 8 independent chains of mma.sync .f64 of one shape; prints TFLOP/s per shape. docs/matmul.md (step 15) quotes
// the H100's figures: m8n8k4 (the only float64 shape of sm_80) runs at half the rate of sm_90's m16n8k4/k8/k16.
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/dmma_throughput scripts/dmma_throughput.cu
//   /tmp/dmma_throughput
#include <cuda_runtime.h>
#include <cstdio>
#define CK(x)                                                       \
  do {                                                              \
    cudaError_t e = (x);                                            \
    if (e != cudaSuccess) {                                         \
      printf("CUDA %s line %d\n", cudaGetErrorString(e), __LINE__); \
      return 1;                                                     \
    }                                                               \
  } while (0)
constexpr int kChains = 8;
constexpr int kIters = 4096;
template <int SHAPE>
__global__ void k(double* out, double seed) {
  double a[8], b[4], c[kChains][4];
  for (int i = 0; i < 8; ++i) a[i] = seed + threadIdx.x + i;
  for (int i = 0; i < 4; ++i) b[i] = seed * 2 + i;
  for (int j = 0; j < kChains; ++j)
    for (int i = 0; i < 4; ++i) c[j][i] = 0;
  for (int it = 0; it < kIters; ++it) {
#pragma unroll
    for (int j = 0; j < kChains; ++j) {
      if constexpr (SHAPE == 0) {
        asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};"
                     : "+d"(c[j][0]), "+d"(c[j][1])
                     : "d"(a[0]), "d"(b[0]));
      } else if constexpr (SHAPE == 1) {
        asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                     : "+d"(c[j][0]), "+d"(c[j][1]), "+d"(c[j][2]), "+d"(c[j][3])
                     : "d"(a[0]), "d"(a[1]), "d"(b[0]));
      } else if constexpr (SHAPE == 2) {
        asm volatile(
            "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
            : "+d"(c[j][0]), "+d"(c[j][1]), "+d"(c[j][2]), "+d"(c[j][3])
            : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
      } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7,%8,%9,%10,%11}, "
            "{%12,%13,%14,%15}, {%0,%1,%2,%3};"
            : "+d"(c[j][0]), "+d"(c[j][1]), "+d"(c[j][2]), "+d"(c[j][3])
            : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]), "d"(b[0]),
              "d"(b[1]), "d"(b[2]), "d"(b[3]));
      }
    }
  }
  double s = 0;
  for (int j = 0; j < kChains; ++j)
    for (int i = 0; i < 4; ++i) s += c[j][i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
template <int SHAPE>
int run(const char* name, double fma_per_mma, int warps) {
  int sms;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  double* out;
  CK(cudaMalloc(&out, sizeof(double) * sms * 32 * warps * 4));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int rep = 0; rep < 3; ++rep) {
    cudaEventRecord(e0);
    k<SHAPE><<<sms * 2, 32 * warps>>>(out, 1.0);
    cudaEventRecord(e1);
    CK(cudaEventSynchronize(e1));
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    double flops = 2.0 * fma_per_mma * kChains * kIters * (double)(sms * 2) * warps;
    if (rep == 2) printf("%-10s warps/block %2d: %.1f TFLOP/s\n", name, warps, flops / ms / 1e9);
  }
  cudaFree(out);
  return 0;
}
int main() {
  for (int w : {4, 8}) {
    run<0>("m8n8k4", 8 * 8 * 4, w);
    run<1>("m16n8k4", 16 * 8 * 4, w);
    run<2>("m16n8k8", 16 * 8 * 8, w);
    run<3>("m16n8k16", 16 * 8 * 16, w);
  }
}
