// 2-D depthwise convolution (one input channel per group, channel multiplier 1) with a
// kernel of at most 3 x 3, unit stride and dilation: MobileNet-style layers, fast.
// Other depthwise shapes run on conv2d_fwd_dw and the direct backward kernels.
//
// conv2d_dw3      Y[n, c] = X[n, c] (*) W[c] (+ bias), or with `flip` the input
//                 gradient: dX[n, c] = dY[n, c] (*) flipped W[c] (a stride-1 depthwise
//                 convolution's input gradient is the convolution of dY with the
//                 flipped kernel and padding K - 1 - pad). A thread computes DW_R rows
//                 x DW_P columns of one channel from a zero-padded copy of the input
//                 (conv2d_pad_input, rows and columns padded up to whole tiles), so its
//                 loads need no bounds checks and its multiply-adds no branches: each
//                 input row it reads feeds up to 3 output rows.
//                 Grid: x = ceil(OH / DW_R) * ceil(OW / DW_P), y = C, z = N.
// conv2d_dw3_bwd_w  the weight gradient: per channel and chunk of DW_R output rows of
//                 one image, the KH x KW sums of dY (unit-stride rows) * X (padded, as
//                 above) over DW_P-wide
//                 column tiles, into
//                 a float workspace [chunk][C][KH][KW] that conv2d_sum_chunks
//                 (conv2d_tiled.metal) adds up. Grid: x = C, y = ceil(OH / DW_R), z = N.
// Host launchers: backend/kernels/conv2d_depthwise.cpp.
#include <metal_stdlib>
using namespace metal;

// 7 x 8 outputs per thread: 7 rows divide the usual CNN sizes (224 / 2^k), and
// on the simulator 7 rows ran 1.4x faster than 4 (per-thread costs amortised).
#define DW_R 7
#define DW_P 8
// See conv2d_tiled.metal.
#if defined(__METAL_VERSION__)
#define UNROLL _Pragma("unroll")
#else
#define UNROLL _Pragma("GCC unroll 16")
#endif

// Mirrored by backend/kernels/conv2d_depthwise_params.h.
struct Conv2dDwParams {
  long N, C, Hp, Wp;      // the padded input copy, dense [N][C][Hp][Wp]
  long OH, OW;            // output
  long KH, KW;            // <= 3
  long y_s[4], w_s[4];
  long b_s, has_bias, flip;
};

template <typename T>
kernel void conv2d_dw3(device T* y [[buffer(0)]],
                       const device T* xp [[buffer(1)]],
                       const device T* w [[buffer(2)]],
                       const device T* bias [[buffer(3)]],
                       constant Conv2dDwParams& p [[buffer(4)]],
                       uint3 gid [[thread_position_in_grid]]) {
  const long tiles_w = (p.OW + DW_P - 1) / DW_P;
  if (long(gid.x) >= ((p.OH + DW_R - 1) / DW_R) * tiles_w) return;
  const long oh0 = (gid.x / tiles_w) * DW_R;
  const long ow0 = (gid.x - (gid.x / tiles_w) * tiles_w) * DW_P;
  const long c = gid.y, n = gid.z;

  float wk[3][3];
  UNROLL for (int kh = 0; kh < 3; ++kh)
    UNROLL for (int kw = 0; kw < 3; ++kw) {
      const long sh = p.flip ? p.KH - 1 - kh : kh, sw = p.flip ? p.KW - 1 - kw : kw;
      wk[kh][kw] = kh < p.KH && kw < p.KW ? float(w[c * p.w_s[0] + sh * p.w_s[2] + sw * p.w_s[3]]) : 0.0f;
    }
  float acc[DW_R][DW_P];
  UNROLL for (int r = 0; r < DW_R; ++r)
    UNROLL for (int j = 0; j < DW_P; ++j) acc[r][j] = 0.0f;
  // Every input row a tile reads is inside the padded copy: no bounds checks.
  const device T* xt = xp + ((n * p.C + c) * p.Hp + oh0) * p.Wp + ow0;
  UNROLL for (int i = 0; i < DW_R + 2; ++i) {
    const device T* row = xt + i * p.Wp;
    UNROLL for (int kh = 0; kh < 3; ++kh) {
      const int r = i - kh;  // the output row this input row feeds through tap kh
      if (r < 0 || r >= DW_R) continue;
      UNROLL for (int kw = 0; kw < 3; ++kw)
        UNROLL for (int j = 0; j < DW_P; ++j) acc[r][j] += wk[kh][kw] * float(row[j + kw]);
    }
  }

  // Through a contiguous array before the masked stores (see conv2d_tiled_bwd_w).
  float res[DW_R][DW_P];
  UNROLL for (int r = 0; r < DW_R; ++r)
    UNROLL for (int j = 0; j < DW_P; ++j) res[r][j] = acc[r][j];
  const float b = p.has_bias ? float(bias[c * p.b_s]) : 0.0f;
  device T* yc = y + n * p.y_s[0] + c * p.y_s[1];
  const long nr = min(long(DW_R), p.OH - oh0), nj = min(long(DW_P), p.OW - ow0);
  if (nr == DW_R && nj == DW_P && p.y_s[3] == 1) {  // a whole tile in unit-stride rows
    UNROLL for (int r = 0; r < DW_R; ++r) {
      device T* yr = yc + (oh0 + r) * p.y_s[2] + ow0;
      UNROLL for (int j = 0; j < DW_P; ++j) yr[j] = T(res[r][j] + b);
    }
    return;
  }
  for (long r = 0; r < nr; ++r)
    for (long j = 0; j < nj; ++j) yc[(oh0 + r) * p.y_s[2] + (ow0 + j) * p.y_s[3]] = T(res[r][j] + b);
}

template <typename T>
kernel void conv2d_dw3_bwd_w(device float* partial [[buffer(0)]],
                             const device T* dy [[buffer(1)]],
                             const device T* xp [[buffer(2)]],
                             constant Conv2dDwParams& p [[buffer(3)]],
                             uint3 gid [[thread_position_in_grid]]) {
  const long c = gid.x, n = gid.z;
  if (c >= p.C) return;
  const long oh0 = long(gid.y) * DW_R;
  const long nr = min(long(DW_R), p.OH - oh0);
  float part[3][3][DW_P];
  UNROLL for (int kh = 0; kh < 3; ++kh)
    UNROLL for (int kw = 0; kw < 3; ++kw)
      UNROLL for (int j = 0; j < DW_P; ++j) part[kh][kw][j] = 0.0f;
  const device T* xc = xp + (n * p.C + c) * p.Hp * p.Wp;
  const device T* yc = dy + n * p.y_s[0] + c * p.y_s[1];
  const long full = p.OW / DW_P * DW_P;
  for (long r = 0; r < nr; ++r) {
    const long oh = oh0 + r;
    const device T* yr = yc + oh * p.y_s[2];
    for (long ow0 = 0; ow0 < full; ow0 += DW_P) {
      const device T* yt = yr + ow0;  // dY's rows are unit-stride (the launcher checks)
      UNROLL for (int kh = 0; kh < 3; ++kh) {
        const device T* xr = xc + (oh + kh) * p.Wp + ow0;
        UNROLL for (int kw = 0; kw < 3; ++kw)
          UNROLL for (int j = 0; j < DW_P; ++j) part[kh][kw][j] += float(yt[j]) * float(xr[j + kw]);
      }
    }
  }
  float res[3][3][DW_P];  // see conv2d_tiled_bwd_w
  UNROLL for (int kh = 0; kh < 3; ++kh)
    UNROLL for (int kw = 0; kw < 3; ++kw)
      UNROLL for (int j = 0; j < DW_P; ++j) res[kh][kw][j] = part[kh][kw][j];
  // The columns past the last full tile, one at a time.
  float tail[3][3];
  for (int kh = 0; kh < 3; ++kh)
    for (int kw = 0; kw < 3; ++kw) tail[kh][kw] = 0.0f;
  for (long r = 0; r < nr; ++r)
    for (long ow = full; ow < p.OW; ++ow) {
      const float g = float(yc[(oh0 + r) * p.y_s[2] + ow * p.y_s[3]]);
      for (long kh = 0; kh < p.KH; ++kh)
        for (long kw = 0; kw < p.KW; ++kw) tail[kh][kw] += g * float(xc[(oh0 + r + kh) * p.Wp + ow + kw]);
    }
  // [chunk][C][KH][KW], chunk = n * ceil(OH / DW_R) + gid.y.
  const long chunk = n * ((p.OH + DW_R - 1) / DW_R) + gid.y;
  device float* out = partial + (chunk * p.C + c) * p.KH * p.KW;
  for (long kh = 0; kh < p.KH; ++kh)
    for (long kw = 0; kw < p.KW; ++kw) {
      float s = tail[kh][kw];
      for (int j = 0; j < DW_P; ++j) s += res[kh][kw][j];
      out[kh * p.KW + kw] = s;
    }
}

template [[host_name("conv2d_dw3_float")]] kernel decltype(conv2d_dw3<float>) conv2d_dw3<float>;
template [[host_name("conv2d_dw3_half")]] kernel decltype(conv2d_dw3<half>) conv2d_dw3<half>;
template [[host_name("conv2d_dw3_bfloat")]] kernel decltype(conv2d_dw3<bfloat>) conv2d_dw3<bfloat>;
template [[host_name("conv2d_dw3_bwd_w_float")]] kernel decltype(conv2d_dw3_bwd_w<float>) conv2d_dw3_bwd_w<float>;
template [[host_name("conv2d_dw3_bwd_w_half")]] kernel decltype(conv2d_dw3_bwd_w<half>) conv2d_dw3_bwd_w<half>;
template [[host_name("conv2d_dw3_bwd_w_bfloat")]] kernel decltype(conv2d_dw3_bwd_w<bfloat>) conv2d_dw3_bwd_w<bfloat>;
