// 2-D convolution, the other two directions (geometry and strides: see
// conv2d_forward.metal; Conv2dParams is mirrored by backend/ops/conv2d/conv2d_params.h).
//
// conv2d_bwd_x    X = conv_transpose(Y, W) (+ bias): a convolution's input gradient and
//                 a transposed convolution's forward, as a gather (each X element sums
//                 the Y elements whose windows cover it, so no atomics). A thread
//                 computes ICB channels (of one group) x PB pixels of one row that
//                 share a phase modulo stride_w. Grid: x = H * stride_w *
//                 ceil(ceil(W / stride_w) / PB), y = groups * ceil(Cx_g / ICB), z = N.
// conv2d_bwd_bias db[c] = sum over n, oh, ow of Y[n, c, oh, ow]: one thread per channel.
//                 (Input gradients of the common shapes, and every weight gradient,
//                 run on the kernels of conv2d_tiled.metal and conv2d_depthwise.metal.)
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
template [[host_name("conv2d_bwd_bias_float")]] kernel decltype(conv2d_bwd_bias<float>) conv2d_bwd_bias<float>;
template [[host_name("conv2d_bwd_x_half_c4")]] kernel decltype(conv2d_bwd_x<half, 4>) conv2d_bwd_x<half, 4>;
template [[host_name("conv2d_bwd_x_half_c1")]] kernel decltype(conv2d_bwd_x<half, 1>) conv2d_bwd_x<half, 1>;
template [[host_name("conv2d_bwd_bias_half")]] kernel decltype(conv2d_bwd_bias<half>) conv2d_bwd_bias<half>;
template [[host_name("conv2d_bwd_x_bfloat_c4")]] kernel decltype(conv2d_bwd_x<bfloat, 4>) conv2d_bwd_x<bfloat, 4>;
template [[host_name("conv2d_bwd_x_bfloat_c1")]] kernel decltype(conv2d_bwd_x<bfloat, 1>) conv2d_bwd_x<bfloat, 1>;
template [[host_name("conv2d_bwd_bias_bfloat")]] kernel decltype(conv2d_bwd_bias<bfloat>) conv2d_bwd_bias<bfloat>;
