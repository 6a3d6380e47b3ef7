// 2-D depthwise convolution with a kernel of at most 3 x 3 (unit stride and dilation,
// channel multiplier 1): when the fast kernels of kernels/conv2d_depthwise.metal
// apply, their scratch, and their launchers. Same conventions as conv2d_tiled.h.
#pragma once

#include <cstddef>

#include "conv2d.h"

namespace metalx::kernels {

bool conv2dDepthwise3Applies(const Conv2dGeometry& g);

// Y = conv(X, W) (+ bias); with `flip`, `g` is the input gradient of a depthwise
// convolution as a forward (conv2dInputGradAsForward) and W that convolution's weight.
// Reads X in place (any strides): no scratch.
void encodeConv2dDepthwise3Forward(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines, DType dtype,
                                   const Conv2dGeometry& g, const ConvOperand& y, const ConvOperand& x,
                                   const ConvOperand& w, const ConvOperand* bias, bool flip);

// The weight gradient also needs dY's rows unit-stride.
bool conv2dDepthwise3BackwardWeightApplies(const Conv2dGeometry& g, const ConvOperand& dy);
size_t conv2dDepthwise3BackwardWeightScratchBytes(DType dtype, const Conv2dGeometry& g);
void encodeConv2dDepthwise3BackwardWeight(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines, DType dtype,
                                          const Conv2dGeometry& g, const ConvOperand& dw, const ConvOperand& dy,
                                          const ConvOperand& x, const ConvOperand& scratch);

}  // namespace metalx::kernels
