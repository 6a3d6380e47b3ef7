// The parameter blocks of kernels/conv2d_tiled.metal, conv2d_layout.metal and
// conv2d_depthwise.metal
// (keep them in sync: all fields are 64-bit, no padding).
#pragma once

#include <cstdint>

namespace metalx::kernels {

struct Conv2dTiledParams {
  int64_t N, Cx, H, W;
  int64_t Cy, OH, OW;
  int64_t KH, KW;
  int64_t stride_h, dil_h, dil_w;
  int64_t cx_g, cy_g, tiles_g;
  int64_t x_s[3];
  int64_t y_s[4];
  int64_t b_s;
  int64_t has_bias;
  int64_t flat;  // 1: a line per image, rows x_s[2] apart; 0: a line per output row
};
static_assert(sizeof(Conv2dTiledParams) == 25 * 8, "Conv2dTiledParams must match the Metal struct");

struct Conv2dWeightGradParams {
  int64_t N, Cx, Hp, Wp;
  int64_t Cy, OH, OW;
  int64_t KH, KW;
  int64_t stride_h, stride_w, dil_h, dil_w;
  int64_t cx_g, cy_g, tiles_g;
  int64_t rows_per_chunk;
  int64_t y_s[4];
  int64_t w_s[4];
  int64_t chunks;
};
static_assert(sizeof(Conv2dWeightGradParams) == 26 * 8, "Conv2dWeightGradParams must match the Metal struct");

struct Conv2dPackParams {
  int64_t ca, cb, groups, tiles_g;
  int64_t KH, KW;
  int64_t w_s[4];
  int64_t transposed;
};
static_assert(sizeof(Conv2dPackParams) == 11 * 8, "Conv2dPackParams must match the Metal struct");

struct Conv2dPadParams {
  int64_t N, C, H, W;
  int64_t x_s[4];
  int64_t Hp, Wp;
  int64_t pad_h, pad_w, sub_h, sub_w;
  int64_t channels_last;
};
static_assert(sizeof(Conv2dPadParams) == 15 * 8, "Conv2dPadParams must match the Metal struct");

}  // namespace metalx::kernels

namespace metalx::kernels {

// kernels/conv2d_depthwise.metal
struct Conv2dDwParams {
  int64_t N, C;
  int64_t OH, OW;
  int64_t KH, KW;
  int64_t y_s[4], w_s[4];
  int64_t b_s, has_bias, flip;
  int64_t H, W, pad_h, pad_w;
  int64_t rows;
  int64_t x_s[4];
};
static_assert(sizeof(Conv2dDwParams) == 26 * 8, "Conv2dDwParams must match the Metal struct");

}  // namespace metalx::kernels
