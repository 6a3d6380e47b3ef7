// 2-D convolution: the layout kernels that feed conv2d_tiled.metal.
//
// conv2d_pack_weight  W [Cy][Cx/groups][KH][KW] (any strides, any float dtype) ->
//                     the float32 layout conv2d_tiled reads:
//                       wp[((tile * KH + kh) * KW + kw) * ca + a][TILE_C]
//                     where the convolution being packed maps `ca` channels per group
//                     to `cb` channels per group in blocks (tiles) of TILE_C, and a
//                     group's last block is padded with zeros. With `transposed`, the
//                     packed convolution is the input gradient's: it maps Y's channels
//                     to X's with the taps flipped, wp[...][ky][b] = W[ky][b][KH-1-kh][KW-1-kw].
//                     Grid: x = ca, y = KH * KW, z = tiles of all groups.
// conv2d_pad_input    X [N][C][H][W] (any strides) -> a dense copy with its taps in
//                     bounds: out[n][c][h][w] = X[n][c][h * sub_h - pad_h][w * sub_w - pad_w],
//                     zero outside X, for h < Hp, w < Wp; NCHW or, with `channels_last`,
//                     NHWC. (sub > 1 subsamples the input of a strided 1x1 convolution.)
//                     Grid: x = Hp, y = C, z = N (NCHW) or x = Wp, y = Hp, z = N (NHWC).
// Host launchers: backend/ops/conv2d/conv2d_tiled.cpp.
#include <metal_stdlib>
using namespace metal;

#define TILE_C 8  // must match conv2d_tiled.metal

// Mirrored by backend/ops/conv2d/conv2d_tiled_params.h.
struct Conv2dPackParams {
  long ca, cb, groups, tiles_g;  // channels per group in/out, TILE_C blocks per group
  long KH, KW;
  long w_s[4];                   // strides of W [Cy][Cx/groups][KH][KW]
  long transposed;
};

template <typename T>
kernel void conv2d_pack_weight(device float* wp [[buffer(0)]],
                               const device T* w [[buffer(1)]],
                               constant Conv2dPackParams& p [[buffer(2)]],
                               uint3 gid [[thread_position_in_grid]]) {
  // One thread writes the TILE_C contiguous floats of one (block, tap, input channel).
  const long taps = p.KH * p.KW;
  const long a = gid.x, tap = gid.y, tile = gid.z;
  if (a >= p.ca || tap >= taps || tile >= p.groups * p.tiles_g) return;
  const long kh = tap / p.KW, kw = tap - (tap / p.KW) * p.KW;
  const long g = tile / p.tiles_g;
  const long b0 = (tile - g * p.tiles_g) * TILE_C;  // within the group
  device float* out = wp + ((tile * taps + tap) * p.ca + a) * TILE_C;
  // W's element for (b, a, kh, kw) is src + b * bstep.
  const device T* src;
  long bstep;
  if (p.transposed) {  // a: a channel of Y, b: a channel of X
    src = w + (g * p.ca + a) * p.w_s[0] + (p.KH - 1 - kh) * p.w_s[2] + (p.KW - 1 - kw) * p.w_s[3];
    bstep = p.w_s[1];
  } else {
    src = w + g * p.cb * p.w_s[0] + a * p.w_s[1] + kh * p.w_s[2] + kw * p.w_s[3];
    bstep = p.w_s[0];
  }
  for (int o = 0; o < TILE_C; ++o) {
    const long b = b0 + o;
    out[o] = b < p.cb ? float(src[b * bstep]) : 0.0f;
  }
}

// Mirrored by backend/ops/conv2d/conv2d_tiled_params.h.
struct Conv2dPadParams {
  long N, C, H, W;     // the source
  long x_s[4];
  long Hp, Wp;         // the copy
  long pad_h, pad_w, sub_h, sub_w;
  long channels_last;
};

template <typename T>
kernel void conv2d_pad_input(device T* out [[buffer(0)]],
                             const device T* x [[buffer(1)]],
                             constant Conv2dPadParams& p [[buffer(2)]],
                             uint3 gid [[thread_position_in_grid]]) {
  if (!p.channels_last) {
    // One row of one channel per thread. (The grid's y and z are the channel and the
    // image, and sub_w == 1 needs no division: a thread copies one short row, and the
    // 64-bit divisions that found its channel and columns took 40% of this kernel's
    // time on the simulator.)
    const long h = gid.x, c = gid.y, n = gid.z;
    if (h >= p.Hp || c >= p.C || n >= p.N) return;
    device T* row = out + ((n * p.C + c) * p.Hp + h) * p.Wp;
    const long ih = h * p.sub_h - p.pad_h;
    if (ih < 0 || ih >= p.H) {
      for (long w = 0; w < p.Wp; ++w) row[w] = T(0.0f);
      return;
    }
    const device T* src = x + n * p.x_s[0] + c * p.x_s[1] + ih * p.x_s[2];
    // Columns [w_lo, w_hi) read X; the others are zero. Three plain loops, no
    // per-element test (the middle one a contiguous copy for unit-stride rows).
    const bool unit = p.sub_w == 1;
    const long w_lo = min(p.Wp, p.pad_w <= 0 ? 0L : unit ? p.pad_w : (p.pad_w + p.sub_w - 1) / p.sub_w);
    const long top = p.W - 1 + p.pad_w;  // the last column reads X at w * sub_w <= top
    const long w_hi = top < 0 ? w_lo : max(w_lo, min(p.Wp, (unit ? top : top / p.sub_w) + 1));
    for (long w = 0; w < w_lo; ++w) row[w] = T(0.0f);
    const long step = p.sub_w * p.x_s[3];
    const device T* s0 = src + (w_lo * p.sub_w - p.pad_w) * p.x_s[3];
    if (step == 1) {
      for (long w = w_lo; w < w_hi; ++w) row[w] = s0[w - w_lo];
    } else {
      for (long w = w_lo; w < w_hi; ++w) row[w] = s0[(w - w_lo) * step];
    }
    for (long w = w_hi; w < p.Wp; ++w) row[w] = T(0.0f);
  } else {
    // One pixel's channels per thread.
    const long w = gid.x, h = gid.y, n = gid.z;
    if (w >= p.Wp || h >= p.Hp) return;
    device T* px = out + ((n * p.Hp + h) * p.Wp + w) * p.C;
    const long ih = h * p.sub_h - p.pad_h, iw = w * p.sub_w - p.pad_w;
    if (ih < 0 || ih >= p.H || iw < 0 || iw >= p.W) {
      for (long c = 0; c < p.C; ++c) px[c] = T(0.0f);
      return;
    }
    const device T* src = x + n * p.x_s[0] + ih * p.x_s[2] + iw * p.x_s[3];
    for (long c = 0; c < p.C; ++c) px[c] = src[c * p.x_s[1]];
  }
}

template [[host_name("conv2d_pack_weight_float")]] kernel decltype(conv2d_pack_weight<float>) conv2d_pack_weight<float>;
template [[host_name("conv2d_pack_weight_half")]] kernel decltype(conv2d_pack_weight<half>) conv2d_pack_weight<half>;
template [[host_name("conv2d_pack_weight_bfloat")]] kernel decltype(conv2d_pack_weight<bfloat>) conv2d_pack_weight<bfloat>;
template [[host_name("conv2d_pad_input_float")]] kernel decltype(conv2d_pad_input<float>) conv2d_pad_input<float>;
template [[host_name("conv2d_pad_input_half")]] kernel decltype(conv2d_pad_input<half>) conv2d_pad_input<half>;
template [[host_name("conv2d_pad_input_bfloat")]] kernel decltype(conv2d_pad_input<bfloat>) conv2d_pad_input<bfloat>;
