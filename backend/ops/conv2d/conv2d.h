// 2-D convolution on the device: the launchers of kernels/conv2d_forward.metal and
// kernels/conv2d_backward.metal.
//
// Torch-free. Every convolution is described as the "regular" one
//   X [N, Cx, H, W]  --W [Cy, Cx/groups, KH, KW]-->  Y [N, Cy, OH, OW]
// (a transposed convolution swaps the roles: its input is Y, its output X). Tensors
// are {buffer, byte offset, four strides in elements}: any layout (NCHW, channels_last,
// views, storage offsets). The caller owns the open compute encoder; these functions
// only encode into it, and encode nothing when there is nothing to compute.
// Supported dtypes: Float32, Float16, BFloat16 (accumulation in float32).
#pragma once

#include <cstddef>
#include <cstdint>

#include "launch/dtype.h"
#include "metalx/runtime/buffer.h"
#include "metalx/runtime/command.h"
#include "metalx/runtime/pipeline_cache.h"

namespace metalx::kernels {

struct Conv2dGeometry {
  int64_t N = 0, Cx = 0, H = 0, W = 0;
  int64_t Cy = 0, OH = 0, OW = 0;
  int64_t KH = 0, KW = 0;
  int64_t stride[2] = {1, 1}, pad[2] = {0, 0}, dilation[2] = {1, 1};
  int64_t groups = 1;
};

struct ConvOperand {
  rt::BufferPtr buffer;    // may be null only when the tensor has no elements
  size_t byte_offset = 0;  // of element [0, 0, 0, 0]
  int64_t strides[4] = {0, 0, 0, 0};  // in elements (a bias uses strides[0])
};

bool conv2dSupportsDType(DType dtype);

// Y = conv(X, W) (+ bias[Cy] when `bias` is given).
void encodeConv2dForward(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines, DType dtype,
                         const Conv2dGeometry& g, const ConvOperand& y, const ConvOperand& x,
                         const ConvOperand& w, const ConvOperand* bias);
// X = conv_transpose(Y, W) (+ bias[Cx] when given): the input gradient of conv(X, W).
void encodeConv2dBackwardInput(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines, DType dtype,
                               const Conv2dGeometry& g, const ConvOperand& x, const ConvOperand& y,
                               const ConvOperand& w, const ConvOperand* bias);
// db[c] = sum of dY[:, c, :, :] for the Cy channels of `g`.
void encodeConv2dBackwardBias(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines, DType dtype,
                              const Conv2dGeometry& g, const ConvOperand& db, const ConvOperand& dy);

}  // namespace metalx::kernels
