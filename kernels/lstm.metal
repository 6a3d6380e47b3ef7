// A whole LSTM layer direction in one dispatch, forward and backward (host side:
// backend/ops/lstm.cpp, which runs the input projections of all time steps and the
// weight gradients as GEMMs around these kernels).
//
// Gates are [input, forget, cell, output] in blocks of H along the 4H gate columns, as
// in torch's weights. A threadgroup is one SIMD group and owns 8 batch rows (batch rows
// are independent in the recurrence, so larger batches take more threadgroups and
// nothing crosses threadgroups). It is persistent: it walks all T time steps, with
// its rows' hidden state in threadgroup memory between them. Per step:
//   1. the recurrent product h_{t-1} (8 x H) @ W_hh^T (H x 4H) on SIMD-group matrices,
//      into the threadgroup's slice of `scratch` (device memory: 8 x G floats would
//      not fit threadgroup memory for large H);
//   2. the cell update of its rows (gates = product + input projection, activations,
//      c_t, h_t), writing the output, the activated gates and c_t for the backward.
// Two barriers a step (the simulator runs them as fiber switches; the elementwise part
// there is run by lane 0 alone, along whole rows, so that it vectorises).
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
};

// d (8 x 64) = a (8 x k, row stride lda) @ b (k x 64, row stride ldb); k a multiple of 8.
template <typename PA, typename PB>
METAL_FUNC void panel_product(thread simdgroup_float8x8 (&d)[1][8], PA a, long lda, PB b, long ldb, long k) {
#if defined(METALSIM_VECTOR_BYTES)
  // The simulator's blocked form of the loop below (metalsim_prelude/simdgroup_matrix.h).
  simdgroup_float8x8 zero = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  for (int j = 0; j < 8; ++j) simdgroup_multiply(d[0][j], zero, zero);
  metalsim::simdgroup_multiply_accumulate_panel(d, a, ulong(lda), b, ulong(ldb), uint(k));
#else
  for (int j = 0; j < 8; ++j) d[0][j] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  for (long kk = 0; kk < k; kk += 8) {
    simdgroup_float8x8 fa, fb;
    simdgroup_load(fa, a + kk, ulong(lda));
    for (int j = 0; j < 8; ++j) {
      simdgroup_load(fb, b + kk * ldb + j * 8, ulong(ldb));
      simdgroup_multiply_accumulate(d[0][j], fa, fb, d[0][j]);
    }
  }
#endif
}

template <typename P>
METAL_FUNC void panel_store(thread simdgroup_float8x8 (&d)[1][8], P dst, long ld) {
  for (int j = 0; j < 8; ++j) simdgroup_store(d[0][j], dst + j * 8, ulong(ld));
}

inline float sigmoid_f(float x) { return 1.0f / (1.0f + exp(-x)); }

// ---- forward ----

// The cell update of batch row b (threadgroup row r) for hidden units [u0, u1) by step u.
template <typename T>
METAL_FUNC void forward_cells(constant LstmParams& p, const device T* xw, const device float* c0,
                              device T* out, device T* hn, device T* cn, device float* gates,
                              device float* cells, const device float* pre, threadgroup float* hs, long t,
                              long tprev, bool first, bool last, long b, int r, long u0, long u1, long du) {
  const long H = p.H;
  const device T* x = xw + (t * p.B + b) * 4 * H;
  const device float* pr = pre + r * p.G;
  const device float* cp = first ? c0 + b * H : cells + (tprev * p.B + b) * H;
  device float* gs = gates + (t * p.B + b) * 4 * H;
  device float* cs = cells + (t * p.B + b) * H;
  device T* o = out + t * p.seq_ts + b * p.seq_bs;
  threadgroup float* h = hs + r * p.HP;
  for (long u = u0; u < u1; u += du) {
    const float gi = sigmoid_f(pr[u] + float(x[u]));
    const float gf = sigmoid_f(pr[H + u] + float(x[H + u]));
    const float gg = tanh(pr[2 * H + u] + float(x[2 * H + u]));
    const float go = sigmoid_f(pr[3 * H + u] + float(x[3 * H + u]));
    const T c = T(gf * cp[u] + gi * gg);
    const T hv = T(go * tanh(float(c)));
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
}

// xw [T][B][4H]: the input projections plus both biases (the layer's dtype);
// w_t [HP][G]: W_hh transposed, float, zero padded; h0, c0 [B][H] float;
// out: output rows through seq_ts/seq_bs; hn, cn [B][H]; gates [T][B][4H] and
// cells [T][B][H] (float) are kept for the backward; scratch: G x 8 floats per threadgroup.
template <typename T>
kernel void lstm_forward(const device T* xw [[buffer(0)]], const device float* w_t [[buffer(1)]],
                         const device float* h0 [[buffer(2)]], const device float* c0 [[buffer(3)]],
                         device T* out [[buffer(4)]], device T* hn [[buffer(5)]], device T* cn [[buffer(6)]],
                         device float* gates [[buffer(7)]], device float* cells [[buffer(8)]],
                         device float* scratch [[buffer(9)]], constant LstmParams& p [[buffer(10)]],
                         uint group [[threadgroup_position_in_grid]], uint lane [[thread_index_in_threadgroup]]) {
  threadgroup float hs[LSTM_ROWS * LSTM_MAX_HP];  // h_{t-1} of the threadgroup's rows, zero padded
  const long b0 = long(group) * LSTM_ROWS;
  const int rows = int(min(long(LSTM_ROWS), p.B - b0));
  device float* pre = scratch + long(group) * LSTM_ROWS * p.G;
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
#if defined(METALSIM_VECTOR_BYTES)
    if (lane == 0)
      for (int r = 0; r < rows; ++r)
        forward_cells(p, xw, c0, out, hn, cn, gates, cells, pre, hs, t, tprev, s == 0, s == p.T - 1, b0 + r, r,
                      0, p.H, 1);
#else
    for (int r = 0; r < rows; ++r)
      forward_cells(p, xw, c0, out, hn, cn, gates, cells, pre, hs, t, tprev, s == 0, s == p.T - 1, b0 + r, r,
                    long(lane), p.H, LSTM_THREADS);
#endif
    threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
  }
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
  device float* dg = dgates + (t * p.B + b) * 4 * H;
  device float* dpr = dpad + r * p.G;
  device float* dcr = dc + r * p.HP;
  const threadgroup float* dh_next = dhs + r * p.HP;
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
}

// grad_out: the output's gradient through seq_ts/seq_bs (has_grad_out); grad_hn,
// grad_cn [B][H]; w [G][HP]: W_hh, float, zero padded; gates, cells, c0: the forward's;
// dgates [T][B][4H] (float): the gates' gradients (pre-activation), for the weight and
// input gradients the host computes over all steps at once; grad_h0, grad_c0 [B][H]
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
  const long b0 = long(group) * LSTM_ROWS;
  const int rows = int(min(long(LSTM_ROWS), p.B - b0));
  device float* dpad = scratch + long(group) * LSTM_ROWS * (p.G + p.HP);
  device float* dc = dpad + LSTM_ROWS * p.G;
  for (long i = lane; i < LSTM_ROWS * p.HP; i += LSTM_THREADS) dhs[i] = 0.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_float8x8 d[1][8];
  for (long s = 0; s < p.T; ++s) {
    const long t = p.reverse ? s : p.T - 1 - s;
    const long tprev = p.reverse ? t + 1 : t - 1;
    const bool first_step = s == p.T - 1;  // t is the forward's first step: c_{t-1} is c0
#if defined(METALSIM_VECTOR_BYTES)
    if (lane == 0)
      for (int r = 0; r < rows; ++r)
        backward_cells(p, grad_out, grad_hn, grad_cn, gates, cells, c0, dgates, dpad, dc, dhs, t, tprev,
                       first_step, s == 0, b0 + r, r, 0, p.H, 1);
#else
    for (int r = 0; r < rows; ++r)
      backward_cells(p, grad_out, grad_hn, grad_cn, gates, cells, c0, dgates, dpad, dc, dhs, t, tprev,
                     first_step, s == 0, b0 + r, r, long(lane), p.H, LSTM_THREADS);
#endif
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
}

#define METALX_LSTM_KERNELS(T)                                                                            \
  template [[host_name("lstm_forward_" #T)]] kernel decltype(lstm_forward<T>) lstm_forward<T>;          \
  template [[host_name("lstm_backward_" #T)]] kernel decltype(lstm_backward<T>) lstm_backward<T>;
METALX_LSTM_KERNELS(float)
METALX_LSTM_KERNELS(half)
METALX_LSTM_KERNELS(bfloat)
