#include "conv2d_tiled.h"

#include <algorithm>
#include <string>

#include "conv2d_launch_util.h"
#include "conv2d_tiled_params.h"
#include "metalx/runtime/error.h"

namespace metalx::kernels {
namespace {

using rt::ErrorKind;
using namespace conv2d_util;

int64_t tilesPerGroup(const Conv2dGeometry& g) { return ceilDiv(g.Cy / g.groups, kConvTileC); }

// How conv2d_tiled reads X for the forward of `g`: in place, or from a dense NCHW copy
// whose every tap is in bounds (padding resolved, a 1-wide/1-high kernel's stride
// turned into subsampling), and along which lines (see the kernel): flat (the whole
// image, q = oh * pitch + ow) when the vertical stride is 1, else one line per row.
struct TiledInput {
  bool copy = false;
  Conv2dPadParams pad{};  // when copying
  int64_t H = 0, W = 0, stride_h = 1;
  int64_t x_s[3] = {0, 0, 0};
  bool flat() const { return stride_h == 1; }  // lines along the image, rows x_s[2] apart
};

// Positions on the flat line of one output image whose rows lie `pitch` apart in X
// (ending at the last output: no tile reads past the last input the convolution needs).
int64_t flatLineLength(const Conv2dGeometry& g, int64_t pitch) { return (g.OH - 1) * pitch + g.OW; }

TiledInput tiledInputOf(const Conv2dGeometry& g, const ConvOperand& x) {
  TiledInput t;
  const int64_t rows_needed = (g.OH - 1) * g.stride[0] + (g.KH - 1) * g.dilation[0] + 1;
  const int64_t cols_needed = (g.OW - 1) * g.stride[1] + (g.KW - 1) * g.dilation[1] + 1;
  // In place: no padding, unit-stride rows, and a line as long as any build's tile
  // (the last inputs a tile reads are then the last the convolution reads). A flat line
  // also needs rows that do not overlap (a row stride of at least W): its positions
  // q = oh * pitch + ow must be distinct outputs.
  const bool flat_in_place =
      g.stride[0] == 1 && x.strides[2] >= g.W && flatLineLength(g, x.strides[2]) >= kConvTilePMax;
  const bool rows_in_place = g.stride[0] != 1 && g.OW >= kConvTilePMax;
  t.copy = g.pad[0] != 0 || g.pad[1] != 0 || g.stride[1] != 1 || x.strides[3] != 1 || rows_needed > g.H ||
           cols_needed > g.W || !(flat_in_place || rows_in_place);
  if (!t.copy) {
    t.H = g.H;
    t.W = g.W;
    t.stride_h = g.stride[0];
    std::copy(x.strides, x.strides + 3, t.x_s);
    return t;
  }
  Conv2dPadParams& p = t.pad;
  p.N = g.N; p.C = g.Cx; p.H = g.H; p.W = g.W;
  std::copy(x.strides, x.strides + 4, p.x_s);
  p.sub_h = g.KH == 1 ? g.stride[0] : 1;
  p.sub_w = g.stride[1];  // conv2dTiledForwardApplies: KW == 1 when it is not 1
  p.pad_h = g.pad[0];
  p.pad_w = g.pad[1];
  t.stride_h = g.stride[0] / p.sub_h;
  p.Hp = (g.OH - 1) * t.stride_h + (g.KH - 1) * g.dilation[0] + 1;
  // Row lines shorter than a tile get rows a tile wide; flat lines need no more than
  // the padded width, and the copy's tail room (below) covers a short last line.
  const int64_t ow_room = t.stride_h == 1 ? g.OW : std::max(g.OW, kConvTilePMax);
  p.Wp = ow_room - 1 + (g.KW - 1) * g.dilation[1] + 1;
  p.channels_last = 0;
  t.H = p.Hp;
  t.W = p.Wp;
  t.x_s[0] = g.Cx * p.Hp * p.Wp;
  t.x_s[1] = p.Hp * p.Wp;
  t.x_s[2] = p.Wp;
  return t;
}

// The scratch of a weight gradient: X as a padded copy (channels-last for
// conv2d_tiled_bwd_w, NCHW for conv2d_taps_bwd_w), then the partial sums of every
// chunk of output rows.
struct WeightGradLayout {
  Conv2dPadParams pad{};
  int64_t rows_per_chunk = 1, chunks = 0;
  size_t input_bytes = 0, partial_bytes = 0;
  size_t scratchBytes() const { return input_bytes + partial_bytes; }
};

// `rows` output rows in chunks of `rows_per_chunk`, doubled while the chunks' partial
// sums (sums_per_chunk floats each, read again by conv2d_sum_chunks) would pass 4M
// floats, and at most all rows.
Conv2dRowChunks boundedChunks(int64_t rows, int64_t rows_per_chunk, int64_t sums_per_chunk) {
  while (ceilDiv(rows, rows_per_chunk) > 1 && ceilDiv(rows, rows_per_chunk) * sums_per_chunk > (int64_t(1) << 22))
    rows_per_chunk *= 2;
  rows_per_chunk = std::min(rows_per_chunk, rows);
  return {rows_per_chunk, ceilDiv(rows, rows_per_chunk)};
}

// X padded for a weight gradient: exactly the rows and columns the taps read, zero
// outside X (strides of X are filled in at encoding).
Conv2dPadParams weightGradPad(const Conv2dGeometry& g, bool channels_last) {
  Conv2dPadParams p{};
  p.N = g.N; p.C = g.Cx; p.H = g.H; p.W = g.W;
  p.Hp = (g.OH - 1) * g.stride[0] + (g.KH - 1) * g.dilation[0] + 1;
  p.Wp = (g.OW - 1) * g.stride[1] + (g.KW - 1) * g.dilation[1] + 1;
  p.pad_h = g.pad[0];
  p.pad_w = g.pad[1];
  p.sub_h = p.sub_w = 1;
  p.channels_last = channels_last;
  return p;
}

// Pads X into the scratch, runs `kernel` (conv2d_tiled_bwd_w or conv2d_taps_bwd_w) on
// a grid of grid_x x grid_y x chunks, then sums the chunks into dW. With no batch every
// sum is empty, and conv2d_sum_chunks writes zeros.
void encodeWeightGrad(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines, DType dtype, const char* kernel,
                      const Conv2dGeometry& g, const WeightGradLayout& l, int64_t tiles_g, int64_t grid_x,
                      const ConvOperand& dw, const ConvOperand& dy, const ConvOperand& x,
                      const ConvOperand& scratch) {
  const ConvOperand xp = region(scratch, 0);
  const ConvOperand partial = region(scratch, l.input_bytes);
  Conv2dWeightGradParams p{};
  p.N = g.N; p.Cx = g.Cx; p.Hp = l.pad.Hp; p.Wp = l.pad.Wp;
  p.Cy = g.Cy; p.OH = g.OH; p.OW = g.OW;
  p.KH = g.KH; p.KW = g.KW;
  p.stride_h = g.stride[0]; p.stride_w = g.stride[1];
  p.dil_h = g.dilation[0]; p.dil_w = g.dilation[1];
  p.cx_g = g.Cx / g.groups;
  p.cy_g = g.Cy / g.groups;
  p.tiles_g = tiles_g;
  p.rows_per_chunk = l.rows_per_chunk;
  std::copy(dy.strides, dy.strides + 4, p.y_s);
  std::copy(dw.strides, dw.strides + 4, p.w_s);
  p.chunks = l.chunks;
  if (g.N * g.OH * g.OW > 0) {
    Conv2dPadParams pad = l.pad;
    std::copy(x.strides, x.strides + 4, pad.x_s);
    encodePadInput(encoder, pipelines, dtype, pad, xp, x);
    encoder.setComputePipeline(pipelines.builtin(std::string(kernel) + "_" + typeName(dtype)));
    encoder.setBuffer(partial.buffer, partial.byte_offset, 0);
    encoder.setBuffer(dy.buffer, dy.byte_offset, 1);
    encoder.setBuffer(xp.buffer, xp.byte_offset, 2);
    encoder.setBytes(&p, sizeof p, 3);
    dispatch(encoder, grid_x, g.groups * tiles_g, l.chunks);
  } else {
    p.chunks = 0;
  }
  encodeSumChunks(encoder, pipelines, dtype, p, dw, partial);
}

WeightGradLayout weightGradLayout(DType dtype, const Conv2dGeometry& g) {
  WeightGradLayout l;
  l.pad = weightGradPad(g, true);
  const Conv2dPadParams& p = l.pad;
  // Room after Xt: a thread reads a whole tile of input channels (up to kConvTilePMax)
  // even where a group has fewer.
  l.input_bytes = alignUp(static_cast<size_t>(g.N * p.Hp * p.Wp * g.Cx + kConvTilePMax) * elementSize(dtype));
  const Conv2dRowChunks c = conv2dWeightGradChunks(g);
  l.rows_per_chunk = c.rows_per_chunk;
  l.chunks = c.chunks;
  l.partial_bytes = static_cast<size_t>(c.chunks * g.Cy * (g.Cx / g.groups) * g.KH * g.KW) * sizeof(float);
  return l;
}

WeightGradLayout tapsWeightGradLayout(DType dtype, const Conv2dGeometry& g) {
  WeightGradLayout l;
  l.pad = weightGradPad(g, false);
  const Conv2dPadParams& p = l.pad;
  l.input_bytes = alignUp(static_cast<size_t>(g.N * g.Cx * p.Hp * p.Wp) * elementSize(dtype));
  // About 2048 output pixels per chunk: fewer, longer threads measured faster on the
  // simulator (the 3 -> 32 stem at 16 x 32 x 32, CPU-ms per call: 2.7 at 256 pixels,
  // 1.8 at 1024, 1.66 at 2048, 1.61 at 4096); fewer chunks when the partial sums would
  // pass 4M floats.
  const int64_t rows = std::max<int64_t>(1, g.N * g.OH);
  const int64_t sums_per_chunk = std::max<int64_t>(1, g.Cy * (g.Cx / g.groups) * g.KH * g.KW);
  const int64_t preferred_rows = std::max<int64_t>(1, 2048 / std::max<int64_t>(1, g.OW));
  const Conv2dRowChunks c = boundedChunks(rows, preferred_rows, sums_per_chunk);
  l.rows_per_chunk = c.rows_per_chunk;
  l.chunks = c.chunks;
  l.partial_bytes = static_cast<size_t>(l.chunks * sums_per_chunk) * sizeof(float);
  return l;
}

}  // namespace

int64_t conv2dPackedWeightFloats(const Conv2dGeometry& g) {
  checkGroups(g);
  return g.groups * tilesPerGroup(g) * g.KH * g.KW * (g.Cx / g.groups) * kConvTileC;
}

void encodeConv2dPackWeight(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines, DType dtype,
                            const Conv2dGeometry& g, const ConvOperand& packed, const ConvOperand& w,
                            bool transposed) {
  checkGroups(g);
  if (conv2dPackedWeightFloats(g) == 0) return;
  Conv2dPackParams p{};
  p.ca = g.Cx / g.groups;
  p.cb = g.Cy / g.groups;
  p.groups = g.groups;
  p.tiles_g = tilesPerGroup(g);
  p.KH = g.KH;
  p.KW = g.KW;
  std::copy(w.strides, w.strides + 4, p.w_s);
  p.transposed = transposed;
  encoder.setComputePipeline(pipelines.builtin("conv2d_pack_weight_" + typeName(dtype)));
  encoder.setBuffer(packed.buffer, packed.byte_offset, 0);
  encoder.setBuffer(w.buffer, w.byte_offset, 1);
  encoder.setBytes(&p, sizeof p, 2);
  dispatch(encoder, p.ca, g.KH * g.KW, g.groups * p.tiles_g);
}

bool conv2dTiledForwardApplies(const Conv2dGeometry& g) {
  if (!groupsDivideChannels(g)) return false;
  if (g.Cx / g.groups < 2 || g.KH < 1 || g.KW < 1) return false;
  return g.stride[1] == 1 || g.KW == 1;
}

std::optional<Conv2dGeometry> conv2dInputGradAsForward(const Conv2dGeometry& g) {
  if (g.stride[0] != 1 || g.stride[1] != 1) return std::nullopt;
  Conv2dGeometry t;
  t.N = g.N;
  t.Cx = g.Cy;
  t.H = g.OH;
  t.W = g.OW;
  t.Cy = g.Cx;
  t.OH = g.H;
  t.OW = g.W;
  t.KH = g.KH;
  t.KW = g.KW;
  t.groups = g.groups;
  for (int d = 0; d < 2; ++d) {
    t.stride[d] = 1;
    t.dilation[d] = g.dilation[d];
    t.pad[d] = g.dilation[d] * ((d == 0 ? g.KH : g.KW) - 1) - g.pad[d];
  }
  return t;
}

size_t conv2dTiledForwardScratchBytes(DType dtype, const Conv2dGeometry& g, const ConvOperand& x) {
  const TiledInput t = tiledInputOf(g, x);
  if (!t.copy) return 0;
  // The copy, and room after it for a last line shorter than a tile.
  return alignUp(static_cast<size_t>(g.N * g.Cx * t.pad.Hp * t.pad.Wp + kConvTilePMax) * elementSize(dtype));
}

void encodeConv2dTiledForward(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines, DType dtype,
                              const Conv2dGeometry& g, const ConvOperand& y, const ConvOperand& x,
                              const ConvOperand& packed_w, const ConvOperand* bias, const ConvOperand& scratch) {
  rt::check(conv2dTiledForwardApplies(g), ErrorKind::Validation, "conv2d: the tiled kernel does not apply");
  if (g.N == 0 || g.Cy == 0 || g.OH == 0 || g.OW == 0) return;
  const TiledInput t = tiledInputOf(g, x);
  ConvOperand xin = x;
  if (t.copy) {
    rt::check(scratch.buffer != nullptr, ErrorKind::Validation, "conv2d: the tiled kernel needs its scratch");
    encodePadInput(encoder, pipelines, dtype, t.pad, scratch, x);
    xin = scratch;
  }
  Conv2dTiledParams p{};
  p.N = g.N; p.Cx = g.Cx; p.H = t.H; p.W = t.W;
  p.Cy = g.Cy; p.OH = g.OH; p.OW = g.OW;
  p.KH = g.KH; p.KW = g.KW;
  p.stride_h = t.stride_h;
  p.dil_h = g.dilation[0];
  p.dil_w = g.dilation[1];
  p.cx_g = g.Cx / g.groups;
  p.cy_g = g.Cy / g.groups;
  p.tiles_g = tilesPerGroup(g);
  std::copy(t.x_s, t.x_s + 3, p.x_s);
  std::copy(y.strides, y.strides + 4, p.y_s);
  p.has_bias = bias != nullptr;
  p.b_s = bias ? bias->strides[0] : 0;
  p.flat = t.flat();
  encoder.setComputePipeline(pipelines.builtin("conv2d_tiled_" + typeName(dtype)));
  bindForwardOperands(encoder, y, xin, packed_w, bias);
  encoder.setBytes(&p, sizeof p, 4);
  const int64_t slots = t.flat() ? ceilDiv(flatLineLength(g, t.x_s[2]), kConvTileSlot)
                                    : g.OH * ceilDiv(g.OW, kConvTileSlot);
  dispatch(encoder, slots, g.groups * p.tiles_g, g.N);
}

bool conv2dTiledBackwardWeightApplies(const Conv2dGeometry& g) {
  if (!groupsDivideChannels(g)) return false;
  return g.Cx / g.groups >= kConvTileC && g.Cy / g.groups >= kConvTileC && g.KH >= 1 && g.KW >= 1;
}

Conv2dRowChunks conv2dWeightGradChunks(const Conv2dGeometry& g) {
  // About 1024 output pixels per chunk keep a threadgroup's slice of dY and X in cache
  // (measured on the simulator: 2-3x faster than 4096 or whole images); more chunks,
  // down to 256 pixels, when the grid would otherwise have fewer than 4096 threads,
  // which a GPU needs. Fewer when the partial sums (read again by conv2d_sum_chunks)
  // would pass 4M floats.
  const int64_t rows = std::max<int64_t>(1, g.N * g.OH);
  const int64_t ow = std::max<int64_t>(1, g.OW);
  const int64_t cx_g = g.Cx / std::max<int64_t>(1, g.groups), cy_g = g.Cy / std::max<int64_t>(1, g.groups);
  const int64_t tiles = std::max<int64_t>(
      1, g.groups * ceilDiv(cy_g, kConvTileC) * ceilDiv(cx_g, kConvTileC) * g.KH * g.KW);
  const int64_t sums_per_chunk = std::max<int64_t>(1, g.Cy * cx_g * g.KH * g.KW);
  int64_t rows_per_chunk = std::max<int64_t>(1, 1024 / ow);
  const int64_t min_rows = std::max<int64_t>(1, 256 / ow);
  while (rows_per_chunk > min_rows && tiles * ceilDiv(rows, rows_per_chunk) < 4096)
    rows_per_chunk = std::max(min_rows, rows_per_chunk / 2);
  return boundedChunks(rows, rows_per_chunk, sums_per_chunk);
}

size_t conv2dTiledBackwardWeightScratchBytes(DType dtype, const Conv2dGeometry& g) {
  return weightGradLayout(dtype, g).scratchBytes();
}

void encodeConv2dTiledBackwardWeight(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines, DType dtype,
                                     const Conv2dGeometry& g, const ConvOperand& dw, const ConvOperand& dy,
                                     const ConvOperand& x, const ConvOperand& scratch) {
  rt::check(conv2dTiledBackwardWeightApplies(g), ErrorKind::Validation,
            "conv2d: the tiled weight-gradient kernel does not apply");
  if (g.Cy == 0 || g.KH == 0 || g.KW == 0) return;
  rt::check(scratch.buffer != nullptr, ErrorKind::Validation, "conv2d: the tiled kernel needs its scratch");
  encodeWeightGrad(encoder, pipelines, dtype, "conv2d_tiled_bwd_w", g, weightGradLayout(dtype, g), tilesPerGroup(g),
                   ceilDiv(g.Cx / g.groups, kConvTileSlot) * g.KH * g.KW, dw, dy, x, scratch);
}

// conv2d_taps_bwd_w's TAPS_T (taps per thread) and TAPS_OC (output channels per thread).
constexpr int64_t kTapsPerThread = 9;
constexpr int64_t kTapsOutputChannels = 2;

bool conv2dTapsBackwardWeightApplies(const Conv2dGeometry& g) {
  if (!groupsDivideChannels(g) || g.Cx == 0 || g.Cy == 0) return false;
  return g.KH >= 1 && g.KW >= 1 && !conv2dTiledBackwardWeightApplies(g);
}

size_t conv2dTapsBackwardWeightScratchBytes(DType dtype, const Conv2dGeometry& g) {
  return tapsWeightGradLayout(dtype, g).scratchBytes();
}

void encodeConv2dTapsBackwardWeight(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines, DType dtype,
                                    const Conv2dGeometry& g, const ConvOperand& dw, const ConvOperand& dy,
                                    const ConvOperand& x, const ConvOperand& scratch) {
  rt::check(conv2dTapsBackwardWeightApplies(g), ErrorKind::Validation,
            "conv2d: the taps weight-gradient kernel does not apply");
  rt::check(scratch.buffer != nullptr, ErrorKind::Validation, "conv2d: the taps kernel needs its scratch");
  const int64_t tiles_g = ceilDiv(g.Cy / g.groups, kTapsOutputChannels);
  encodeWeightGrad(encoder, pipelines, dtype, "conv2d_taps_bwd_w", g, tapsWeightGradLayout(dtype, g), tiles_g,
                   (g.Cx / g.groups) * ceilDiv(g.KH * g.KW, kTapsPerThread), dw, dy, x, scratch);
}

}  // namespace metalx::kernels
