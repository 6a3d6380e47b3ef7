#include "conv2d.h"

#include <algorithm>
#include <string>

#include "conv2d_launch_util.h"
#include "conv2d_params.h"
#include "metalx/runtime/error.h"

namespace metalx::kernels {
namespace {

using rt::ErrorKind;
using namespace conv2d_util;

Conv2dParams paramsFor(const Conv2dGeometry& g) {
  checkGroups(g);
  rt::check(g.stride[0] > 0 && g.stride[1] > 0 && g.dilation[0] > 0 && g.dilation[1] > 0,
            ErrorKind::Validation, "conv2d: stride and dilation must be positive");
  Conv2dParams p{};
  p.N = g.N; p.Cx = g.Cx; p.H = g.H; p.W = g.W;
  p.Cy = g.Cy; p.OH = g.OH; p.OW = g.OW;
  p.KH = g.KH; p.KW = g.KW;
  p.stride_h = g.stride[0]; p.stride_w = g.stride[1];
  p.pad_h = g.pad[0]; p.pad_w = g.pad[1];
  p.dil_h = g.dilation[0]; p.dil_w = g.dilation[1];
  p.groups = g.groups;
  p.cx_g = g.Cx / g.groups;
  p.cy_g = g.Cy / g.groups;
  return p;
}

void copyStrides(int64_t (&dst)[4], const ConvOperand& t) { std::copy(t.strides, t.strides + 4, dst); }

constexpr int64_t kPixelTile = 8;      // PB in the kernels
constexpr int64_t kDepthwiseTile = 16; // PBD in conv2d_fwd_dw

}  // namespace

bool conv2dSupportsDType(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float16 || dtype == DType::BFloat16;
}

void encodeConv2dForward(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines, DType dtype,
                         const Conv2dGeometry& g, const ConvOperand& y, const ConvOperand& x,
                         const ConvOperand& w, const ConvOperand* bias) {
  Conv2dParams p = paramsFor(g);
  if (p.N == 0 || p.Cy == 0 || p.OH == 0 || p.OW == 0) return;
  copyStrides(p.x_s, x);
  copyStrides(p.w_s, w);
  copyStrides(p.y_s, y);
  p.has_bias = bias != nullptr;
  p.b_s = bias ? bias->strides[0] : 0;
  const bool depthwise = p.cx_g == 1;
  const int cb = p.cy_g >= 4 ? 4 : 1;
  auto pipeline = pipelines.builtin(depthwise ? "conv2d_fwd_dw_" + typeName(dtype)
                                              : "conv2d_fwd_" + typeName(dtype) + "_c" + std::to_string(cb));
  encoder.setComputePipeline(pipeline);
  bindForwardOperands(encoder, y, x, w, bias);
  encoder.setBytes(&p, sizeof p, 4);
  if (depthwise)
    dispatch(encoder, p.OH * ceilDiv(p.OW, kDepthwiseTile), p.Cy, p.N);
  else
    dispatch(encoder, p.OH * ceilDiv(p.OW, kPixelTile), p.groups * ceilDiv(p.cy_g, cb), p.N);
}

void encodeConv2dBackwardInput(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines, DType dtype,
                               const Conv2dGeometry& g, const ConvOperand& x, const ConvOperand& y,
                               const ConvOperand& w, const ConvOperand* bias) {
  Conv2dParams p = paramsFor(g);
  if (p.N == 0 || p.Cx == 0 || p.H == 0 || p.W == 0) return;
  copyStrides(p.x_s, x);
  copyStrides(p.w_s, w);
  copyStrides(p.y_s, y);
  p.has_bias = bias != nullptr;
  p.b_s = bias ? bias->strides[0] : 0;
  const int cb = p.cx_g >= 4 ? 4 : 1;
  auto pipeline = pipelines.builtin("conv2d_bwd_x_" + typeName(dtype) + "_c" + std::to_string(cb));
  encoder.setComputePipeline(pipeline);
  encoder.setBuffer(x.buffer, x.byte_offset, 0);
  encoder.setBuffer(y.buffer ? y.buffer : x.buffer, y.buffer ? y.byte_offset : 0, 1);
  encoder.setBuffer(w.buffer ? w.buffer : x.buffer, w.buffer ? w.byte_offset : 0, 2);
  if (bias) encoder.setBuffer(bias->buffer, bias->byte_offset, 3);
  else encoder.setBuffer(x.buffer, x.byte_offset, 3);
  encoder.setBytes(&p, sizeof p, 4);
  dispatch(encoder, p.H * p.stride_w * ceilDiv(ceilDiv(p.W, p.stride_w), kPixelTile), p.groups * ceilDiv(p.cx_g, cb),
           p.N);
}

void encodeConv2dBackwardBias(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines, DType dtype,
                              const Conv2dGeometry& g, const ConvOperand& db, const ConvOperand& dy) {
  Conv2dParams p = paramsFor(g);
  if (p.Cy == 0) return;
  copyStrides(p.y_s, dy);
  p.b_s = db.strides[0];
  auto pipeline = pipelines.builtin("conv2d_bwd_bias_" + typeName(dtype));
  encoder.setComputePipeline(pipeline);
  encoder.setBuffer(db.buffer, db.byte_offset, 0);
  encoder.setBuffer(dy.buffer ? dy.buffer : db.buffer, dy.buffer ? dy.byte_offset : 0, 1);
  encoder.setBytes(&p, sizeof p, 2);
  dispatch(encoder, p.Cy, 1, 1);
}

}  // namespace metalx::kernels
