// Standalone tuning experiment for the square kernel's launch shape (no torch): fp32 and bf16-sized (2-byte)
// elements, 16-byte packs, persistent grid-stride vs one-pass grid, unroll 1/2/4, 128/256 threads, against
// cudaMemcpy D2D. nvcc -O3 -arch=sm_90a scripts/square_tune.cu -o /tmp/square_tune && /tmp/square_tune
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

struct alignas(16) P4 {
  float v[4];
};

template <int kThreads, int kUnroll, bool kPersistent>
__global__ void __launch_bounds__(kThreads) sq(const P4* __restrict__ x, P4* __restrict__ y, long n) {
  long stride = kPersistent ? (long)gridDim.x * kThreads * kUnroll : n;
  for (long base = (long)blockIdx.x * kThreads * kUnroll + threadIdx.x; base < n; base += stride) {
    P4 b[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + u * kThreads < n) b[u] = x[base + u * kThreads];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + u * kThreads < n) {
        for (int e = 0; e < 4; ++e) b[u].v[e] *= b[u].v[e];
        y[base + u * kThreads] = b[u];
      }
  }
}

static char* flush_buf;
template <typename F>
float time_it(F f) {
  cudaEvent_t s, e;
  cudaEventCreate(&s);
  cudaEventCreate(&e);
  for (int i = 0; i < 5; ++i) f();
  std::vector<float> t;
  for (int i = 0; i < 40; ++i) {
    cudaMemsetAsync(flush_buf, i, 256 << 20);
    cudaEventRecord(s);
    f();
    cudaEventRecord(e);
    cudaEventSynchronize(e);
    float ms;
    cudaEventElapsedTime(&ms, s, e);
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <int kThreads, int kUnroll, bool kPersistent>
void run(const P4* x, P4* y, long n_packs, int sms, double bytes, float copy_ms) {
  long blocks = (n_packs + kThreads * kUnroll - 1) / (kThreads * kUnroll);
  if (kPersistent) blocks = std::min<long>(blocks, (long)sms * (2048 / kThreads));
  float ms = time_it([&] { sq<kThreads, kUnroll, kPersistent><<<blocks, kThreads>>>(x, y, n_packs); });
  printf("  threads %3d unroll %d %-10s %8.1f GB/s  %.3f of copy\n", kThreads, kUnroll,
         kPersistent ? "persistent" : "one-pass", bytes / ms / 1e6, copy_ms / ms);
}

int main() {
  int sms;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaMalloc(&flush_buf, 256 << 20);
  for (int p : {20, 24, 26, 28}) {
    long bytes_in = 4L << p;
    long n_packs = bytes_in / 16;
    P4 *x, *y;
    cudaMalloc(&x, bytes_in);
    cudaMalloc(&y, bytes_in);
    cudaMemset(x, 1, bytes_in);
    double bytes = 2.0 * bytes_in;
    float copy_ms = time_it([&] { cudaMemcpyAsync(y, x, bytes_in, cudaMemcpyDeviceToDevice); });
    printf("fp32 2^%d: copy %.1f GB/s\n", p, bytes / copy_ms / 1e6);
    run<128, 1, false>(x, y, n_packs, sms, bytes, copy_ms);
    run<128, 2, false>(x, y, n_packs, sms, bytes, copy_ms);
    run<256, 1, false>(x, y, n_packs, sms, bytes, copy_ms);
    run<256, 2, false>(x, y, n_packs, sms, bytes, copy_ms);
    run<256, 4, false>(x, y, n_packs, sms, bytes, copy_ms);
    run<256, 4, true>(x, y, n_packs, sms, bytes, copy_ms);
    run<256, 2, true>(x, y, n_packs, sms, bytes, copy_ms);
    run<512, 2, false>(x, y, n_packs, sms, bytes, copy_ms);
    cudaFree(x);
    cudaFree(y);
  }
  return 0;
}
