// Helpers shared by the convolution launchers (conv2d.cpp, conv2d_tiled.cpp, conv2d_depthwise.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "conv2d.h"
#include "conv2d_tiled_params.h"

namespace metalx::kernels::conv2d_util {

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Whether `g`'s groups are positive and divide both channel counts; checkGroups makes it
// a validation error.
inline bool groupsDivideChannels(const Conv2dGeometry& g) {
  return g.groups > 0 && g.Cx % g.groups == 0 && g.Cy % g.groups == 0;
}
void checkGroups(const Conv2dGeometry& g);

// Scratch regions start on this boundary (any buffer offset is then aligned enough).
constexpr size_t kRegionAlign = 256;
inline size_t alignUp(size_t v) { return (v + kRegionAlign - 1) / kRegionAlign * kRegionAlign; }

// The dtype's part of a kernel name (float, half, bfloat); an error for other dtypes.
std::string typeName(DType dtype);

// dispatchThreads over (x, y, z) with threadgroups of up to 64 threads along x.
void dispatch(rt::ComputeEncoder& e, int64_t x, int64_t y, int64_t z);

// `scratch` moved `offset` bytes on.
ConvOperand region(const ConvOperand& scratch, size_t offset);

// The forward kernels' operands: y at [[buffer(0)]], x at 1, w at 2, bias at 3 (y when
// there is none: bound but unread). An empty x or w (no buffer: Cx_g == 0 or a 0-sized
// kernel) binds y in its place; the kernel then reads nothing from it.
void bindForwardOperands(rt::ComputeEncoder& e, const ConvOperand& y, const ConvOperand& x, const ConvOperand& w,
                         const ConvOperand* bias);

// conv2d_pad_input: a padded (NCHW or NHWC) copy of x into `out`.
void encodePadInput(rt::ComputeEncoder& e, rt::PipelineCache& pipelines, DType dtype, const Conv2dPadParams& p,
                    const ConvOperand& out, const ConvOperand& x);

// conv2d_sum_chunks: dW from the float partial sums [chunks][Cy][cx_g][KH][KW].
void encodeSumChunks(rt::ComputeEncoder& e, rt::PipelineCache& pipelines, DType dtype,
                     const Conv2dWeightGradParams& p, const ConvOperand& dw, const ConvOperand& partial);

}  // namespace metalx::kernels::conv2d_util
