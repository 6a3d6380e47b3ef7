// The fast convolution launchers (backend/ops/conv2d/conv2d_tiled.h, conv2d_depthwise.h)
// without torch: which geometries each path takes, the row chunks of the weight
// gradient, the input gradient as a forward, and the kernels' results against a
// double-precision host reference, with scratch and outputs at buffer offsets and
// outputs in a strided layout.
#include <cmath>
#include <random>

#include "conv2d_depthwise.h"
#include "conv2d_tiled.h"
#include "test_support.h"

namespace metalx::kernels::testing {
namespace {

using rt::testing::dev;

Conv2dGeometry geometry(int64_t n, int64_t cx, int64_t h, int64_t w, int64_t cy, int64_t k, int64_t stride = 1,
                        int64_t pad = 0, int64_t dil = 1, int64_t groups = 1) {
  Conv2dGeometry g;
  g.N = n; g.Cx = cx; g.H = h; g.W = w; g.Cy = cy; g.KH = g.KW = k; g.groups = groups;
  g.stride[0] = g.stride[1] = stride;
  g.pad[0] = g.pad[1] = pad;
  g.dilation[0] = g.dilation[1] = dil;
  g.OH = (h + 2 * pad - dil * (k - 1) - 1) / stride + 1;
  g.OW = (w + 2 * pad - dil * (k - 1) - 1) / stride + 1;
  return g;
}

TEST(Conv2dLaunchers, WhichPathApplies) {
  EXPECT_TRUE(conv2dTiledForwardApplies(geometry(1, 16, 8, 8, 16, 3, 1, 1)));
  EXPECT_TRUE(conv2dTiledForwardApplies(geometry(1, 16, 8, 8, 16, 1, 2)));   // strided 1x1: subsampled
  EXPECT_FALSE(conv2dTiledForwardApplies(geometry(1, 16, 8, 8, 16, 3, 2)));  // strided 3x3
  EXPECT_FALSE(conv2dTiledForwardApplies(geometry(1, 8, 8, 8, 8, 3, 1, 1, 1, 8)));  // depthwise
  EXPECT_TRUE(conv2dDepthwise3Applies(geometry(1, 8, 8, 8, 8, 3, 1, 1, 1, 8)));
  EXPECT_FALSE(conv2dDepthwise3Applies(geometry(1, 8, 8, 8, 16, 3, 1, 1, 1, 8)));  // multiplier 2
  EXPECT_FALSE(conv2dDepthwise3Applies(geometry(1, 8, 12, 12, 8, 5, 1, 2, 1, 8)));  // 5x5
  EXPECT_TRUE(conv2dTiledBackwardWeightApplies(geometry(1, 8, 8, 8, 8, 3)));
  EXPECT_FALSE(conv2dTiledBackwardWeightApplies(geometry(1, 4, 8, 8, 8, 3)));  // < 8 input channels per group
}

TEST(Conv2dLaunchers, InputGradAsForward) {
  const Conv2dGeometry g = geometry(2, 16, 10, 9, 24, 3, 1, 1, 2);
  const auto t = conv2dInputGradAsForward(g);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->Cx, 24);
  EXPECT_EQ(t->Cy, 16);
  EXPECT_EQ(t->pad[0], 2 * 2 - 1);  // dilation * (k - 1) - pad
  // Its output is exactly X's size.
  EXPECT_EQ((t->H + 2 * t->pad[0] - t->dilation[0] * (t->KH - 1) - 1) + 1, g.H);
  EXPECT_FALSE(conv2dInputGradAsForward(geometry(2, 16, 10, 10, 16, 3, 2, 1)).has_value());
}

TEST(Conv2dLaunchers, WeightGradChunksCoverEveryRowAndGiveEnoughThreads) {
  for (const Conv2dGeometry& g : {geometry(8, 64, 56, 56, 64, 3, 1, 1), geometry(8, 256, 14, 14, 256, 3, 1, 1),
                                  geometry(8, 64, 56, 56, 256, 1), geometry(1, 8, 3, 3, 8, 3, 1, 1)}) {
    const Conv2dRowChunks c = conv2dWeightGradChunks(g);
    const int64_t rows = g.N * g.OH;
    EXPECT_GE(c.rows_per_chunk, 1);
    EXPECT_GE(c.chunks * c.rows_per_chunk, rows);
    EXPECT_LT((c.chunks - 1) * c.rows_per_chunk, rows);  // no empty chunk
    const int64_t tiles = (g.Cy / 8) * (g.Cx / 8) * g.KH * g.KW;
    // Enough threads for a GPU, unless chunks would drop below 256 output pixels.
    if (tiles * c.chunks < 4096) EXPECT_LE(c.rows_per_chunk * g.OW, 511) << g.Cx << "x" << g.H;
  }
}

// ---- results against a host reference ----

struct Tensor4 {
  int64_t d[4];
  int64_t s[4];
  size_t offset;  // elements before [0, 0, 0, 0] in the buffer
  std::vector<float> host;  // the whole buffer
  rt::BufferPtr buffer;

  float& at(int64_t a, int64_t b, int64_t c, int64_t e) { return host[offset + a * s[0] + b * s[1] + c * s[2] + e * s[3]]; }
  ConvOperand operand() const {
    ConvOperand o;
    o.buffer = buffer;
    o.byte_offset = offset * sizeof(float);
    std::copy(s, s + 4, o.strides);
    return o;
  }
};

// A dense tensor, NCHW or channels-last, `offset` elements into its buffer.
Tensor4 makeTensor(int64_t a, int64_t b, int64_t c, int64_t e, bool channels_last, size_t offset, std::mt19937& rng) {
  Tensor4 t{{a, b, c, e}, {0, 0, 0, 0}, offset, {}, nullptr};
  if (channels_last) {
    t.s[1] = 1; t.s[3] = b; t.s[2] = b * e; t.s[0] = b * e * c;
  } else {
    t.s[3] = 1; t.s[2] = e; t.s[1] = e * c; t.s[0] = b * e * c;
  }
  std::normal_distribution<float> nd;
  t.host.resize(offset + a * b * c * e + 3);
  for (float& v : t.host) v = nd(rng);
  t.buffer = rt::testing::bufferFrom(t.host);
  return t;
}

double refForward(Tensor4& x, Tensor4& w, const Conv2dGeometry& g, int64_t n, int64_t oc, int64_t oh, int64_t ow) {
  const int64_t cxg = g.Cx / g.groups, cyg = g.Cy / g.groups, grp = oc / cyg;
  double s = 0;
  for (int64_t ic = 0; ic < cxg; ++ic)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const int64_t ih = oh * g.stride[0] - g.pad[0] + kh * g.dilation[0];
        const int64_t iw = ow * g.stride[1] - g.pad[1] + kw * g.dilation[1];
        if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
        s += double(x.at(n, grp * cxg + ic, ih, iw)) * w.at(oc, ic, kh, kw);
      }
  return s;
}

class Conv2dLauncherResults : public ::testing::Test {
 protected:
  void SetUp() override {
    queue = dev().newCommandQueue();
    pipelines = std::make_unique<rt::PipelineCache>(dev());
  }
  ConvOperand scratchOf(size_t bytes) {
    // At an offset: the launchers must honour the operand's byte offset.
    scratch_buffer = dev().newBuffer(bytes + 512);
    ConvOperand o;
    o.buffer = scratch_buffer;
    o.byte_offset = 256;
    return o;
  }
  rt::CommandQueuePtr queue;
  std::unique_ptr<rt::PipelineCache> pipelines;
  rt::BufferPtr scratch_buffer;
  std::mt19937 rng{42};
};

// A KH x 1 kernel with vertical stride 2: conv2d_tiled's row lines (not flat).
Conv2dGeometry tallKernelStride2(int64_t w) {
  Conv2dGeometry g = geometry(1, 8, 9, w, 8, 1);
  g.KH = 3;
  g.stride[0] = 2;
  g.OH = (g.H - 3) / 2 + 1;
  return g;
}

TEST_F(Conv2dLauncherResults, TiledForwardMatchesReference) {
  // Padded copies read as flat lines (with padding, dilation, a subsampled 1x1, groups, an
  // image smaller than a tile), X read in place as a flat line (unpadded NCHW; channels-last
  // X is copied), and row lines, in place and copied (shorter than a tile).
  for (const Conv2dGeometry& g : {geometry(2, 12, 9, 11, 20, 3, 1, 1), geometry(1, 16, 7, 5, 8, 3, 1, 2, 2),
                                  geometry(2, 16, 9, 9, 16, 1, 2), geometry(1, 32, 6, 10, 32, 3, 1, 1, 1, 4),
                                  geometry(1, 8, 4, 4, 8, 3, 1, 1), geometry(2, 16, 9, 11, 8, 3),
                                  tallKernelStride2(40), tallKernelStride2(10)}) {
    for (bool cl : {false, true}) {
      Tensor4 x = makeTensor(g.N, g.Cx, g.H, g.W, cl, 5, rng);
      Tensor4 w = makeTensor(g.Cy, g.Cx / g.groups, g.KH, g.KW, false, 0, rng);
      Tensor4 y = makeTensor(g.N, g.Cy, g.OH, g.OW, !cl, 7, rng);
      Tensor4 b = makeTensor(g.Cy, 1, 1, 1, false, 1, rng);
      auto packed = dev().newBuffer(conv2dPackedWeightFloats(g) * sizeof(float));
      ConvOperand p;
      p.buffer = packed;
      const ConvOperand scratch = scratchOf(std::max<size_t>(16, conv2dTiledForwardScratchBytes(DType::Float32, g, x.operand())));
      const ConvOperand bias = b.operand();
      auto cb = rt::testing::runCompute(*queue, [&](rt::ComputeEncoder& e) {
        encodeConv2dPackWeight(e, *pipelines, DType::Float32, g, p, w.operand(), false);
        encodeConv2dTiledForward(e, *pipelines, DType::Float32, g, y.operand(), x.operand(), p, &bias, scratch);
      });
      ASSERT_EQ(cb->status(), rt::CommandBufferStatus::Completed) << cb->error();
      const std::vector<float> before = y.host;
      y.host = rt::testing::read<float>(y.buffer, y.host.size());
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t oc = 0; oc < g.Cy; ++oc)
          for (int64_t oh = 0; oh < g.OH; ++oh)
            for (int64_t ow = 0; ow < g.OW; ++ow)
              ASSERT_NEAR(y.at(n, oc, oh, ow), refForward(x, w, g, n, oc, oh, ow) + b.at(oc, 0, 0, 0), 1e-3)
                  << "Cx " << g.Cx << " cl " << cl << " at " << n << "," << oc << "," << oh << "," << ow;
      // Nothing outside Y was written.
      for (size_t i = 0; i < y.offset; ++i) EXPECT_EQ(y.host[i], before[i]);
    }
  }
}

TEST_F(Conv2dLauncherResults, TiledWeightGradientMatchesReference) {
  // Input channels per group below, at, and above a tile of every build (8 or 32: the
  // last tile overlaps), and groups (a small group's tile reads into the next group).
  for (const Conv2dGeometry& g : {geometry(3, 8, 20, 20, 16, 3, 1, 1), geometry(2, 16, 9, 7, 8, 3, 2, 1),
                                  geometry(2, 24, 6, 6, 12, 1), geometry(1, 40, 7, 7, 16, 3, 1, 1),
                                  geometry(2, 24, 6, 6, 16, 3, 1, 1, 1, 2)}) {
    Tensor4 x = makeTensor(g.N, g.Cx, g.H, g.W, false, 3, rng);
    Tensor4 dy = makeTensor(g.N, g.Cy, g.OH, g.OW, true, 0, rng);
    Tensor4 dw = makeTensor(g.Cy, g.Cx / g.groups, g.KH, g.KW, false, 2, rng);
    const ConvOperand scratch = scratchOf(conv2dTiledBackwardWeightScratchBytes(DType::Float32, g));
    auto cb = rt::testing::runCompute(*queue, [&](rt::ComputeEncoder& e) {
      encodeConv2dTiledBackwardWeight(e, *pipelines, DType::Float32, g, dw.operand(), dy.operand(), x.operand(), scratch);
    });
    ASSERT_EQ(cb->status(), rt::CommandBufferStatus::Completed) << cb->error();
    dw.host = rt::testing::read<float>(dw.buffer, dw.host.size());
    const int64_t cx_g = g.Cx / g.groups, cy_g = g.Cy / g.groups;
    for (int64_t oc = 0; oc < g.Cy; ++oc)
      for (int64_t ic = 0; ic < cx_g; ++ic)
        for (int64_t kh = 0; kh < g.KH; ++kh)
          for (int64_t kw = 0; kw < g.KW; ++kw) {
            const int64_t cx = oc / cy_g * cx_g + ic;  // X's channel
            double s = 0;
            for (int64_t n = 0; n < g.N; ++n)
              for (int64_t oh = 0; oh < g.OH; ++oh)
                for (int64_t ow = 0; ow < g.OW; ++ow) {
                  const int64_t ih = oh * g.stride[0] - g.pad[0] + kh, iw = ow * g.stride[1] - g.pad[1] + kw;
                  if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) s += double(dy.at(n, oc, oh, ow)) * x.at(n, cx, ih, iw);
                }
            ASSERT_NEAR(dw.at(oc, ic, kh, kw), s, 1e-3) << "chunks " << conv2dWeightGradChunks(g).chunks;
          }
  }
}

TEST_F(Conv2dLauncherResults, Depthwise3ForwardAndWeightGradientMatchReference) {
  // Both kernels read X in place: windows at the borders (padding), wholly inside X
  // (the larger images), NCHW and channels-last X, no padding, a 2 x 2 kernel.
  for (const Conv2dGeometry& gf : {geometry(2, 6, 9, 13, 6, 3, 1, 1, 1, 6), geometry(1, 4, 30, 40, 4, 3, 1, 1, 1, 4),
                                   geometry(1, 4, 20, 25, 4, 3, 1, 0, 1, 4), geometry(1, 3, 16, 19, 3, 2, 1, 1, 1, 3)}) {
    for (bool cl : {true, false}) {
      Tensor4 xf = makeTensor(gf.N, gf.Cx, gf.H, gf.W, cl, 1, rng);
      Tensor4 wf = makeTensor(gf.Cy, 1, gf.KH, gf.KW, false, 0, rng);
      Tensor4 yf = makeTensor(gf.N, gf.Cy, gf.OH, gf.OW, false, 4, rng);
      auto cb = rt::testing::runCompute(*queue, [&](rt::ComputeEncoder& e) {
        encodeConv2dDepthwise3Forward(e, *pipelines, DType::Float32, gf, yf.operand(), xf.operand(), wf.operand(),
                                      nullptr, false);
      });
      ASSERT_EQ(cb->status(), rt::CommandBufferStatus::Completed) << cb->error();
      yf.host = rt::testing::read<float>(yf.buffer, yf.host.size());
      for (int64_t n = 0; n < gf.N; ++n)
        for (int64_t c = 0; c < gf.Cy; ++c)
          for (int64_t oh = 0; oh < gf.OH; ++oh)
            for (int64_t ow = 0; ow < gf.OW; ++ow)
              ASSERT_NEAR(yf.at(n, c, oh, ow), refForward(xf, wf, gf, n, c, oh, ow), 1e-4)
                  << "H " << gf.H << " cl " << cl << " at " << n << "," << c << "," << oh << "," << ow;
      // dW through the same windows, with dY := Y.
      Tensor4 dwf = makeTensor(gf.Cy, 1, gf.KH, gf.KW, false, 0, rng);
      const ConvOperand scratch = scratchOf(conv2dDepthwise3BackwardWeightScratchBytes(DType::Float32, gf));
      cb = rt::testing::runCompute(*queue, [&](rt::ComputeEncoder& e) {
        encodeConv2dDepthwise3BackwardWeight(e, *pipelines, DType::Float32, gf, dwf.operand(), yf.operand(),
                                             xf.operand(), scratch);
      });
      ASSERT_EQ(cb->status(), rt::CommandBufferStatus::Completed) << cb->error();
      dwf.host = rt::testing::read<float>(dwf.buffer, dwf.host.size());
      for (int64_t c = 0; c < gf.Cy; ++c)
        for (int64_t kh = 0; kh < gf.KH; ++kh)
          for (int64_t kw = 0; kw < gf.KW; ++kw) {
            double s = 0;
            for (int64_t n = 0; n < gf.N; ++n)
              for (int64_t oh = 0; oh < gf.OH; ++oh)
                for (int64_t ow = 0; ow < gf.OW; ++ow) {
                  const int64_t ih = oh - gf.pad[0] + kh, iw = ow - gf.pad[1] + kw;
                  if (ih >= 0 && ih < gf.H && iw >= 0 && iw < gf.W) s += double(yf.at(n, c, oh, ow)) * xf.at(n, c, ih, iw);
                }
            ASSERT_NEAR(dwf.at(c, 0, kh, kw), s, 1e-3) << "H " << gf.H << " cl " << cl << " tap " << kh << "," << kw;
          }
    }
  }
  const Conv2dGeometry g = geometry(2, 6, 9, 13, 6, 3, 1, 1, 1, 6);
  Tensor4 x = makeTensor(g.N, g.Cx, g.H, g.W, true, 1, rng);
  Tensor4 w = makeTensor(g.Cy, 1, 3, 3, false, 0, rng);
  Tensor4 y = makeTensor(g.N, g.Cy, g.OH, g.OW, false, 4, rng);
  Tensor4 dw = makeTensor(g.Cy, 1, 3, 3, false, 0, rng);
  const ConvOperand scratch = scratchOf(conv2dDepthwise3BackwardWeightScratchBytes(DType::Float32, g));
  auto cb = rt::testing::runCompute(*queue, [&](rt::ComputeEncoder& e) {
    encodeConv2dDepthwise3Forward(e, *pipelines, DType::Float32, g, y.operand(), x.operand(), w.operand(), nullptr,
                                  false);
  });
  ASSERT_EQ(cb->status(), rt::CommandBufferStatus::Completed) << cb->error();
  y.host = rt::testing::read<float>(y.buffer, y.host.size());
  // dW from dY := the output just computed.
  cb = rt::testing::runCompute(*queue, [&](rt::ComputeEncoder& e) {
    encodeConv2dDepthwise3BackwardWeight(e, *pipelines, DType::Float32, g, dw.operand(), y.operand(), x.operand(),
                                         scratch);
  });
  ASSERT_EQ(cb->status(), rt::CommandBufferStatus::Completed) << cb->error();
  dw.host = rt::testing::read<float>(dw.buffer, dw.host.size());
  for (int64_t c = 0; c < g.Cy; ++c)
    for (int64_t kh = 0; kh < 3; ++kh)
      for (int64_t kw = 0; kw < 3; ++kw) {
        double s = 0;
        for (int64_t n = 0; n < g.N; ++n)
          for (int64_t oh = 0; oh < g.OH; ++oh)
            for (int64_t ow = 0; ow < g.OW; ++ow) {
              const int64_t ih = oh - 1 + kh, iw = ow - 1 + kw;
              if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) s += double(y.at(n, c, oh, ow)) * x.at(n, c, ih, iw);
            }
        ASSERT_NEAR(dw.at(c, 0, kh, kw), s, 1e-3);
      }
}

TEST(Conv2dLaunchersValidation, RefusesGeometriesTheyDoNotRun) {
  auto queue = dev().newCommandQueue();
  rt::PipelineCache pipelines(dev());
  const Conv2dGeometry g = geometry(1, 8, 8, 8, 8, 3, 1, 1, 1, 8);  // depthwise
  ConvOperand none;
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  EXPECT_RT_ERROR(encodeConv2dTiledForward(*enc, pipelines, DType::Float32, g, none, none, none, nullptr, none),
                  rt::ErrorKind::Validation, "tiled kernel does not apply");
  EXPECT_RT_ERROR(encodeConv2dTiledBackwardWeight(*enc, pipelines, DType::Float32, geometry(1, 4, 8, 8, 8, 3), none,
                                                  none, none, none),
                  rt::ErrorKind::Validation, "does not apply");
  EXPECT_RT_ERROR(encodeConv2dDepthwise3Forward(*enc, pipelines, DType::Float32, geometry(1, 8, 8, 8, 8, 3), none,
                                                none, none, nullptr, false),
                  rt::ErrorKind::Validation, "does not apply");
  enc->endEncoding();
}

}  // namespace
}  // namespace metalx::kernels::testing
