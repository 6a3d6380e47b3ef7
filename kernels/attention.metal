// Fused scaled dot-product attention, forward and backward (backend/ops/attention.cpp,
// reached through torch's SDPA dispatch as _scaled_dot_product_fused_attention_overrideable).
//
// q [B, Hq, L, D], k [B, Hk, S, D], v [B, Hk, S, Dv], read in place through strides;
// Hq is a multiple of Hk (grouped-query attention: query head h reads key/value head
// h / (Hq / Hk)). The additive mask (any broadcast of [B, Hq, L, S], stride 0 where
// broadcast) is in the inputs' type; torch turns boolean masks into -inf/0 before the
// call. D and Dv are at most 128 (padded with zeros to a multiple of 8 in the staged tiles).
//
// Two tile classes, each a set of three kernels: head dims up to 64 (`attention_*_<T>`,
// blocks of 32 query rows and 32 keys forward, 16 rows x 32 keys backward) and up to
// 128 (`attention_*_wide_<T>`, 16 x 16 forward, 8 x 16 backward), so that the staged
// tiles fit the 32 KB of threadgroup memory (at_blocks below).
//
// attention_forward_<T>: one SIMD group per block of BQ query rows of one (batch, head),
// one pass over K/V in blocks of BK keys with online softmax: S = Q K^T and O += P V run
// on SIMD-group matrices, each thread keeps one query row's running max and sum and
// turns its row of S into probabilities; the accumulator is rescaled through a
// multiply by the diagonal of the rows' correction factors. Writes O and the rows'
// logsumexp (natural log, float32), which the backward recomputes P from.
//
// attention_backward_kv_<T>: one SIMD group per block of BK keys of one (batch, key
// head): over the query heads of its group and the query rows in blocks of BQB, recompute
// S and dP = dO V^T, form P and dS = P * (dP - rowsum(dO * O)) per key column, and
// accumulate dV += P^T dO and dK += dS^T Q.
// attention_backward_q_<T>: one SIMD group per block of BQB query rows: the same
// recomputation, dQ^T += K^T dS^T, and the mask's gradient (dS itself) when asked.
//
// Dropout: element (b, h, i, j)'s keep decision is Philox word (j % 4) of counter group
// group0 + (b * Hq + h) * L * S4 / 4 + i * S4 / 4 + j / 4 (S4: S rounded up to 4), so the
// backward (and the debug mask) regenerate exactly the forward's mask.
//
// The simulator (METALSIM_VECTOR_BYTES) runs a SIMD group's lanes one after another, so
// there lane 0 computes each kernel's whole block alone, masks and dropout included (the
// *_lane0 functions: no barriers, no SIMD-group matrix objects).
//
// All products accumulate in float32; half and bfloat convert when staged.
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
#include "philox.h"
using namespace metal;

// Mirrored by backend/ops/attention_params.h.
struct AttentionParams {
  long B, Hq, Hk, L, S, D, Dv;
  long q_bs, q_hs, q_ls, q_ds;
  long k_bs, k_hs, k_ls, k_ds;
  long v_bs, v_hs, v_ls, v_ds;
  long o_bs, o_hs, o_ls, o_ds;      // the output (forward) / out (backward)
  long g_bs, g_hs, g_ls, g_ds;      // grad_out (backward)
  long m_bs, m_hs, m_ls, m_ss;      // the additive mask
  long has_mask, causal, debug, mask_grad;
  long gpu_code;                    // simulator: the code below, not the lane-0 kernels (tests)
  ulong group0;                     // Philox counter group of element 0
  uint seed_lo, seed_hi;
  float scale, dropout;
};

#define AT_THREADS 32  // one SIMD group per threadgroup

// Block sizes of a tile class (DMAX: the largest head dim it takes, 64 or 128), mirrored
// by backend/ops/attention.cpp. The threadgroup memory of each kernel (floats; the
// limit is 32 KiB):
//   forward      BQ*DMAX + DMAX*BK + BK*DMAX + BQ*BK + BQ*8   (64: 29.0 KiB, 128: 25.5 KiB)
//   backward_kv  2*DMAX*BK + 2*BQB*DMAX + 2*BQB*BK + 2*BQB    (64: 28.1 KiB, 128: 25.1 KiB)
//   backward_q   the same                                     (the same)
struct at_blocks {
  int bq, bk, bqb;  // forward query rows, keys per block (every kernel), backward query rows
};
constexpr at_blocks at_blocks_for(int dmax) { return dmax <= 64 ? at_blocks{32, 32, 16} : at_blocks{16, 16, 8}; }

// ---- SIMD-group matrix helpers ----

#if defined(METALSIM_VECTOR_BYTES)
// The simulator zeroes through a multiply by zero (lane 0 writes, the other lanes
// count) instead of copying a fresh matrix object on every lane (kernels/matmul.metal).
#define AT_ZERO(m) simdgroup_multiply(m, zero, zero)
#else
#define AT_ZERO(m) m = make_filled_simdgroup_matrix<float, 8, 8>(0.0f)
#endif

// d[TM][TN] += a (8TM x k, row stride lda) @ b (k x 8TN, row stride ldb), k a multiple
// of 8, both in threadgroup memory.
template <int TM, int TN>
METAL_FUNC void mma_panel(thread simdgroup_float8x8 (&d)[TM][TN], const threadgroup float* a, int lda,
                          const threadgroup float* b, int ldb, int k) {
#if defined(METALSIM_VECTOR_BYTES)
  // The simulator's blocked form of exactly the loop below (metalsim_prelude/simdgroup_matrix.h).
  metalsim::simdgroup_multiply_accumulate_panel(d, a, ulong(lda), b, ulong(ldb), uint(k));
#else
  for (int kk = 0; kk < k; kk += 8) {
    simdgroup_float8x8 fa[TM], fb[TN];
    for (int i = 0; i < TM; ++i) simdgroup_load(fa[i], a + i * 8 * lda + kk, lda);
    for (int j = 0; j < TN; ++j) simdgroup_load(fb[j], b + kk * ldb + j * 8, ldb);
    for (int i = 0; i < TM; ++i)
      for (int j = 0; j < TN; ++j) simdgroup_multiply_accumulate(d[i][j], fa[i], fb[j], d[i][j]);
  }
#endif
}

template <int TM, int TN>
METAL_FUNC void store_panel(thread simdgroup_float8x8 (&d)[TM][TN], threadgroup float* dst, int ld) {
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN; ++j) simdgroup_store(d[i][j], dst + i * 8 * ld + j * 8, ld);
}

// ---- staging ----

// Tile row r (< rows), column c (< cols) goes to dst[r * rstep + c * cstep]: source
// element (r0 + r, c) of a (R x C) operand with strides rs, cs, zero outside it.
// Simulator: each thread copies whole rows (its lanes run one after another, a row is
// a loop the compiler vectorises). GPU: consecutive threads take consecutive columns.
template <typename T>
METAL_FUNC void stage(threadgroup float* dst, int rstep, int cstep, const device T* src, long rs, long cs, long r0,
                      long R, long C, int rows, int cols, uint tid) {
#if defined(METALSIM_VECTOR_BYTES)
  for (int r = int(tid); r < rows; r += AT_THREADS) {
    threadgroup float* o = dst + r * rstep;
    const long gr = r0 + r;
    const int n = gr < R ? int(C) : 0;
    const device T* in = src + gr * rs;
    if (cs == 1) {
      for (int c = 0; c < n; ++c) o[c * cstep] = float(in[c]);
    } else {
      for (int c = 0; c < n; ++c) o[c * cstep] = float(in[c * cs]);
    }
    for (int c = n; c < cols; ++c) o[c * cstep] = 0.0f;
  }
#else
  for (int i = int(tid); i < rows * cols; i += AT_THREADS) {
    const int r = i / cols, c = i % cols;
    const long gr = r0 + r;
    dst[r * rstep + c * cstep] = (gr < R && c < C) ? float(src[gr * rs + c * cs]) : 0.0f;
  }
#endif
}

// Padded widths: multiples of 8 for the products' k, and of 32 where a width is the
// columns of 4-fragment-wide panels (32 columns each).
inline int pad8(long n) { return int((n + 7) / 8 * 8); }
inline int pad32(long n) { return int((n + 31) / 32 * 32); }

// ---- dropout ----

inline uint4 dropout_words(constant AttentionParams& p, long bh, long i, long j) {
  const ulong per_row = ulong((p.S + 3) / 4);
  return philox4x32_10(PhiloxKey{p.seed_lo, p.seed_hi}, p.group0 + ulong(bh * p.L + i) * per_row + ulong(j / 4));
}
inline bool dropout_keep(uint4 w, long j, float prob) {
  const int lane = int(j % 4);
  const uint word = lane == 0 ? w.x : lane == 1 ? w.y : lane == 2 ? w.z : w.w;
  return philox_uniform(word) >= prob;
}

// The score of (i, j) after scale, mask and causality; -inf where masked out.
template <typename T>
inline float masked_score(constant AttentionParams& p, const device T* mask, float s, long b, long h, long i, long j) {
  if (i >= p.L || j >= p.S || (p.causal != 0 && j > i)) return -INFINITY;
  s *= p.scale;
  if (p.has_mask != 0) s += float(mask[b * p.m_bs + h * p.m_hs + i * p.m_ls + j * p.m_ss]);
  return s;
}

#if defined(METALSIM_VECTOR_BYTES)
// ---- the simulator's lane-0 kernels ----
//
// The simulator runs a SIMD group's 32 lanes one after another on fibers: every barrier
// is 32 fiber switches, every SIMD-group matrix call is counted on each lane, and
// per-lane loops run 32 times in a row. Its lane 0 therefore computes each whole block
// alone, every call (attention_forward_lane0 and the two backward ones below), with no
// barriers and no matrix objects: the products as register-blocked loops over plain
// float arrays, the softmax with the rows side by side (vectorised, metal::exp), the
// mask read in place and dropout's Philox words drawn for 8 rows at once (vectors), the
// other lanes only count one SIMD-group call so the
// simulator's divergence check still sees them (as kernels/matmul.metal's simulator
// branch does). Per element the steps are the #else branch's: products summed in the
// order of k, one multiply-add each, the softmax's steps in the order of the keys (not
// bit for bit: the GPU code also adds the zero padding of partial blocks).
#if METALSIM_VECTOR_BYTES >= 64
#define AT_W 16    // floats per vector register
#define AT_ACC 16  // accumulator registers per register block (of 32)
#elif METALSIM_VECTOR_BYTES >= 32
#define AT_W 8
#define AT_ACC 8  // of 16
#else
#define AT_W 4
#define AT_ACC 8
#endif
typedef float at_v4 __attribute__((vector_size(16), aligned(4)));
typedef float at_v8 __attribute__((vector_size(32), aligned(4)));
typedef float at_v16 __attribute__((vector_size(64), aligned(4)));
// Vectors of W floats (AT_W, or the rows' whole length N when shorter: the wide tile
// class's 8-row backward blocks).
template <int W> struct at_vec_of;
template <> struct at_vec_of<4> { typedef at_v4 type; };
template <> struct at_vec_of<8> { typedef at_v8 type; };
template <> struct at_vec_of<16> { typedef at_v16 type; };

constant float at_zeros[64] = {};
// One counted SIMD-group matrix call on every lane (lane 0 loads 64 zeros).
#define AT_COUNT_CALL()                \
  {                                    \
    simdgroup_float8x8 mark;           \
    simdgroup_load(mark, at_zeros, 8); \
  }

enum at_init { at_accumulate, at_from_zero, at_rescaled };

// Rows m0..m0+R of acc (N floats each): acc[m] (zero, or times the vector `corr`
// element-wise, by INIT) + sum_{k < K} A(m, k) b[k][:], A(m, k) = a[m * a_ms + k * a_ks]
// read as a scalar (any strides, any T; UNIT: a_ms is 1), b dense [K][N]. R rows x N / W
// vectors of accumulators stay in registers over k.
template <int N, int R, at_init INIT, bool UNIT, typename TA>
METAL_FUNC void at_block(float* acc, const device TA* a, long a_ms, long a_ks, const float* b, int K, int m0,
                         const float* corr) {
  constexpr int W = N < AT_W ? N : AT_W, NV = N / W;
  typedef typename at_vec_of<W>::type at_vec;
  at_vec x[R][NV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      if (INIT == at_from_zero) {
        x[r][v] = at_vec{};
      } else {
        __builtin_memcpy(&x[r][v], acc + (m0 + r) * N + v * W, sizeof(at_vec));
        if (INIT == at_rescaled) {
          at_vec c;
          __builtin_memcpy(&c, corr + v * W, sizeof c);
          x[r][v] *= c;
        }
      }
    }
  const device TA* ar = a + m0 * a_ms;
  for (int k = 0; k < K; ++k, ar += a_ks) {
    at_vec bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) __builtin_memcpy(&bv[v], b + k * N + v * W, sizeof(at_vec));
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const float s = float(ar[UNIT ? r : r * a_ms]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) x[r][v] += s * bv[v];
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) __builtin_memcpy(acc + (m0 + r) * N + v * W, &x[r][v], sizeof(at_vec));
}

// acc [M][N] = (per INIT) acc + A (M x K, strided, any T) @ b (dense [K][N]).
template <int N, at_init INIT, typename TA>
METAL_FUNC void at_product(float* acc, int M, const device TA* a, long a_ms, long a_ks, const float* b, int K,
                           const float* corr = nullptr) {
  constexpr int W = N < AT_W ? N : AT_W;
  static_assert(N % W == 0 && W >= 4, "rows of whole vectors");
  // Rows of A one element apart (a_ms == 1) are read at constant offsets; rows a
  // run-time stride apart need a register per row's offset, so at most 8 of them (16
  // spilled the offsets to the stack, a reload per multiply-add).
  constexpr int R = AT_ACC / (N / W) > 0 ? AT_ACC / (N / W) : 1;
  constexpr int RS = R < 8 ? R : 8;
  int m0 = 0;
  if (a_ms == 1) {
    for (; m0 + R <= M; m0 += R) at_block<N, R, INIT, true>(acc, a, a_ms, a_ks, b, K, m0, corr);
  } else {
    for (; m0 + RS <= M; m0 += RS) at_block<N, RS, INIT, false>(acc, a, a_ms, a_ks, b, K, m0, corr);
  }
  for (; m0 < M; ++m0) at_block<N, 1, INIT, true>(acc, a, a_ms, a_ks, b, K, m0, corr);
}

// dst[c][r] = float(src[r * rs + c * cs]) for r < rows, c < cols (a block of an operand,
// transposed, N = the destination's row length), zero for rows..N.
template <int N, typename T>
METAL_FUNC void at_stage_transposed(float* dst, const device T* src, long rs, long cs, int rows, int cols) {
  for (int c = 0; c < cols; ++c) {
    float* o = dst + c * N;
    for (int r = 0; r < rows; ++r) o[r] = float(src[r * rs + c * cs]);
    for (int r = rows; r < N; ++r) o[r] = 0.0f;
  }
}

// Dropout's factors for rows i0..i0+8 and keys j0..j0+3 (j0 a multiple of 4): f[r * rs +
// u * us] = keep_scale where (i0 + r, j0 + u) is kept, 0 where dropped. The keep decisions
// are dropout_words' and dropout_keep's, with philox.h's ten rounds run on vectors of the
// 8 rows' counters (one scalar Philox call per four keys was most of a dropout call's
// CPU time); test_attention checks the mask against the algorithm.
typedef unsigned int at_vu __attribute__((vector_size(32)));
typedef unsigned long at_vl __attribute__((vector_size(64)));
METAL_FUNC void at_dropout_rows8(constant AttentionParams& p, long bh, long i0, long j0, float keep_scale, float* f,
                                 int rs, int us) {
  constexpr int N = 8;
  typedef at_v8 at_vf;
  const unsigned long per_row = (unsigned long)((p.S + 3) / 4);
  at_vl ctr;
  for (int r = 0; r < N; ++r)
    ctr[r] = p.group0 + (unsigned long)(bh * p.L + i0 + r) * per_row + (unsigned long)(j0 / 4);
  // Counter words (group_lo, group_hi, 0, 0), key (seed_lo, seed_hi), as philox4x32_10.
  at_vu c0 = __builtin_convertvector(ctr, at_vu), c1 = __builtin_convertvector(ctr >> 32, at_vu);
  at_vu c2 = at_vu{}, c3 = at_vu{};
  unsigned int k0 = p.seed_lo, k1 = p.seed_hi;
  for (int round = 0; round < 10; ++round) {
    // 32 x 32 -> 64-bit products: mulhi is the high half, the low half the wrapped product.
    const at_vl m0 = __builtin_convertvector(c0, at_vl) * 0xD2511F53ul;
    const at_vl m1 = __builtin_convertvector(c2, at_vl) * 0xCD9E8D57ul;
    const at_vu n0 = __builtin_convertvector(m1 >> 32, at_vu) ^ c1 ^ k0;
    const at_vu n2 = __builtin_convertvector(m0 >> 32, at_vu) ^ c3 ^ k1;
    c1 = __builtin_convertvector(m1, at_vu);
    c3 = __builtin_convertvector(m0, at_vu);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  const at_vu words[4] = {c0, c1, c2, c3};
  const at_vf kept = at_vf{} + keep_scale, dropped = at_vf{};
  for (int u = 0; u < 4; ++u) {
    // philox_uniform: the top 24 bits, exact in float.
    const at_vf x = __builtin_convertvector(words[u] >> 8, at_vf) * (1.0f / 16777216.0f);
    const at_vf fu = x >= p.dropout ? kept : dropped;
    for (int r = 0; r < N; ++r) f[r * rs + u * us] = fu[r];
  }
}

// N rows: eight at a time (every N is a multiple of 8).
template <int N>
METAL_FUNC void at_dropout_rows(constant AttentionParams& p, long bh, long i0, long j0, float keep_scale, float* f,
                                int rs, int us) {
  static_assert(N % 8 == 0, "whole vectors of rows");
  for (int r0 = 0; r0 < N; r0 += 8) at_dropout_rows8(p, bh, i0 + r0, j0, keep_scale, f + r0 * rs, rs, us);
}

// The forward for query rows q0.. (BQ of them) of head h, on lane 0: per block of BK keys,
// S^T = K Q^T (keys as rows, the BQ query rows side by side in vectors), the online
// softmax update of every row at once (the row sums before dropout), dropout's factors,
// O^T = O^T * correction + V^T P^T; then O = O^T^T / row sum and the logsumexp. The rows'
// arithmetic is attention_forward's per-row loop's.
template <typename T, int BQ, int BK, int DMAX>
METAL_FUNC void attention_forward_lane0(constant AttentionParams& p, const device T* q, const device T* k,
                                        const device T* v, const device T* mask, device T* out, device float* lse,
                                        device float* debug, long bh, long q0) {
  const long b = bh / p.Hq, h = bh % p.Hq, hk = h / (p.Hq / p.Hk);
  const device T* qb = q + b * p.q_bs + h * p.q_hs;
  const device T* kb = k + b * p.k_bs + hk * p.k_hs;
  const device T* vb = v + b * p.v_bs + hk * p.v_hs;
  const device T* mb = mask + b * p.m_bs + h * p.m_hs + q0 * p.m_ls;
  float qt[DMAX * BQ], ot[DMAX * BQ], st[BK * BQ];  // Q^T [D][BQ], O^T [Dv][BQ], S^T and P^T [BK][BQ]
  float mt[BK * BQ];                                // the mask's block, transposed as S^T
  float row_max[BQ], row_sum[BQ], corr[BQ];
  const int D = int(p.D), Dv = int(p.Dv);
  const int nq = int(min(long(BQ), p.L - q0));
  at_stage_transposed<BQ>(qt, qb + q0 * p.q_ls, p.q_ls, p.q_ds, nq, D);
  for (int i = 0; i < Dv * BQ; ++i) ot[i] = 0.0f;
  for (int r = 0; r < BQ; ++r) {
    row_max[r] = -INFINITY;
    row_sum[r] = 0.0f;
  }
  const float scale = p.scale;
  const bool has_mask = p.has_mask != 0, drop = p.dropout > 0.0f;
  const float keep_scale = p.dropout < 1.0f ? 1.0f / (1.0f - p.dropout) : 0.0f;
  long kend = p.S;
  if (p.causal != 0) kend = min(p.S, q0 + BQ);  // keys past the block's last row are masked for all its rows
  for (long k0 = 0; k0 < kend; k0 += BK) {
    const int nk = int(min(long(BK), p.S - k0));
    // S^T [nk][BQ]: row j is key k0 + j against every query row.
    at_product<BQ, at_from_zero>(st, nk, kb + k0 * p.k_ls, p.k_ls, p.k_ds, qt, D);
    // Scores after scale (and the mask), -inf where masked (keys past S, rows past L,
    // causal); the block's max per row.
    float bm[BQ];
    for (int r = 0; r < BQ; ++r) bm[r] = -INFINITY;
    const bool whole = nk == BK && nq == BQ && (p.causal == 0 || k0 + BK - 1 <= q0);
    if (has_mask) {
      // Read in place through its strides (0 where broadcast); columns past nk unused.
      at_stage_transposed<BQ>(mt, mb + k0 * p.m_ss, p.m_ls, p.m_ss, nq, nk);
      for (int i = nk * BQ; i < BK * BQ; ++i) mt[i] = 0.0f;
      for (int j = 0; j < BK; ++j)
        for (int r = 0; r < BQ; ++r) {
          const bool in = j < nk && r < nq;
          float s = st[j * BQ + r] * scale;
          s += mt[j * BQ + r];
          s = in ? s : -INFINITY;
          st[j * BQ + r] = s;
          bm[r] = s > bm[r] ? s : bm[r];
        }
    } else if (whole) {
      for (int j = 0; j < BK; ++j)
        for (int r = 0; r < BQ; ++r) {
          const float s = st[j * BQ + r] * scale;
          st[j * BQ + r] = s;
          bm[r] = s > bm[r] ? s : bm[r];
        }
    } else {
      for (int j = 0; j < BK; ++j)
        for (int r = 0; r < BQ; ++r) {
          const bool in = j < nk && r < nq && (p.causal == 0 || k0 + j <= q0 + r);
          float s = st[j * BQ + r] * scale;
          s = in ? s : -INFINITY;
          st[j * BQ + r] = s;
          bm[r] = s > bm[r] ? s : bm[r];
        }
    }
    float nm[BQ], base[BQ], bs[BQ];
    for (int r = 0; r < BQ; ++r) {
      nm[r] = row_max[r] > bm[r] ? row_max[r] : bm[r];
      corr[r] = nm[r] == -INFINITY ? 1.0f : exp(row_max[r] - nm[r]);
      // A row masked so far (max -inf) subtracts 0: its scores are all -inf, exp gives
      // 0. No select around exp in the loop below: GCC would not vectorise it.
      base[r] = nm[r] == -INFINITY ? 0.0f : nm[r];
      bs[r] = 0.0f;
    }
    for (int j = 0; j < BK; ++j)
      for (int r = 0; r < BQ; ++r) {
        const float e = exp(st[j * BQ + r] - base[r]);  // exp(-inf - max) is 0 for masked scores
        st[j * BQ + r] = e;
        bs[r] += e;
      }
    for (int r = 0; r < BQ; ++r) {
      row_sum[r] = row_sum[r] * corr[r] + bs[r];
      row_max[r] = nm[r];
    }
    if (drop) {  // after the row sums, which are dropout's denominators
      for (int j0 = 0; j0 < nk && (p.causal == 0 || k0 + j0 <= q0 + BQ - 1); j0 += 4) {
        float f[4 * BQ];
        at_dropout_rows<BQ>(p, bh, q0, k0 + j0, keep_scale, f, 1, BQ);
        for (int l = 0; l < 4 && j0 + l < nk; ++l)
          for (int r = 0; r < BQ; ++r) st[(j0 + l) * BQ + r] *= f[l * BQ + r];
      }
    }
    // O^T [Dv][BQ] = O^T * correction + V^T P^T: row d, key j is v[k0 + j][d].
    at_product<BQ, at_rescaled>(ot, Dv, vb + k0 * p.v_ls, p.v_ds, p.v_ls, st, nk, corr);
  }
  // O / row sum; a row with no unmasked key gives 0, as CPU's SDPA does.
  for (int r = 0; r < nq; ++r) {
    const float inv = row_sum[r] > 0.0f ? 1.0f / row_sum[r] : 0.0f;
    device T* o = out + b * p.o_bs + h * p.o_hs + (q0 + r) * p.o_ls;
    for (int d = 0; d < Dv; ++d) o[d * p.o_ds] = T(ot[d * BQ + r] * inv);
    lse[bh * p.L + q0 + r] = row_sum[r] > 0.0f ? row_max[r] + log(row_sum[r]) : -INFINITY;
  }
  // The debug keep mask [B, Hq, L, S], every key (causal blocks skipped above included).
  for (long j0 = 0; p.debug != 0 && j0 < p.S; j0 += 4) {
    float f[4 * BQ];
    at_dropout_rows<BQ>(p, bh, q0, j0, 1.0f, f, 1, BQ);
    for (int r = 0; r < nq; ++r)
      for (long l = 0; l < 4 && j0 + l < p.S; ++l) debug[(bh * p.L + q0 + r) * p.S + j0 + l] = f[l * BQ + r];
  }
}
#endif

// ---- forward ----

template <typename T, int DMAX>
kernel void attention_forward(const device T* q [[buffer(0)]], const device T* k [[buffer(1)]],
                              const device T* v [[buffer(2)]], const device T* mask [[buffer(3)]],
                              device T* out [[buffer(4)]], device float* lse [[buffer(5)]],
                              device float* debug [[buffer(6)]], constant AttentionParams& p [[buffer(7)]],
                              uint3 group [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]]) {
  constexpr int BQ = at_blocks_for(DMAX).bq, BK = at_blocks_for(DMAX).bk;
#if defined(METALSIM_VECTOR_BYTES)
  // Every call (masks, dropout and its debug mask included) unless asked for the GPU's
  // code (METALX_SIM_ATTENTION_GPU_CODE, so tests keep running it). Before the threadgroup
  // variables: the simulator allocates them on every lane.
  if (p.gpu_code == 0) {
    AT_COUNT_CALL();
    if (tid == 0)
      attention_forward_lane0<T, BQ, BK, DMAX>(p, q, k, v, mask, out, lse, debug, long(group.y), long(group.x) * BQ);
    return;
  }
#endif
  constexpr int NP = DMAX / 32;  // 32-column panels of the output
  threadgroup float Qs[BQ * DMAX];  // [BQ][dq]; at the end O [BQ][DMAX]
  threadgroup float KT[DMAX * BK];  // [dq][BK]
  threadgroup float Vs[BK * DMAX];  // [BK][ldv]
  threadgroup float Ps[BQ * BK];    // S, then P
  threadgroup float Dg[BQ * 8];     // per 8 rows an 8x8 diagonal of correction factors

  const long bh = long(group.y), b = bh / p.Hq, h = bh % p.Hq, hk = h / (p.Hq / p.Hk);
  const long q0 = long(group.x) * BQ;
  const int dq = pad8(p.D), ldv = pad32(p.Dv);
  const device T* qb = q + b * p.q_bs + h * p.q_hs;
  const device T* kb = k + b * p.k_bs + hk * p.k_hs;
  const device T* vb = v + b * p.v_bs + hk * p.v_hs;

  stage(Qs, dq, 1, qb, p.q_ls, p.q_ds, q0, p.L, p.D, BQ, dq, tid);
  for (int i = int(tid); i < BQ * 8; i += AT_THREADS) Dg[i] = 0.0f;

  simdgroup_float8x8 zero = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  simdgroup_float8x8 O[NP][BQ / 8][4], Sf[BQ / 8][BK / 8];  // O: 32 columns per panel
  for (int pp = 0; pp < NP; ++pp)
    for (int a = 0; a < BQ / 8; ++a)
      for (int c = 0; c < 4; ++c)
        if (p.Dv > 32 * pp) AT_ZERO(O[pp][a][c]);

  // Thread tid < BQ keeps query row i's running max and sum; the others have no row.
  const bool has_row = int(tid) < BQ;
  const long i = q0 + long(tid);
  float row_max = -INFINITY, row_sum = 0.0f;
  const float keep_scale = p.dropout < 1.0f ? 1.0f / (1.0f - p.dropout) : 0.0f;
  // Causal: keys past the block's last row are masked for all its rows.
  long kend = p.S;
  if (p.causal != 0 && p.debug == 0) kend = min(p.S, q0 + BQ);

  for (long k0 = 0; k0 < kend; k0 += BK) {
    stage(KT, 1, BK, kb, p.k_ls, p.k_ds, k0, p.S, p.D, BK, dq, tid);
    stage(Vs, ldv, 1, vb, p.v_ls, p.v_ds, k0, p.S, p.Dv, BK, ldv, tid);
    for (int a = 0; a < BQ / 8; ++a)
      for (int c = 0; c < BK / 8; ++c) AT_ZERO(Sf[a][c]);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    mma_panel(Sf, Qs, dq, KT, BK, dq);
    store_panel(Sf, Ps, BK);
    threadgroup_barrier(mem_flags::mem_threadgroup);

    // This thread's row: online softmax update.
    if (has_row) {
      threadgroup float* row = Ps + tid * BK;
      float block_max = -INFINITY;
      // A block with nothing masked in this row takes a branch-free loop (the simulator
      // runs these per-lane loops one lane after another).
      const bool unmasked = p.has_mask == 0 && i < p.L && k0 + BK <= p.S && (p.causal == 0 || k0 + BK - 1 <= i);
      if (unmasked) {
        for (int j = 0; j < BK; ++j) {
          const float s = row[j] * p.scale;
          row[j] = s;
          block_max = s > block_max ? s : block_max;
        }
      } else {
        for (int j = 0; j < BK; ++j) {
          const float s = masked_score(p, mask, row[j], b, h, i, k0 + j);
          row[j] = s;
          block_max = s > block_max ? s : block_max;
        }
      }
      const float new_max = row_max > block_max ? row_max : block_max;
      const float correction = new_max == -INFINITY ? 1.0f : exp(row_max - new_max);
      float block_sum = 0.0f;
      if (p.dropout == 0.0f) {
        // exp(-inf - max) is 0 for masked scores; a row masked so far has all zeros.
        if (new_max == -INFINITY) {
          for (int j = 0; j < BK; ++j) row[j] = 0.0f;
        } else {
          for (int j = 0; j < BK; ++j) {
            const float e = exp(row[j] - new_max);
            row[j] = e;
            block_sum += e;
          }
        }
      }
      for (int j0 = 0; p.dropout != 0.0f && j0 < BK; j0 += 4) {
        uint4 w = uint4(0);
        const bool drop = p.dropout > 0.0f && i < p.L;
        if (drop) w = dropout_words(p, bh, i, k0 + j0);
        for (int j = j0; j < j0 + 4; ++j) {
          const float s = row[j];
          const float e = s == -INFINITY ? 0.0f : exp(s - new_max);
          block_sum += e;
          if (drop) {
            const bool keep = dropout_keep(w, k0 + j, p.dropout);
            row[j] = keep ? e * keep_scale : 0.0f;
            if (p.debug != 0 && k0 + j < p.S) debug[(bh * p.L + i) * p.S + k0 + j] = keep ? 1.0f : 0.0f;
          } else {
            row[j] = e;
          }
        }
      }
      row_sum = row_sum * correction + block_sum;
      row_max = new_max;
      Dg[(tid / 8) * 64 + (tid % 8) * 9] = correction;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);

    for (int a = 0; a < BQ / 8; ++a) {
      simdgroup_float8x8 dg;
      simdgroup_load(dg, Dg + a * 64, 8);
      for (int pp = 0; pp < NP; ++pp)
        for (int c = 0; c < 4; ++c)
          if (p.Dv > 32 * pp) simdgroup_multiply(O[pp][a][c], dg, O[pp][a][c]);
    }
    for (int pp = 0; pp < NP; ++pp)
      if (p.Dv > 32 * pp) mma_panel(O[pp], Ps, BK, Vs + 32 * pp, ldv, BK);
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }

  // Epilogue through Qs (free now): O / row_sum; a row with no unmasked key gives 0,
  // as CPU's SDPA does.
  for (int pp = 0; pp < NP; ++pp)
    if (p.Dv > 32 * pp) store_panel(O[pp], Qs + 32 * pp, DMAX);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (has_row && i < p.L) {
    const float inv = row_sum > 0.0f ? 1.0f / row_sum : 0.0f;
    device T* o = out + b * p.o_bs + h * p.o_hs + i * p.o_ls;
    for (long d = 0; d < p.Dv; ++d) o[d * p.o_ds] = T(Qs[tid * DMAX + d] * inv);
    lse[bh * p.L + i] = row_sum > 0.0f ? row_max + log(row_sum) : -INFINITY;
  }
}

// ---- backward ----

// For key column j = k0 + tid (tid < BK) and the BQB query rows from q0 (head h): from S
// (sbuf, [BQB][BK]) and dO V^T (dpbuf, same), P with dropout applied and dS, written
// transposed ([BK][BQB]) over the same buffers. `lse_rows` holds the rows' logsumexp,
// `delta_rows` rowsum(dO * O). The mask's gradient is dS, written when `mask_grad` is given.
template <int BQB, int BK, typename T>
METAL_FUNC void probabilities_column(constant AttentionParams& p, const device T* mask, threadgroup float* sbuf,
                                     threadgroup float* dpbuf, const threadgroup float* lse_rows,
                                     const threadgroup float* delta_rows, long b, long h, long q0, long k0, uint tid,
                                     device T* mask_grad) {
  const long bh = b * p.Hq + h, j = k0 + long(tid);
  const bool has_column = int(tid) < BK;
  const float keep_scale = p.dropout < 1.0f ? 1.0f / (1.0f - p.dropout) : 0.0f;
  float pt[BQB], dst[BQB];
  // Nothing masked or dropped in this column for these rows: a branch-free loop (every
  // row then has an unmasked key, so its logsumexp is finite).
  const bool plain = p.has_mask == 0 && p.dropout == 0.0f && j < p.S && q0 + BQB <= p.L &&
                     (p.causal == 0 || j <= q0);
  for (int r = 0; has_column && plain && r < BQB; ++r) {
    const float prob = exp(sbuf[r * BK + tid] * p.scale - lse_rows[r]);
    pt[r] = prob;
    dst[r] = prob * (dpbuf[r * BK + tid] - delta_rows[r]);
  }
  for (int r = 0; has_column && !plain && r < BQB; ++r) {
    const long i = q0 + r;
    const float s = masked_score(p, mask, sbuf[r * BK + tid], b, h, i, j);
    const float lse = lse_rows[r];
    float prob = (s == -INFINITY || lse == -INFINITY) ? 0.0f : exp(s - lse);
    float dp = dpbuf[r * BK + tid];
    float pd = prob;
    if (p.dropout > 0.0f && prob != 0.0f) {
      const bool keep = dropout_keep(dropout_words(p, bh, i, j), j, p.dropout);
      pd = keep ? prob * keep_scale : 0.0f;
      dp = keep ? dp * keep_scale : 0.0f;
    }
    pt[r] = pd;
    dst[r] = prob * (dp - delta_rows[r]);
    if (mask_grad && i < p.L && j < p.S) mask_grad[(bh * p.L + i) * p.S + j] = T(dst[r]);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int r = 0; has_column && r < BQB; ++r) {
    sbuf[tid * BQB + r] = pt[r];
    dpbuf[tid * BQB + r] = dst[r];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
}

// Stages the BQB rows q0.. of head h's Q and dO and their logsumexp and rowsum(dO * O).
template <int BQB, typename T>
METAL_FUNC void stage_query_block(constant AttentionParams& p, const device T* q, const device T* grad_out,
                                  const device float* lse, const device float* delta, threadgroup float* Qs,
                                  int ldq, threadgroup float* dOs, int ldo, threadgroup float* lse_rows,
                                  threadgroup float* delta_rows, long b, long h, long q0, uint tid) {
  stage(Qs, ldq, 1, q + b * p.q_bs + h * p.q_hs, p.q_ls, p.q_ds, q0, p.L, p.D, BQB, ldq, tid);
  stage(dOs, ldo, 1, grad_out + b * p.g_bs + h * p.g_hs, p.g_ls, p.g_ds, q0, p.L, p.Dv, BQB, ldo, tid);
  if (int(tid) < BQB) {
    const long i = q0 + tid, row = (b * p.Hq + h) * p.L + i;
    lse_rows[tid] = i < p.L ? lse[row] : -INFINITY;
    delta_rows[tid] = i < p.L ? delta[row] : 0.0f;
  }
}

#if defined(METALSIM_VECTOR_BYTES)
// The simulator's backward for key rows k0.. (BK of them) of key head hk, on lane 0 (see
// the lane-0 section above): K^T and V^T staged once; per query head of the group and
// block of AT_BWD_ROWS query rows, S = Q K^T and dP = dO V^T (query rows as rows, the
// keys side by side), P and dS = P * (dP - delta) per element (with the mask's row and
// dropout's factors when given), dV^T += dO^T P and dK^T += Q^T dS; Q and dO are read in
// place. Per element the arithmetic of attention_backward_kv and probabilities_column.
#define AT_BWD_ROWS 64
template <typename T, int BK, int DMAX>
METAL_FUNC void attention_backward_kv_lane0(constant AttentionParams& p, const device T* q, const device T* k,
                                            const device T* v, const device T* mask, const device T* grad_out,
                                            const device float* lse, const device float* delta, device T* grad_k,
                                            device T* grad_v, long bhk, long k0) {
  const long b = bhk / p.Hk, hk = bhk % p.Hk;
  constexpr int QB = AT_BWD_ROWS;
  float kt[DMAX * BK], vt[DMAX * BK], dkt[DMAX * BK], dvt[DMAX * BK];  // K^T, V^T, dK^T, dV^T [d][BK]
  float sb[QB * BK], dpb[QB * BK];                                     // S then P, dP then dS [QB][BK]
  const int D = int(p.D), Dv = int(p.Dv);
  const int nk = int(min(long(BK), p.S - k0));
  at_stage_transposed<BK>(kt, k + b * p.k_bs + hk * p.k_hs + k0 * p.k_ls, p.k_ls, p.k_ds, nk, D);
  at_stage_transposed<BK>(vt, v + b * p.v_bs + hk * p.v_hs + k0 * p.v_ls, p.v_ls, p.v_ds, nk, Dv);
  for (int i = 0; i < D * BK; ++i) dkt[i] = 0.0f;
  for (int i = 0; i < Dv * BK; ++i) dvt[i] = 0.0f;
  const float scale = p.scale;
  const long groups = p.Hq / p.Hk;
  const long qstart = p.causal != 0 ? k0 / QB * QB : 0;  // causal: rows before k0 see none of these keys
  const bool has_mask = p.has_mask != 0, drop = p.dropout > 0.0f;
  const float keep_scale = p.dropout < 1.0f ? 1.0f / (1.0f - p.dropout) : 0.0f;
  float fb[QB * BK], ones[BK];  // dropout's factors [QB][BK] of the query block; 1s without dropout
  for (int c = 0; c < BK; ++c) ones[c] = 1.0f;
  for (long h = hk * groups; h < (hk + 1) * groups; ++h) {
    const long bh = b * p.Hq + h;
    const device T* mb = mask + b * p.m_bs + h * p.m_hs + k0 * p.m_ss;
    for (long q0 = qstart; q0 < p.L; q0 += QB) {
      const int nq = int(min(long(QB), p.L - q0));
      const device T* qr = q + b * p.q_bs + h * p.q_hs + q0 * p.q_ls;
      const device T* gr = grad_out + b * p.g_bs + h * p.g_hs + q0 * p.g_ls;
      at_product<BK, at_from_zero>(sb, nq, qr, p.q_ls, p.q_ds, kt, D);    // S [nq][BK]
      at_product<BK, at_from_zero>(dpb, nq, gr, p.g_ls, p.g_ds, vt, Dv);  // dP
      const bool whole = nk == BK && (p.causal == 0 || k0 + BK - 1 <= q0);
      for (int c0 = 0; drop && c0 < BK; c0 += 4) {
        if (p.causal == 0 || k0 + c0 <= q0 + QB - 1) {
          at_dropout_rows<QB>(p, bh, q0, k0 + c0, keep_scale, fb + c0, BK, 1);
        } else {  // causality masks these keys for every row (P = 0): not drawn
          for (int r = 0; r < QB; ++r)
            for (int u = 0; u < 4; ++u) fb[r * BK + c0 + u] = 1.0f;
        }
      }
      for (int r = 0; r < nq; ++r) {
        const float l = lse[bh * p.L + q0 + r], dl = delta[bh * p.L + q0 + r];
        float* s = sb + r * BK;
        float* dp = dpb + r * BK;
        if (has_mask || drop) {
          // The mask's row (0 past nk) and dropout's factors (1 without dropout). With
          // f = 0 this is the GPU code's P = 0, dP = 0 of a dropped element; with f = 1 and
          // mr = 0 the plain loops' arithmetic.
          float mr[BK];
          for (int c = 0; c < BK; ++c) mr[c] = 0.0f;
          if (has_mask) {
            const device T* m = mb + (q0 + r) * p.m_ls;
            for (int c = 0; c < nk; ++c) mr[c] = float(m[c * p.m_ss]);
          }
          const float* f = drop ? fb + r * BK : ones;
          for (int c = 0; c < BK; ++c) {
            const bool in = c < nk && (p.causal == 0 || k0 + c <= q0 + r) && l != -INFINITY;
            const float x = (s[c] * scale + mr[c]) - l;
            const float prob = exp(in ? x : -INFINITY);  // the select before exp (see below)
            s[c] = prob * f[c];
            dp[c] = prob * (dp[c] * f[c] - dl);
          }
        } else if (whole) {  // nothing masked: every row then has an unmasked key, a finite logsumexp
          for (int c = 0; c < BK; ++c) {
            const float prob = exp(s[c] * scale - l);
            s[c] = prob;
            dp[c] = prob * (dp[c] - dl);
          }
        } else {
          for (int c = 0; c < BK; ++c) {
            // Masked: exp(-inf) = 0. The select goes before exp: after it, GCC computes exp
            // only where it is kept, in a branch, and the loop stays scalar.
            const bool in = c < nk && (p.causal == 0 || k0 + c <= q0 + r) && l != -INFINITY;
            const float x = s[c] * scale - l;
            const float prob = exp(in ? x : -INFINITY);
            s[c] = prob;
            dp[c] = prob * (dp[c] - dl);
          }
        }
      }
      // dV^T [Dv][BK] += dO^T P, dK^T [D][BK] += Q^T dS: row d, query row i is dO[i][d], Q[i][d].
      at_product<BK, at_accumulate>(dvt, Dv, gr, p.g_ds, p.g_ls, sb, nq);
      at_product<BK, at_accumulate>(dkt, D, qr, p.q_ds, p.q_ls, dpb, nq);
    }
  }
  for (int j = 0; j < nk; ++j) {
    // grad_k, grad_v: dense [B, Hk, S, D] / [.., Dv].
    device T* gk = grad_k + (bhk * p.S + k0 + j) * p.D;
    device T* gv = grad_v + (bhk * p.S + k0 + j) * p.Dv;
    for (int d = 0; d < D; ++d) gk[d] = T(dkt[d * BK + j] * scale);
    for (int d = 0; d < Dv; ++d) gv[d] = T(dvt[d * BK + j]);
  }
}

// The simulator's dQ for query rows q0.. (BQB of them) of head h, on lane 0: Q^T and dO^T
// staged once; per block of BK keys, S^T = K Q^T and dP^T = V dO^T (keys as rows, the
// query rows side by side), dS^T = P^T * (dP^T - delta) (with the mask and dropout's
// factors when given; dS is the mask's gradient when asked), dQ^T += K^T dS^T; K and V
// are read in place. Per element the arithmetic of attention_backward_q and
// probabilities_column.
template <typename T, int BQB, int BK, int DMAX>
METAL_FUNC void attention_backward_q_lane0(constant AttentionParams& p, const device T* q, const device T* k,
                                           const device T* v, const device T* mask, const device T* grad_out,
                                           const device float* lse, const device float* delta, device T* grad_q,
                                           device T* grad_mask, long bh, long q0) {
  const long b = bh / p.Hq, h = bh % p.Hq, hk = h / (p.Hq / p.Hk);
  float qt[DMAX * BQB], gt[DMAX * BQB], dqt[DMAX * BQB];  // Q^T, dO^T, dQ^T [d][BQB]
  float st[BK * BQB], dpt[BK * BQB];                       // S^T, dP^T then dS^T [BK][BQB]
  float lr[BQB], dr[BQB];                                  // the rows' logsumexp and delta
  const int D = int(p.D), Dv = int(p.Dv);
  const int nq = int(min(long(BQB), p.L - q0));
  at_stage_transposed<BQB>(qt, q + b * p.q_bs + h * p.q_hs + q0 * p.q_ls, p.q_ls, p.q_ds, nq, D);
  at_stage_transposed<BQB>(gt, grad_out + b * p.g_bs + h * p.g_hs + q0 * p.g_ls, p.g_ls, p.g_ds, nq, Dv);
  for (int r = 0; r < BQB; ++r) {
    lr[r] = r < nq ? lse[bh * p.L + q0 + r] : -INFINITY;
    dr[r] = r < nq ? delta[bh * p.L + q0 + r] : 0.0f;
  }
  for (int i = 0; i < D * BQB; ++i) dqt[i] = 0.0f;
  const device T* kb = k + b * p.k_bs + hk * p.k_hs;
  const device T* vb = v + b * p.v_bs + hk * p.v_hs;
  const float scale = p.scale;
  const long kend = p.causal != 0 ? min(p.S, q0 + BQB) : p.S;
  const bool has_mask = p.has_mask != 0, drop = p.dropout > 0.0f;
  const float keep_scale = p.dropout < 1.0f ? 1.0f / (1.0f - p.dropout) : 0.0f;
  const device T* mb = mask + b * p.m_bs + h * p.m_hs + q0 * p.m_ls;
  float mt[BK * BQB], ft[BK * BQB];  // the mask's block and dropout's factors, as S^T
  for (long k0 = 0; k0 < kend; k0 += BK) {
    const int nk = int(min(long(BK), p.S - k0));
    at_product<BQB, at_from_zero>(st, nk, kb + k0 * p.k_ls, p.k_ls, p.k_ds, qt, D);    // S^T [nk][BQB]
    at_product<BQB, at_from_zero>(dpt, nk, vb + k0 * p.v_ls, p.v_ls, p.v_ds, gt, Dv);  // dP^T
    const bool whole = nq == BQB && (p.causal == 0 || k0 + nk - 1 <= q0);
    if (has_mask || drop) {
      // As the kv kernel's: mask 0 past nq, factors 1 without dropout (and where a row
      // sees none of four keys).
      if (has_mask) {
        at_stage_transposed<BQB>(mt, mb + k0 * p.m_ss, p.m_ls, p.m_ss, nq, nk);
      } else {
        for (int i = 0; i < nk * BQB; ++i) mt[i] = 0.0f;
      }
      for (int i = 0; i < BK * BQB; ++i) ft[i] = 1.0f;
      for (int j0 = 0; drop && j0 < nk && (p.causal == 0 || k0 + j0 <= q0 + BQB - 1); j0 += 4)
        at_dropout_rows<BQB>(p, bh, q0, k0 + j0, keep_scale, ft + j0 * BQB, 1, BQB);
    }
    for (int j = 0; j < nk; ++j) {
      float* s = st + j * BQB;
      float* dp = dpt + j * BQB;
      if (has_mask || drop) {
        const float* m = mt + j * BQB;
        const float* f = ft + j * BQB;
        for (int r = 0; r < BQB; ++r) {
          const bool in = r < nq && (p.causal == 0 || k0 + j <= q0 + r) && lr[r] != -INFINITY;
          const float x = (s[r] * scale + m[r]) - lr[r];
          const float prob = exp(in ? x : -INFINITY);
          dp[r] = prob * (dp[r] * f[r] - dr[r]);
        }
        if (grad_mask != nullptr) {  // dense [B, Hq, L, S]; blocks never visited stay the host's zeros
          for (int r = 0; r < nq; ++r) grad_mask[(bh * p.L + q0 + r) * p.S + k0 + j] = T(dp[r]);
        }
      } else if (whole) {
        for (int r = 0; r < BQB; ++r) dp[r] = exp(s[r] * scale - lr[r]) * (dp[r] - dr[r]);
      } else {
        for (int r = 0; r < BQB; ++r) {
          const bool in = r < nq && (p.causal == 0 || k0 + j <= q0 + r) && lr[r] != -INFINITY;
          const float x = s[r] * scale - lr[r];
          const float prob = exp(in ? x : -INFINITY);  // the select before exp (see the kv kernel)
          dp[r] = prob * (dp[r] - dr[r]);
        }
      }
    }
    // dQ^T [D][BQB] += K^T dS^T: row d, key j is K[k0 + j][d].
    at_product<BQB, at_accumulate>(dqt, D, kb + k0 * p.k_ls, p.k_ds, p.k_ls, dpt, nk);
  }
  for (int r = 0; r < nq; ++r) {
    device T* gq = grad_q + (bh * p.L + q0 + r) * p.D;  // dense [B, Hq, L, D]
    for (int d = 0; d < D; ++d) gq[d] = T(dqt[d * BQB + r] * scale);
  }
}
#endif

template <typename T, int DMAX>
kernel void attention_backward_kv(const device T* q [[buffer(0)]], const device T* k [[buffer(1)]],
                                  const device T* v [[buffer(2)]], const device T* mask [[buffer(3)]],
                                  const device T* grad_out [[buffer(4)]], const device float* lse [[buffer(5)]],
                                  const device float* delta [[buffer(6)]], device T* grad_k [[buffer(7)]],
                                  device T* grad_v [[buffer(8)]], constant AttentionParams& p [[buffer(9)]],
                                  uint3 group [[threadgroup_position_in_grid]],
                                  uint tid [[thread_index_in_threadgroup]]) {
  constexpr int BK = at_blocks_for(DMAX).bk, BQB = at_blocks_for(DMAX).bqb;
#if defined(METALSIM_VECTOR_BYTES)
  if (p.gpu_code == 0) {  // before the threadgroup variables (see the forward)
    AT_COUNT_CALL();
    if (tid == 0)
      attention_backward_kv_lane0<T, BK, DMAX>(p, q, k, v, mask, grad_out, lse, delta, grad_k, grad_v,
                                               long(group.y), long(group.x) * BK);
    return;
  }
#endif
  constexpr int NP = DMAX / 32;  // 32-column panels of dK and dV
  threadgroup float KT[DMAX * BK];    // [dq][BK]; at the end dK [BK][DMAX]
  threadgroup float VT[DMAX * BK];    // [dv][BK]; at the end dV [BK][DMAX]
  threadgroup float Qs[BQB * DMAX];   // [BQB][ldq]
  threadgroup float dOs[BQB * DMAX];  // [BQB][ldo]
  threadgroup float Sb[BQB * BK], dPb[BQB * BK];
  threadgroup float lse_rows[BQB], delta_rows[BQB];

  const long bhk = long(group.y), b = bhk / p.Hk, hk = bhk % p.Hk, groups = p.Hq / p.Hk;
  const long k0 = long(group.x) * BK;
  const int dq = pad8(p.D), dv = pad8(p.Dv), ldq = pad32(p.D), ldo = pad32(p.Dv);
  stage(KT, 1, BK, k + b * p.k_bs + hk * p.k_hs, p.k_ls, p.k_ds, k0, p.S, p.D, BK, dq, tid);
  stage(VT, 1, BK, v + b * p.v_bs + hk * p.v_hs, p.v_ls, p.v_ds, k0, p.S, p.Dv, BK, dv, tid);
  // Staged before anything reads or (with no query block to visit, causal) overwrites them.
  threadgroup_barrier(mem_flags::mem_threadgroup);

  simdgroup_float8x8 zero = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  simdgroup_float8x8 dK[NP][BK / 8][4], dV[NP][BK / 8][4], Sf[BQB / 8][BK / 8], dPf[BQB / 8][BK / 8];
  for (int pp = 0; pp < NP; ++pp)
    for (int a = 0; a < BK / 8; ++a)
      for (int c = 0; c < 4; ++c) {
        if (p.D > 32 * pp) AT_ZERO(dK[pp][a][c]);
        if (p.Dv > 32 * pp) AT_ZERO(dV[pp][a][c]);
      }

  // Causal: query rows before k0 see none of this block's keys.
  const long qstart = p.causal != 0 ? k0 / BQB * BQB : 0;
  for (long h = hk * groups; h < (hk + 1) * groups; ++h) {
    for (long q0 = qstart; q0 < p.L; q0 += BQB) {
      stage_query_block<BQB>(p, q, grad_out, lse, delta, Qs, ldq, dOs, ldo, lse_rows, delta_rows, b, h, q0, tid);
      for (int a = 0; a < BQB / 8; ++a)
        for (int c = 0; c < BK / 8; ++c) {
          AT_ZERO(Sf[a][c]);
          AT_ZERO(dPf[a][c]);
        }
      threadgroup_barrier(mem_flags::mem_threadgroup);
      mma_panel(Sf, Qs, ldq, KT, BK, dq);
      mma_panel(dPf, dOs, ldo, VT, BK, dv);
      store_panel(Sf, Sb, BK);
      store_panel(dPf, dPb, BK);
      threadgroup_barrier(mem_flags::mem_threadgroup);
      probabilities_column<BQB, BK>(p, mask, Sb, dPb, lse_rows, delta_rows, b, h, q0, k0, tid,
                                    (device T*)nullptr);
      // dV += P^T dO, dK += dS^T Q (P^T in Sb, dS^T in dPb, [BK][BQB]).
      for (int pp = 0; pp < NP; ++pp) {
        if (p.Dv > 32 * pp) mma_panel(dV[pp], Sb, BQB, dOs + 32 * pp, ldo, BQB);
        if (p.D > 32 * pp) mma_panel(dK[pp], dPb, BQB, Qs + 32 * pp, ldq, BQB);
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
  }

  for (int pp = 0; pp < NP; ++pp) {
    if (p.D > 32 * pp) store_panel(dK[pp], KT + 32 * pp, DMAX);
    if (p.Dv > 32 * pp) store_panel(dV[pp], VT + 32 * pp, DMAX);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const long j = k0 + long(tid);
  if (int(tid) < BK && j < p.S) {
    // grad_k, grad_v: dense [B, Hk, S, D] / [.., Dv].
    device T* gk = grad_k + (bhk * p.S + j) * p.D;
    device T* gv = grad_v + (bhk * p.S + j) * p.Dv;
    for (long d = 0; d < p.D; ++d) gk[d] = T(KT[tid * DMAX + d] * p.scale);
    for (long d = 0; d < p.Dv; ++d) gv[d] = T(VT[tid * DMAX + d]);
  }
}

template <typename T, int DMAX>
kernel void attention_backward_q(const device T* q [[buffer(0)]], const device T* k [[buffer(1)]],
                                 const device T* v [[buffer(2)]], const device T* mask [[buffer(3)]],
                                 const device T* grad_out [[buffer(4)]], const device float* lse [[buffer(5)]],
                                 const device float* delta [[buffer(6)]], device T* grad_q [[buffer(7)]],
                                 device T* grad_mask [[buffer(8)]], constant AttentionParams& p [[buffer(9)]],
                                 uint3 group [[threadgroup_position_in_grid]],
                                 uint tid [[thread_index_in_threadgroup]]) {
  constexpr int BK = at_blocks_for(DMAX).bk, BQB = at_blocks_for(DMAX).bqb;
#if defined(METALSIM_VECTOR_BYTES)
  if (p.gpu_code == 0) {  // before the threadgroup variables (see the forward)
    AT_COUNT_CALL();
    if (tid == 0)
      attention_backward_q_lane0<T, BQB, BK, DMAX>(p, q, k, v, mask, grad_out, lse, delta, grad_q,
                                                   p.mask_grad != 0 ? grad_mask : (device T*)nullptr,
                                                   long(group.y), long(group.x) * BQB);
    return;
  }
#endif
  constexpr int NP = DMAX / 32;  // 32-row panels of dQ^T
  threadgroup float KT[DMAX * BK];    // [ldq][BK], rows past D zero; at the end dQ^T [DMAX][BQB]
  threadgroup float VT[DMAX * BK];    // [dv][BK]
  threadgroup float Qs[BQB * DMAX];   // [BQB][ldq]
  threadgroup float dOs[BQB * DMAX];  // [BQB][ldo]
  threadgroup float Sb[BQB * BK], dPb[BQB * BK];
  threadgroup float lse_rows[BQB], delta_rows[BQB];

  const long bh = long(group.y), b = bh / p.Hq, h = bh % p.Hq, hk = h / (p.Hq / p.Hk);
  const long q0 = long(group.x) * BQB;
  const int dq = pad8(p.D), dv = pad8(p.Dv), ldq = pad32(p.D), ldo = pad32(p.Dv);
  const device T* kb = k + b * p.k_bs + hk * p.k_hs;
  const device T* vb = v + b * p.v_bs + hk * p.v_hs;
  stage_query_block<BQB>(p, q, grad_out, lse, delta, Qs, ldq, dOs, ldo, lse_rows, delta_rows, b, h, q0, tid);

  simdgroup_float8x8 zero = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  simdgroup_float8x8 dQT[NP][4][BQB / 8], Sf[BQB / 8][BK / 8], dPf[BQB / 8][BK / 8];  // dQ^T: 32 rows (d) per panel
  for (int pp = 0; pp < NP; ++pp)
    for (int a = 0; a < 4; ++a)
      for (int c = 0; c < BQB / 8; ++c)
        if (p.D > 32 * pp) AT_ZERO(dQT[pp][a][c]);
  const bool want_mask_grad = p.mask_grad != 0;
  const long kend = p.causal != 0 ? min(p.S, q0 + BQB) : p.S;
  for (long k0 = 0; k0 < kend; k0 += BK) {
    stage(KT, 1, BK, kb, p.k_ls, p.k_ds, k0, p.S, p.D, BK, ldq, tid);
    stage(VT, 1, BK, vb, p.v_ls, p.v_ds, k0, p.S, p.Dv, BK, dv, tid);
    for (int a = 0; a < BQB / 8; ++a)
      for (int c = 0; c < BK / 8; ++c) {
        AT_ZERO(Sf[a][c]);
        AT_ZERO(dPf[a][c]);
      }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    mma_panel(Sf, Qs, ldq, KT, BK, dq);
    mma_panel(dPf, dOs, ldo, VT, BK, dv);
    store_panel(Sf, Sb, BK);
    store_panel(dPf, dPb, BK);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    probabilities_column<BQB, BK>(p, mask, Sb, dPb, lse_rows, delta_rows, b, h, q0, k0, tid,
                                  want_mask_grad ? grad_mask : (device T*)nullptr);
    // dQ^T += K^T dS^T.
    for (int pp = 0; pp < NP; ++pp)
      if (p.D > 32 * pp) mma_panel(dQT[pp], KT + 32 * pp * BK, BK, dPb, BQB, BK);
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  // A causal block past every key (L > S) still owes its mask gradient rows nothing:
  // they were never visited, and the host zero-fills the mask gradient.

  for (int pp = 0; pp < NP; ++pp)
    if (p.D > 32 * pp) store_panel(dQT[pp], KT + 32 * pp * BQB, BQB);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (int(tid) < BQB) {
    const long i = q0 + long(tid);
    if (i < p.L) {
      device T* gq = grad_q + (bh * p.L + i) * p.D;  // dense [B, Hq, L, D]
      for (long d = 0; d < p.D; ++d) gq[d] = T(KT[d * BQB + tid] * p.scale);
    }
  }
}

// Per dtype and tile class (the host picks the class by head dim): 6 kernels per dtype.
#define ATTENTION_KERNELS(T, DMAX, SUFFIX)                                                                        \
  template [[host_name("attention_forward" SUFFIX #T)]] kernel void attention_forward<T, DMAX>(                   \
      const device T*, const device T*, const device T*, const device T*, device T*, device float*, device float*, \
      constant AttentionParams&, uint3, uint);                                                                     \
  template [[host_name("attention_backward_kv" SUFFIX #T)]] kernel void attention_backward_kv<T, DMAX>(           \
      const device T*, const device T*, const device T*, const device T*, const device T*, const device float*,   \
      const device float*, device T*, device T*, constant AttentionParams&, uint3, uint);                         \
  template [[host_name("attention_backward_q" SUFFIX #T)]] kernel void attention_backward_q<T, DMAX>(             \
      const device T*, const device T*, const device T*, const device T*, const device T*, const device float*,   \
      const device float*, device T*, device T*, constant AttentionParams&, uint3, uint);
ATTENTION_KERNELS(float, 64, "_")
ATTENTION_KERNELS(half, 64, "_")
ATTENTION_KERNELS(bfloat, 64, "_")
ATTENTION_KERNELS(float, 128, "_wide_")
ATTENTION_KERNELS(half, 128, "_wide_")
ATTENTION_KERNELS(bfloat, 128, "_wide_")
