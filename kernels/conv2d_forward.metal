// 2-D convolution, forward direction: Y = conv(X, W) (+ bias).
//
// Geometry (mirrored by backend/ops/conv2d/conv2d_params.h): the "regular" convolution
//   X [N, Cx, H, W]  --W [Cy, Cx/groups, KH, KW]-->  Y [N, Cy, OH, OW]
// with stride, padding and dilation per spatial dim. Every tensor is addressed through
// its own four strides (in elements) from the bound buffer offset, so NCHW,
// channels_last, non-contiguous views and storage offsets need no copies. All offsets
// are 64-bit; values accumulate in float whatever the storage type.
//
// conv2d_fwd computes Y from X (a convolution's forward; a transposed convolution's
// input gradient). Each thread computes a register tile of OCB output channels (of one
// group) x PB consecutive output pixels of one row (a branch-free path
// with contiguous loads when the row is unit-stride and the tile is inside it): the PB inputs and OCB weights
// loaded per tap feed OCB*PB multiply-adds. No threadgroup memory, no barriers.
// Grid: x = OH * ceil(OW / PB) pixel tiles, y = groups * ceil(Cy_g / OCB) channel
// tiles, z = N. Host launcher: backend/ops/conv2d/conv2d.cpp.
#include <metal_stdlib>
using namespace metal;

struct Conv2dParams {
  long N, Cx, H, W;          // X
  long Cy, OH, OW;           // Y
  long KH, KW;
  long stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  long groups, cx_g, cy_g;   // channels per group of X and Y
  long x_s[4];               // strides of X (n, c, h, w)
  long w_s[4];               // strides of the weight (cy, cx_g, kh, kw)
  long y_s[4];               // strides of Y (n, c, h, w)
  long b_s;                  // stride of the bias
  long has_bias;
};

#define PB 8

template <typename T, int OCB>
kernel void conv2d_fwd(device T* y [[buffer(0)]],
                       const device T* x [[buffer(1)]],
                       const device T* w [[buffer(2)]],
                       const device T* bias [[buffer(3)]],
                       constant Conv2dParams& p [[buffer(4)]],
                       uint3 gid [[thread_position_in_grid]]) {
  const long tiles_w = (p.OW + PB - 1) / PB;
  const long pix = gid.x;
  if (pix >= p.OH * tiles_w) return;
  const long oh = pix / tiles_w;
  // The last tile of a row ends at the row's end (overlapping the one before it, whose
  // shared outputs it computes identically), so every tile is full when OW >= PB.
  long ow0 = (pix - oh * tiles_w) * PB;
  if (ow0 + PB > p.OW && p.OW >= PB) ow0 = p.OW - PB;
  const long tiles_c = (p.cy_g + OCB - 1) / OCB;
  const long g = gid.y / tiles_c;
  if (g >= p.groups) return;
  const long oc0 = g * p.cy_g + (gid.y - g * tiles_c) * OCB;
  const long nc = (g + 1) * p.cy_g - oc0 < OCB ? (g + 1) * p.cy_g - oc0 : OCB;
  const long n = gid.z;

  float acc[OCB][PB];
  for (int o = 0; o < OCB; ++o)
    for (int j = 0; j < PB; ++j) acc[o][j] = 0.0f;

  const long iw_first = ow0 * p.stride_w - p.pad_w;
  const bool unit_w = p.stride_w == 1 && p.x_s[3] == 1;
  const device T* xn = x + n * p.x_s[0] + g * p.cx_g * p.x_s[1];
  const device T* wo = w + oc0 * p.w_s[0];
  for (long kh = 0; kh < p.KH; ++kh) {
    const long ih = oh * p.stride_h - p.pad_h + kh * p.dil_h;
    if (ih < 0 || ih >= p.H) continue;
    for (long kw = 0; kw < p.KW; ++kw) {
      const long iw0 = iw_first + kw * p.dil_w;
      // Which of the PB inputs of this tap are inside the (unpadded) row.
      bool ok[PB];
      long xo[PB];
      for (int j = 0; j < PB; ++j) {
        const long iw = iw0 + j * p.stride_w;
        ok[j] = iw >= 0 && iw < p.W;
        xo[j] = ok[j] ? iw * p.x_s[3] : 0;
      }
      const device T* xr = xn + ih * p.x_s[2];
      const device T* wt = wo + kh * p.w_s[2] + kw * p.w_s[3];
      const bool inside = nc == OCB && iw0 >= 0 && iw0 + (PB - 1) * p.stride_w < p.W;
      if (inside && unit_w) {
        // Fast path: the tile has all OCB channels and its PB inputs are consecutive
        // elements inside the row: no selects, contiguous loads.
        const device T* xp = xr + iw0;
        for (long ic = 0; ic < p.cx_g; ++ic) {
          const device T* xc = xp + ic * p.x_s[1];
          float xv[PB];
          for (int j = 0; j < PB; ++j) xv[j] = float(xc[j]);
          const device T* wc = wt + ic * p.w_s[1];
          float wv[OCB];
          for (int o = 0; o < OCB; ++o) wv[o] = float(wc[o * p.w_s[0]]);
          for (int o = 0; o < OCB; ++o)
            for (int j = 0; j < PB; ++j) acc[o][j] += wv[o] * xv[j];
        }
        continue;
      }
      if (inside) {
        // The same with strided inputs (stride > 1, channels_last rows).
        const device T* xp = xr + iw0 * p.x_s[3];
        const long xstep = p.stride_w * p.x_s[3];
        for (long ic = 0; ic < p.cx_g; ++ic) {
          const device T* xc = xp + ic * p.x_s[1];
          float xv[PB];
          for (int j = 0; j < PB; ++j) xv[j] = float(xc[j * xstep]);
          const device T* wc = wt + ic * p.w_s[1];
          float wv[OCB];
          for (int o = 0; o < OCB; ++o) wv[o] = float(wc[o * p.w_s[0]]);
          for (int o = 0; o < OCB; ++o)
            for (int j = 0; j < PB; ++j) acc[o][j] += wv[o] * xv[j];
        }
        continue;
      }
      for (long ic = 0; ic < p.cx_g; ++ic) {
        const device T* xc = xr + ic * p.x_s[1];
        float xv[PB];
        for (int j = 0; j < PB; ++j) xv[j] = ok[j] ? float(xc[xo[j]]) : 0.0f;
        const device T* wc = wt + ic * p.w_s[1];
        float wv[OCB];
        for (int o = 0; o < OCB; ++o) wv[o] = o < nc ? float(wc[o * p.w_s[0]]) : 0.0f;
        for (int o = 0; o < OCB; ++o)
          for (int j = 0; j < PB; ++j) acc[o][j] += wv[o] * xv[j];
      }
    }
  }

  device T* yo = y + n * p.y_s[0] + oc0 * p.y_s[1] + oh * p.y_s[2];
  for (int o = 0; o < OCB; ++o) {
    if (o >= nc) break;
    const float b = p.has_bias ? float(bias[(oc0 + o) * p.b_s]) : 0.0f;
    for (int j = 0; j < PB; ++j) {
      if (ow0 + j >= p.OW) break;
      yo[o * p.y_s[1] + (ow0 + j) * p.y_s[3]] = T(acc[o][j] + b);
    }
  }
}

// conv2d_fwd_dw: the same for one input channel per group (Cx_g == 1: depthwise, with
// any channel multiplier). Too little work per tap for the tiled kernel, so a thread
// computes PBD consecutive outputs of one channel's row, tap by tap.
// Grid: x = OH * ceil(OW / PBD), y = Cy, z = N.
#define PBD 16

template <typename T>
kernel void conv2d_fwd_dw(device T* y [[buffer(0)]],
                          const device T* x [[buffer(1)]],
                          const device T* w [[buffer(2)]],
                          const device T* bias [[buffer(3)]],
                          constant Conv2dParams& p [[buffer(4)]],
                          uint3 gid [[thread_position_in_grid]]) {
  const long tiles_w = (p.OW + PBD - 1) / PBD;
  const long pix = gid.x;
  if (pix >= p.OH * tiles_w) return;
  const long oh = pix / tiles_w;
  long ow0 = (pix - oh * tiles_w) * PBD;
  if (ow0 + PBD > p.OW && p.OW >= PBD) ow0 = p.OW - PBD;
  const long oc = gid.y;
  if (oc >= p.Cy) return;
  const long g = oc / p.cy_g;  // its input channel
  const long n = gid.z;

  float acc[PBD];
  for (int j = 0; j < PBD; ++j) acc[j] = 0.0f;
  const bool unit_w = p.stride_w == 1 && p.x_s[3] == 1;
  const device T* xc = x + n * p.x_s[0] + g * p.x_s[1];
  const device T* wc = w + oc * p.w_s[0];
  const long iw_first = ow0 * p.stride_w - p.pad_w;
  for (long kh = 0; kh < p.KH; ++kh) {
    const long ih = oh * p.stride_h - p.pad_h + kh * p.dil_h;
    if (ih < 0 || ih >= p.H) continue;
    const device T* xr = xc + ih * p.x_s[2];
    for (long kw = 0; kw < p.KW; ++kw) {
      const float wv = float(wc[kh * p.w_s[2] + kw * p.w_s[3]]);
      const long iw0 = iw_first + kw * p.dil_w;
      if (unit_w && iw0 >= 0 && iw0 + PBD <= p.W) {
        const device T* xp = xr + iw0;
        for (int j = 0; j < PBD; ++j) acc[j] += wv * float(xp[j]);
      } else {
        for (int j = 0; j < PBD; ++j) {
          const long iw = iw0 + j * p.stride_w;
          if (iw >= 0 && iw < p.W) acc[j] += wv * float(xr[iw * p.x_s[3]]);
        }
      }
    }
  }
  const float b = p.has_bias ? float(bias[oc * p.b_s]) : 0.0f;
  device T* yo = y + n * p.y_s[0] + oc * p.y_s[1] + oh * p.y_s[2];
  for (int j = 0; j < PBD; ++j) {
    if (ow0 + j >= p.OW) break;
    yo[(ow0 + j) * p.y_s[3]] = T(acc[j] + b);
  }
}

template [[host_name("conv2d_fwd_float_c4")]] kernel decltype(conv2d_fwd<float, 4>) conv2d_fwd<float, 4>;
template [[host_name("conv2d_fwd_float_c1")]] kernel decltype(conv2d_fwd<float, 1>) conv2d_fwd<float, 1>;
template [[host_name("conv2d_fwd_half_c4")]] kernel decltype(conv2d_fwd<half, 4>) conv2d_fwd<half, 4>;
template [[host_name("conv2d_fwd_half_c1")]] kernel decltype(conv2d_fwd<half, 1>) conv2d_fwd<half, 1>;
template [[host_name("conv2d_fwd_bfloat_c4")]] kernel decltype(conv2d_fwd<bfloat, 4>) conv2d_fwd<bfloat, 4>;
template [[host_name("conv2d_fwd_bfloat_c1")]] kernel decltype(conv2d_fwd<bfloat, 1>) conv2d_fwd<bfloat, 1>;
template [[host_name("conv2d_fwd_dw_float")]] kernel decltype(conv2d_fwd_dw<float>) conv2d_fwd_dw<float>;
template [[host_name("conv2d_fwd_dw_half")]] kernel decltype(conv2d_fwd_dw<half>) conv2d_fwd_dw<half>;
template [[host_name("conv2d_fwd_dw_bfloat")]] kernel decltype(conv2d_fwd_dw<bfloat>) conv2d_fwd_dw<bfloat>;
