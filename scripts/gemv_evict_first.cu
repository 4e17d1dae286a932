// Standalone test of float32 y (1 x N) = x (1 x K) @ W (K x N, row-major) on the GPU, against cublasSgemv: variants
// of step 14's "rows" loop (how K is split, loads in flight, double buffering, block width) and the cache policy of
// W's loads (__ldg, __ldcs, an L2 evict-first policy), each timed after an L2 flush. By default the flush is a 100 MB
// cudaMemsetAsync, the way benchmark.py flushed until commit c2a3f34 (leaving L2 full of dirty lines that the timed
// kernel writes back); with the argument `read` it is a kernel reading 100 MB (what benchmark.py does now: a clean,
// cold L2). The zeroing flush is why step 14 loads its streamed operand evict-first (docs/matmul.md, "Skinny
// outputs"; the H100 output is docs/results/h100_gemv_evict_first.txt). Each round also times a kernel that only
// reads W (64 MB, a sum per block): the bandwidth ceiling of a kernel that must read W once.
//
// Build and run (cuBLAS headers and library from the toolkit or torch's nvidia/cu13 wheel directory NV):
//   nvcc -std=c++17 -O3 -arch=sm_90a -I$NV/include -L$NV/lib -o /tmp/gemv scripts/gemv_evict_first.cu
//   -l:libcublas.so.13 /tmp/gemv [read]
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e = (x);                                                                   \
    if (e != cudaSuccess) printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
  } while (0)

template <int kLoad>
__device__ __forceinline__ float4 load4(const float* p) {
  if constexpr (kLoad == 0) {
    return __ldg(reinterpret_cast<const float4*>(p));
  } else if constexpr (kLoad == 1) {
    return __ldcs(reinterpret_cast<const float4*>(p));
  } else {
    float4 v;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(p), "l"(pol));
    return v;
  }
}

// Variant "k8": 8 warps split k (warp w: k = kb + w, + 8, ...), block tile 128 columns, kU float4 loads a batch.
template <int kU, bool kDouble, int kLoad = 0>
__global__ void __launch_bounds__(256) gemv_k8(const float* x, const float* W, float* part, int N, int K, int kc) {
  __shared__ float red[8][128];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n = blockIdx.x * 128 + lane * 4;
  const int kb = blockIdx.y * kc, ke = min(K, kb + kc);
  float acc[4] = {};
  const int step = kU * 8;
  if constexpr (!kDouble) {
    for (int k0 = kb + warp; k0 < ke; k0 += step) {
      float4 r[kU];
      float p[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int k = k0 + u * 8;
        r[u] = k < ke ? load4<kLoad>(W + (size_t)k * N + n) : make_float4(0, 0, 0, 0);
        p[u] = k < ke ? x[k] : 0.f;
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        acc[0] += p[u] * r[u].x, acc[1] += p[u] * r[u].y, acc[2] += p[u] * r[u].z, acc[3] += p[u] * r[u].w;
      }
    }
  } else {
    float4 r[kU];
    float p[kU];
    auto load = [&](int k0, float4(&rr)[kU], float (&pp)[kU]) {
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int k = k0 + u * 8;
        rr[u] = k < ke ? load4<kLoad>(W + (size_t)k * N + n) : make_float4(0, 0, 0, 0);
        pp[u] = k < ke ? x[k] : 0.f;
      }
    };
    load(kb + warp, r, p);
    for (int k0 = kb + warp; k0 < ke; k0 += step) {
      float4 r2[kU];
      float p2[kU];
      load(k0 + step, r2, p2);
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        acc[0] += p[u] * r[u].x, acc[1] += p[u] * r[u].y, acc[2] += p[u] * r[u].z, acc[3] += p[u] * r[u].w;
        r[u] = r2[u], p[u] = p2[u];
      }
    }
  }
#pragma unroll
  for (int v = 0; v < 4; ++v) red[warp][v * 32 + lane] = acc[v];
  __syncthreads();
  if (threadIdx.x < 128) {
    const int i = threadIdx.x;
    float s = 0;
    for (int w = 0; w < 8; ++w) s += red[w][i];
    part[(size_t)blockIdx.y * N + blockIdx.x * 128 + (i % 32) * 4 + i / 32] = s;
  }
}

// Variant "wide": kG k groups of warps; a block covers (8 / kG) * 128 columns; warps of one k group read
// consecutive 512-byte pieces of the same row.
template <int kU, int kG, int kLoad = 0>
__global__ void __launch_bounds__(256) gemv_wide(const float* x, const float* W, float* part, int N, int K, int kc) {
  constexpr int kColWarps = 8 / kG, kTile = kColWarps * 128;
  __shared__ float red[kG][kTile];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = warp / kColWarps, cw = warp % kColWarps;
  const int n = blockIdx.x * kTile + cw * 128 + lane * 4;
  const int kb = blockIdx.y * kc, ke = min(K, kb + kc);
  float acc[4] = {};
  for (int k0 = kb + g; k0 < ke; k0 += kU * kG) {
    float4 r[kU];
    float p[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int k = k0 + u * kG;
      r[u] = k < ke ? load4<kLoad>(W + (size_t)k * N + n) : make_float4(0, 0, 0, 0);
      p[u] = k < ke ? x[k] : 0.f;
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      acc[0] += p[u] * r[u].x, acc[1] += p[u] * r[u].y, acc[2] += p[u] * r[u].z, acc[3] += p[u] * r[u].w;
    }
  }
  if constexpr (kG == 1) {
    *reinterpret_cast<float4*>(part + (size_t)blockIdx.y * N + n) = make_float4(acc[0], acc[1], acc[2], acc[3]);
  } else {
#pragma unroll
    for (int v = 0; v < 4; ++v) red[g][cw * 128 + lane * 4 + v] = acc[v];
    __syncthreads();
    for (int i = threadIdx.x; i < kTile; i += 256) {
      float s = 0;
      for (int gg = 0; gg < kG; ++gg) s += red[gg][i];
      part[(size_t)blockIdx.y * N + blockIdx.x * kTile + i] = s;
    }
  }
}

__global__ void reduce(const float* part, float* y, int N, int splits) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x) {
    float s = 0;
    for (int j = 0; j < splits; ++j) s += part[(size_t)j * N + i];
    y[i] = s;
  }
}

// Reads n floats (n % 4 == 0) in float4s, grid-stride, and writes one sum per block (so no load is dead code).
__global__ void __launch_bounds__(256) read_all(const float* p, size_t n, float* sums) {
  __shared__ float red[256];
  float acc = 0.f;
  for (size_t i = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * 4; i < n; i += (size_t)gridDim.x * blockDim.x * 4) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(p + i));
    acc += v.x + v.y + v.z + v.w;
  }
  red[threadIdx.x] = acc;
  __syncthreads();
  for (int s = 128; s > 0; s /= 2) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) sums[blockIdx.x] = red[0];
}

int main(int argc, char** argv) {
  const bool read_flush = argc > 1 && std::string(argv[1]) == "read";
  const int N = 4096, K = 4096;
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  float *x, *W, *y, *yref, *part, *flush;
  const size_t flush_bytes = 100 << 20;
  CK(cudaMalloc(&x, K * 4));
  CK(cudaMalloc(&W, (size_t)K * N * 4));
  CK(cudaMalloc(&y, N * 4));
  CK(cudaMalloc(&yref, N * 4));
  CK(cudaMalloc(&part, (size_t)1024 * N * 4));
  CK(cudaMalloc(&flush, flush_bytes));
  CK(cudaMemset(flush, 0, flush_bytes));
  float* sums;
  CK(cudaMalloc(&sums, 65536 * 4));
  std::vector<float> h((size_t)K * N);
  for (size_t i = 0; i < h.size(); ++i) h[i] = ((i * 2654435761u) % 1000) / 1000.f - 0.5f;
  CK(cudaMemcpy(W, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(x, h.data(), K * 4, cudaMemcpyHostToDevice));
  cublasHandle_t handle;
  cublasCreate(&handle);
  const float one = 1, zero = 0;
  auto cublas = [&] { cublasSgemv(handle, CUBLAS_OP_N, N, K, &one, W, N, x, 1, &zero, yref, 1); };
  auto time_us = [&](auto f) {
    std::vector<float> t;
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int r = 0; r < 40; ++r) {
      if (read_flush) {
        read_all<<<sms * 8, 256>>>(flush, flush_bytes / 4, sums);
      } else {
        cudaMemsetAsync(flush, 0, flush_bytes);
      }
      cudaEventRecord(a);
      f();
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      float ms;
      cudaEventElapsedTime(&ms, a, b);
      if (r >= 5) t.push_back(ms * 1000);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  std::vector<float> hy(N), hr(N);
  auto check = [&](const char* name) {
    CK(cudaMemcpy(hy.data(), y, N * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hr.data(), yref, N * 4, cudaMemcpyDeviceToHost));
    double m = 0;
    for (int i = 0; i < N; ++i) m = std::max(m, (double)std::abs(hy[i] - hr[i]));
    if (m > 1e-2) printf("  %s WRONG maxerr %g\n", name, m);
  };
  cublas();
  for (int round = 0; round < 2; ++round) {
    const float tc = time_us(cublas);
    printf("round %d (%s flush) cuBLAS sgemv %.1f us (%.2f TB/s)\n", round, read_flush ? "read" : "zeroing", tc,
           K * (double)N * 4 / tc / 1e6);
    for (int blocks : {sms * 4, sms * 8, sms * 16}) {
      const float tr = time_us([&] { read_all<<<blocks, 256>>>(W, (size_t)K * N, sums); });
      printf("  read W only   grid %5d: %6.1f us (%.2f TB/s)\n", blocks, tr, K * (double)N * 4 / tr / 1e6);
    }
    auto run = [&](const char* name, auto kern, int tile, int splits) {
      const int kc = (K + splits - 1) / splits;
      const int sp = (K + kc - 1) / kc;
      dim3 grid(N / tile, sp);
      auto f = [&] {
        kern<<<grid, 256>>>(x, W, part, N, K, kc);
        reduce<<<std::min(N / 256, sms * 8), 256>>>(part, y, N, sp);
      };
      f();
      CK(cudaDeviceSynchronize());
      check(name);
      const float t = time_us(f);
      const float t1 = time_us([&] { kern<<<grid, 256>>>(x, W, part, N, K, kc); });
      printf("  %-14s splits %4d grid %5d: %6.1f us (main kernel alone %6.1f)  %.3fx cuBLAS\n", name, sp,
             grid.x * grid.y, t, t1, tc / t);
    };
    // The loop's shape, loads through __ldg (the read-only path, default policy).
    for (int sp : {8, 17, 33}) {
      run("k8 u8 ldg", gemv_k8<8, false, 0>, 128, sp);
      run("k8 u16 ldg", gemv_k8<16, false, 0>, 128, sp);
      run("k8 u8 dbl ldg", gemv_k8<8, true, 0>, 128, sp);
    }
    for (int sp : {33, 66, 132}) run("wide g2 u8 ldg", gemv_wide<8, 2, 0>, 512, sp);
    for (int sp : {66, 132, 264}) run("wide g1 u8 ldg", gemv_wide<8, 1, 0>, 1024, sp);
    // The cache policy.
    for (int sp : {8, 17, 33}) {
      run("k8 u8 ldcs", gemv_k8<8, false, 1>, 128, sp);
      run("k8 u8 evfirst", gemv_k8<8, false, 2>, 128, sp);
      run("k8 u16 evfirst", gemv_k8<16, false, 2>, 128, sp);
      run("k8 u8 dbl evf", gemv_k8<8, true, 2>, 128, sp);
    }
    for (int sp : {33, 66}) {
      run("wide g2 u8 ldcs", gemv_wide<8, 2, 1>, 512, sp);
      run("wide g2 u8 evf", gemv_wide<8, 2, 2>, 512, sp);
    }
    for (int sp : {17, 33}) run("wide g4 u8 evf", gemv_wide<8, 4, 2>, 256, sp);
  }
  return 0;
}
