// Tensor-core building blocks of ladder steps 07 and 08 (sm_80+): the warp-level mma.sync.m16n8k16 with float32
// accumulators, ldmatrix fragment loads, 16-byte cp.async copies, and the float16/bfloat16 types behind them.
//
// Every wrapper compiles for any arch (the extension may be built for older GPUs too) but does its work only on
// sm_80+; the launchers refuse to run on older GPUs (min_cc in csrc/cuda/matmul/dispatch.cpp), and the device code for
// them traps instead of computing garbage.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace cuda_kernels::matmul_ladder::sm80 {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define CUDA_KERNELS_SM80_UNSUPPORTED 1
#else
#define CUDA_KERNELS_SM80_UNSUPPORTED 0
#endif

// The 16-bit element types the tensor-core steps take. torch's at::Half / at::BFloat16 have the same layout as
// __half / __nv_bfloat16 (one 16-bit word), so the launchers reinterpret the data pointers.
template <bool kBf16>
struct Elem;
template <>
struct Elem<false> {
  using type = __half;
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);  // .x = lo goes to the low 16 bits (the lower address)
    return *reinterpret_cast<const uint32_t*>(&h);
  }
  __device__ __forceinline__ static type from_float(float x) { return __float2half_rn(x); }
};
template <>
struct Elem<true> {
  using type = __nv_bfloat16;
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
  __device__ __forceinline__ static type from_float(float x) { return __float2bfloat16_rn(x); }
};

// Generic -> shared-window address, the form ldmatrix / cp.async / st.shared take.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 matrices of 16-bit elements from shared memory, one 16-byte row per lane address: lanes 8i..8i+7 give
// the 8 row addresses of matrix i. Lane l receives, in r[i], row l / 4, elements 2 * (l % 4) + {0, 1} of matrix
// i: exactly the per-lane piece the mma fragments below want.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
#if !CUDA_KERNELS_SM80_UNSUPPORTED
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#else
  __trap();
#endif
}
// The same, each matrix transposed on the way: lane l receives elements (2 * (l % 4) + {0, 1}, l / 4), i.e. two
// consecutive ROWS of column l / 4. Used for B, which is stored (k, n) row-major but wanted by mma as k-pairs.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
#if !CUDA_KERNELS_SM80_UNSUPPORTED
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#else
  __trap();
#endif
}

// d += a (16x16, row-major) * b (16x8, "col": k-major per column), float32 accumulators, one warp.
// Fragment layout (PTX ISA, "mma.m16n8k16"), with g = lane / 4 and t = lane % 4:
//   a[0]: A[g][2t..2t+1]   a[1]: A[g+8][2t..2t+1]   a[2]: A[g][2t+8..2t+9]   a[3]: A[g+8][2t+8..2t+9]
//   b[0]: B[2t..2t+1][g]   b[1]: B[2t+8..2t+9][g]
//   d[0], d[1]: D[g][2t], D[g][2t+1]                 d[2], d[3]: D[g+8][2t], D[g+8][2t+1]
template <bool kBf16>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if !CUDA_KERNELS_SM80_UNSUPPORTED
  if constexpr (kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#else
  __trap();
#endif
}

// 16 bytes global -> shared without passing through registers (.cg: cached in L2 only, each piece is read once
// per block). valid = false writes 16 zero bytes and reads nothing (src-size 0); src must still be a mapped
// address, so callers pass the matrix base then.
__device__ __forceinline__ void cp_async16_zfill(uint32_t dst, const void* src, bool valid) {
#if !CUDA_KERNELS_SM80_UNSUPPORTED
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
#else
  __trap();
#endif
}
// 4 bytes global -> shared the same way (.ca: the only form that copies fewer than 16 bytes); src 4-byte aligned.
__device__ __forceinline__ void cp_async4_zfill(uint32_t dst, const void* src, bool valid) {
#if !CUDA_KERNELS_SM80_UNSUPPORTED
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0));
#else
  __trap();
#endif
}
// An L2 cache policy (sm_80+) that evicts the lines it is given first: for data read or written once in all (a
// skinny product's big operand, a GEMM's output), so that it leaves L2 before the lines other work still needs or
// left dirty there (which would otherwise be written back to DRAM while this kernel runs).
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy = 0;
#if !CUDA_KERNELS_SM80_UNSUPPORTED
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
#endif
  return policy;
}
// cp_async16_zfill with the copy's L2 lines under `policy` (l2_evict_first_policy() for an operand read once).
__device__ __forceinline__ void cp_async16_zfill_stream(uint32_t dst, const void* src, bool valid, uint64_t policy) {
#if !CUDA_KERNELS_SM80_UNSUPPORTED
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0), "l"(policy));
#else
  __trap();
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if !CUDA_KERNELS_SM80_UNSUPPORTED
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
// Waits until at most n of this thread's committed copy groups are still in flight.
template <int n>
__device__ __forceinline__ void cp_async_wait() {
#if !CUDA_KERNELS_SM80_UNSUPPORTED
  asm volatile("cp.async.wait_group %0;\n" ::"n"(n) : "memory");
#endif
}

// A 16-byte store to shared memory (the scalar fallback writes the chunks it assembled in registers).
__device__ __forceinline__ void st_shared16(uint32_t dst, const uint4& v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// Eight consecutive 16-bit elements src[0..n) (n <= 8; the rest zero) gathered into one 16-byte chunk with
// 2-byte loads: the path for matrices whose rows are not 16-byte aligned.
template <typename T>
__device__ __forceinline__ uint4 gather8(const T* src, int n) {
  uint16_t h[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) h[i] = i < n ? reinterpret_cast<const uint16_t*>(src)[i] : uint16_t{0};
  return make_uint4(h[0] | uint32_t{h[1]} << 16, h[2] | uint32_t{h[3]} << 16, h[4] | uint32_t{h[5]} << 16,
                    h[6] | uint32_t{h[7]} << 16);
}

// Tile order: block b of a 1-D grid computes output tile (tm, tn). Blocks go down groups of kGroupM row tiles
// column by column, so the blocks resident at one time share kGroupM row tiles of A and a few column tiles of B
// in L2 (instead of one row of A and every column of B).
template <int kGroupM>
__device__ __forceinline__ void grouped_tile(int64_t b, int64_t tiles_m, int64_t tiles_n, int64_t& tm, int64_t& tn) {
  const int64_t per_group = kGroupM * tiles_n;
  const int64_t first_m = (b / per_group) * kGroupM;
  const int64_t rows = tiles_m - first_m < kGroupM ? tiles_m - first_m : kGroupM;  // the last group may be short
  const int64_t in_group = b % per_group;
  tm = first_m + in_group % rows;
  tn = in_group / rows;
}

}  // namespace cuda_kernels::matmul_ladder::sm80
