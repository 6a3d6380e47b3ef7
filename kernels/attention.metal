// Fused scaled dot-product attention, forward and backward (backend/ops/attention.cpp,
// reached through torch's SDPA dispatch as _scaled_dot_product_fused_attention_overrideable).
//
// q [B, Hq, L, D], k [B, Hk, S, D], v [B, Hk, S, Dv], read in place through strides;
// Hq is a multiple of Hk (grouped-query attention: query head h reads key/value head
// h / (Hq / Hk)). The additive mask (any broadcast of [B, Hq, L, S], stride 0 where
// broadcast) is in the inputs' type; torch turns boolean masks into -inf/0 before the
// call. D and Dv are at most 64 (padded with zeros to a multiple of 8 in the staged tiles).
//
// attention_forward_<T>: one SIMD group per block of 32 query rows of one (batch, head),
// one pass over K/V in blocks of 32 keys with online softmax: S = Q K^T and O += P V run
// on SIMD-group matrices, each thread keeps one query row's running max and sum and
// turns its row of S into probabilities; the accumulator is rescaled through a
// multiply by the diagonal of the rows' correction factors. Writes O and the rows'
// logsumexp (natural log, float32), which the backward recomputes P from.
//
// attention_backward_kv_<T>: one SIMD group per block of 32 keys of one (batch, key
// head): over the query heads of its group and the query rows in blocks of 16, recompute
// S and dP = dO V^T, form P and dS = P * (dP - rowsum(dO * O)) per key column, and
// accumulate dV += P^T dO and dK += dS^T Q.
// attention_backward_q_<T>: one SIMD group per block of 16 query rows: the same
// recomputation, dQ^T += K^T dS^T, and the mask's gradient (dS itself) when asked.
//
// Dropout: element (b, h, i, j)'s keep decision is Philox word (j % 4) of counter group
// group0 + (b * Hq + h) * L * S4 / 4 + i * S4 / 4 + j / 4 (S4: S rounded up to 4), so the
// backward (and the debug mask) regenerate exactly the forward's mask.
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
  ulong group0;                     // Philox counter group of element 0
  uint seed_lo, seed_hi;
  float scale, dropout;
};

#define AT_THREADS 32  // one SIMD group per threadgroup
#define AT_BQ 32       // forward: query rows per threadgroup
#define AT_BK 32       // keys per block (all kernels)
#define AT_BQB 16      // backward: query rows per block
#define AT_DMAX 64

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

// Padded widths: multiples of 8 for the products' k, and 32 or 64 where a width is
// the columns of a 4-fragment-wide panel (halves of at most 64).
inline int pad8(long n) { return int((n + 7) / 8 * 8); }
inline int pad32(long n) { return n <= 32 ? 32 : 64; }

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

// ---- forward ----

template <typename T>
kernel void attention_forward(const device T* q [[buffer(0)]], const device T* k [[buffer(1)]],
                              const device T* v [[buffer(2)]], const device T* mask [[buffer(3)]],
                              device T* out [[buffer(4)]], device float* lse [[buffer(5)]],
                              device float* debug [[buffer(6)]], constant AttentionParams& p [[buffer(7)]],
                              uint3 group [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float Qs[AT_BQ * AT_DMAX];  // [BQ][dq]
  threadgroup float KT[AT_DMAX * AT_BK];  // [dq][BK]
  threadgroup float Vs[AT_BK * AT_DMAX];  // [BK][ldv]
  threadgroup float Ps[AT_BQ * AT_BK];    // S, then P
  threadgroup float Dg[AT_BQ * 8];        // per 8 rows an 8x8 diagonal of correction factors

  const long bh = long(group.y), b = bh / p.Hq, h = bh % p.Hq, hk = h / (p.Hq / p.Hk);
  const long q0 = long(group.x) * AT_BQ;
  const int dq = pad8(p.D), ldv = pad32(p.Dv);
  const bool wide = p.Dv > 32;
  const device T* qb = q + b * p.q_bs + h * p.q_hs;
  const device T* kb = k + b * p.k_bs + hk * p.k_hs;
  const device T* vb = v + b * p.v_bs + hk * p.v_hs;

  stage(Qs, dq, 1, qb, p.q_ls, p.q_ds, q0, p.L, p.D, AT_BQ, dq, tid);
  for (int i = int(tid); i < AT_BQ * 8; i += AT_THREADS) Dg[i] = 0.0f;

  simdgroup_float8x8 zero = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  simdgroup_float8x8 O0[4][4], O1[4][4], Sf[4][4];  // O columns 0-31 and 32-63
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      AT_ZERO(O0[i][j]);
      if (wide) AT_ZERO(O1[i][j]);
    }

  const long i = q0 + long(tid);  // this thread's query row
  float row_max = -INFINITY, row_sum = 0.0f;
  const float keep_scale = p.dropout < 1.0f ? 1.0f / (1.0f - p.dropout) : 0.0f;
  // Causal: keys past the block's last row are masked for all its rows.
  long kend = p.S;
  if (p.causal != 0 && p.debug == 0) kend = min(p.S, q0 + AT_BQ);

  for (long k0 = 0; k0 < kend; k0 += AT_BK) {
    stage(KT, 1, AT_BK, kb, p.k_ls, p.k_ds, k0, p.S, p.D, AT_BK, dq, tid);
    stage(Vs, ldv, 1, vb, p.v_ls, p.v_ds, k0, p.S, p.Dv, AT_BK, ldv, tid);
    for (int a = 0; a < 4; ++a)
      for (int c = 0; c < 4; ++c) AT_ZERO(Sf[a][c]);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    mma_panel(Sf, Qs, dq, KT, AT_BK, dq);
    store_panel(Sf, Ps, AT_BK);
    threadgroup_barrier(mem_flags::mem_threadgroup);

    // This thread's row: online softmax update.
    threadgroup float* row = Ps + tid * AT_BK;
    float block_max = -INFINITY;
    // A block with nothing masked in this row takes a branch-free loop (the simulator
    // runs these per-lane loops one lane after another: they are most of its time).
    const bool unmasked = p.has_mask == 0 && i < p.L && k0 + AT_BK <= p.S && (p.causal == 0 || k0 + AT_BK - 1 <= i);
    if (unmasked) {
      for (int j = 0; j < AT_BK; ++j) {
        const float s = row[j] * p.scale;
        row[j] = s;
        block_max = s > block_max ? s : block_max;
      }
    } else {
      for (int j = 0; j < AT_BK; ++j) {
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
        for (int j = 0; j < AT_BK; ++j) row[j] = 0.0f;
      } else {
        for (int j = 0; j < AT_BK; ++j) {
          const float e = exp(row[j] - new_max);
          row[j] = e;
          block_sum += e;
        }
      }
    }
    for (int j0 = 0; p.dropout != 0.0f && j0 < AT_BK; j0 += 4) {
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
    threadgroup_barrier(mem_flags::mem_threadgroup);

    for (int a = 0; a < 4; ++a) {
      simdgroup_float8x8 dg;
      simdgroup_load(dg, Dg + a * 64, 8);
      for (int c = 0; c < 4; ++c) {
        simdgroup_multiply(O0[a][c], dg, O0[a][c]);
        if (wide) simdgroup_multiply(O1[a][c], dg, O1[a][c]);
      }
    }
    mma_panel(O0, Ps, AT_BK, Vs, ldv, AT_BK);
    if (wide) mma_panel(O1, Ps, AT_BK, Vs + 32, ldv, AT_BK);
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }

  // Epilogue through Qs (free now): O / row_sum; a row with no unmasked key gives 0,
  // as CPU's SDPA does.
  store_panel(O0, Qs, AT_DMAX);
  if (wide) store_panel(O1, Qs + 32, AT_DMAX);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (i < p.L) {
    const float inv = row_sum > 0.0f ? 1.0f / row_sum : 0.0f;
    device T* o = out + b * p.o_bs + h * p.o_hs + i * p.o_ls;
    for (long d = 0; d < p.Dv; ++d) o[d * p.o_ds] = T(Qs[tid * AT_DMAX + d] * inv);
    lse[bh * p.L + i] = row_sum > 0.0f ? row_max + log(row_sum) : -INFINITY;
  }
}

// ---- backward ----

// For key column j = k0 + tid and the AT_BQB query rows from q0 (head h): from S
// (sbuf, [BQB][BK]) and dO V^T (dpbuf, same), P with dropout applied and dS, written
// transposed ([BK][BQB]) over the same buffers. `rowstat` holds the rows' logsumexp
// then rowsum(dO * O). The mask's gradient is dS, written when `mask_grad` is given.
template <typename T>
METAL_FUNC void probabilities_column(constant AttentionParams& p, const device T* mask, threadgroup float* sbuf,
                                     threadgroup float* dpbuf, const threadgroup float* lse_rows,
                                     const threadgroup float* delta_rows, long b, long h, long q0, long k0, uint tid,
                                     device T* mask_grad) {
  const long bh = b * p.Hq + h, j = k0 + long(tid);
  const float keep_scale = p.dropout < 1.0f ? 1.0f / (1.0f - p.dropout) : 0.0f;
  float pt[AT_BQB], dst[AT_BQB];
  // Nothing masked or dropped in this column for these rows: a branch-free loop (every
  // row then has an unmasked key, so its logsumexp is finite).
  const bool plain = p.has_mask == 0 && p.dropout == 0.0f && j < p.S && q0 + AT_BQB <= p.L &&
                     (p.causal == 0 || j <= q0);
  for (int r = 0; plain && r < AT_BQB; ++r) {
    const float prob = exp(sbuf[r * AT_BK + tid] * p.scale - lse_rows[r]);
    pt[r] = prob;
    dst[r] = prob * (dpbuf[r * AT_BK + tid] - delta_rows[r]);
  }
  for (int r = 0; !plain && r < AT_BQB; ++r) {
    const long i = q0 + r;
    const float s = masked_score(p, mask, sbuf[r * AT_BK + tid], b, h, i, j);
    const float lse = lse_rows[r];
    float prob = (s == -INFINITY || lse == -INFINITY) ? 0.0f : exp(s - lse);
    float dp = dpbuf[r * AT_BK + tid];
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
  for (int r = 0; r < AT_BQB; ++r) {
    sbuf[tid * AT_BQB + r] = pt[r];
    dpbuf[tid * AT_BQB + r] = dst[r];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
}

// Stages the rows q0.. of head h's Q and dO and their logsumexp and rowsum(dO * O).
template <typename T>
METAL_FUNC void stage_query_block(constant AttentionParams& p, const device T* q, const device T* grad_out,
                                  const device float* lse, const device float* delta, threadgroup float* Qs,
                                  int ldq, threadgroup float* dOs, int ldo, threadgroup float* lse_rows,
                                  threadgroup float* delta_rows, long b, long h, long q0, uint tid) {
  stage(Qs, ldq, 1, q + b * p.q_bs + h * p.q_hs, p.q_ls, p.q_ds, q0, p.L, p.D, AT_BQB, ldq, tid);
  stage(dOs, ldo, 1, grad_out + b * p.g_bs + h * p.g_hs, p.g_ls, p.g_ds, q0, p.L, p.Dv, AT_BQB, ldo, tid);
  if (tid < AT_BQB) {
    const long i = q0 + tid, row = (b * p.Hq + h) * p.L + i;
    lse_rows[tid] = i < p.L ? lse[row] : -INFINITY;
    delta_rows[tid] = i < p.L ? delta[row] : 0.0f;
  }
}

template <typename T>
kernel void attention_backward_kv(const device T* q [[buffer(0)]], const device T* k [[buffer(1)]],
                                  const device T* v [[buffer(2)]], const device T* mask [[buffer(3)]],
                                  const device T* grad_out [[buffer(4)]], const device float* lse [[buffer(5)]],
                                  const device float* delta [[buffer(6)]], device T* grad_k [[buffer(7)]],
                                  device T* grad_v [[buffer(8)]], constant AttentionParams& p [[buffer(9)]],
                                  uint3 group [[threadgroup_position_in_grid]],
                                  uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float KT[AT_DMAX * AT_BK];    // [dq][BK]; at the end dK [BK][64]
  threadgroup float VT[AT_DMAX * AT_BK];    // [dv][BK]; at the end dV [BK][64]
  threadgroup float Qs[AT_BQB * AT_DMAX];   // [BQB][ldq]
  threadgroup float dOs[AT_BQB * AT_DMAX];  // [BQB][ldo]
  threadgroup float Sb[AT_BQB * AT_BK], dPb[AT_BQB * AT_BK];
  threadgroup float lse_rows[AT_BQB], delta_rows[AT_BQB];

  const long bhk = long(group.y), b = bhk / p.Hk, hk = bhk % p.Hk, groups = p.Hq / p.Hk;
  const long k0 = long(group.x) * AT_BK;
  const int dq = pad8(p.D), dv = pad8(p.Dv), ldq = pad32(p.D), ldo = pad32(p.Dv);
  const bool wide_k = p.D > 32, wide_v = p.Dv > 32;
  stage(KT, 1, AT_BK, k + b * p.k_bs + hk * p.k_hs, p.k_ls, p.k_ds, k0, p.S, p.D, AT_BK, dq, tid);
  stage(VT, 1, AT_BK, v + b * p.v_bs + hk * p.v_hs, p.v_ls, p.v_ds, k0, p.S, p.Dv, AT_BK, dv, tid);
  // Staged before anything reads or (with no query block to visit, causal) overwrites them.
  threadgroup_barrier(mem_flags::mem_threadgroup);

  simdgroup_float8x8 zero = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  simdgroup_float8x8 dK0[4][4], dK1[4][4], dV0[4][4], dV1[4][4], Sf[2][4], dPf[2][4];
  for (int a = 0; a < 4; ++a)
    for (int c = 0; c < 4; ++c) {
      AT_ZERO(dK0[a][c]);
      AT_ZERO(dV0[a][c]);
      if (wide_k) AT_ZERO(dK1[a][c]);
      if (wide_v) AT_ZERO(dV1[a][c]);
    }

  // Causal: query rows before k0 see none of this block's keys.
  const long qstart = p.causal != 0 ? k0 / AT_BQB * AT_BQB : 0;
  for (long h = hk * groups; h < (hk + 1) * groups; ++h) {
    for (long q0 = qstart; q0 < p.L; q0 += AT_BQB) {
      stage_query_block(p, q, grad_out, lse, delta, Qs, ldq, dOs, ldo, lse_rows, delta_rows, b, h, q0, tid);
      for (int a = 0; a < 2; ++a)
        for (int c = 0; c < 4; ++c) {
          AT_ZERO(Sf[a][c]);
          AT_ZERO(dPf[a][c]);
        }
      threadgroup_barrier(mem_flags::mem_threadgroup);
      mma_panel(Sf, Qs, ldq, KT, AT_BK, dq);
      mma_panel(dPf, dOs, ldo, VT, AT_BK, dv);
      store_panel(Sf, Sb, AT_BK);
      store_panel(dPf, dPb, AT_BK);
      threadgroup_barrier(mem_flags::mem_threadgroup);
      probabilities_column(p, mask, Sb, dPb, lse_rows, delta_rows, b, h, q0, k0, tid, (device T*)nullptr);
      // dV += P^T dO, dK += dS^T Q (P^T in Sb, dS^T in dPb, [BK][BQB]).
      mma_panel(dV0, Sb, AT_BQB, dOs, ldo, AT_BQB);
      if (wide_v) mma_panel(dV1, Sb, AT_BQB, dOs + 32, ldo, AT_BQB);
      mma_panel(dK0, dPb, AT_BQB, Qs, ldq, AT_BQB);
      if (wide_k) mma_panel(dK1, dPb, AT_BQB, Qs + 32, ldq, AT_BQB);
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
  }

  store_panel(dK0, KT, AT_DMAX);
  if (wide_k) store_panel(dK1, KT + 32, AT_DMAX);
  store_panel(dV0, VT, AT_DMAX);
  if (wide_v) store_panel(dV1, VT + 32, AT_DMAX);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const long j = k0 + long(tid);
  if (j < p.S) {
    // grad_k, grad_v: dense [B, Hk, S, D] / [.., Dv].
    device T* gk = grad_k + (bhk * p.S + j) * p.D;
    device T* gv = grad_v + (bhk * p.S + j) * p.Dv;
    for (long d = 0; d < p.D; ++d) gk[d] = T(KT[tid * AT_DMAX + d] * p.scale);
    for (long d = 0; d < p.Dv; ++d) gv[d] = T(VT[tid * AT_DMAX + d]);
  }
}

template <typename T>
kernel void attention_backward_q(const device T* q [[buffer(0)]], const device T* k [[buffer(1)]],
                                 const device T* v [[buffer(2)]], const device T* mask [[buffer(3)]],
                                 const device T* grad_out [[buffer(4)]], const device float* lse [[buffer(5)]],
                                 const device float* delta [[buffer(6)]], device T* grad_q [[buffer(7)]],
                                 device T* grad_mask [[buffer(8)]], constant AttentionParams& p [[buffer(9)]],
                                 uint3 group [[threadgroup_position_in_grid]],
                                 uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float KT[AT_DMAX * AT_BK];    // [64][BK], rows past D zero
  threadgroup float VT[AT_DMAX * AT_BK];    // [dv][BK]
  threadgroup float Qs[AT_BQB * AT_DMAX];   // [BQB][ldq]
  threadgroup float dOs[AT_BQB * AT_DMAX];  // [BQB][ldo]
  threadgroup float SP[2 * AT_BQB * AT_BK];  // S and dP; at the end dQ^T [64][BQB]
  threadgroup float lse_rows[AT_BQB], delta_rows[AT_BQB];
  threadgroup float* Sb = SP;
  threadgroup float* dPb = SP + AT_BQB * AT_BK;

  const long bh = long(group.y), b = bh / p.Hq, h = bh % p.Hq, hk = h / (p.Hq / p.Hk);
  const long q0 = long(group.x) * AT_BQB;
  const int dq = pad8(p.D), dv = pad8(p.Dv), ldq = pad32(p.D), ldo = pad32(p.Dv);
  const bool wide_k = p.D > 32;
  const device T* kb = k + b * p.k_bs + hk * p.k_hs;
  const device T* vb = v + b * p.v_bs + hk * p.v_hs;
  stage_query_block(p, q, grad_out, lse, delta, Qs, ldq, dOs, ldo, lse_rows, delta_rows, b, h, q0, tid);

  simdgroup_float8x8 zero = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  simdgroup_float8x8 dQT0[4][2], dQT1[4][2], Sf[2][4], dPf[2][4];  // dQ^T rows (d) 0-31, 32-63
  for (int a = 0; a < 4; ++a)
    for (int c = 0; c < 2; ++c) {
      AT_ZERO(dQT0[a][c]);
      if (wide_k) AT_ZERO(dQT1[a][c]);
    }
  const bool want_mask_grad = p.mask_grad != 0;
  const long kend = p.causal != 0 ? min(p.S, q0 + AT_BQB) : p.S;
  for (long k0 = 0; k0 < kend; k0 += AT_BK) {
    stage(KT, 1, AT_BK, kb, p.k_ls, p.k_ds, k0, p.S, p.D, AT_BK, ldq, tid);
    stage(VT, 1, AT_BK, vb, p.v_ls, p.v_ds, k0, p.S, p.Dv, AT_BK, dv, tid);
    for (int a = 0; a < 2; ++a)
      for (int c = 0; c < 4; ++c) {
        AT_ZERO(Sf[a][c]);
        AT_ZERO(dPf[a][c]);
      }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    mma_panel(Sf, Qs, ldq, KT, AT_BK, dq);
    mma_panel(dPf, dOs, ldo, VT, AT_BK, dv);
    store_panel(Sf, Sb, AT_BK);
    store_panel(dPf, dPb, AT_BK);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    probabilities_column(p, mask, Sb, dPb, lse_rows, delta_rows, b, h, q0, k0, tid,
                         want_mask_grad ? grad_mask : (device T*)nullptr);
    // dQ^T += K^T dS^T.
    mma_panel(dQT0, KT, AT_BK, dPb, AT_BQB, AT_BK);
    if (wide_k) mma_panel(dQT1, KT + 32 * AT_BK, AT_BK, dPb, AT_BQB, AT_BK);
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  // A causal block past every key (L > S) still owes its mask gradient rows nothing:
  // they were never visited, and the host zero-fills the mask gradient.

  store_panel(dQT0, SP, AT_BQB);
  if (wide_k) store_panel(dQT1, SP + 32 * AT_BQB, AT_BQB);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (tid < AT_BQB) {
    const long i = q0 + long(tid);
    if (i < p.L) {
      device T* gq = grad_q + (bh * p.L + i) * p.D;  // dense [B, Hq, L, D]
      for (long d = 0; d < p.D; ++d) gq[d] = T(SP[d * AT_BQB + tid] * p.scale);
    }
  }
}

#define ATTENTION_KERNELS(T)                                                                                      \
  template [[host_name("attention_forward_" #T)]] kernel void attention_forward<T>(                               \
      const device T*, const device T*, const device T*, const device T*, device T*, device float*, device float*, \
      constant AttentionParams&, uint3, uint);                                                                     \
  template [[host_name("attention_backward_kv_" #T)]] kernel void attention_backward_kv<T>(                       \
      const device T*, const device T*, const device T*, const device T*, const device T*, const device float*,   \
      const device float*, device T*, device T*, constant AttentionParams&, uint3, uint);                         \
  template [[host_name("attention_backward_q_" #T)]] kernel void attention_backward_q<T>(                         \
      const device T*, const device T*, const device T*, const device T*, const device T*, const device float*,   \
      const device float*, device T*, device T*, constant AttentionParams&, uint3, uint);
ATTENTION_KERNELS(float)
ATTENTION_KERNELS(half)
ATTENTION_KERNELS(bfloat)
