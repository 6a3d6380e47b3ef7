#include "conv2d_launch_util.h"

#include <algorithm>

#include "metalx/runtime/error.h"

namespace metalx::kernels::conv2d_util {

std::string typeName(DType dtype) {
  rt::check(conv2dSupportsDType(dtype), rt::ErrorKind::Validation,
            std::string("conv2d: unsupported dtype ") + dtypeName(dtype));
  return kernelTypeName(dtype);
}

void checkGroups(const Conv2dGeometry& g) {
  rt::check(groupsDivideChannels(g), rt::ErrorKind::Validation, "conv2d: groups must divide both channel counts");
}

void dispatch(rt::ComputeEncoder& e, int64_t x, int64_t y, int64_t z) {
  constexpr int64_t kMaxGrid = 0xffffffffll;
  rt::check(x <= kMaxGrid && y <= kMaxGrid && z <= kMaxGrid, rt::ErrorKind::Validation,
            "conv2d: problem too large for one dispatch");
  const uint64_t tx = static_cast<uint64_t>(std::min<int64_t>(x, 64));
  e.dispatchThreads({static_cast<uint64_t>(x), static_cast<uint64_t>(y), static_cast<uint64_t>(z)}, {tx, 1, 1});
}

void bindForwardOperands(rt::ComputeEncoder& e, const ConvOperand& y, const ConvOperand& x, const ConvOperand& w,
                         const ConvOperand* bias) {
  e.setBuffer(y.buffer, y.byte_offset, 0);
  e.setBuffer(x.buffer ? x.buffer : y.buffer, x.buffer ? x.byte_offset : 0, 1);
  e.setBuffer(w.buffer ? w.buffer : y.buffer, w.buffer ? w.byte_offset : 0, 2);
  if (bias) e.setBuffer(bias->buffer, bias->byte_offset, 3);
  else e.setBuffer(y.buffer, y.byte_offset, 3);
}

ConvOperand region(const ConvOperand& scratch, size_t offset) {
  ConvOperand r = scratch;
  r.byte_offset += offset;
  return r;
}

void encodePadInput(rt::ComputeEncoder& e, rt::PipelineCache& pipelines, DType dtype, const Conv2dPadParams& p,
                    const ConvOperand& out, const ConvOperand& x) {
  e.setComputePipeline(pipelines.builtin("conv2d_pad_input_" + typeName(dtype)));
  e.setBuffer(out.buffer, out.byte_offset, 0);
  e.setBuffer(x.buffer, x.byte_offset, 1);
  e.setBytes(&p, sizeof p, 2);
  if (p.channels_last)
    dispatch(e, p.Wp, p.Hp, p.N);
  else
    dispatch(e, p.Hp, p.C, p.N);
}

void encodeSumChunks(rt::ComputeEncoder& e, rt::PipelineCache& pipelines, DType dtype,
                     const Conv2dWeightGradParams& p, const ConvOperand& dw, const ConvOperand& partial) {
  e.setComputePipeline(pipelines.builtin("conv2d_sum_chunks_" + typeName(dtype)));
  e.setBuffer(dw.buffer, dw.byte_offset, 0);
  e.setBuffer(partial.buffer, partial.byte_offset, 1);
  e.setBytes(&p, sizeof p, 2);
  dispatch(e, p.cx_g * p.KH * p.KW, p.Cy, 1);
}

}  // namespace metalx::kernels::conv2d_util
