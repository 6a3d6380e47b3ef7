// What backend/ops/convolution.cpp offers the rest of the backend beyond the aten
// kernels it registers: convolution with a weight packed once (ops_conv_prepack.cpp
// exposes them as metalx::conv2d_weight_pack / metalx::conv2d_packed).
#pragma once

#include <ATen/ATen.h>

#include <optional>

namespace metalx {

// Whether a 2-D convolution with these parameters runs from a packed weight
// (conv2d_tiled): not depthwise, and a horizontal stride only with a 1-wide kernel.
bool convolutionUsesPackedWeight(at::IntArrayRef weight_shape, at::IntArrayRef stride, int64_t groups);

// Floats of the packed form of a weight of this shape.
int64_t packedConvolutionWeightSize(at::IntArrayRef weight_shape, int64_t groups);

// `weight` [Cy, Cx/groups, KH, KW] (a metalx tensor) in the layout conv2d_tiled reads:
// a 1-D float32 metalx tensor.
at::Tensor packConvolutionWeight(const at::Tensor& weight, int64_t groups);

// conv2d(input, weight, bias, ...) where `packed` is packConvolutionWeight(weight) and
// `weight_shape` is weight's shape. Arguments are checked by the caller.
at::Tensor convolutionWithPackedWeight(const at::Tensor& input, const at::Tensor& packed,
                                       at::IntArrayRef weight_shape, const std::optional<at::Tensor>& bias,
                                       at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                       int64_t groups);

}  // namespace metalx
