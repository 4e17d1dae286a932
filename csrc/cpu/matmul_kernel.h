// matmul's CPU kernel, written once with at::vec::Vectorized and compiled once per CPU capability
// (matmul_kernel_default.cpp, matmul_kernel_avx2.cpp, matmul_kernel_avx512.cpp include it between vec_isa_begin.h
// and vec_isa_end.h, as square's kernel is built); matmul.cpp picks one build at run time (cpu::capability()).
//
// The structure is the classic blocked GEMM (Goto and van de Geijn):
//  - B is packed once, converted to the accumulation type, into panels of kNR columns: panel p holds, for every k,
//    the kNR values B[k][p*kNR ...] side by side (zeros past N), so a k step of the micro-kernel reads one
//    contiguous row of the panel.
//  - A is packed once too, converted, into panels of kMR rows: panel q holds, for every k, the kMR values
//    A[q*kMR ...][k] side by side (zeros past M). Packed per task instead, A would be packed again for every block
//    of columns: scalar work that does not shrink with the vector width and grows with the thread count (more,
//    narrower tasks). Both packed operands live in buffers the calling thread keeps (packed_buffer).
//  - C is cut into tasks of kMC rows x at most kNCPanels B panels, spread over torch's threads (Parallel,
//    kernel_api.h). A task walks K in slabs of kKC: for each B panel's slab (kKC x kNR: stays in L1) it runs the
//    micro-kernel over the slabs of its A panels (kMC x kKC together: they stay in L2).
//  - The micro-kernel keeps a kMR x kNR tile of C in registers (kMR x 2 vectors) through the slab: per k one
//    broadcast of each A value and two vector FMAs. Its sums are added to the task's C tile, kept in the
//    accumulation type until the last slab, then rounded once into C.
// float16/bfloat16 accumulate in float (at::opmath_type), float64 in double. Fewer than kMR rows of float or double
// with a row-major B (a vector times a matrix) take matmul_skinny instead, which streams B once without packing;
// fewer than kMR columns with a row-major A (a matrix times a vector), matmul_skinny_n: dot products of A's rows.
// No #pragma once: included once by each capability's translation unit.

namespace cuda_kernels::cpu::CPU_CAPABILITY {

template <typename acc_t>
using Vec = at::vec::Vectorized<acc_t>;

// Register tile: kMR rows of C times two vectors of columns (AVX2 float: 6 x 16 in 12 of the 16 ymm registers,
// plus two for the B row and one for the broadcast A value).
constexpr int64_t kMR = 6;
#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
template <typename acc_t>
constexpr int64_t kNR = 2 * Vec<acc_t>::size();
#else
template <typename acc_t>
constexpr int64_t kNR = 32 / sizeof(acc_t);  // two 16-byte registers (SSE, NEON): the DEFAULT build's tile fits
#endif

// Cache blocking: a B panel slab is kKC x kNR (16 KB for AVX2 float: L1), an A block kMC x kKC (72 KB: L2).
constexpr int64_t kKC = 256;
constexpr int64_t kMC = 12 * kMR;  // 72 rows
constexpr int64_t kNCPanels = 16;  // B panels per task at most: 256 float columns with AVX2
// Tasks per thread at least (fewer panels per task until there are): 512^3 on 16 threads with AVX512 (32-float
// panels) has 8 row blocks and, at 16 panels a task, one column block: half the threads would idle. Two per thread
// also even out unequal tasks; more cost 256^3 on 2 threads 5% (smaller tiles, A packed more often).
constexpr int64_t kTasksPerThread = 2;

#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
// C_tile[0 .. kMR) x [0 .. kNR) += Ap (kc x kMR, k-major) times Bp (kc x kNR, k-major); ldc: C_tile's row pitch.
// Compiled on its own (noinline) and with its loops over the tile's rows unrolled from the start (#pragma GCC
// unroll), in every build: otherwise GCC may keep a copy of the accumulator tile on the stack and store all of it at
// every k step (the stores then take longer than the FMAs), depending on its version and on the code around the
// call. tests/ops/test_matmul.py checks the built binary for vector stores to the stack in every micro_kernel.
template <typename acc_t>
__attribute__((noinline)) void micro_kernel(int64_t kc, const acc_t* ap, const acc_t* bp, acc_t* c_tile, int64_t ldc) {
  constexpr int64_t kW = Vec<acc_t>::size();
  Vec<acc_t> acc[kMR][2];
#pragma GCC unroll 16
  for (int64_t r = 0; r < kMR; ++r) acc[r][0] = acc[r][1] = Vec<acc_t>(acc_t(0));
  for (int64_t k = 0; k < kc; ++k) {
    const Vec<acc_t> b0 = Vec<acc_t>::loadu(bp + k * kNR<acc_t>);
    const Vec<acc_t> b1 = Vec<acc_t>::loadu(bp + k * kNR<acc_t> + kW);
#pragma GCC unroll 16
    for (int64_t r = 0; r < kMR; ++r) {
      const Vec<acc_t> a(ap[k * kMR + r]);
      acc[r][0] = at::vec::fmadd(a, b0, acc[r][0]);
      acc[r][1] = at::vec::fmadd(a, b1, acc[r][1]);
    }
  }
#pragma GCC unroll 16
  for (int64_t r = 0; r < kMR; ++r) {
    acc_t* row = c_tile + r * ldc;
    (Vec<acc_t>::loadu(row) + acc[r][0]).store(row);
    (Vec<acc_t>::loadu(row + kW) + acc[r][1]).store(row + kW);
  }
}
#else
// The DEFAULT build: at::vec's portable Vectorized is a small array behind function calls, and plain loops over a
// tile GCC vectorizes along the wrong axis (shuffling every step). GCC/Clang vector types of 16 bytes (SSE, NEON)
// say it directly: two per row of the tile, the A value broadcast by the scalar-vector product.
template <typename acc_t>
struct Vec16;
template <>
struct Vec16<float> {
  typedef float type __attribute__((vector_size(16)));
};
template <>
struct Vec16<double> {
  typedef double type __attribute__((vector_size(16)));
};

template <typename acc_t>
__attribute__((noinline)) void micro_kernel(int64_t kc, const acc_t* ap, const acc_t* bp, acc_t* c_tile, int64_t ldc) {
  using V = typename Vec16<acc_t>::type;
  constexpr int64_t kL = 16 / sizeof(acc_t);  // lanes of V; kNR = 2 * kL
  V acc[kMR][2] = {};
  for (int64_t k = 0; k < kc; ++k) {
    V b0, b1;
    __builtin_memcpy(&b0, bp + k * kNR<acc_t>, sizeof(V));  // unaligned loads
    __builtin_memcpy(&b1, bp + k * kNR<acc_t> + kL, sizeof(V));
#pragma GCC unroll 16
    for (int64_t r = 0; r < kMR; ++r) {
      const acc_t a = ap[k * kMR + r];
      acc[r][0] += b0 * a;
      acc[r][1] += b1 * a;
    }
  }
#pragma GCC unroll 16
  for (int64_t r = 0; r < kMR; ++r) {
    V c0, c1;
    __builtin_memcpy(&c0, c_tile + r * ldc, sizeof(V));
    __builtin_memcpy(&c1, c_tile + r * ldc + kL, sizeof(V));
    c0 += acc[r][0];
    c1 += acc[r][1];
    __builtin_memcpy(c_tile + r * ldc, &c0, sizeof(V));
    __builtin_memcpy(c_tile + r * ldc + kL, &c1, sizeof(V));
  }
}
#endif

// Scalar conversions to and from the accumulation type. float16 goes through c10's portable bit conversions:
// c10::Half's own operators use F16C/AVX-512 intrinsics when CPU_CAPABILITY_AVX2/AVX512 is defined, which the
// headers vec_isa_begin.h includes before its target pragma cannot compile.
template <typename acc_t, typename scalar_t>
inline acc_t to_acc(scalar_t v) {
  if constexpr (std::is_same_v<scalar_t, c10::Half>) {
    return c10::detail::fp16_ieee_to_fp32_value(v.x);
  } else {
    return static_cast<acc_t>(v);
  }
}
template <typename scalar_t, typename acc_t>
inline scalar_t from_acc(acc_t v) {
  if constexpr (std::is_same_v<scalar_t, c10::Half>) {
    return c10::Half(c10::detail::fp16_ieee_from_fp32_value(v), c10::Half::from_bits());
  } else {
    return static_cast<scalar_t>(v);
  }
}

// A strided (rows x cols) matrix of scalar_t: element (i, j) at data[i * s0 + j * s1].
template <typename scalar_t>
struct Strided {
  const scalar_t* data;
  int64_t s0, s1;
  scalar_t at(int64_t i, int64_t j) const { return data[i * s0 + j * s1]; }
};

// Packs a K x N matrix (any strides) into ceil(N / W) panels of K x W, converted to acc_t, zeros past N: panel p
// holds, for every k, the W values src[k][p*W ...] side by side. B is packed with W = kNR; A, as its transpose
// (K x M), with W = kMR.
template <int64_t W, typename scalar_t, typename acc_t>
void pack_panels(Strided<scalar_t> src, int64_t K, int64_t N, acc_t* packed, const Parallel& par) {
  const int64_t panels = (N + W - 1) / W;
  par.parallel_for(0, panels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      acc_t* out = packed + p * K * W;
      const int64_t j0 = p * W, cols = std::min(W, N - j0);
      for (int64_t k = 0; k < K; ++k) {
        for (int64_t j = 0; j < cols; ++j) out[k * W + j] = to_acc<acc_t>(src.at(k, j0 + j));
        for (int64_t j = cols; j < W; ++j) out[k * W + j] = acc_t(0);
      }
    }
  });
}

// Columns of C per task of the skinny path, and rows of B it folds into each pass over the accumulators.
constexpr int64_t kSkinnyCols = 512;
constexpr int64_t kSkinnyK = 4;

// A few rows of C (M < kMR: a matrix-vector product, a decode step): packing B would read and write all of it once
// more for a handful of multiply-adds per element, so B's rows are streamed as they are instead, each read once.
// Tasks own blocks of columns; the accumulators for their M x kSkinnyCols block stay in L1. B row-major, float or
// double (no conversion on the way).
template <typename acc_t>
void matmul_skinny(Strided<acc_t> a, const acc_t* b, int64_t ldb, acc_t* c, int64_t M, int64_t N, int64_t K,
                   const Parallel& par) {
  constexpr int64_t kW = Vec<acc_t>::size();
  par.parallel_for(0, (N + kSkinnyCols - 1) / kSkinnyCols, 1, [&](int64_t begin, int64_t end) {
    acc_t acc[kMR][kSkinnyCols];
    for (int64_t t = begin; t < end; ++t) {
      const int64_t j0 = t * kSkinnyCols, cols = std::min(kSkinnyCols, N - j0);
      const int64_t vec_cols = cols - cols % kW;
      for (int64_t i = 0; i < M; ++i) std::fill(acc[i], acc[i] + cols, acc_t(0));
      // kSkinnyK rows of B per pass: each accumulator vector is loaded and stored once per kSkinnyK FMAs.
      int64_t k = 0;
      for (; k + kSkinnyK <= K; k += kSkinnyK) {
        const acc_t* brow = b + k * ldb + j0;
        for (int64_t i = 0; i < M; ++i) {
          Vec<acc_t> av[kSkinnyK];
          for (int64_t u = 0; u < kSkinnyK; ++u) av[u] = Vec<acc_t>(a.at(i, k + u));
          int64_t j = 0;
          for (; j < vec_cols; j += kW) {
            Vec<acc_t> sum = Vec<acc_t>::loadu(acc[i] + j);
            for (int64_t u = 0; u < kSkinnyK; ++u)
              sum = at::vec::fmadd(av[u], Vec<acc_t>::loadu(brow + u * ldb + j), sum);
            sum.store(acc[i] + j);
          }
          for (; j < cols; ++j) {
            for (int64_t u = 0; u < kSkinnyK; ++u) acc[i][j] += a.at(i, k + u) * brow[u * ldb + j];
          }
        }
      }
      for (; k < K; ++k) {
        const acc_t* brow = b + k * ldb + j0;
        for (int64_t i = 0; i < M; ++i) {
          const acc_t aik = a.at(i, k);
          const Vec<acc_t> av(aik);
          int64_t j = 0;
          for (; j < vec_cols; j += kW) {
            at::vec::fmadd(av, Vec<acc_t>::loadu(brow + j), Vec<acc_t>::loadu(acc[i] + j)).store(acc[i] + j);
          }
          for (; j < cols; ++j) acc[i][j] += aik * brow[j];
        }
      }
      for (int64_t i = 0; i < M; ++i) std::copy(acc[i], acc[i] + cols, c + i * N + j0);
    }
  });
}

// A few columns of C (N < kMR: a row-major matrix times a vector): each element is a dot product of a row of A,
// read once and contiguously, with a column of B (copied contiguous first: N x K values). Tasks own rows.
template <typename acc_t>
void matmul_skinny_n(const acc_t* a, int64_t lda, Strided<acc_t> b, acc_t* c, int64_t M, int64_t N, int64_t K,
                     const Parallel& par) {
  constexpr int64_t kW = Vec<acc_t>::size();
  std::vector<acc_t> bt(static_cast<size_t>(N * K));  // bt[j * K + k] = B[k][j]
  for (int64_t j = 0; j < N; ++j) {
    for (int64_t k = 0; k < K; ++k) bt[j * K + k] = b.at(k, j);
  }
  const int64_t vec_k = K - K % kW;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, K));  // rows per task: ~16K MACs or more
  par.parallel_for(0, M, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const acc_t* arow = a + i * lda;
      for (int64_t j = 0; j < N; ++j) {
        const acc_t* bcol = bt.data() + j * K;
        Vec<acc_t> sum(acc_t(0));
        for (int64_t k = 0; k < vec_k; k += kW)
          sum = at::vec::fmadd(Vec<acc_t>::loadu(arow + k), Vec<acc_t>::loadu(bcol + k), sum);
        alignas(64) acc_t lanes[kW];
        sum.store(lanes);
        acc_t total = acc_t(0);
        for (int64_t l = 0; l < kW; ++l) total += lanes[l];
        for (int64_t k = vec_k; k < K; ++k) total += arow[k] * bcol[k];
        c[i * N + j] = total;
      }
    }
  });
}

// Packed operands up to this size are kept by the calling thread for its next call: a fresh allocation costs a page
// fault per 4 KB on first touch and unmapping when freed, more than the packing itself at a few hundred rows on many
// threads. Bigger ones are allocated per call, where the arithmetic dwarfs that.
constexpr size_t kKeepPackedBytes = size_t{16} << 20;

// Room for n values of acc_t, uninitialized (packing writes every one): for slot 0 (B) or 1 (A), the calling
// thread's kept buffer, grown if needed; beyond kKeepPackedBytes, a new one that `owner` frees after the call.
template <typename acc_t>
acc_t* packed_buffer(int slot, size_t n, std::unique_ptr<acc_t[]>& owner) {
  if (n * sizeof(acc_t) > kKeepPackedBytes) {
    owner.reset(new acc_t[n]);
    return owner.get();
  }
  thread_local std::unique_ptr<acc_t[]> kept[2];
  thread_local size_t kept_n[2] = {0, 0};
  if (kept_n[slot] < n) {
    kept[slot].reset(new acc_t[n]);
    kept_n[slot] = n;
  }
  return kept[slot].get();
}

template <typename scalar_t>
void matmul_blocked(Strided<scalar_t> a, Strided<scalar_t> b, scalar_t* c, int64_t M, int64_t N, int64_t K,
                    const Parallel& par) {
  using acc_t = at::opmath_type<scalar_t>;
  constexpr int64_t nr = kNR<acc_t>;
  const int64_t b_panels = (N + nr - 1) / nr;
  std::unique_ptr<acc_t[]> b_owner, a_owner;
  acc_t* bp = packed_buffer<acc_t>(0, static_cast<size_t>(b_panels * K * nr), b_owner);
  pack_panels<nr>(b, K, N, bp, par);
  acc_t* ap = packed_buffer<acc_t>(1, static_cast<size_t>((M + kMR - 1) / kMR * kMR * K), a_owner);
  pack_panels<kMR>(Strided<scalar_t>{a.data, a.s1, a.s0}, K, M, ap, par);  // A's transpose: panels of kMR rows of A

  const int64_t m_tasks = (M + kMC - 1) / kMC;
  // Rows per task: M shared evenly by the m_tasks row blocks, in whole A panels (512 rows: 8 blocks of 66 rows, not
  // 7 of 72 and one of 8, which left a thread with a full task while another had almost nothing).
  const int64_t m_rows = (M + m_tasks - 1) / m_tasks;
  const int64_t mc_task = (m_rows + kMR - 1) / kMR * kMR;  // <= kMC: kMC is a multiple of kMR
  int64_t task_panels = kNCPanels;                         // B panels per task
  const int64_t want_tasks = kTasksPerThread * par.num_threads;
  while (task_panels > 1 && m_tasks * ((b_panels + task_panels - 1) / task_panels) < want_tasks) task_panels /= 2;
  const int64_t nc = task_panels * nr;  // columns of C per task
  const int64_t n_tasks = (b_panels + task_panels - 1) / task_panels;
  par.parallel_for(0, m_tasks * n_tasks, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> c_tile(static_cast<size_t>(kMC * nc));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t i0 = (t / n_tasks) * mc_task, mc = std::min(mc_task, M - i0);
      const int64_t p0 = (t % n_tasks) * task_panels;  // first B panel of the task
      const int64_t np = std::min(task_panels, b_panels - p0);
      // The task's A panels: q0 .. q0 + mp - 1 (i0 is a multiple of kMR; the last panel is zero-padded).
      const int64_t q0 = i0 / kMR, mp = (mc + kMR - 1) / kMR;
      std::fill(c_tile.begin(), c_tile.end(), acc_t(0));
      for (int64_t k0 = 0; k0 < K; k0 += kKC) {
        const int64_t kc = std::min(kKC, K - k0);
        for (int64_t p = 0; p < np; ++p) {
          const acc_t* b_slab = bp + ((p0 + p) * K + k0) * nr;
          for (int64_t q = 0; q < mp; ++q) {
            const acc_t* a_slab = ap + ((q0 + q) * K + k0) * kMR;
            micro_kernel(kc, a_slab, b_slab, c_tile.data() + q * kMR * nc + p * nr, nc);
          }
        }
      }
      // One rounding per element into C, for the rows and columns that exist.
      const int64_t j0 = p0 * nr, cols = std::min(np * nr, N - j0);
      for (int64_t i = 0; i < mc; ++i) {
        const acc_t* src = c_tile.data() + i * nc;
        scalar_t* dst = c + (i0 + i) * N + j0;
        for (int64_t j = 0; j < cols; ++j) dst[j] = from_acc<scalar_t>(src[j]);
      }
    }
  });
}

constexpr int64_t kSerialMacs = int64_t{1} << 19;

// Entry point for matmul.cpp (declared there once per capability): c (M x N, row-major) = a (M x K) @ b (K x N),
// a and b of `dtype` with any strides (element (i, j) at data[i * s0 + j * s1]); M, N, K >= 1.
void matmul_kernel(torch::headeronly::ScalarType dtype, const void* a, int64_t sa0, int64_t sa1, const void* b,
                   int64_t sb0, int64_t sb1, void* c, int64_t M, int64_t N, int64_t K, const Parallel& threads) {
  // A product of fewer than kSerialMacs multiply-adds runs on the calling thread: its three parallel_for calls
  // (pack B, pack A, the tiles) would cost more than the arithmetic.
  const Parallel& par = M * N * K < kSerialMacs ? kCallingThread : threads;
  dispatch_float(dtype, [&](auto t) {
    using scalar_t = decltype(t);
    if constexpr (std::is_same_v<scalar_t, at::opmath_type<scalar_t>>) {
      if (M < kMR && sb1 == 1) {
        matmul_skinny<scalar_t>({static_cast<const scalar_t*>(a), sa0, sa1}, static_cast<const scalar_t*>(b), sb0,
                                static_cast<scalar_t*>(c), M, N, K, par);
        return;
      }
      if (N < kMR && sa1 == 1) {
        matmul_skinny_n<scalar_t>(static_cast<const scalar_t*>(a), sa0, {static_cast<const scalar_t*>(b), sb0, sb1},
                                  static_cast<scalar_t*>(c), M, N, K, par);
        return;
      }
    }
    matmul_blocked<scalar_t>({static_cast<const scalar_t*>(a), sa0, sa1}, {static_cast<const scalar_t*>(b), sb0, sb1},
                             static_cast<scalar_t*>(c), M, N, K, par);
  });
}

}  // namespace cuda_kernels::cpu::CPU_CAPABILITY
