// The parameter block of kernels/conv2d_forward.metal and conv2d_backward.metal
// (Conv2dParams there; keep the two in sync: all fields are 64-bit, no padding).
#pragma once

#include <cstdint>

namespace metalx::kernels {

struct Conv2dParams {
  int64_t N, Cx, H, W;
  int64_t Cy, OH, OW;
  int64_t KH, KW;
  int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int64_t groups, cx_g, cy_g;
  int64_t x_s[4];
  int64_t w_s[4];
  int64_t y_s[4];
  int64_t b_s;
  int64_t has_bias;
};
static_assert(sizeof(Conv2dParams) == 32 * 8, "Conv2dParams must match the Metal struct");

}  // namespace metalx::kernels
