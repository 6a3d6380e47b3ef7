// Upsampling on metalx, forward and backward: upsample_nearest1d/2d,
// _upsample_nearest_exact1d/2d, upsample_linear1d and upsample_bilinear2d (align_corners
// either way, scale factors given or not) — what F.interpolate runs for these modes —
// with their out= forms. torch's structured meta functions check the arguments and size
// the outputs (keeping channels_last), so errors are CPU's; the kernels
// (kernels/upsample.metal) read and write every tensor through its strides. The
// backward gathers per input element (no atomics, deterministic). Float32, float16 and
// bfloat16 run natively (float arithmetic); other dtypes (uint8, float64) run CPU's
// kernels through the fallback.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/ops/_upsample_nearest_exact1d_backward_meta.h>
#include <ATen/ops/_upsample_nearest_exact1d_meta.h>
#include <ATen/ops/_upsample_nearest_exact2d_backward_meta.h>
#include <ATen/ops/_upsample_nearest_exact2d_meta.h>
#include <ATen/ops/upsample_bilinear2d_backward_meta.h>
#include <ATen/ops/upsample_bilinear2d_meta.h>
#include <ATen/ops/upsample_linear1d_backward_meta.h>
#include <ATen/ops/upsample_linear1d_meta.h>
#include <ATen/ops/upsample_nearest1d_backward_meta.h>
#include <ATen/ops/upsample_nearest1d_meta.h>
#include <ATen/ops/upsample_nearest2d_backward_meta.h>
#include <ATen/ops/upsample_nearest2d_meta.h>
#include <torch/library.h>

#include "launch/structured.h"
#include "launch/threads.h"
#include "ops/spatial_launch.h"

namespace metalx {
namespace {

using at::IntArrayRef;
using at::Tensor;
using Scale = std::optional<double>;

// Mirrors kernels/upsample.metal's UpsampleShape.
struct UpsampleShape {
  int64_t batch = 1, channels = 1, in_h = 1, in_w = 1, out_h = 1, out_w = 1;
  int64_t in_s[4] = {}, out_s[4] = {};
  float scale_h = 1, scale_w = 1;
  uint32_t mode = 0;
  uint32_t align_corners = 0;
  uint32_t round_weights = 0;
};

enum Mode : uint32_t { kNearest = 0, kNearestExact = 1, kLinear = 2 };

launch::KernelFamily forward_kernels("upsample", launch::kFloatTypes);
launch::KernelFamily backward_kernels("upsample_backward", launch::kFloatTypes);

// CPU's compute_scales_value<float>: the reciprocal of a given positive scale factor,
// else input / output.
float stepOf(Scale scale, int64_t in, int64_t out) {
  return scale.has_value() && *scale > 0 ? static_cast<float>(1.0 / *scale)
                                         : static_cast<float>(in) / static_cast<float>(out);
}

// CPU's area_pixel_compute_scale<float> for linear modes.
float linearStepOf(bool align_corners, Scale scale, int64_t in, int64_t out) {
  if (align_corners) return out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
  return stepOf(scale, in, out);
}

// The kernels' shape for `input`-sized and `output`-sized tensors of an op with
// `spatial` dims; `in`/`out` are the tensors whose strides the kernel uses.
UpsampleShape shapeOf(Mode mode, int spatial, bool align_corners, Scale scale_h, Scale scale_w, const Tensor& in,
                      const Tensor& out) {
  const spatial::Planes pi = spatial::planesOf(in, spatial), po = spatial::planesOf(out, spatial);
  UpsampleShape s;
  s.batch = pi.size[0], s.channels = pi.size[1];
  s.in_h = pi.size[2], s.in_w = pi.size[3], s.out_h = po.size[2], s.out_w = po.size[3];
  std::copy(pi.stride, pi.stride + 4, s.in_s);
  std::copy(po.stride, po.stride + 4, s.out_s);
  s.mode = mode;
  s.align_corners = align_corners;
  if (mode == kLinear) {
    s.scale_h = linearStepOf(align_corners, scale_h, s.in_h, s.out_h);
    s.scale_w = linearStepOf(align_corners, scale_w, s.in_w, s.out_w);
  } else {
    s.scale_h = stepOf(scale_h, s.in_h, s.out_h);
    s.scale_w = stepOf(scale_w, s.in_w, s.out_w);
  }
  return s;
}

// Whether CPU's linear forward runs its generic kernel, which keeps half/bfloat16
// weights in that dtype, rather than its vectorised one (float weights): always in 1-d;
// in 2-d unless the input is channels_last with more than 3 channels, the output is
// small (height + width <= 128), or one thread interpolates 3 channels
// (UpSampleKernel.cpp's conditions). Matching it keeps results CPU's to the bit.
bool cpuTakesGenericLinear(const Tensor& input, const Tensor& output) {
  if (input.dim() < 4) return true;
  const bool channels_last = input.is_contiguous(at::MemoryFormat::ChannelsLast) && input.size(1) > 3;
  const bool small = output.size(-2) + output.size(-1) <= 128;
  const bool one_thread_rgb = at::get_num_threads() == 1 && input.size(1) == 3;
  return !(channels_last || small || one_thread_rgb);
}

// The arguments of an op after its sizes: (align_corners,) then one scale per spatial dim.
struct Options {
  bool align_corners = false;
  Scale scale_h, scale_w;
};
Options optionsOf(Scale w) { return {false, std::nullopt, w}; }
Options optionsOf(Scale h, Scale w) { return {false, h, w}; }
Options optionsOf(bool align, Scale w) { return {align, std::nullopt, w}; }
Options optionsOf(bool align, Scale h, Scale w) { return {align, h, w}; }

// One op: its meta classes, aten name (for the fallback), mode and spatial dims.
#define METALX_UPSAMPLE_OP(Struct, op, mode, spatial)                    \
  struct Struct {                                                       \
    using Meta = at::meta::structured_##op;                             \
    using BackwardMeta = at::meta::structured_##op##_backward;          \
    static constexpr const char* kName = "aten::" #op;                  \
    static constexpr const char* kBackwardName = "aten::" #op "_backward"; \
    static constexpr Mode kMode = mode;                                 \
    static constexpr int kSpatial = spatial;                            \
  };
METALX_UPSAMPLE_OP(Nearest1d, upsample_nearest1d, kNearest, 1)
METALX_UPSAMPLE_OP(NearestExact1d, _upsample_nearest_exact1d, kNearestExact, 1)
METALX_UPSAMPLE_OP(Linear1d, upsample_linear1d, kLinear, 1)
METALX_UPSAMPLE_OP(Nearest2d, upsample_nearest2d, kNearest, 2)
METALX_UPSAMPLE_OP(NearestExact2d, _upsample_nearest_exact2d, kNearestExact, 2)
METALX_UPSAMPLE_OP(Bilinear2d, upsample_bilinear2d, kLinear, 2)
#undef METALX_UPSAMPLE_OP

template <class Op, class... Args>
void forwardInto(const Tensor& self, const Tensor& out, IntArrayRef output_size, Args... args) {
  const auto type = spatial::floatKernelType(self.scalar_type());
  if (!type) {
    static const c10::OperatorHandle h = spatial::findOp(Op::kName, "out");
    launch::cpuFallbackOut(h, {out}, self, output_size, args...);
    return;
  }
  const Options o = optionsOf(args...);
  UpsampleShape s = shapeOf(Op::kMode, Op::kSpatial, o.align_corners, o.scale_h, o.scale_w, self, out);
  s.round_weights = Op::kMode == kLinear && self.scalar_type() != at::kFloat && cpuTakesGenericLinear(self, out);
  launch::encodeThreads(forward_kernels, launch::Variant::Plain, *type, {&self, &out}, s, static_cast<uint64_t>(out.numel()));
}

template <class Op, class... Args>
Tensor forward(const Tensor& self, IntArrayRef output_size, Args... args) {
  launch::FunctionalOp<typename Op::Meta> m;
  m.meta(self, output_size, args...);
  forwardInto<Op>(self, m.outputs[0], output_size, args...);
  return std::move(m.outputs[0]);
}

template <class Op, class... Args>
Tensor& forwardOut(const Tensor& self, IntArrayRef output_size, Args... args, Tensor& out) {
  launch::OutOp<typename Op::Meta> m(out);
  m.meta(self, output_size, args...);
  forwardInto<Op>(self, m.maybe_get_output(0), output_size, args...);
  m.finish();
  return out;
}

template <class Op, class... Args>
void backwardInto(const Tensor& grad_output, const Tensor& grad_input, IntArrayRef output_size,
                  IntArrayRef input_size, Args... args) {
  const auto type = spatial::floatKernelType(grad_output.scalar_type());
  if (!type) {
    static const c10::OperatorHandle h = spatial::findOp(Op::kBackwardName, "grad_input");
    launch::cpuFallbackOut(h, {grad_input}, grad_output, output_size, input_size, args...);
    return;
  }
  const Options o = optionsOf(args...);
  const UpsampleShape s =
      shapeOf(Op::kMode, Op::kSpatial, o.align_corners, o.scale_h, o.scale_w, grad_input, grad_output);
  launch::encodeThreads(backward_kernels, launch::Variant::Plain, *type, {&grad_output, &grad_input}, s,
                         static_cast<uint64_t>(grad_input.numel()));
}

template <class Op, class... Args>
Tensor backward(const Tensor& grad_output, IntArrayRef output_size, IntArrayRef input_size, Args... args) {
  launch::FunctionalOp<typename Op::BackwardMeta> m;
  m.meta(grad_output, output_size, input_size, args...);
  backwardInto<Op>(grad_output, m.outputs[0], output_size, input_size, args...);
  return std::move(m.outputs[0]);
}

template <class Op, class... Args>
Tensor& backwardOut(const Tensor& grad_output, IntArrayRef output_size, IntArrayRef input_size, Args... args,
                    Tensor& grad_input) {
  launch::OutOp<typename Op::BackwardMeta> m(grad_input);
  m.meta(grad_output, output_size, input_size, args...);
  backwardInto<Op>(grad_output, m.maybe_get_output(0), output_size, input_size, args...);
  m.finish();
  return grad_input;
}

// Registers an op's four overloads; `Args...` are its arguments after the size lists.
template <class Op, class... Args>
void registerOp(torch::Library& m, const char* name) {
  const std::string n = name;
  m.impl(n.c_str(), TORCH_FN((forward<Op, Args...>)));
  m.impl((n + ".out").c_str(), TORCH_FN((forwardOut<Op, Args...>)));
  m.impl((n + "_backward").c_str(), TORCH_FN((backward<Op, Args...>)));
  m.impl((n + "_backward.grad_input").c_str(), TORCH_FN((backwardOut<Op, Args...>)));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  registerOp<Nearest1d, Scale>(m, "upsample_nearest1d");
  registerOp<NearestExact1d, Scale>(m, "_upsample_nearest_exact1d");
  registerOp<Linear1d, bool, Scale>(m, "upsample_linear1d");
  registerOp<Nearest2d, Scale, Scale>(m, "upsample_nearest2d");
  registerOp<NearestExact2d, Scale, Scale>(m, "_upsample_nearest_exact2d");
  registerOp<Bilinear2d, bool, Scale, Scale>(m, "upsample_bilinear2d");
}

}  // namespace
}  // namespace metalx
