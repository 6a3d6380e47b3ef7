#include "conv2d_depthwise.h"

#include <algorithm>

#include "conv2d_launch_util.h"
#include "metalx/runtime/error.h"

namespace metalx::kernels {
namespace {

using namespace conv2d_util;

// DW_RW and DW_P of kernels/conv2d_depthwise.metal: the weight gradient's rows per
// chunk, columns per tile.
constexpr int64_t kRowsWeightGrad = 7;
constexpr int64_t kCols = 8;

// Output rows per conv2d_dw3 thread. A GPU wants many light threads: 7 rows (7 divides
// the usual CNN sizes, 224 / 2^k). The simulator runs every thread as a call on a CPU
// core, where per-thread costs favour fewer, heavier ones: 28 rows ran 1.5x faster
// than 7 there (8x128x28x28).
int64_t dw3RowsPerThread(const rt::DeviceInfo& info) { return info.is_simulated ? 28 : 7; }

// Both kernels read X in place, with its padding: `y` is Y for the forward and dY for
// the weight gradient, `w` W or dW.
Conv2dDwParams paramsFor(const Conv2dGeometry& g, const ConvOperand& x, const ConvOperand& y, const ConvOperand& w) {
  Conv2dDwParams p{};
  p.N = g.N; p.C = g.Cx;
  p.OH = g.OH; p.OW = g.OW;
  p.KH = g.KH; p.KW = g.KW;
  std::copy(y.strides, y.strides + 4, p.y_s);
  std::copy(w.strides, w.strides + 4, p.w_s);
  p.H = g.H;
  p.W = g.W;
  p.pad_h = g.pad[0];
  p.pad_w = g.pad[1];
  std::copy(x.strides, x.strides + 4, p.x_s);
  return p;
}

}  // namespace

bool conv2dDepthwise3Applies(const Conv2dGeometry& g) {
  return g.groups > 0 && g.Cx == g.groups && g.Cy == g.groups && g.KH >= 1 && g.KH <= 3 && g.KW >= 1 &&
         g.KW <= 3 && g.stride[0] == 1 && g.stride[1] == 1 && g.dilation[0] == 1 && g.dilation[1] == 1;
}

void encodeConv2dDepthwise3Forward(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines, DType dtype,
                                   const Conv2dGeometry& g, const ConvOperand& y, const ConvOperand& x,
                                   const ConvOperand& w, const ConvOperand* bias, bool flip) {
  rt::check(conv2dDepthwise3Applies(g), rt::ErrorKind::Validation, "conv2d: the depthwise 3x3 kernel does not apply");
  if (g.N == 0 || g.Cy == 0 || g.OH == 0 || g.OW == 0) return;
  Conv2dDwParams p = paramsFor(g, x, y, w);
  p.has_bias = bias != nullptr;
  p.b_s = bias ? bias->strides[0] : 0;
  p.flip = flip;
  p.rows = dw3RowsPerThread(pipelines.device().info());
  encoder.setComputePipeline(pipelines.builtin("conv2d_dw3_" + typeName(dtype)));
  bindForwardOperands(encoder, y, x, w, bias);
  encoder.setBytes(&p, sizeof p, 4);
  dispatch(encoder, ceilDiv(g.OH, p.rows) * ceilDiv(g.OW, kCols), g.Cy, g.N);
}

bool conv2dDepthwise3BackwardWeightApplies(const Conv2dGeometry& g, const ConvOperand& dy) {
  return conv2dDepthwise3Applies(g) && dy.strides[3] == 1;
}

size_t conv2dDepthwise3BackwardWeightScratchBytes(DType, const Conv2dGeometry& g) {
  const int64_t chunks = g.N * ceilDiv(g.OH, kRowsWeightGrad);
  return static_cast<size_t>(chunks * g.Cy * g.KH * g.KW) * sizeof(float);
}

void encodeConv2dDepthwise3BackwardWeight(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines, DType dtype,
                                          const Conv2dGeometry& g, const ConvOperand& dw, const ConvOperand& dy,
                                          const ConvOperand& x, const ConvOperand& scratch) {
  rt::check(conv2dDepthwise3BackwardWeightApplies(g, dy), rt::ErrorKind::Validation,
            "conv2d: the depthwise 3x3 weight-gradient kernel does not apply");
  if (g.Cy == 0) return;
  rt::check(scratch.buffer != nullptr, rt::ErrorKind::Validation, "conv2d: the depthwise kernel needs its scratch");
  const ConvOperand& partial = scratch;
  // conv2d_sum_chunks sees the partial sums as [chunks][Cy][1][KH][KW].
  Conv2dWeightGradParams sum{};
  sum.Cy = g.Cy;
  sum.cx_g = 1;
  sum.KH = g.KH;
  sum.KW = g.KW;
  std::copy(dw.strides, dw.strides + 4, sum.w_s);
  sum.chunks = g.N * ceilDiv(g.OH, kRowsWeightGrad);
  if (sum.chunks > 0 && g.OW > 0) {
    const Conv2dDwParams p = paramsFor(g, x, dy, dw);
    encoder.setComputePipeline(pipelines.builtin("conv2d_dw3_bwd_w_" + typeName(dtype)));
    encoder.setBuffer(partial.buffer, partial.byte_offset, 0);
    encoder.setBuffer(dy.buffer, dy.byte_offset, 1);
    encoder.setBuffer(x.buffer, x.byte_offset, 2);
    encoder.setBytes(&p, sizeof p, 3);
    dispatch(encoder, g.Cy, ceilDiv(g.OH, kRowsWeightGrad), g.N);
  } else {
    sum.chunks = 0;  // empty sums: zeros
  }
  encodeSumChunks(encoder, pipelines, dtype, sum, dw, partial);
}

}  // namespace metalx::kernels
