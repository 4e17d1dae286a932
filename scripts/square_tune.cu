// Standalone tuning experiment for the square kernel's launch shape (no torch), against cudaMemcpy D2D of the
// same bytes. 4-byte (float) and 8-byte (double) elements in 16-byte packs (1-8 per thread), three layouts:
//   one-pass   enough blocks to cover the tensor once; thread t of a block takes packs t, t + kThreads, ...
//   capped     the same, but the grid is capped at (SMs x resident blocks per SM x waves) and strides over the
//              tensor (a grid sized from the SM count); waves = 1 is a classic persistent grid
//   adjacent   one-pass, but each thread's kUnroll packs are adjacent in memory (what torch's vectorized
//              elementwise kernel does for 8-byte types: 4 doubles = 32 bytes per thread)
// Before every timed call 256 MB are zeroed (as benchmark.py flushes L2). Median of 101 calls.
//   nvcc -O3 -std=c++17 -arch=sm_90a scripts/square_tune.cu -o /tmp/square_tune && /tmp/square_tune [small]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

template <typename T>
struct alignas(16) Pack {
  static constexpr int kVec = 16 / sizeof(T);
  T v[kVec];
};

enum Layout { kOnePass, kCapped, kAdjacent };

template <typename T, int kThreads, int kUnroll, Layout kLayout>
__global__ void __launch_bounds__(kThreads) sq(const Pack<T>* __restrict__ x, Pack<T>* __restrict__ y, long n) {
  const long per_block = long{kThreads} * kUnroll;
  const long stride = kLayout == kCapped ? long{gridDim.x} * per_block : n;
  for (long block_base = long{blockIdx.x} * per_block; block_base < n; block_base += stride) {
    // index of pack u of this thread
    auto at = [&](int u) {
      return kLayout == kAdjacent ? block_base + long{threadIdx.x} * kUnroll + u
                                  : block_base + threadIdx.x + long{u} * kThreads;
    };
    Pack<T> b[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (at(u) < n) b[u] = x[at(u)];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (at(u) < n) {
#pragma unroll
        for (int e = 0; e < Pack<T>::kVec; ++e) b[u].v[e] *= b[u].v[e];
        y[at(u)] = b[u];
      }
  }
}

static char* flush_buf;
constexpr size_t kFlushBytes = size_t{256} << 20;
constexpr int kReps = 101;  // timed calls per case; the median is reported

template <typename F>
float time_it(F f) {
  cudaEvent_t s, e;
  cudaEventCreate(&s);
  cudaEventCreate(&e);
  for (int i = 0; i < 5; ++i) f();
  std::vector<float> t;
  for (int i = 0; i < kReps; ++i) {
    cudaMemsetAsync(flush_buf, i, kFlushBytes);
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

template <typename T, int kThreads, int kUnroll, Layout kLayout>
void run(const Pack<T>* x, Pack<T>* y, long n_packs, int waves, double bytes, float copy_ms) {
  auto kernel = sq<T, kThreads, kUnroll, kLayout>;
  long blocks = (n_packs + kThreads * kUnroll - 1) / (kThreads * kUnroll);
  if (kLayout == kCapped) {
    int sms, per_sm;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0);
    blocks = std::min<long>(blocks, long{sms} * per_sm * waves);
  }
  float ms = time_it([&] { kernel<<<blocks, kThreads>>>(x, y, n_packs); });
  const char* name = kLayout == kOnePass ? "one-pass" : kLayout == kCapped ? "capped" : "adjacent";
  printf("  threads %3d unroll %d %-9s waves %2d blocks %7ld %8.1f GB/s %6.2f us  %.3f of copy\n", kThreads, kUnroll,
         name, kLayout == kCapped ? waves : 0, blocks, bytes / ms / 1e6, ms * 1e3, copy_ms / ms);
}

// The launch shapes timed at every size: large tensors (bandwidth-bound) ...
template <typename T>
void rows_large(const Pack<T>* x, Pack<T>* y, long n_packs, double bytes, float copy_ms) {
  run<T, 128, 1, kOnePass>(x, y, n_packs, 0, bytes, copy_ms);
  run<T, 128, 2, kOnePass>(x, y, n_packs, 0, bytes, copy_ms);
  run<T, 128, 4, kOnePass>(x, y, n_packs, 0, bytes, copy_ms);
  run<T, 128, 8, kOnePass>(x, y, n_packs, 0, bytes, copy_ms);
  run<T, 256, 2, kOnePass>(x, y, n_packs, 0, bytes, copy_ms);
  run<T, 128, 2, kAdjacent>(x, y, n_packs, 0, bytes, copy_ms);
  for (int waves : {1, 8, 32}) run<T, 128, 2, kCapped>(x, y, n_packs, waves, bytes, copy_ms);
}

// ... and small ones (latency-bound, a few us): 1, 2 or 4 packs per thread, i.e. how many SMs share the work.
template <typename T>
void rows_small(const Pack<T>* x, Pack<T>* y, long n_packs, double bytes, float copy_ms) {
  run<T, 128, 1, kOnePass>(x, y, n_packs, 0, bytes, copy_ms);
  run<T, 128, 2, kOnePass>(x, y, n_packs, 0, bytes, copy_ms);
  run<T, 128, 4, kOnePass>(x, y, n_packs, 0, bytes, copy_ms);
  run<T, 64, 1, kOnePass>(x, y, n_packs, 0, bytes, copy_ms);
  run<T, 256, 1, kOnePass>(x, y, n_packs, 0, bytes, copy_ms);
}

template <typename T>
void sweep(const char* type, std::initializer_list<int> log2_sizes,
           void (*rows)(const Pack<T>*, Pack<T>*, long, double, float)) {
  for (int p : log2_sizes) {
    const long bytes_in = long{sizeof(T)} << p;
    const long n_packs = bytes_in / 16;
    Pack<T>*x, *y;
    cudaMalloc(&x, bytes_in);
    cudaMalloc(&y, bytes_in);
    cudaMemset(x, 1, bytes_in);
    const double bytes = 2.0 * bytes_in;
    const float copy_ms = time_it([&] { cudaMemcpyAsync(y, x, bytes_in, cudaMemcpyDeviceToDevice); });
    printf("%s 2^%d: copy %.1f GB/s %.2f us\n", type, p, bytes / copy_ms / 1e6, copy_ms * 1e3);
    rows(x, y, n_packs, bytes, copy_ms);
    cudaFree(x);
    cudaFree(y);
  }
}

int main(int argc, char** argv) {
  cudaMalloc(&flush_buf, kFlushBytes);
  if (argc > 1 && std::string(argv[1]) == "small") {  // 2-byte elements 2^12..2^19 = float 2^11..2^18 (bytes)
    sweep<float>("float32", {11, 12, 13, 14, 15, 16, 17, 18, 19}, rows_small<float>);
    cudaDeviceSynchronize();
    return 0;
  }
  sweep<float>("float32", {20, 21, 22, 23, 24, 25, 26, 28}, rows_large<float>);
  sweep<double>("float64", {19, 20, 21, 22, 23, 24, 27}, rows_large<double>);
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) printf("CUDA error: %s\n", cudaGetErrorString(err));
  return err != cudaSuccess;
}
