// 2-D convolution, the other two directions (geometry and strides: see
// conv2d_forward.metal; Conv2dParams is mirrored by backend/ops/conv2d/conv2d_params.h).
//
// conv2d_bwd_x    X = conv_transpose(Y, W) (+ bias): a convolution's input gradient and
//                 a transposed convolution's forward, as a gather (each X element sums
//                 the Y elements whose windows cover it, so no atomics). A thread
//                 computes ICB channels (of one group) x PB pixels of one row that
//                 share a phase modulo stride_w. Grid: x = H * stride_w *
//                 ceil(ceil(W / stride_w) / PB), y = groups * ceil(Cx_g / ICB), z = N.
// conv2d_bwd_w    dW[cy, cx, kh, kw] = sum over n, oh, ow of Y[n, cy, oh, ow] *
//                 X[n, cx, ih, iw]: a thread computes OCB x ICB weights of one tap,
//                 reducing over the whole batch and every output pixel itself.
//                 Grid: x = ceil(Cx_g / ICB) * KH * KW, y = groups * ceil(Cy_g / OCB).
// conv2d_bwd_bias db[c] = sum over n, oh, ow of Y[n, c, oh, ow]: one thread per channel.
//                 (Input and weight gradients of the common shapes run on the faster
//                 kernels of conv2d_tiled.metal and conv2d_depthwise.metal.)
// All offsets are 64-bit; values accumulate in float. No barriers.
#include <metal_stdlib>
using namespace metal;

struct Conv2dParams {
  long N, Cx, H, W;
  long Cy, OH, OW;
  long KH, KW;
  long stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  long groups, cx_g, cy_g;
  long x_s[4];
  long w_s[4];
  long y_s[4];
  long b_s;
  long has_bias;
};

#define PB 8

template <typename T, int ICB>
kernel void conv2d_bwd_x(device T* x [[buffer(0)]],
                         const device T* y [[buffer(1)]],
                         const device T* w [[buffer(2)]],
                         const device T* bias [[buffer(3)]],
                         constant Conv2dParams& p [[buffer(4)]],
                         uint3 gid [[thread_position_in_grid]]) {
  // Pixels are tiled by phase: a thread's PB pixels of row ih are
  // iw = r + (m0 + j) * stride_w, j < PB, all with the same phase r = iw mod stride_w.
  // For one tap they are all reached or none is (the divisibility test is common), and
  // the Y columns they read are consecutive: ow = ow0 + j.
  const long sw = p.stride_w;
  const long phase_len = (p.W + sw - 1) / sw;  // pixels of the longest phase
  const long tiles_m = (phase_len + PB - 1) / PB;
  const long per_row = sw * tiles_m;
  const long pix = gid.x;
  if (pix >= p.H * per_row) return;
  const long ih = pix / per_row;
  const long rest = pix - ih * per_row;
  const long r = rest / tiles_m;
  if (r >= p.W) return;
  const long len = (p.W - r + sw - 1) / sw;  // pixels of phase r
  long m0 = (rest - r * tiles_m) * PB;
  if (m0 >= len) return;
  if (m0 + PB > len && len >= PB) m0 = len - PB;  // a full last tile (see conv2d_fwd)
  const long iw0 = r + m0 * sw;
  const long valid_j = len - m0 < PB ? len - m0 : PB;
  const long tiles_c = (p.cx_g + ICB - 1) / ICB;
  const long g = gid.y / tiles_c;
  if (g >= p.groups) return;
  const long icg0 = (gid.y - g * tiles_c) * ICB;
  const long nc = p.cx_g - icg0 < ICB ? p.cx_g - icg0 : ICB;
  const long n = gid.z;

  float acc[ICB][PB];
  for (int i = 0; i < ICB; ++i)
    for (int j = 0; j < PB; ++j) acc[i][j] = 0.0f;

  const bool unit_y = p.y_s[3] == 1;
  const device T* yn = y + n * p.y_s[0] + g * p.cy_g * p.y_s[1];
  const device T* wg = w + g * p.cy_g * p.w_s[0] + icg0 * p.w_s[1];
  for (long kh = 0; kh < p.KH; ++kh) {
    const long th = ih + p.pad_h - kh * p.dil_h;  // = oh * stride_h
    if (th < 0) break;  // th only decreases with kh
    const long oh = th / p.stride_h;
    if (oh * p.stride_h != th || oh >= p.OH) continue;
    const device T* yr = yn + oh * p.y_s[2];
    for (long kw = 0; kw < p.KW; ++kw) {
      const long tw = iw0 + p.pad_w - kw * p.dil_w;  // = ow0 * stride_w
      const long tmod = tw % sw;
      if (tmod != 0) continue;  // (C++ remainder: zero exactly when divisible)
      const long ow0 = tw / sw;
      const device T* wt = wg + kh * p.w_s[2] + kw * p.w_s[3];
      if (nc == ICB && valid_j == PB && ow0 >= 0 && ow0 + PB <= p.OW) {
        // Fast paths: every pixel reached and all ICB channels, so no selects; the Y
        // columns are consecutive, contiguous when Y's rows are unit-stride.
        const long ystep = unit_y ? 1 : p.y_s[3];
        const device T* yp = yr + ow0 * ystep;
        for (long oc = 0; oc < p.cy_g; ++oc) {
          const device T* yc = yp + oc * p.y_s[1];
          float yv[PB];
          if (unit_y) {
            for (int j = 0; j < PB; ++j) yv[j] = float(yc[j]);
          } else {
            for (int j = 0; j < PB; ++j) yv[j] = float(yc[j * ystep]);
          }
          const device T* wc = wt + oc * p.w_s[0];
          float wv[ICB];
          for (int i = 0; i < ICB; ++i) wv[i] = float(wc[i * p.w_s[1]]);
          for (int i = 0; i < ICB; ++i)
            for (int j = 0; j < PB; ++j) acc[i][j] += wv[i] * yv[j];
        }
        continue;
      }
      bool ok[PB];
      long yo[PB];
      bool any = false;
      for (int j = 0; j < PB; ++j) {
        const long ow = ow0 + j;
        ok[j] = j < valid_j && ow >= 0 && ow < p.OW;
        yo[j] = ok[j] ? ow * p.y_s[3] : 0;
        any = any || ok[j];
      }
      if (!any) continue;
      for (long oc = 0; oc < p.cy_g; ++oc) {
        const device T* yc = yr + oc * p.y_s[1];
        float yv[PB];
        for (int j = 0; j < PB; ++j) yv[j] = ok[j] ? float(yc[yo[j]]) : 0.0f;
        const device T* wc = wt + oc * p.w_s[0];
        float wv[ICB];
        for (int i = 0; i < ICB; ++i) wv[i] = i < nc ? float(wc[i * p.w_s[1]]) : 0.0f;
        for (int i = 0; i < ICB; ++i)
          for (int j = 0; j < PB; ++j) acc[i][j] += wv[i] * yv[j];
      }
    }
  }

  const long c0 = g * p.cx_g + icg0;
  device T* xo = x + n * p.x_s[0] + c0 * p.x_s[1] + ih * p.x_s[2];
  for (int i = 0; i < ICB; ++i) {
    if (i >= nc) break;
    const float b = p.has_bias ? float(bias[(c0 + i) * p.b_s]) : 0.0f;
    for (int j = 0; j < PB; ++j) {
      if (j >= valid_j) break;
      xo[i * p.x_s[1] + (iw0 + j * sw) * p.x_s[3]] = T(acc[i][j] + b);
    }
  }
}

// First output index o in [0, limit) with o * stride - pad + k >= 0, and one past the
// last with o * stride - pad + k < size.
inline long first_valid(long pad_minus_k, long stride) {
  return pad_minus_k <= 0 ? 0 : (pad_minus_k + stride - 1) / stride;
}
inline long end_valid(long size, long pad_minus_k, long stride, long limit) {
  const long top = size - 1 + pad_minus_k;  // o * stride <= top
  if (top < 0) return 0;
  const long e = top / stride + 1;
  return e < limit ? e : limit;
}

template <typename T, int OCB, int ICB>
kernel void conv2d_bwd_w(device T* dw [[buffer(0)]],
                         const device T* y [[buffer(1)]],
                         const device T* x [[buffer(2)]],
                         constant Conv2dParams& p [[buffer(3)]],
                         uint3 gid [[thread_position_in_grid]]) {
  const long taps = p.KH * p.KW;
  const long tiles_i = (p.cx_g + ICB - 1) / ICB;
  if (long(gid.x) >= tiles_i * taps) return;
  const long icg0 = (gid.x / taps) * ICB;
  const long tap = gid.x - (gid.x / taps) * taps;
  const long kh = tap / p.KW;
  const long kw = tap - kh * p.KW;
  const long tiles_o = (p.cy_g + OCB - 1) / OCB;
  const long g = gid.y / tiles_o;
  if (g >= p.groups) return;
  const long oc0 = g * p.cy_g + (gid.y - g * tiles_o) * OCB;
  const long no = (g + 1) * p.cy_g - oc0 < OCB ? (g + 1) * p.cy_g - oc0 : OCB;
  const long ni = p.cx_g - icg0 < ICB ? p.cx_g - icg0 : ICB;

  float acc[OCB][ICB];
  for (int o = 0; o < OCB; ++o)
    for (int i = 0; i < ICB; ++i) acc[o][i] = 0.0f;

  const long oh_lo = first_valid(p.pad_h - kh * p.dil_h, p.stride_h);
  const long oh_hi = end_valid(p.H, p.pad_h - kh * p.dil_h, p.stride_h, p.OH);
  const long ow_lo = first_valid(p.pad_w - kw * p.dil_w, p.stride_w);
  const long ow_hi = end_valid(p.W, p.pad_w - kw * p.dil_w, p.stride_w, p.OW);
  // Channels past the tile's end read channel 0 of the tile (always valid), and their
  // sums are dropped.
  long yc[OCB], xc[ICB];
  for (int o = 0; o < OCB; ++o) yc[o] = (o < no ? oc0 + o : oc0) * p.y_s[1];
  for (int i = 0; i < ICB; ++i) xc[i] = (g * p.cx_g + icg0 + (i < ni ? i : 0)) * p.x_s[1];

  // Unit-stride rows (stride 1, NCHW-like): 4 pixels at a time into 4 partial sums per
  // weight (contiguous loads, independent adds), folded into acc at the end.
  const bool unit_w = p.stride_w == 1 && p.x_s[3] == 1 && p.y_s[3] == 1;
  float part[OCB][ICB][4];
  for (int o = 0; o < OCB; ++o)
    for (int i = 0; i < ICB; ++i)
      for (int l = 0; l < 4; ++l) part[o][i][l] = 0.0f;

  for (long n = 0; n < p.N; ++n) {
    for (long oh = oh_lo; oh < oh_hi; ++oh) {
      const long ih = oh * p.stride_h - p.pad_h + kh * p.dil_h;
      const device T* yr = y + n * p.y_s[0] + oh * p.y_s[2];
      // Offset of X[n, 0, ih, iw(ow)] = xr + ow * stride_w * x_s[3] (xr alone may be
      // negative: it is an offset, never a pointer).
      const long xr = n * p.x_s[0] + ih * p.x_s[2] + (kw * p.dil_w - p.pad_w) * p.x_s[3];
      const long xstep = p.stride_w * p.x_s[3];
      long ow = ow_lo;
      if (unit_w) {
        for (; ow + 4 <= ow_hi; ow += 4) {
          const device T* yp = yr + ow;
          const device T* xp = x + (xr + ow);
          float yv[OCB][4], xv[ICB][4];
          for (int o = 0; o < OCB; ++o)
            for (int l = 0; l < 4; ++l) yv[o][l] = float(yp[yc[o] + l]);
          for (int i = 0; i < ICB; ++i)
            for (int l = 0; l < 4; ++l) xv[i][l] = float(xp[xc[i] + l]);
          for (int o = 0; o < OCB; ++o)
            for (int i = 0; i < ICB; ++i)
              for (int l = 0; l < 4; ++l) part[o][i][l] += yv[o][l] * xv[i][l];
        }
      }
      for (; ow < ow_hi; ++ow) {
        const device T* yp = yr + ow * p.y_s[3];
        const device T* xp = x + (xr + ow * xstep);
        float yv[OCB], xv[ICB];
        for (int o = 0; o < OCB; ++o) yv[o] = float(yp[yc[o]]);
        for (int i = 0; i < ICB; ++i) xv[i] = float(xp[xc[i]]);
        for (int o = 0; o < OCB; ++o)
          for (int i = 0; i < ICB; ++i) acc[o][i] += yv[o] * xv[i];
      }
    }
  }

  for (int o = 0; o < OCB; ++o)
    for (int i = 0; i < ICB; ++i) acc[o][i] += (part[o][i][0] + part[o][i][1]) + (part[o][i][2] + part[o][i][3]);

  device T* out = dw + oc0 * p.w_s[0] + icg0 * p.w_s[1] + kh * p.w_s[2] + kw * p.w_s[3];
  for (int o = 0; o < OCB; ++o) {
    if (o >= no) break;
    for (int i = 0; i < ICB; ++i) {
      if (i >= ni) break;
      out[o * p.w_s[0] + i * p.w_s[1]] = T(acc[o][i]);
    }
  }
}

template <typename T>
kernel void conv2d_bwd_bias(device T* db [[buffer(0)]],
                            const device T* y [[buffer(1)]],
                            constant Conv2dParams& p [[buffer(2)]],
                            uint gid [[thread_position_in_grid]]) {
  if (long(gid) >= p.Cy) return;
  // Eight independent partial sums over unit-stride rows: a vector's worth of adds in
  // flight instead of one long dependent chain.
  float part[8];
  for (int l = 0; l < 8; ++l) part[l] = 0.0f;
  float acc = 0.0f;
  const device T* yc = y + long(gid) * p.y_s[1];
  for (long n = 0; n < p.N; ++n)
    for (long oh = 0; oh < p.OH; ++oh) {
      const device T* yr = yc + n * p.y_s[0] + oh * p.y_s[2];
      long ow = 0;
      if (p.y_s[3] == 1)
        for (; ow + 8 <= p.OW; ow += 8)
          for (int l = 0; l < 8; ++l) part[l] += float(yr[ow + l]);
      for (; ow < p.OW; ++ow) acc += float(yr[ow * p.y_s[3]]);
    }
  db[long(gid) * p.b_s] = T(acc + ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7])));
}

template [[host_name("conv2d_bwd_x_float_c4")]] kernel decltype(conv2d_bwd_x<float, 4>) conv2d_bwd_x<float, 4>;
template [[host_name("conv2d_bwd_x_float_c1")]] kernel decltype(conv2d_bwd_x<float, 1>) conv2d_bwd_x<float, 1>;
template [[host_name("conv2d_bwd_w_float_o4_i4")]] kernel decltype(conv2d_bwd_w<float, 4, 4>) conv2d_bwd_w<float, 4, 4>;
template [[host_name("conv2d_bwd_w_float_o4_i1")]] kernel decltype(conv2d_bwd_w<float, 4, 1>) conv2d_bwd_w<float, 4, 1>;
template [[host_name("conv2d_bwd_w_float_o1_i4")]] kernel decltype(conv2d_bwd_w<float, 1, 4>) conv2d_bwd_w<float, 1, 4>;
template [[host_name("conv2d_bwd_w_float_o1_i1")]] kernel decltype(conv2d_bwd_w<float, 1, 1>) conv2d_bwd_w<float, 1, 1>;
template [[host_name("conv2d_bwd_bias_float")]] kernel decltype(conv2d_bwd_bias<float>) conv2d_bwd_bias<float>;
template [[host_name("conv2d_bwd_x_half_c4")]] kernel decltype(conv2d_bwd_x<half, 4>) conv2d_bwd_x<half, 4>;
template [[host_name("conv2d_bwd_x_half_c1")]] kernel decltype(conv2d_bwd_x<half, 1>) conv2d_bwd_x<half, 1>;
template [[host_name("conv2d_bwd_w_half_o4_i4")]] kernel decltype(conv2d_bwd_w<half, 4, 4>) conv2d_bwd_w<half, 4, 4>;
template [[host_name("conv2d_bwd_w_half_o4_i1")]] kernel decltype(conv2d_bwd_w<half, 4, 1>) conv2d_bwd_w<half, 4, 1>;
template [[host_name("conv2d_bwd_w_half_o1_i4")]] kernel decltype(conv2d_bwd_w<half, 1, 4>) conv2d_bwd_w<half, 1, 4>;
template [[host_name("conv2d_bwd_w_half_o1_i1")]] kernel decltype(conv2d_bwd_w<half, 1, 1>) conv2d_bwd_w<half, 1, 1>;
template [[host_name("conv2d_bwd_bias_half")]] kernel decltype(conv2d_bwd_bias<half>) conv2d_bwd_bias<half>;
template [[host_name("conv2d_bwd_x_bfloat_c4")]] kernel decltype(conv2d_bwd_x<bfloat, 4>) conv2d_bwd_x<bfloat, 4>;
template [[host_name("conv2d_bwd_x_bfloat_c1")]] kernel decltype(conv2d_bwd_x<bfloat, 1>) conv2d_bwd_x<bfloat, 1>;
template [[host_name("conv2d_bwd_w_bfloat_o4_i4")]] kernel decltype(conv2d_bwd_w<bfloat, 4, 4>) conv2d_bwd_w<bfloat, 4, 4>;
template [[host_name("conv2d_bwd_w_bfloat_o4_i1")]] kernel decltype(conv2d_bwd_w<bfloat, 4, 1>) conv2d_bwd_w<bfloat, 4, 1>;
template [[host_name("conv2d_bwd_w_bfloat_o1_i4")]] kernel decltype(conv2d_bwd_w<bfloat, 1, 4>) conv2d_bwd_w<bfloat, 1, 4>;
template [[host_name("conv2d_bwd_w_bfloat_o1_i1")]] kernel decltype(conv2d_bwd_w<bfloat, 1, 1>) conv2d_bwd_w<bfloat, 1, 1>;
template [[host_name("conv2d_bwd_bias_bfloat")]] kernel decltype(conv2d_bwd_bias<bfloat>) conv2d_bwd_bias<bfloat>;
