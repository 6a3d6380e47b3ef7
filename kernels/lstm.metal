// A whole LSTM layer direction in one dispatch, forward and backward (host side:
// backend/ops/lstm.cpp, which runs the input projections of all time steps and the
// weight gradients as GEMMs around these kernels).
//
// Gates are [input, forget, cell, output] in blocks of H along the 4H gate columns, as
// in torch's weights. A threadgroup is one SIMD group and owns up to 8 batch rows
// (group_rows; batch rows are independent in the recurrence, so larger batches take
// more threadgroups and nothing crosses threadgroups; a batch of 16 rows or fewer is
// split over two threadgroups, so that two GPU cores, or the simulator's two worker
// threads, share it). It is persistent: it walks all T time steps, with
// its rows' hidden state in threadgroup memory between them. Per step:
//   1. the recurrent product h_{t-1} (8 x H) @ W_hh^T (H x 4H) on SIMD-group matrices,
//      into the threadgroup's slice of `scratch` (device memory: 8 x G floats would
//      not fit threadgroup memory for large H);
//   2. the cell update of its rows (gates = product + input projection, activations,
//      c_t, h_t), writing the output, the activated gates and c_t for the backward.
// Two barriers a step. The simulator's form (#if METALSIM_VECTOR_BYTES) runs the same
// arithmetic on lane 0 alone, with no barriers (see rows_product).
//
// Padded sizes (the host builds the padded weights with zeros): HP = H rounded up to 64,
// G = 4H rounded up to 64, so the products run in panels of 8 x 64 with k a multiple of
// 8; padding rows and columns of every operand are zero, so they add nothing. HP is at
// most LSTM_MAX_HP (threadgroup memory: 8 x HP floats); larger layers take torch's
// composite path.
//
// Precision: products and the cell update in float32; h_t and c_t are rounded to the
// layer's dtype before the next step uses them, as torch's step-by-step code keeps them.
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;

#define LSTM_ROWS 8      // batch rows per threadgroup
#define LSTM_THREADS 32  // one SIMD group
#define LSTM_PANEL 64    // columns of one product panel
#define LSTM_MAX_HP 512

// Mirrored by backend/ops/lstm.cpp.
struct LstmParams {
  long T, B, H;
  long HP, G;         // padded hidden size, padded gate columns
  long reverse;       // 1: the layer's reverse direction (time runs T-1 .. 0)
  long seq_ts, seq_bs;  // strides (elements) of the output (forward) / grad_output (backward) over time, batch
  long has_grad_out, has_grad_hn, has_grad_cn;  // backward: which gradients were given
  long group_rows;    // batch rows per threadgroup, 1..LSTM_ROWS (the host splits small batches in two)
  long keep_hprev;    // forward: write h_{t-1} of every step to hprev (for the backward's W_hh gradient)
  long batch_major;   // rows of xw, hprev and dgates in [B][T] order (a batch_first first layer), else [T][B]
};

// The row of step t, batch row b in xw, hprev and dgates: batch-major for a batch_first
// first layer, whose input projection then reads the input and whose input gradient is
// written in the caller's layout without a transposing copy.
inline long seq_row(constant LstmParams& p, long t, long b) { return p.batch_major ? b * p.T + t : t * p.B + b; }

// d (8 x 64) = a (8 x k, row stride lda) @ b (k x 64, row stride ldb); k a multiple of 8.
// (The GPU form; the simulator's is rows_product below.)
template <typename PA, typename PB>
METAL_FUNC void panel_product(thread simdgroup_float8x8 (&d)[1][8], PA a, long lda, PB b, long ldb, long k) {
  for (int j = 0; j < 8; ++j) d[0][j] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  for (long kk = 0; kk < k; kk += 8) {
    simdgroup_float8x8 fa, fb;
    simdgroup_load(fa, a + kk, ulong(lda));
    for (int j = 0; j < 8; ++j) {
      simdgroup_load(fb, b + kk * ldb + j * 8, ulong(ldb));
      simdgroup_multiply_accumulate(d[0][j], fa, fb, d[0][j]);
    }
  }
}

template <typename P>
METAL_FUNC void panel_store(thread simdgroup_float8x8 (&d)[1][8], P dst, long ld) {
  for (int j = 0; j < 8; ++j) simdgroup_store(d[0][j], dst + j * 8, ulong(ld));
}

inline float sigmoid_f(float x) { return 1.0f / (1.0f + exp(-x)); }

#if defined(METALSIM_VECTOR_BYTES)
// ---- the simulator's form of a step ----
// The simulator runs a threadgroup's 32 threads one after another as fibers, so the
// GPU form's split of each step across lanes bought nothing there but two barriers a
// step (each 32 fiber switches) and a cell update that did not vectorise (a strided
// loop through ten pointers that may alias). Here lane 0 runs the whole recurrence
// alone, with no barriers: a register-blocked product and a cell update in chunks of
// one vector through local arrays, so that both vectorise. Same arithmetic as the
// #else branch, element by element: the products are added in the order of k, one
// multiply-add each (as simdgroup_multiply_accumulate adds them), starting from zero.
#define LSTM_VW (METALSIM_VECTOR_BYTES / 4)  // floats per vector
typedef float lstm_vec __attribute__((vector_size(METALSIM_VECTOR_BYTES), aligned(4)));

// out (RB x n, row stride ldo) = a (RB x k, row stride lda) @ b (k x n, row stride ldb),
// in blocks of RB rows x VB vectors held in registers over k; n a multiple of VB vectors
// (the padded sizes are multiples of 64 floats).
template <int RB, int VB>
METAL_FUNC void rows_block_product(float* out, long ldo, const float* a, long lda, const float* b, long ldb, long k,
                                   long n) {
  for (long c0 = 0; c0 < n; c0 += VB * LSTM_VW) {
    lstm_vec acc[RB][VB] = {};
    const float* ar = a;
    const float* br = b + c0;
    for (long kk = 0; kk < k; ++kk, ++ar, br += ldb) {
      lstm_vec bv[VB];
#pragma GCC unroll 4
      for (int v = 0; v < VB; ++v) __builtin_memcpy(&bv[v], br + v * LSTM_VW, sizeof bv[v]);
#pragma GCC unroll 8
      for (int r = 0; r < RB; ++r) {
        const float s = ar[r * lda];
#pragma GCC unroll 4
        for (int v = 0; v < VB; ++v) acc[r][v] += s * bv[v];
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < RB; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < VB; ++v) __builtin_memcpy(out + r * ldo + c0 + v * LSTM_VW, &acc[r][v], sizeof acc[r][v]);
  }
}

// The first `rows` rows (1..8) of out = a @ b as above: 8 rows x 2 vectors a block on
// AVX-512 (16 accumulators of its 32 registers), else 4 rows x 2 vectors (4 x 4 on
// AVX-512 when at most 4 rows are wanted).
METAL_FUNC void rows_product(int rows, float* out, long ldo, const float* a, long lda, const float* b, long ldb,
                             long k, long n) {
#if METALSIM_VECTOR_BYTES >= 64
  if (rows > 4) return rows_block_product<8, 2>(out, ldo, a, lda, b, ldb, k, n);
  return rows_block_product<4, 4>(out, ldo, a, lda, b, ldb, k, n);
#else
  for (int r0 = 0; r0 < rows; r0 += 4) rows_block_product<4, 2>(out + r0 * ldo, ldo, a + r0 * lda, lda, b, ldb, k, n);
#endif
}

// Units [u, u + n) of one row's cell update (n <= N; forward_cells' arithmetic): inputs
// into local arrays (zeros past n), the math on all N of them, then one store loop per
// destination, so that no loop mixes loads and stores of pointers that may alias. A
// row's last, partial chunk runs the same N-wide code as the others, so every unit is
// computed by the same instructions whatever the hidden size.
template <typename T, int N>
METAL_FUNC void forward_chunk(const float* pr, const device T* x, const float* cp, long H, long u, int n, float* gs,
                              float* cs, device T* o, float* h, device T* hp, device T* hn, device T* cn, bool last) {
  float zi[N], zf[N], zg[N], zo[N], cv[N];
  for (int i = 0; i < N; ++i) {
    const bool in = i < n;
    zi[i] = in ? pr[u + i] + float(x[u + i]) : 0.0f;
    zf[i] = in ? pr[H + u + i] + float(x[H + u + i]) : 0.0f;
    zg[i] = in ? pr[2 * H + u + i] + float(x[2 * H + u + i]) : 0.0f;
    zo[i] = in ? pr[3 * H + u + i] + float(x[3 * H + u + i]) : 0.0f;
    cv[i] = in ? cp[u + i] : 0.0f;
  }
  float gi[N], gf[N], gg[N], go[N], c[N], hv[N];
  for (int i = 0; i < N; ++i) {
    gi[i] = sigmoid_f(zi[i]);
    gf[i] = sigmoid_f(zf[i]);
    gg[i] = tanh(zg[i]);
    go[i] = sigmoid_f(zo[i]);
    c[i] = float(T(gf[i] * cv[i] + gi[i] * gg[i]));
    hv[i] = float(T(go[i] * tanh(c[i])));
  }
  if (hp)
    for (int i = 0; i < n; ++i) hp[u + i] = T(h[u + i]);
  for (int i = 0; i < n; ++i) gs[u + i] = gi[i];
  for (int i = 0; i < n; ++i) gs[H + u + i] = gf[i];
  for (int i = 0; i < n; ++i) gs[2 * H + u + i] = gg[i];
  for (int i = 0; i < n; ++i) gs[3 * H + u + i] = go[i];
  for (int i = 0; i < n; ++i) cs[u + i] = c[i];
  for (int i = 0; i < n; ++i) h[u + i] = hv[i];
  for (int i = 0; i < n; ++i) o[u + i] = T(hv[i]);
  if (last) {
    for (int i = 0; i < n; ++i) hn[u + i] = T(hv[i]);
    for (int i = 0; i < n; ++i) cn[u + i] = T(c[i]);
  }
}

// Units [u, u + n) of one row's gate gradients (backward_cells' arithmetic), laid out
// as forward_chunk.
template <typename T, int N>
METAL_FUNC void backward_chunk(constant LstmParams& p, const device T* go_row, const device T* ghn,
                               const device T* gcn, const float* gs, const float* cs, const float* cp,
                               const float* dh_next, long u, int n, bool last_step, float* dg, float* dpr,
                               float* dcr) {
  const long H = p.H;
  float dh[N], dcv[N], gi[N], gf[N], gg[N], go[N], cpv[N], csv[N];
  for (int i = 0; i < N; ++i) {
    const bool in = i < n;
    dh[i] = in ? dh_next[u + i] : 0.0f;
    dcv[i] = in ? dcr[u + i] : 0.0f;
    gi[i] = in ? gs[u + i] : 0.0f;
    gf[i] = in ? gs[H + u + i] : 0.0f;
    gg[i] = in ? gs[2 * H + u + i] : 0.0f;
    go[i] = in ? gs[3 * H + u + i] : 0.0f;
    cpv[i] = in ? cp[u + i] : 0.0f;
    csv[i] = in ? cs[u + i] : 0.0f;
  }
  if (p.has_grad_out)
    for (int i = 0; i < N; ++i) dh[i] += i < n ? float(go_row[u + i]) : 0.0f;
  if (last_step) {
    // The backward's first step is the forward's last: h_n's and c_n's gradients enter here.
    for (int i = 0; i < N; ++i) dh[i] += p.has_grad_hn && i < n ? float(ghn[u + i]) : 0.0f;
    for (int i = 0; i < N; ++i) dcv[i] = p.has_grad_cn && i < n ? float(gcn[u + i]) : 0.0f;
  }
  float di[N], df[N], dgg[N], dgo[N], dcp[N];
  for (int i = 0; i < N; ++i) {
    const float tc = tanh(csv[i]);
    const float d = dcv[i] + dh[i] * go[i] * (1.0f - tc * tc);
    di[i] = d * gg[i] * gi[i] * (1.0f - gi[i]);
    df[i] = d * cpv[i] * gf[i] * (1.0f - gf[i]);
    dgg[i] = d * gi[i] * (1.0f - gg[i] * gg[i]);
    dgo[i] = dh[i] * tc * go[i] * (1.0f - go[i]);
    dcp[i] = d * gf[i];
  }
  for (int i = 0; i < n; ++i) dg[u + i] = di[i];
  for (int i = 0; i < n; ++i) dg[H + u + i] = df[i];
  for (int i = 0; i < n; ++i) dg[2 * H + u + i] = dgg[i];
  for (int i = 0; i < n; ++i) dg[3 * H + u + i] = dgo[i];
  for (int i = 0; i < n; ++i) dpr[u + i] = di[i];
  for (int i = 0; i < n; ++i) dpr[H + u + i] = df[i];
  for (int i = 0; i < n; ++i) dpr[2 * H + u + i] = dgg[i];
  for (int i = 0; i < n; ++i) dpr[3 * H + u + i] = dgo[i];
  for (int i = 0; i < n; ++i) dcr[u + i] = dcp[i];
}
#endif

// ---- forward ----

// The cell update of batch row b (threadgroup row r) for hidden units [u0, u1) by step u.
template <typename T>
METAL_FUNC void forward_cells(constant LstmParams& p, const device T* xw, const device float* c0,
                              device T* out, device T* hprev, device T* hn, device T* cn, device float* gates,
                              device float* cells, const device float* pre, threadgroup float* hs, long t,
                              long tprev, bool first, bool last, long b, int r, long u0, long u1, long du) {
  const long H = p.H;
  const device T* x = xw + seq_row(p, t, b) * 4 * H;
  const device float* pr = pre + r * p.G;
  const device float* cp = first ? c0 + b * H : cells + (tprev * p.B + b) * H;
  device float* gs = gates + (t * p.B + b) * 4 * H;
  device float* cs = cells + (t * p.B + b) * H;
  device T* o = out + t * p.seq_ts + b * p.seq_bs;
  threadgroup float* h = hs + r * p.HP;
  device T* hp = p.keep_hprev ? hprev + seq_row(p, t, b) * H : nullptr;
#if defined(METALSIM_VECTOR_BYTES)
  // Lane 0 alone, the whole row (u0 = 0, u1 = H, du = 1), a vector at a time.
  long u = u0;
  for (; u + LSTM_VW <= u1; u += LSTM_VW)
    forward_chunk<T, LSTM_VW>(pr, x, cp, H, u, LSTM_VW, gs, cs, o, h, hp, hn + b * H, cn + b * H, last);
  if (u < u1)
    forward_chunk<T, LSTM_VW>(pr, x, cp, H, u, int(u1 - u), gs, cs, o, h, hp, hn + b * H, cn + b * H, last);
#else
  for (long u = u0; u < u1; u += du) {
    const float gi = sigmoid_f(pr[u] + float(x[u]));
    const float gf = sigmoid_f(pr[H + u] + float(x[H + u]));
    const float gg = tanh(pr[2 * H + u] + float(x[2 * H + u]));
    const float go = sigmoid_f(pr[3 * H + u] + float(x[3 * H + u]));
    const T c = T(gf * cp[u] + gi * gg);
    const T hv = T(go * tanh(float(c)));
    if (hp) hp[u] = T(h[u]);  // h_{t-1}, before this step replaces it
    gs[u] = gi;
    gs[H + u] = gf;
    gs[2 * H + u] = gg;
    gs[3 * H + u] = go;
    cs[u] = float(c);
    o[u] = hv;
    h[u] = float(hv);
    if (last) {
      hn[b * H + u] = hv;
      cn[b * H + u] = c;
    }
  }
#endif
}

// xw [T][B][4H] ([B][T][4H] if batch_major): the input projections plus both biases
// (the layer's dtype); w_t [HP][G]: W_hh transposed, float, zero padded; h0, c0 [B][H]
// float; out: output rows through seq_ts/seq_bs; hn, cn [B][H]; gates [T][B][4H] and
// cells [T][B][H] (float) are kept for the backward, and with keep_hprev hprev
// [T][B][H] ([B][T][H] if batch_major), each step's h_{t-1} (the rows the W_hh gradient
// multiplies; it spares the backward assembling them from h0 and the output);
// scratch: G x 8 floats per threadgroup.
template <typename T>
kernel void lstm_forward(const device T* xw [[buffer(0)]], const device float* w_t [[buffer(1)]],
                         const device float* h0 [[buffer(2)]], const device float* c0 [[buffer(3)]],
                         device T* out [[buffer(4)]], device T* hn [[buffer(5)]], device T* cn [[buffer(6)]],
                         device float* gates [[buffer(7)]], device float* cells [[buffer(8)]],
                         device float* scratch [[buffer(9)]], device T* hprev [[buffer(10)]],
                         constant LstmParams& p [[buffer(11)]],
                         uint group [[threadgroup_position_in_grid]], uint lane [[thread_index_in_threadgroup]]) {
  threadgroup float hs[LSTM_ROWS * LSTM_MAX_HP];  // h_{t-1} of the threadgroup's rows, zero padded
  const long b0 = long(group) * p.group_rows;
  const int rows = int(min(p.group_rows, p.B - b0));
  device float* pre = scratch + long(group) * LSTM_ROWS * p.G;
#if defined(METALSIM_VECTOR_BYTES)
  // Lane 0 runs the recurrence alone (see rows_product): no barriers.
  if (lane != 0) return;
  for (long i = 0; i < LSTM_ROWS * p.HP; ++i) {
    const long r = i / p.HP, u = i % p.HP;
    hs[i] = (r < rows && u < p.H) ? h0[(b0 + r) * p.H + u] : 0.0f;
  }
  for (long s = 0; s < p.T; ++s) {
    const long t = p.reverse ? p.T - 1 - s : s;
    const long tprev = p.reverse ? t + 1 : t - 1;
    rows_product(rows, pre, p.G, hs, p.HP, w_t, p.G, p.HP, p.G);
    for (int r = 0; r < rows; ++r)
      forward_cells(p, xw, c0, out, hprev, hn, cn, gates, cells, pre, hs, t, tprev, s == 0, s == p.T - 1, b0 + r,
                    r, 0, p.H, 1);
  }
#else
  for (long i = lane; i < LSTM_ROWS * p.HP; i += LSTM_THREADS) {
    const long r = i / p.HP, u = i % p.HP;
    hs[i] = (r < rows && u < p.H) ? h0[(b0 + r) * p.H + u] : 0.0f;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_float8x8 d[1][8];
  for (long s = 0; s < p.T; ++s) {
    const long t = p.reverse ? p.T - 1 - s : s;
    const long tprev = p.reverse ? t + 1 : t - 1;
    for (long j0 = 0; j0 < p.G; j0 += LSTM_PANEL) {
      panel_product(d, (const threadgroup float*)hs, p.HP, w_t + j0, p.G, p.HP);
      panel_store(d, pre + j0, p.G);
    }
    threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
    for (int r = 0; r < rows; ++r)
      forward_cells(p, xw, c0, out, hprev, hn, cn, gates, cells, pre, hs, t, tprev, s == 0, s == p.T - 1, b0 + r,
                    r, long(lane), p.H, LSTM_THREADS);
    threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
  }
#endif
}

// ---- backward ----

// Gradients of step t's gates for batch row b (threadgroup row r), units [u0, u1) by du.
// dhs holds the gradient reaching h_t through the next step's recurrent product; dc
// (device, the threadgroup's slice) the gradient reaching c_t, replaced by c_{t-1}'s.
template <typename T>
METAL_FUNC void backward_cells(constant LstmParams& p, const device T* grad_out, const device T* grad_hn,
                               const device T* grad_cn, const device float* gates, const device float* cells,
                               const device float* c0, device float* dgates, device float* dpad, device float* dc,
                               const threadgroup float* dhs, long t, long tprev, bool first_step, bool last_step,
                               long b, int r, long u0, long u1, long du) {
  const long H = p.H;
  const device float* gs = gates + (t * p.B + b) * 4 * H;
  const device float* cs = cells + (t * p.B + b) * H;
  const device float* cp = first_step ? c0 + b * H : cells + (tprev * p.B + b) * H;
  const device T* go_row = grad_out + t * p.seq_ts + b * p.seq_bs;
  device float* dg = dgates + seq_row(p, t, b) * 4 * H;
  device float* dpr = dpad + r * p.G;
  device float* dcr = dc + r * p.HP;
  const threadgroup float* dh_next = dhs + r * p.HP;
#if defined(METALSIM_VECTOR_BYTES)
  // Lane 0 alone, the whole row (u0 = 0, u1 = H, du = 1), a vector at a time.
  long u = u0;
  for (; u + LSTM_VW <= u1; u += LSTM_VW)
    backward_chunk<T, LSTM_VW>(p, go_row, grad_hn + b * H, grad_cn + b * H, gs, cs, cp, dh_next, u, LSTM_VW,
                               last_step, dg, dpr, dcr);
  if (u < u1)
    backward_chunk<T, LSTM_VW>(p, go_row, grad_hn + b * H, grad_cn + b * H, gs, cs, cp, dh_next, u, int(u1 - u),
                               last_step, dg, dpr, dcr);
#else
  for (long u = u0; u < u1; u += du) {
    float dh = dh_next[u];
    if (p.has_grad_out) dh += float(go_row[u]);
    float dcv = dcr[u];
    if (last_step) {
      // The backward's first step is the forward's last: h_n's and c_n's gradients enter here.
      dh += p.has_grad_hn ? float(grad_hn[b * H + u]) : 0.0f;
      dcv = p.has_grad_cn ? float(grad_cn[b * H + u]) : 0.0f;
    }
    const float gi = gs[u], gf = gs[H + u], gg = gs[2 * H + u], go = gs[3 * H + u];
    const float tc = tanh(cs[u]);
    dcv += dh * go * (1.0f - tc * tc);
    const float di = dcv * gg * gi * (1.0f - gi);
    const float df = dcv * cp[u] * gf * (1.0f - gf);
    const float dgg = dcv * gi * (1.0f - gg * gg);
    const float dgo = dh * tc * go * (1.0f - go);
    dg[u] = di;
    dg[H + u] = df;
    dg[2 * H + u] = dgg;
    dg[3 * H + u] = dgo;
    dpr[u] = di;
    dpr[H + u] = df;
    dpr[2 * H + u] = dgg;
    dpr[3 * H + u] = dgo;
    dcr[u] = dcv * gf;
  }
#endif
}

// grad_out: the output's gradient through seq_ts/seq_bs (has_grad_out); grad_hn,
// grad_cn [B][H]; w [G][HP]: W_hh, float, zero padded; gates, cells, c0: the forward's;
// dgates [T][B][4H] ([B][T][4H] if batch_major; float): the gates' gradients
// (pre-activation), for the weight and input gradients the host computes over all
// steps at once; grad_h0, grad_c0 [B][H]
// float; scratch: per threadgroup 8 x G floats (the step's gate gradients, padded: the
// host zeroes them) then 8 x HP (c's gradient).
template <typename T>
kernel void lstm_backward(const device T* grad_out [[buffer(0)]], const device T* grad_hn [[buffer(1)]],
                          const device T* grad_cn [[buffer(2)]], const device float* w [[buffer(3)]],
                          const device float* gates [[buffer(4)]], const device float* cells [[buffer(5)]],
                          const device float* c0 [[buffer(6)]], device float* dgates [[buffer(7)]],
                          device float* grad_h0 [[buffer(8)]], device float* grad_c0 [[buffer(9)]],
                          device float* scratch [[buffer(10)]], constant LstmParams& p [[buffer(11)]],
                          uint group [[threadgroup_position_in_grid]], uint lane [[thread_index_in_threadgroup]]) {
  threadgroup float dhs[LSTM_ROWS * LSTM_MAX_HP];  // gradient reaching h_t from step t+1, zero padded
  const long b0 = long(group) * p.group_rows;
  const int rows = int(min(p.group_rows, p.B - b0));
  device float* dpad = scratch + long(group) * LSTM_ROWS * (p.G + p.HP);
  device float* dc = dpad + LSTM_ROWS * p.G;
#if defined(METALSIM_VECTOR_BYTES)
  // Lane 0 runs the recurrence alone (see rows_product): no barriers.
  if (lane != 0) return;
  for (long i = 0; i < LSTM_ROWS * p.HP; ++i) dhs[i] = 0.0f;
  for (long s = 0; s < p.T; ++s) {
    const long t = p.reverse ? s : p.T - 1 - s;
    const long tprev = p.reverse ? t + 1 : t - 1;
    for (int r = 0; r < rows; ++r)
      backward_cells(p, grad_out, grad_hn, grad_cn, gates, cells, c0, dgates, dpad, dc, dhs, t, tprev,
                     s == p.T - 1, s == 0, b0 + r, r, 0, p.H, 1);
    rows_product(rows, dhs, p.HP, dpad, p.G, w, p.HP, p.G, p.HP);
  }
  for (long i = 0; i < long(rows) * p.H; ++i) {
    const long r = i / p.H, u = i % p.H;
    grad_h0[(b0 + r) * p.H + u] = dhs[r * p.HP + u];
    grad_c0[(b0 + r) * p.H + u] = dc[r * p.HP + u];
  }
#else
  for (long i = lane; i < LSTM_ROWS * p.HP; i += LSTM_THREADS) dhs[i] = 0.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_float8x8 d[1][8];
  for (long s = 0; s < p.T; ++s) {
    const long t = p.reverse ? s : p.T - 1 - s;
    const long tprev = p.reverse ? t + 1 : t - 1;
    const bool first_step = s == p.T - 1;  // t is the forward's first step: c_{t-1} is c0
    for (int r = 0; r < rows; ++r)
      backward_cells(p, grad_out, grad_hn, grad_cn, gates, cells, c0, dgates, dpad, dc, dhs, t, tprev,
                     first_step, s == 0, b0 + r, r, long(lane), p.H, LSTM_THREADS);
    threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
    for (long j0 = 0; j0 < p.HP; j0 += LSTM_PANEL) {
      panel_product(d, (const device float*)dpad, p.G, w + j0, p.HP, p.G);
      panel_store(d, dhs + j0, p.HP);
    }
    threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
  }
  for (long i = lane; i < long(rows) * p.H; i += LSTM_THREADS) {
    const long r = i / p.H, u = i % p.H;
    grad_h0[(b0 + r) * p.H + u] = dhs[r * p.HP + u];
    grad_c0[(b0 + r) * p.H + u] = dc[r * p.HP + u];
  }
#endif
}

#define METALX_LSTM_KERNELS(T)                                                                            \
  template [[host_name("lstm_forward_" #T)]] kernel decltype(lstm_forward<T>) lstm_forward<T>;          \
  template [[host_name("lstm_backward_" #T)]] kernel decltype(lstm_backward<T>) lstm_backward<T>;
METALX_LSTM_KERNELS(float)
METALX_LSTM_KERNELS(half)
METALX_LSTM_KERNELS(bfloat)
