// Hopper (sm_90a) building blocks shared by the wgmma steps of the matmul ladder: PTX wrappers for mbarriers,
// TMA (cp.async.bulk.tensor) loads, wgmma.mma_async and setmaxnreg, the wgmma shared-memory matrix descriptor,
// and host-side tensor-map encoding.
//
// Every device wrapper compiles to nothing outside the sm_90a pass (`__CUDA_ARCH_FEAT_SM90_ALL`), so a file
// including this header still builds for sm_80; kernels that use them must guard their bodies the same way.
// Only the last section (tma_operand, prepare_call) is host code that uses the ladder's Args and errors.
#pragma once

#include <cuda.h>  // CUtensorMap and its enums (types only: the driver is reached through the runtime)
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

namespace cuda_kernels::hopper {

// ---------------------------------------------------------------------------------------------------------------
// Shared memory, mbarriers
// ---------------------------------------------------------------------------------------------------------------

// The shared-window address (what PTX's .shared instructions take) of a generic pointer into shared memory.
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t arrivals) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
#endif
}

// Makes barrier initializations visible to the other threads and to the async proxy (TMA) before first use.
__device__ __forceinline__ void mbar_fence_init() {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// Thread 0 initializes a ring of `stages` full/empty barrier pairs: a full barrier completes on the producer's one
// arrival (and TMA's bytes), an empty one on `empty_arrivals` consumer arrivals. The caller then syncs the block, or
// the cluster when peer blocks arrive on these barriers, before their first use.
__device__ __forceinline__ void init_ring(uint64_t* full, uint64_t* empty, int stages, uint32_t empty_arrivals) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      mbar_init(smem_u32(&full[s]), 1);
      mbar_init(smem_u32(&empty[s]), empty_arrivals);
    }
    mbar_fence_init();
  }
}

// Arrives once and adds `bytes` to the transaction count the current phase waits for (TMA completes them).
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#endif
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}

// Spins until the phase with parity `parity` of the barrier has completed. A freshly initialized barrier counts
// its (virtual) previous phase, parity 1, as complete: producers wait on `phase ^ 1` for free slots.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  uint32_t done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
#endif
}

// ---------------------------------------------------------------------------------------------------------------
// TMA
// ---------------------------------------------------------------------------------------------------------------

// Copies the box at element coordinates (c0 innermost, c1) of the 2-D tensor map into shared memory at `dst`
// and signals `bar` with the bytes written (out-of-range elements are written as zeros and counted).
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int32_t c0, int32_t c1,
                                            uint32_t bar) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
#endif
}

// tma_load_2d for a 3-D tensor map (a batch of matrices, c2 the matrix): a box of one matrix, laid out in shared
// memory as the 2-D box is.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, int32_t c0, int32_t c1, int32_t c2,
                                            uint32_t bar) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
#endif
}

// Copies the box at shared address `src` (the 128-byte-swizzled layout of a load with the same box) to the 2-D
// tensor map's box at element coordinates (c0, c1); the parts of the box outside the matrix are not written.
// Completion is tracked per thread in bulk groups (bulk_commit / bulk_wait_read).
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, uint32_t src, int32_t c0, int32_t c1) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(c0), "r"(c1), "r"(src)
               : "memory");
#endif
}
// The same, with an L2 cache policy for the written lines (sm80::l2_evict_first_policy() in mma_sm80.cuh: an output
// nothing in this kernel reads again should not push the operands out of L2).
__device__ __forceinline__ void tma_store_2d_hint(const CUtensorMap* map, uint32_t src, int32_t c0, int32_t c1,
                                                  uint64_t policy) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group.L2::cache_hint [%0, {%1, %2}], [%3], %4;\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(c0), "r"(c1), "r"(src), "l"(policy)
               : "memory");
#endif
}
// tma_store_2d_hint for a 3-D tensor map (c2 the matrix of a batch).
__device__ __forceinline__ void tma_store_3d_hint(const CUtensorMap* map, uint32_t src, int32_t c0, int32_t c1,
                                                  int32_t c2, uint64_t policy) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group.L2::cache_hint [%0, {%1, %2, %3}], [%4], %5;\n" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(c0), "r"(c1), "r"(c2), "r"(src), "l"(policy)
      : "memory");
#endif
}
__device__ __forceinline__ void bulk_commit() {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
// Waits until this thread's bulk stores have finished reading shared memory (the source may be overwritten).
__device__ __forceinline__ void bulk_wait_read() {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
#endif
}
// Waits until this thread's bulk stores are complete (written to global memory).
__device__ __forceinline__ void bulk_wait() {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
#endif
}
// Makes this thread's ordinary shared-memory writes visible to the async proxy (TMA) before a barrier.
__device__ __forceinline__ void fence_proxy_async_smem() {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Barrier `id` (1..15; 0 is __syncthreads) among `threads` threads (whole warps).
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void st_shared_f4(uint32_t addr, float x, float y, float z, float w) {
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "f"(x), "f"(y), "f"(z), "f"(w) : "memory");
}
__device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

// Global-memory flags between blocks (stream-K): a release store publishes this thread's earlier writes (and,
// after a barrier, its block's) at GPU scope; an acquire load makes the writes published before it visible.
__device__ __forceinline__ void st_release_gpu(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("st.release.gpu.global.u64 [%0], %1;\n" ::"l"(p), "l"(v) : "memory");
#endif
}
__device__ __forceinline__ void st_relaxed_gpu(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;\n" ::"l"(p), "l"(v) : "memory");
#endif
}
__device__ __forceinline__ uint64_t ld_acquire_gpu(const uint64_t* p) {
  uint64_t v = 0;
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
#endif
  return v;
}
__device__ __forceinline__ int ld_acquire_gpu(const int* p) {
  int v = 0;
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
#endif
  return v;
}
// Orders this thread's view of global memory (e.g. data another block published and this thread acquired) before
// its later async-proxy (TMA) accesses: TMA reads of data written by ordinary stores need it.
__device__ __forceinline__ void fence_proxy_async_global() {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
#endif
}

// ---------------------------------------------------------------------------------------------------------------
// Clusters
// ---------------------------------------------------------------------------------------------------------------

// Brings the 128-byte line at p into L1 (no register, no wait).
__device__ __forceinline__ void prefetch_l1(const void* p) {
#if defined(__CUDA_ARCH__)
  asm volatile("prefetch.global.L1 [%0];\n" ::"l"(p));
#endif
}

// Loads the tensor map `map` (a __grid_constant__ parameter) into the descriptor cache ahead of the first TMA copy
// that names it, which would otherwise wait for that fetch.
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
#endif
}

// This block's rank in its cluster.
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r = 0;
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#endif
  return r;
}

// All threads of all blocks of the cluster (exited threads excepted) meet here; memory operations before it
// (shared-memory writes, barrier inits, remote arrivals) are visible to the whole cluster after it. Called by
// whole warps, which first converge: in a grid launched without clusters (every block a cluster of one)
// barrier.cluster compiles to the block-wide barrier, which expects converged warps (compute-sanitizer's synccheck
// reported divergent threads when a producer's thread 0 arrived after the rest of its warp).
__device__ __forceinline__ void cluster_sync() {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __syncwarp();
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
#endif
}

// The shared::cluster address of the variable at shared address `addr` in the cluster's block `rank`.
__device__ __forceinline__ uint32_t cluster_map(uint32_t addr, uint32_t rank) {
  uint32_t out = addr;
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(addr), "r"(rank));
#endif
  return out;
}

// 16 bytes from shared::cluster address `addr` (any block's of the cluster, cluster_map) as 4 floats.
__device__ __forceinline__ void ld_shared_cluster_f4(uint32_t addr, float (&v)[4]) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3])
               : "r"(addr)
               : "memory");
#else
  v[0] = v[1] = v[2] = v[3] = 0.f;
#endif
}

// Arrives on an mbarrier given by its shared::cluster address (another block's of the cluster). Default
// semantics (release at CTA scope): a cluster-scope release would also wait for this thread's wgmma still in
// flight, stalling the issue of the next batch.
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t cluster_bar) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_bar) : "memory");
#endif
}

// Like tma_load_2d, but the box lands at the same shared offset `dst` in every block of the cluster named in
// `cta_mask`, and each of them gets the completion bytes on its barrier at offset `bar`.
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst, const CUtensorMap* map, int32_t c0, int32_t c1,
                                                      uint32_t bar, uint16_t cta_mask) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], "
      "[%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(cta_mask)
      : "memory");
#endif
}

// tma_load_2d_multicast for a 3-D tensor map (c2 the matrix of a batch).
__device__ __forceinline__ void tma_load_3d_multicast(uint32_t dst, const CUtensorMap* map, int32_t c0, int32_t c1,
                                                      int32_t c2, uint32_t bar, uint16_t cta_mask) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], "
      "[%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "h"(cta_mask)
      : "memory");
#endif
}

// The loads and the store above for a map of kRank 2 (c2 unused) or 3 (c2 the matrix of a batch), so that a
// kernel can take a batch or not by a template parameter, without a third coordinate where it has none.
template <int kRank>
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap* map, int32_t c0, int32_t c1, int32_t c2,
                                         uint32_t bar) {
  if constexpr (kRank == 3) {
    tma_load_3d(dst, map, c0, c1, c2, bar);
  } else {
    tma_load_2d(dst, map, c0, c1, bar);
  }
}
template <int kRank>
__device__ __forceinline__ void tma_load_multicast(uint32_t dst, const CUtensorMap* map, int32_t c0, int32_t c1,
                                                   int32_t c2, uint32_t bar, uint16_t cta_mask) {
  if constexpr (kRank == 3) {
    tma_load_3d_multicast(dst, map, c0, c1, c2, bar, cta_mask);
  } else {
    tma_load_2d_multicast(dst, map, c0, c1, bar, cta_mask);
  }
}
template <int kRank>
__device__ __forceinline__ void tma_store_hint(const CUtensorMap* map, uint32_t src, int32_t c0, int32_t c1, int32_t c2,
                                               uint64_t policy) {
  if constexpr (kRank == 3) {
    tma_store_3d_hint(map, src, c0, c1, c2, policy);
  } else {
    tma_store_2d_hint(map, src, c0, c1, policy);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Registers, wgmma
// ---------------------------------------------------------------------------------------------------------------

// Per-thread registers a block of `threads` threads is given at launch under __launch_bounds__(threads, 1): the
// register file (64 K) shared out, rounded down to the allocation unit of 8.
constexpr int launch_regs(int threads) {
  return 65536 / threads / 8 * 8;
}
// Whether setmaxnreg budgets fit: a producer warpgroup of 128 threads at producer_regs, the rest at consumer_regs.
// setmaxnreg moves registers only within the block's allocation at launch (threads x launch_regs), not the whole
// register file: a consumer asking for more than the producer gave up waits in setmaxnreg.inc forever (the kernel
// hangs; docs/matmul.md, "Tried and not kept").
constexpr bool setmaxnreg_fits(int threads, int producer_regs, int consumer_regs) {
  return 128 * producer_regs + (threads - 128) * consumer_regs <= threads * launch_regs(threads);
}
static_assert(launch_regs(384) == 168 && setmaxnreg_fits(384, 24, 240) && !setmaxnreg_fits(384, 32, 240),
              "producer 32 / consumers 240 is the split that hung: it asks for 1,024 registers more than 384 x 168");

// Moves this warpgroup's per-thread register budget up (inc) or down (dec) to kRegs; needs the kernel to have a
// register cap at entry (__launch_bounds__(threads, 1)).
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

// Orders this thread's earlier register accesses before the wgmma that follow (needed before the first wgmma
// of a batch that reads accumulators other instructions touched).
__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most kPending committed wgmma groups of this warpgroup are still running.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}

// Keeps the compiler from moving accumulator reads/writes across wgmma fences/waits (an empty asm that
// "modifies" the register).
__device__ __forceinline__ void reg_fence(float& r) {
  asm volatile("" : "+f"(r)::"memory");
}

// The shared-memory matrix descriptor of a wgmma operand in the 128-byte-swizzled layout that TMA writes with
// CU_TENSOR_MAP_SWIZZLE_128B (each 8 x 128-byte block 1024-byte aligned):
//   bits 0-13 start address >> 4, 16-29 leading-dimension byte offset >> 4, 32-45 stride-dimension byte
//   offset >> 4, 62-63 swizzle mode (1 = 128 bytes).
// K-major operand (rows of 64 contiguous k, 128 bytes each): SBO = 1024 (from 8 rows to the next 8), LBO unused.
// MN-major operand (rows of 64 contiguous m or n per k, 128 bytes each): SBO = 1024 (from 8 k to the next 8),
// LBO = byte distance between consecutive 64-wide column blocks along M/N.
__device__ __forceinline__ uint64_t make_smem_desc(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo_bytes >> 4) << 16) |
         (static_cast<uint64_t>(sbo_bytes >> 4) << 32) | (uint64_t{1} << 62);
}

// D (64 x 256, fp32, 128 registers per thread) (+)= A (64 x 16) * B (16 x 256), A and B from shared memory.
#define CK_WGMMA_M64N256K16(TYPES)                                                                                   \
  asm volatile(                                                                                                      \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                                                  \
      "wgmma.mma_async.sync.aligned.m64n256k16.f32" TYPES                                                            \
      " "                                                                                                            \
      "{"                                                                                                            \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                       \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                             \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                             \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "                             \
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "                             \
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "                             \
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "                 \
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"               \
      "}, %128, %129, p, 1, 1, %131, %132;\n}\n"                                                                     \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),  \
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),       \
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),      \
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),      \
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),      \
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),      \
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),      \
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),      \
        "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]),      \
        "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]),      \
        "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]),      \
        "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]),      \
        "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), \
        "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),            \
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]),            \
        "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]),            \
        "+f"(d[126]), "+f"(d[127])                                                                                   \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransA), "n"(kTransB))

template <bool kBf16, int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (kBf16) {
    CK_WGMMA_M64N256K16(".bf16.bf16");
  } else {
    CK_WGMMA_M64N256K16(".f16.f16");
  }
#endif
}
#undef CK_WGMMA_M64N256K16

// D (64 x 128, fp32, 64 registers per thread) (+)= A (64 x 16) * B (16 x 128), A and B from shared memory.
#define CK_WGMMA_M64N128K16(TYPES)                                                                                  \
  asm volatile(                                                                                                     \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                                                  \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32" TYPES                                                           \
      " "                                                                                                           \
      "{"                                                                                                           \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                      \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                            \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                            \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"                              \
      "}, %64, %65, p, 1, 1, %67, %68;\n}\n"                                                                        \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), \
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),      \
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),     \
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),     \
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),     \
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),     \
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),     \
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])                   \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransA), "n"(kTransB))

template <bool kBf16, int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (kBf16) {
    CK_WGMMA_M64N128K16(".bf16.bf16");
  } else {
    CK_WGMMA_M64N128K16(".f16.f16");
  }
#endif
}
#undef CK_WGMMA_M64N128K16

// D (64 x 64, fp32, 32 registers per thread) (+)= A (64 x 16) * B (16 x 64), A and B from shared memory.
#define CK_WGMMA_M64N64K16(TYPES)                                                                                   \
  asm volatile(                                                                                                     \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                                                  \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32" TYPES                                                            \
      " "                                                                                                           \
      "{"                                                                                                           \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                      \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"                              \
      "}, %32, %33, p, 1, 1, %35, %36;\n}\n"                                                                        \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), \
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),      \
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),     \
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                   \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransA), "n"(kTransB))

template <bool kBf16, int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int scale_d) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (kBf16) {
    CK_WGMMA_M64N64K16(".bf16.bf16");
  } else {
    CK_WGMMA_M64N64K16(".f16.f16");
  }
#endif
}
#undef CK_WGMMA_M64N64K16

// D (64 x 256, fp32, 128 registers per thread) (+)= X (64 x 8, tf32, 4 registers per thread) * Y (8 x 256, tf32,
// K-major in shared memory). X's fragment, per warp w of the warpgroup (rows 16w..16w+15): x[0] = (row lane / 4, col
// lane % 4), x[1] = (row + 8, col), x[2] = (row, col + 4), x[3] = (row + 8, col + 4), as in mma.m16n8k8.tf32.
// tf32 has no transpose bits: Y must be K-major.
__device__ __forceinline__ void wgmma_m64n256k8_tf32_rs(float (&d)[128], const uint32_t (&x)[4], uint64_t desc_y,
                                                        int scale_d) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
      "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "
      "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, "
      "%68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, "
      "%90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, "
      "%110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "{%128, %129, %130, %131}, %132, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),
        "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]),
        "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]),
        "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]),
        "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]),
        "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]),
        "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]),
        "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]),
        "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "l"(desc_y), "r"(scale_d));
#endif
}

// D (64 x 128, fp32, 64 registers per thread) (+)= X (64 x 8, tf32, 4 registers per thread) * Y (8 x 128, tf32, K-major
// in shared memory). X's fragment, per warp w of the warpgroup (rows 16w..16w+15): x[0] = (row lane / 4, col
// lane % 4), x[1] = (row + 8, col), x[2] = (row, col + 4), x[3] = (row + 8, col + 4), as in mma.m16n8k8.tf32.
// tf32 has no transpose bits: Y must be K-major.
__device__ __forceinline__ void wgmma_m64n128k8_tf32_rs(float (&d)[64], const uint32_t (&x)[4], uint64_t desc_y,
                                                        int scale_d) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
      "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "
      "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "l"(desc_y), "r"(scale_d));
#endif
}

// x rounded to TF32 (10 explicit mantissa bits) to nearest, ties away from zero, as cuBLAS rounds its operands;
// the bits of the result as wgmma's .tf32 register operands take them.
__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r = __float_as_uint(x);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
#endif
  return r;
}

// Stores four 8 x 8 matrices of 16-bit elements to shared memory (stmatrix .x4): register i of each thread holds
// row lane / 4, columns 2 * (lane % 4) + {0, 1} of matrix i (the mma/wgmma accumulator fragment layout), and
// lanes 8i..8i+7 give the addresses of the 16-byte rows 0..7 of matrix i.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
#endif
}

// stmatrix_x4 when `pred` (warp-uniform) holds, without a branch (for use between wgmma, see step 12).
__device__ __forceinline__ void stmatrix_x4_if(bool pred, uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                               uint32_t r3) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %5, 0;\n@p stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, "
      "%4};\n}\n" ::"r"(addr),
      "r"(r0), "r"(r1), "r"(r2), "r"(r3), "r"(static_cast<int>(pred))
      : "memory");
#endif
}

// ---------------------------------------------------------------------------------------------------------------
// Pieces shared by the GEMM kernels
// ---------------------------------------------------------------------------------------------------------------

// Maps a linear tile index to (row tile, column tile): groups of group_m row tiles, walked column by column
// inside a group, so consecutive indices (the blocks working at the same time) share A rows and B columns in L2.
// In 32-bit arithmetic: a consumer maps every tile at the tile's start, where nothing else runs, and 64-bit
// divisions there were measurably slower (docs/matmul.md). Callers keep
// tile counts below 2^31 (prepare_call checks the 64 x 64 tile count; an output that large would not fit in memory).
__device__ __forceinline__ void grouped_tile(int64_t tile, int m_tiles, int n_tiles, int group_m, int& tm, int& tn) {
  const uint32_t t = static_cast<uint32_t>(tile);
  const uint32_t group_size = static_cast<uint32_t>(group_m) * static_cast<uint32_t>(n_tiles);
  const uint32_t group = t / group_size;
  const uint32_t first_m = group * static_cast<uint32_t>(group_m);
  const uint32_t rows = min(static_cast<uint32_t>(m_tiles) - first_m, static_cast<uint32_t>(group_m));
  const uint32_t in_group = t - group * group_size;
  tm = static_cast<int>(first_m + in_group % rows);
  tn = static_cast<int>(in_group / rows);
}

// Two floats rounded to bf16 (kBf16) or fp16, as the bits of one 32-bit word (first value in the low half); one
// float as 16 bits. Intrinsics only: torch builds with the half/bfloat16 operators and conversions disabled.
template <bool kBf16>
__device__ __forceinline__ uint32_t pack2(float x, float y) {
  if constexpr (kBf16) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}
template <bool kBf16>
__device__ __forceinline__ uint16_t pack1(float x) {
  if constexpr (kBf16) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
  } else {
    return __half_as_ushort(__float2half_rn(x));
  }
}

// A GEMM operand as TMA reads it. mn_major: element (i, k) of A (i = m) or of B transposed (i = n) lies at
// ptr[k * ld + i]; else at ptr[i * ld + k]. ptr must be 16-byte aligned and ld * element size a multiple of 16.
// In a batch (only step 12 takes one), matrix j starts batch_stride elements after matrix j - 1 (a multiple of 16
// bytes, at least a matrix), or batch_stride is 0: one matrix for the whole batch.
struct Operand {
  const void* ptr;
  int64_t ld;
  bool mn_major;
  int64_t batch_stride = 0;
};

// ---------------------------------------------------------------------------------------------------------------
// Host: tensor maps
// ---------------------------------------------------------------------------------------------------------------

// cuTensorMapEncodeTiled from the driver, looked up once through the runtime (no link against libcuda).
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult status{};
#if CUDART_VERSION >= 12050
    const cudaError_t err =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &status);
#else
    const cudaError_t err = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &ptr, cudaEnableDefault, &status);
#endif
    if (err != cudaSuccess || status != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      ptr = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(ptr);
  }();
  return fn;
}

// cuTensorMapEncodeTiled for a `rank`-dimensional map of 16-bit (bf16 or fp16) or fp32 elements, dims[0]
// contiguous, strides (bytes) of dimensions 1 and up, 128-byte swizzle, zeros read outside the tensor.
inline bool encode_tiled(CUtensorMap* map, bool bf16, bool fp32, const void* base, uint32_t rank,
                         const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (encode == nullptr) return false;
  const CUtensorMapDataType type = fp32   ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                   : bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                          : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult res =
      encode(map, type, rank, const_cast<void*>(base), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return res == CUDA_SUCCESS;
}

// A 2-D tensor map over a matrix of `outer` rows of `inner` contiguous elements (16-bit bf16/fp16, or 32-bit
// fp32 with `fp32`), `row_stride` elements apart, read in boxes of box_outer x box_inner elements (box_inner
// elements <= 128 bytes) into 128-byte-swizzled shared memory. Reads outside the matrix return zeros. Needs
// base % 16 == 0 and a row stride that is a multiple of 16 bytes. Returns false when the driver rejects it.
inline bool encode_tensor_map_2d(CUtensorMap* map, bool bf16, const void* base, uint64_t inner, uint64_t outer,
                                 uint64_t row_stride, uint32_t box_inner, uint32_t box_outer, bool fp32 = false) {
  const uint64_t elem_bytes = fp32 ? 4 : 2;
  const cuuint64_t dims[2] = {inner, outer};
  const cuuint64_t strides[1] = {row_stride * elem_bytes};
  const cuuint32_t box[2] = {box_inner, box_outer};
  return encode_tiled(map, bf16, fp32, base, 2, dims, strides, box);
}

// The same over `batch` such matrices, batch_stride elements apart (a multiple of 16 bytes), as a 3-D map whose
// boxes lie in one matrix (coordinate 2 the matrix; step 12 loads them with tma_load_3d), or with rank 2 a 2-D
// map of the one matrix (batch must be 1).
inline bool encode_tensor_map_3d(CUtensorMap* map, bool bf16, const void* base, uint64_t inner, uint64_t outer,
                                 uint64_t batch, uint64_t row_stride, uint64_t batch_stride, uint32_t box_inner,
                                 uint32_t box_outer, int rank = 3) {
  if (rank == 2)
    return batch == 1 && encode_tensor_map_2d(map, bf16, base, inner, outer, row_stride, box_inner, box_outer);
  constexpr uint64_t elem_bytes = 2;
  // One matrix: its size as the batch stride (never used to address, but the driver checks it).
  if (batch == 1) batch_stride = row_stride * outer;
  const cuuint64_t dims[3] = {inner, outer, batch};
  const cuuint64_t strides[2] = {row_stride * elem_bytes, batch_stride * elem_bytes};
  const cuuint32_t box[3] = {box_inner, box_outer, 1};
  return encode_tiled(map, bf16, false, base, 3, dims, strides, box);
}

constexpr int kMaxDevices = 64;  // devices whose per-device launch settings are cached (more: set every launch)

// Raises kKernel's dynamic shared-memory limit to `bytes` (the opt-in beyond 48 KB) once per device, and gives the
// current device: cudaFuncSetAttribute is not free, and every launch would otherwise pay it.
template <auto kKernel>
cudaError_t opt_in_smem(size_t bytes, int& device) {
  static std::atomic<bool> configured[kMaxDevices] = {};
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (device >= kMaxDevices || !configured[device].load(std::memory_order_relaxed)) {
    err = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
    if (err != cudaSuccess) return err;
    if (device < kMaxDevices) configured[device].store(true, std::memory_order_relaxed);
  }
  return cudaSuccess;
}

}  // namespace cuda_kernels::hopper

// ---------------------------------------------------------------------------------------------------------------
// Ladder side: fitting a call's operands to what TMA can read
// ---------------------------------------------------------------------------------------------------------------
#include <limits>

#include "cuda/errors.h"
#include "cuda/matmul/args.h"

namespace cuda_kernels::hopper {

// Describes the (rows x cols) matrix at p, element (r, c) at p[r * s0 + c * s1], for TMA, as row-major (element
// (r, c) at ptr[r * ld + c], mn_major = false) or column-major (ptr[c * ld + r], mn_major = true), whichever its
// strides allow, preferring row-major; a size-1 dimension's stride is never used, so it is given a valid pitch.
// Anything else (other strides, a base not 16-byte aligned, a pitch not a multiple of 16 bytes) is copied into the
// workspace, row-major with a padded pitch, whose logical size stays rows x cols (TMA's zero fill still covers the
// tails). For A (M x K) row-major means K-major; for B (K x N) it means MN-major: callers flip mn_major for B.
// A batch of `batch` such matrices s_batch elements apart (0: the same matrix for all) is read as it is when each
// matrix starts 16-byte aligned past the previous one's rows, else copied whole (one copy for s_batch 0).
inline Operand tma_operand(const void* p, matmul_ladder::Dtype dtype, int64_t rows, int64_t cols, int64_t s0,
                           int64_t s1, matmul_ladder::Workspace& workspace, int64_t batch = 1, int64_t s_batch = 0) {
  constexpr int64_t kAlignBytes = 16;  // TMA: 16-byte base and row pitch
  const int64_t pitch_elems = kAlignBytes / matmul_ladder::dtype_size(dtype);
  const auto round_up = [](int64_t x, int64_t m) { return (x + m - 1) / m * m; };
  const int64_t stride = batch > 1 ? s_batch : 0;  // the Operand's batch_stride
  // Whether a matrix of `lines` rows (or columns) `ld` apart may be read batch-wise with the batch's stride.
  const auto batch_fits = [&](int64_t lines, int64_t ld) {
    return stride == 0 || (stride % pitch_elems == 0 && stride >= lines * ld);
  };
  if (reinterpret_cast<uintptr_t>(p) % kAlignBytes == 0) {
    if ((s1 == 1 || cols == 1) && (rows == 1 || (s0 % pitch_elems == 0 && s0 >= cols))) {
      const int64_t ld = rows == 1 ? round_up(cols, pitch_elems) : s0;
      if (batch_fits(rows, ld)) return {p, ld, false, stride};
    }
    if ((s0 == 1 || rows == 1) && (cols == 1 || (s1 % pitch_elems == 0 && s1 >= rows))) {
      const int64_t ld = cols == 1 ? round_up(rows, pitch_elems) : s1;
      if (batch_fits(cols, ld)) return {p, ld, true, stride};
    }
  }
  const int64_t pitch = round_up(cols, pitch_elems);
  const int64_t copies = stride == 0 ? 1 : batch;
  return {workspace.copy_3d(p, dtype, copies, rows, cols, stride, s0, s1, pitch), pitch, false,
          copies > 1 ? rows * pitch : 0};
}

// One call of a Hopper ladder step (9-13) as its kernels' launcher takes it: the sizes checked, a and b described
// for TMA (padded copies in the call's workspace when needed).
struct Call {
  bool bf16;
  int M, N, K;
  int batch;  // products (only step 12 is given more than one)
  Operand a, b;
  void* c;
  int device;
  cudaStream_t stream;
};

// What every Hopper step's launcher starts with; `step` names it in the errors ("09_wgmma_tma"). With float32 (the
// TF32 step) a, b and c are float32 instead of 16-bit.
inline Call prepare_call(const char* step, const matmul_ladder::Args& args, bool (*wgmma_available)(int device),
                         bool float32 = false) {
  constexpr const char* op = "cuda_kernels.matmul";
  using matmul_ladder::Dtype;
  if (float32) {
    CUDA_KERNELS_CHECK(args.dtype == Dtype::kFloat32, op, ": step ", step, " supports float32 only, got ",
                       matmul_ladder::dtype_name(args.dtype));
  } else {
    CUDA_KERNELS_CHECK(args.dtype == Dtype::kBFloat16 || args.dtype == Dtype::kFloat16, op, ": step ", step,
                       " supports bfloat16 and float16 only, got ", matmul_ladder::dtype_name(args.dtype));
  }
  CUDA_KERNELS_CHECK(wgmma_available(args.device), op, ": step ", step,
                     " needs a compute capability 9.0 GPU and a build with sm_90a code");
  const int64_t M = args.M, N = args.N, K = args.K;
  constexpr int64_t kMaxDim = std::numeric_limits<int>::max();  // TMA coordinates and the kernels' indices are int
  CUDA_KERNELS_CHECK(M <= kMaxDim && N <= kMaxDim && K <= kMaxDim, op, ": step ", step, " needs M, N, K < 2^31");
  // grouped_tile's 32-bit tile indices: every tile of these steps is at least 64 x 64 (never reached in practice:
  // an output with 2^31 such tiles would take 16 TB).
  constexpr int64_t kTile = 64;
  const int64_t batch = args.batch;
  CUDA_KERNELS_CHECK(batch <= kMaxDim && (M + kTile - 1) / kTile * ((N + kTile - 1) / kTile) <= kMaxDim / batch, op,
                     ": step ", step, " needs fewer than 2^31 output tiles of 64 x 64");
  Call call{args.dtype == Dtype::kBFloat16,
            static_cast<int>(M),
            static_cast<int>(N),
            static_cast<int>(K),
            static_cast<int>(batch),
            tma_operand(args.a, args.dtype, M, K, args.sa0, args.sa1, *args.workspace, batch, args.sa_batch),
            tma_operand(args.b, args.dtype, K, N, args.sb0, args.sb1, *args.workspace, batch, args.sb_batch),
            args.c,
            args.device,
            args.stream};
  call.b.mn_major = !call.b.mn_major;  // row-major (K, N) B has n contiguous
  return call;
}

inline void check_launch(const char* step, cudaError_t err) {
  CUDA_KERNELS_CHECK(err == cudaSuccess, "cuda_kernels.matmul: step ", step,
                     " launch failed: ", cudaGetErrorString(err));
}

}  // namespace cuda_kernels::hopper
