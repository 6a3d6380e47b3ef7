// 2-D convolution, the fast paths: when they apply, the scratch memory they need, and
// their launchers (kernels/conv2d_tiled.metal and kernels/conv2d_layout.metal).
//
// Torch-free, like conv2d.h (same geometry and operands). The caller checks that a
// path applies, allocates the scratch the matching *ScratchBytes function asks for on
// the same device (any alignment: regions inside it are placed here), and keeps it
// alive until the encoded work completes. The direct kernels of conv2d.h remain the
// general path (depthwise, horizontal stride with wide kernels, few channels per group).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "conv2d.h"

namespace metalx::kernels {

// conv2d_tiled's TILE_C (output channels per thread, and the packed weight's blocks)
// and TILE_SLOT (the unit its grid counts output positions in). Its TILE_P (positions
// per thread) differs per target, at most kConvTilePMax: inputs it reads past a short
// line must lie inside the buffer.
constexpr int64_t kConvTileC = 8;
constexpr int64_t kConvTileSlot = 8;
constexpr int64_t kConvTilePMax = 32;

// ---- packed weights ----

// Floats of the packed weight of the forward of `g` (blocks of kConvTileC output
// channels per group, zero-padded).
int64_t conv2dPackedWeightFloats(const Conv2dGeometry& g);
// Packs `w` for the forward of `g`. With `transposed`, `g` is the input gradient of a
// convolution (see conv2dInputGradAsForward) and `w` is that convolution's weight
// [Cx_g * groups][Cy / groups][KH][KW] in `g`'s terms, packed transposed and flipped.
void encodeConv2dPackWeight(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines, DType dtype,
                            const Conv2dGeometry& g, const ConvOperand& packed, const ConvOperand& w,
                            bool transposed);

// ---- forward ----

// Whether conv2d_tiled computes the forward of `g`: at least two input channels per
// group (depthwise has its own kernel), and a unit horizontal stride unless the
// kernel is one column wide (the input is then subsampled into the scratch).
bool conv2dTiledForwardApplies(const Conv2dGeometry& g);
// The input gradient of `g` (dY -> dX) as the forward of another convolution, when `g`
// has unit strides: dY convolved with the transposed, flipped weight, padded by
// dilation * (kernel - 1) - padding. Also a stride-1 transposed convolution.
std::optional<Conv2dGeometry> conv2dInputGradAsForward(const Conv2dGeometry& g);
// Bytes of scratch encodeConv2dTiledForward needs (0: it reads X in place).
size_t conv2dTiledForwardScratchBytes(DType dtype, const Conv2dGeometry& g, const ConvOperand& x);
// Y = conv(X, W) (+ bias) from W packed by encodeConv2dPackWeight (or prepacked).
void encodeConv2dTiledForward(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines, DType dtype,
                              const Conv2dGeometry& g, const ConvOperand& y, const ConvOperand& x,
                              const ConvOperand& packed_w, const ConvOperand* bias, const ConvOperand& scratch);

// ---- weight gradient ----

// Whether conv2d_tiled_bwd_w computes the weight gradient of `g`: at least kConvTileC
// input and output channels per group.
bool conv2dTiledBackwardWeightApplies(const Conv2dGeometry& g);
size_t conv2dTiledBackwardWeightScratchBytes(DType dtype, const Conv2dGeometry& g);
// dW of Y = conv(X, W) given dY (written over).
void encodeConv2dTiledBackwardWeight(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines, DType dtype,
                                     const Conv2dGeometry& g, const ConvOperand& dw, const ConvOperand& dy,
                                     const ConvOperand& x, const ConvOperand& scratch);

// Whether conv2d_taps_bwd_w computes the weight gradient of `g`: when
// conv2d_tiled_bwd_w does not (fewer than kConvTileC channels per group on either
// side, e.g. a network's stem with its 3 input channels).
bool conv2dTapsBackwardWeightApplies(const Conv2dGeometry& g);
size_t conv2dTapsBackwardWeightScratchBytes(DType dtype, const Conv2dGeometry& g);
// dW of Y = conv(X, W) given dY (written over), on conv2d_taps_bwd_w.
void encodeConv2dTapsBackwardWeight(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines, DType dtype,
                                    const Conv2dGeometry& g, const ConvOperand& dw, const ConvOperand& dy,
                                    const ConvOperand& x, const ConvOperand& scratch);

// How conv2d_tiled_bwd_w splits the N * OH output rows into chunks (exposed for tests).
struct Conv2dRowChunks {
  int64_t rows_per_chunk;
  int64_t chunks;
};
Conv2dRowChunks conv2dWeightGradChunks(const Conv2dGeometry& g);

}  // namespace metalx::kernels
