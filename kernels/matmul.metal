// Matrix multiply: C = alpha * sum_b (A_b @ B_b) + beta * S, the one kernel behind mm,
// bmm, addmm, baddbmm, addbmm and addr (backend/ops/matmul.cpp), and the
// matrix-vector kernel behind mv, addmv, dot and vdot (and mm's products with one
// row or one column).
//
// matmul_gemm_<T>: every operand is read in place through (row, column, batch) strides,
// as BLAS does with its transpose flags and leading dimensions: a transposed operand
// is just a column-major one, a broadcast bias has stride 0. Per threadgroup a BM x BN
// block of C; per K step, BM x BK of A and BK x BN of B are staged into threadgroup
// memory as float (half and bfloat convert once here, so products accumulate in
// float32, as CPU's do), then each SIMD group multiplies its share with
// simdgroup_multiply_accumulate over 8x8 fragments held in registers across the whole
// K loop (summed in chunks of K, see below). The epilogue stores the fragments to
// threadgroup memory (reused) and every thread writes its elements with alpha, beta and
// the bias, rounding once to T.
// Grid: x = column blocks, y = row blocks, z = batches (1 when the batches are summed
// into one C, addbmm: p.reduce_batches > 1).
//
// Block shapes per shape class (the host picks one by M and N, matmul.cpp; a product
// with few columns runs as its transpose, C^T = B^T A^T, which is only other strides):
//   matmul_gemm_<T>         64 x 64: square and large products
//   matmul_gemm_narrow_<T>  64 x 32: 17..32 columns (attention's P @ V, head width 32)
//   matmul_gemm_skinny_<T>  8 rows x 64 (simulator) / 128 (GPU): up to 16 rows (an RNN
//                           step's batch, a linear layer on a few tokens)
// so that a skinny product is not padded to 64 rows.
//
// matmul_gemv_<T>: y = alpha * A @ x + beta * s, one thread per row of A.
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;

// Mirrored by backend/ops/matmul_params.h.
struct MatmulParams {
  long M, N, K;
  long a_rs, a_cs, a_bs;  // strides of A (rows, columns, batches)
  long b_rs, b_cs, b_bs;
  long c_rs, c_cs, c_bs;
  long s_rs, s_cs, s_bs;  // the bias S (beta's operand), broadcast by stride 0
  long reduce_batches;    // > 1: sum this many batches of A @ B into one C (addbmm)
  long round_terms;       // round alpha * AB and beta * S to T before adding them (addr, as CPU)
  float alpha, beta;      // beta == 0: S is not read (a NaN in it does not propagate)
};

// Per target. Apple GPUs: K steps of 16, four SIMD groups per threadgroup, laid out
// over the block as MM_SG_ROWS(BM, BN) x MM_SG_COLS(BM, BN) (64 x 64: 2 x 2 groups of
// 32 x 32, 4 x 4 fragments each), with coalesced staging loads.
// The simulator runs each SIMD-group matrix call once for the whole group (its lane 0),
// and a K step's calls as one register-blocked loop (simdgroup_multiply_accumulate_panel),
// so one SIMD group per block and long K steps pay off there: K steps of 64 (the 64 x 64
// block's staged tiles then fill the 32 KB of threadgroup memory; fewer steps, fewer
// barriers, each a round of fiber switches). The host dispatches MM_THREADS threads per
// group by DeviceInfo::is_simulated (no [[max_total_threads_per_threadgroup]]: built-in
// kernels accept 256).
#if defined(METALSIM_VECTOR_BYTES)
#define MM_BK 64
#define MM_THREADS 32
#define MM_SG_ROWS(BM, BN) 1
#define MM_SKINNY_BN 64
#else
#define MM_BK 16
#define MM_THREADS 128
#define MM_SG_ROWS(BM, BN) ((BM) >= 4 * (BN) ? 4 : (BN) >= 4 * (BM) ? 1 : 2)
#define MM_SKINNY_BN 128
#endif
#define MM_SG_COLS(BM, BN) (MM_THREADS / 32 / MM_SG_ROWS(BM, BN))
#define MM_CHUNK_K 256  // K summed per partial sum (a multiple of MM_BK)

// Copies rows x cols of a strided operand into a dense float tile (row stride `ld`),
// zero outside the matrix.
// Apple GPUs: consecutive threads take consecutive elements along whichever dimension
// is unit-stride in memory, so a SIMD group's loads coalesce for row- and column-major
// operands alike. The simulator: its threads run one after another, so how the work is
// split between them does not matter, only that each copy loop vectorises: rows of a
// row-major operand are straight copies; a column-major operand goes 8 columns at a
// time, each of its contiguous runs read once and written as 8-float rows of the tile.
template <typename T>
METAL_FUNC void stage_tile(threadgroup float* tile, int ld, const device T* src, long rs, long cs, long r0,
                           long c0, long R, long C, int rows, int cols, uint tid) {
#if defined(METALSIM_VECTOR_BYTES)
  const int nr = r0 < R ? int(min(long(rows), R - r0)) : 0;  // rows and columns inside the matrix
  const int nc = c0 < C ? int(min(long(cols), C - c0)) : 0;
  const device T* base = src + r0 * rs + c0 * cs;
  if (cs == 1 || rs != 1) {
    for (int r = int(tid); r < rows; r += MM_THREADS) {
      threadgroup float* out = tile + r * ld;
      const int n = r < nr ? nc : 0;
      const device T* in = base + r * rs;
      if (cs == 1) {
        for (int c = 0; c < n; ++c) out[c] = float(in[c]);
      } else {
        for (int c = 0; c < n; ++c) out[c] = float(in[c * cs]);
      }
      for (int c = n; c < cols; ++c) out[c] = 0.0f;
    }
  } else {
    // Column-major (rs == 1): 8 columns per step (cols is a multiple of 8).
    for (int c8 = int(tid) * 8; c8 < cols; c8 += MM_THREADS * 8) {
      const int n = nc - c8 < 0 ? 0 : (nc - c8 < 8 ? nc - c8 : 8);
      const device T* in = base + c8 * cs;
      for (int r = 0; r < rows; ++r) {
        threadgroup float* out = tile + r * ld + c8;
        if (r < nr && n == 8) {
          for (int j = 0; j < 8; ++j) out[j] = float(in[r + j * cs]);
        } else {
          for (int j = 0; j < 8; ++j) out[j] = (r < nr && j < n) ? float(in[r + j * cs]) : 0.0f;
        }
      }
    }
  }
#else
  const bool along_rows = cs == 1 || rs != 1;  // memory runs along a row of the tile
  const int count = rows * cols;
  for (int i = int(tid); i < count; i += MM_THREADS) {
    const int r = along_rows ? i / cols : i % rows, c = along_rows ? i % cols : i / rows;
    const long gr = r0 + r, gc = c0 + c;
    tile[r * ld + c] = (gr < R && gc < C) ? float(src[gr * rs + gc * cs]) : 0.0f;
  }
#endif
}

#if defined(METALSIM_VECTOR_BYTES)
// The simulator reads a float operand in place when a K step's tile lies inside it with
// unit column stride (the panel takes rows of any stride): no staging copy and, when
// neither operand needs one, no barriers. Other dtypes convert through staging.
METAL_FUNC const device float* float_operand(const device float* p) { return p; }
template <typename T>
METAL_FUNC const device float* float_operand(const device T*) { return nullptr; }
#endif

template <typename T, int BM, int BN>
kernel void matmul_gemm(const device T* A [[buffer(0)]], const device T* B [[buffer(1)]],
                        device T* C [[buffer(2)]], const device T* S [[buffer(3)]],
                        constant MatmulParams& p [[buffer(4)]], uint3 group [[threadgroup_position_in_grid]],
                        uint tid [[thread_index_in_threadgroup]], uint sg [[simdgroup_index_in_threadgroup]]) {
  constexpr int SGN = MM_SG_COLS(BM, BN);
  constexpr int TM = BM / MM_SG_ROWS(BM, BN) / 8, TN = BN / SGN / 8;  // fragments per SIMD group
  constexpr int STAGE = BM * MM_BK + MM_BK * BN, SMEM = STAGE > BM * BN ? STAGE : BM * BN;
  threadgroup float smem[SMEM];
  threadgroup float* As = smem;               // [BM][BK]
  threadgroup float* Bs = smem + BM * MM_BK;  // [BK][BN]
  const long m0 = long(group.y) * BM, n0 = long(group.x) * BN;
  const int sm = int(sg) / SGN * (TM * 8), sn = int(sg) % SGN * (TN * 8);

  // Products are summed into `part` over MM_CHUNK_K of K, then `part` into `acc`: a
  // two-level sum, whose rounding error grows like sqrt(chunk) + sqrt(K / chunk) instead
  // of sqrt(K) for one running sum, so that long K stays as close to the exact result as
  // CPU BLAS's blocked sums are. Matrices add through a multiply by the identity (MSL has
  // no matrix add); one per chunk costs 8 / MM_CHUNK_K of the multiplies.
  simdgroup_float8x8 acc[TM][TN], part[TM][TN];
  simdgroup_float8x8 identity(1.0f);
#if defined(METALSIM_VECTOR_BYTES)
  // The simulator zeroes through a multiply (lane 0 writes, the other lanes count)
  // rather than assigning a fresh matrix, which copies the whole matrix object on
  // each of the 32 lanes: for short K that copying took longer than the products.
  simdgroup_float8x8 zero = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
#define MM_ZERO(m) simdgroup_multiply(m, zero, zero)
#else
#define MM_ZERO(m) m = make_filled_simdgroup_matrix<float, 8, 8>(0.0f)
#endif
  // One chunk in all: `part` is the whole sum, the chunk add is skipped (for short K it
  // would cost a sixth of the multiplies, and I * part turns an inf in part into NaN),
  // and `acc` is never used.
  const bool single_chunk = p.reduce_batches == 1 && p.K <= MM_CHUNK_K;
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN; ++j) {
      if (!single_chunk) MM_ZERO(acc[i][j]);
      MM_ZERO(part[i][j]);
    }

  if (p.alpha != 0.0f) {
    for (long b = 0; b < p.reduce_batches; ++b) {
      const long batch = p.reduce_batches > 1 ? b : long(group.z);
      const device T* a = A + batch * p.a_bs;
      const device T* bm = B + batch * p.b_bs;
      for (long k0 = 0; k0 < p.K; k0 += MM_BK) {
        // The K step's length rounded up to whole fragments (the staged tiles are zero
        // beyond K): a short K is not multiplied as a whole MM_BK.
        const int kl = p.K - k0 < MM_BK ? int((p.K - k0 + 7) / 8 * 8) : MM_BK;
#if defined(METALSIM_VECTOR_BYTES)
        const device float* fa = float_operand(a);
        const device float* fb = float_operand(bm);
        const bool a_in_place = fa != nullptr && p.a_cs == 1 && m0 + BM <= p.M && k0 + kl <= p.K;
        const bool b_in_place = fb != nullptr && p.b_cs == 1 && n0 + BN <= p.N && k0 + kl <= p.K;
        if (!a_in_place) stage_tile(As, MM_BK, a, p.a_rs, p.a_cs, m0, k0, p.M, p.K, BM, kl, tid);
        if (!b_in_place) stage_tile(Bs, BN, bm, p.b_rs, p.b_cs, k0, n0, p.K, p.N, kl, BN, tid);
        const bool staged = !a_in_place || !b_in_place;
        if (staged) threadgroup_barrier(mem_flags::mem_threadgroup);
        // Exactly the loop of the #else branch (the same calls, counted on every lane, the
        // same sums), with lane 0 running the whole K step as one register-blocked loop
        // (metalsim_prelude/simdgroup_matrix.h).
        if (a_in_place && b_in_place)
          metalsim::simdgroup_multiply_accumulate_panel(part, fa + (m0 + sm) * p.a_rs + k0, ulong(p.a_rs),
                                                        fb + k0 * p.b_rs + n0 + sn, ulong(p.b_rs), uint(kl));
        else if (a_in_place)
          metalsim::simdgroup_multiply_accumulate_panel(part, fa + (m0 + sm) * p.a_rs + k0, ulong(p.a_rs), Bs + sn,
                                                        ulong(BN), uint(kl));
        else if (b_in_place)
          metalsim::simdgroup_multiply_accumulate_panel(part, As + sm * MM_BK, ulong(MM_BK),
                                                        fb + k0 * p.b_rs + n0 + sn, ulong(p.b_rs), uint(kl));
        else
          metalsim::simdgroup_multiply_accumulate_panel(part, As + sm * MM_BK, ulong(MM_BK), Bs + sn, ulong(BN),
                                                        uint(kl));
        if (staged) threadgroup_barrier(mem_flags::mem_threadgroup);
#else
        stage_tile(As, MM_BK, a, p.a_rs, p.a_cs, m0, k0, p.M, p.K, BM, MM_BK, tid);
        stage_tile(Bs, BN, bm, p.b_rs, p.b_cs, k0, n0, p.K, p.N, MM_BK, BN, tid);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (int kk = 0; kk < kl; kk += 8) {
          simdgroup_float8x8 fa[TM], fb[TN];
          for (int i = 0; i < TM; ++i) simdgroup_load(fa[i], As + (sm + i * 8) * MM_BK + kk, MM_BK);
          for (int j = 0; j < TN; ++j) simdgroup_load(fb[j], Bs + kk * BN + sn + j * 8, BN);
          for (int i = 0; i < TM; ++i)
            for (int j = 0; j < TN; ++j) simdgroup_multiply_accumulate(part[i][j], fa[i], fb[j], part[i][j]);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
#endif
        if (!single_chunk && ((k0 + MM_BK) % MM_CHUNK_K == 0 || k0 + MM_BK >= p.K)) {
          for (int i = 0; i < TM; ++i)
            for (int j = 0; j < TN; ++j) {
              simdgroup_multiply_accumulate(acc[i][j], identity, part[i][j], acc[i][j]);
              MM_ZERO(part[i][j]);
            }
        }
      }
    }
  }

  // Epilogue through threadgroup memory (the staging tiles are free now).
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN; ++j) {
      if (single_chunk) simdgroup_store(part[i][j], smem + (sm + i * 8) * BN + sn + j * 8, BN);
      else simdgroup_store(acc[i][j], smem + (sm + i * 8) * BN + sn + j * 8, BN);
    }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const long batch = p.reduce_batches > 1 ? 0 : long(group.z);
  device T* c = C + batch * p.c_bs;
  const device T* s = S + batch * p.s_bs;
  const int rows = int(min(long(BM), p.M - m0)), cols = int(min(long(BN), p.N - n0));
#if defined(METALSIM_VECTOR_BYTES)
  // The simulator: whole rows per thread, so that the common cases (C with unit column
  // stride, no bias or a bias with unit column stride) are loops that vectorise.
  for (int r = int(tid); r < rows; r += MM_THREADS) {
    const threadgroup float* sr = smem + r * BN;
    device T* cr = c + (m0 + r) * p.c_rs + n0 * p.c_cs;
    const device T* br = s + (m0 + r) * p.s_rs + n0 * p.s_cs;
    const float alpha = p.alpha, beta = p.beta;
    if (p.c_cs == 1 && p.round_terms == 0 && beta == 0.0f) {
      for (int col = 0; col < cols; ++col) cr[col] = T(alpha * sr[col]);
    } else if (p.c_cs == 1 && p.round_terms == 0 && p.s_cs == 1) {
      for (int col = 0; col < cols; ++col) cr[col] = T(alpha * sr[col] + beta * float(br[col]));
    } else {
      for (int col = 0; col < cols; ++col) {
        float v = alpha * sr[col];
        if (p.round_terms != 0) v = float(T(v));
        if (beta != 0.0f) {
          const float bias = beta * float(br[col * p.s_cs]);
          v += p.round_terms != 0 ? float(T(bias)) : bias;
        }
        cr[col * p.c_cs] = T(v);
      }
    }
  }
#else
  for (int i = int(tid); i < BM * BN; i += MM_THREADS) {
    const int r = i / BN, col = i % BN;
    if (r >= rows || col >= cols) continue;
    const long gr = m0 + r, gc = n0 + col;
    float v = p.alpha != 0.0f ? p.alpha * smem[i] : 0.0f;
    if (p.round_terms != 0) v = float(T(v));
    if (p.beta != 0.0f) {
      const float bias = p.beta * float(s[gr * p.s_rs + gc * p.s_cs]);
      v += p.round_terms != 0 ? float(T(bias)) : bias;
    }
    c[gr * p.c_rs + gc * p.c_cs] = T(v);
  }
#endif
}

// Matrix-vector: y[m] = alpha * sum_k A[m, k] x[k] + beta * s[m]. One thread per row,
// four partial sums (independent chains; the simulator vectorises them), summed per
// chunk of MM_CHUNK_K into a running total, as the GEMM sums its chunks, so that long
// K stays within CPU's tolerance.
struct GemvParams {
  long M, K;
  long a_rs, a_cs;
  long x_s, y_s, s_s;
  float alpha, beta;
};

template <typename T>
kernel void matmul_gemv(const device T* A [[buffer(0)]], const device T* x [[buffer(1)]], device T* y [[buffer(2)]],
                        const device T* s [[buffer(3)]], constant GemvParams& p [[buffer(4)]],
                        uint row [[thread_position_in_grid]]) {
  if (long(row) >= p.M) return;
  const device T* a = A + long(row) * p.a_rs;
  float total = 0.0f;
  if (p.alpha != 0.0f) {
    const bool dense = p.a_cs == 1 && p.x_s == 1;
    for (long k0 = 0; k0 < p.K; k0 += MM_CHUNK_K) {
      const long end = min(p.K, k0 + MM_CHUNK_K);
      float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      long k = k0;
      if (dense) {
        for (; k + 4 <= end; k += 4)
          for (int j = 0; j < 4; ++j) part[j] += float(a[k + j]) * float(x[k + j]);
      }
      for (; k < end; ++k) part[0] += float(a[k * p.a_cs]) * float(x[k * p.x_s]);
      total += (part[0] + part[1]) + (part[2] + part[3]);
    }
  }
  float v = p.alpha != 0.0f ? p.alpha * total : 0.0f;
  if (p.beta != 0.0f) v += p.beta * float(s[long(row) * p.s_s]);
  y[long(row) * p.y_s] = T(v);
}

#define MATMUL_GEMM(name, T, BM, BN)                                                                       \
  template [[host_name(name #T)]] kernel void matmul_gemm<T, BM, BN>(                                      \
      const device T*, const device T*, device T*, const device T*, constant MatmulParams&, uint3, uint, uint);
#define MATMUL_KERNELS(T)                                                      \
  MATMUL_GEMM("matmul_gemm_", T, 64, 64)                                       \
  MATMUL_GEMM("matmul_gemm_narrow_", T, 64, 32)                                \
  MATMUL_GEMM("matmul_gemm_skinny_", T, 8, MM_SKINNY_BN)                       \
  template [[host_name("matmul_gemv_" #T)]] kernel void matmul_gemv<T>(        \
      const device T*, const device T*, device T*, const device T*, constant GemvParams&, uint);
MATMUL_KERNELS(float)
MATMUL_KERNELS(half)
MATMUL_KERNELS(bfloat)
