// Reflection and replication padding on metalx, 1-d and 2-d, forward and backward, with
// their out= forms: what F.pad(mode="reflect"/"replicate") runs for 2-d to 4-d inputs
// (constant padding is composite: constant_pad_nd fills and copies with native ops).
// The structured ops (reflection_pad1d, replication_pad1d/2d and the 1-d backwards) run
// torch's meta functions; reflection_pad2d and the 2-d backwards are not structured in
// torch, so their checks are written here with CPU's messages. The forward only moves
// elements, so it is native for every dtype up to 8 bytes but bool; the backward for float32,
// float16 and bfloat16 (float accumulation), other dtypes through the CPU fallback.
// Kernels: kernels/padding.metal (any strides, channels_last in place).
#include <ATen/ATen.h>
#include <ATen/native/Padding.h>
#include <ATen/ops/reflection_pad1d_backward_meta.h>
#include <ATen/ops/reflection_pad1d_meta.h>
#include <ATen/ops/replication_pad1d_backward_meta.h>
#include <ATen/ops/replication_pad1d_meta.h>
#include <ATen/ops/replication_pad2d_meta.h>
#include <torch/library.h>

#include "launch/structured.h"
#include "launch/threads.h"
#include "launch/torch_dtype.h"
#include "ops/spatial_launch.h"

namespace metalx {
namespace {

using at::IntArrayRef;
using at::Tensor;
using kernels::DType;

// Mirrors kernels/padding.metal's PadShape.
struct PadShape {
  int64_t batch = 1, channels = 1, in_h = 1, in_w = 1, out_h = 1, out_w = 1;
  int64_t pad_top = 0, pad_left = 0;
  int64_t in_s[4] = {}, out_s[4] = {};
  uint32_t reflect = 0;
};

launch::KernelFamily forward_kernels("pad", {DType::UInt8, DType::Int16, DType::Int32, DType::Int64});
launch::KernelFamily backward_kernels("pad_backward", launch::kFloatTypes);

// The kernel that moves `t`'s elements; bool has none, so it meets CPU's kernel (which
// does not take bool) through the fallback.
std::optional<DType> moveType(const Tensor& t) {
  if (t.scalar_type() == at::kBool) return std::nullopt;
  return launch::bitsDtype(t.element_size());
}

// `in` has the unpadded sizes, `out` the padded ones; padding is (left, right[, top, bottom]).
PadShape shapeOf(bool reflect, IntArrayRef padding, const Tensor& in, const Tensor& out) {
  const int spatial = static_cast<int>(padding.size() / 2);
  const spatial::Planes pi = spatial::planesOf(in, spatial), po = spatial::planesOf(out, spatial);
  PadShape s;
  s.batch = pi.size[0], s.channels = pi.size[1];
  s.in_h = pi.size[2], s.in_w = pi.size[3], s.out_h = po.size[2], s.out_w = po.size[3];
  s.pad_left = padding[0];
  s.pad_top = spatial == 2 ? padding[2] : 0;
  std::copy(pi.stride, pi.stride + 4, s.in_s);
  std::copy(po.stride, po.stride + 4, s.out_s);
  s.reflect = reflect;
  return s;
}

// One op: its aten name (for the fallback), mode and spatial dims.
struct PadOp {
  const char* name;
  const char* backward_name;
  bool reflect;
};
constexpr PadOp kReflect1d{"aten::reflection_pad1d", "aten::reflection_pad1d_backward", true};
constexpr PadOp kReflect2d{"aten::reflection_pad2d", "aten::reflection_pad2d_backward", true};
constexpr PadOp kReplicate1d{"aten::replication_pad1d", "aten::replication_pad1d_backward", false};
constexpr PadOp kReplicate2d{"aten::replication_pad2d", "aten::replication_pad2d_backward", false};

template <const PadOp& Op>
void forwardInto(const Tensor& self, IntArrayRef padding, const Tensor& out) {
  const auto type = moveType(self);
  if (!type) {
    static const c10::OperatorHandle h = spatial::findOp(Op.name, "out");
    launch::cpuFallbackOut(h, {out}, self, padding);
    return;
  }
  launch::encodeThreads(forward_kernels, launch::Variant::Plain, *type, {&self, &out}, shapeOf(Op.reflect, padding, self, out),
                         static_cast<uint64_t>(out.numel()));
}

template <const PadOp& Op>
void backwardInto(const Tensor& grad_output, const Tensor& self, IntArrayRef padding, const Tensor& grad_input) {
  const auto type = spatial::floatKernelType(grad_output.scalar_type());
  if (!type || grad_input.scalar_type() != grad_output.scalar_type()) {
    static const c10::OperatorHandle h = spatial::findOp(Op.backward_name, "grad_input");
    launch::cpuFallbackOut(h, {grad_input}, grad_output, self, padding);
    return;
  }
  launch::encodeThreads(backward_kernels, launch::Variant::Plain, *type, {&grad_output, &grad_input},
                         shapeOf(Op.reflect, padding, grad_input, grad_output),
                         static_cast<uint64_t>(grad_input.numel()));
}

// ---- structured ops: torch's meta functions ----

template <class Meta, const PadOp& Op>
Tensor structuredForward(const Tensor& self, IntArrayRef padding) {
  launch::FunctionalOp<Meta> m;
  m.meta(self, padding);
  forwardInto<Op>(self, padding, m.outputs[0]);
  return std::move(m.outputs[0]);
}

template <class Meta, const PadOp& Op>
Tensor& structuredForwardOut(const Tensor& self, IntArrayRef padding, Tensor& out) {
  launch::OutOp<Meta> m(out);
  m.meta(self, padding);
  forwardInto<Op>(self, padding, m.maybe_get_output(0));
  m.finish();
  return out;
}

template <class Meta, const PadOp& Op>
Tensor structuredBackward(const Tensor& grad_output, const Tensor& self, IntArrayRef padding) {
  launch::FunctionalOp<Meta> m;
  m.meta(grad_output, self, padding);
  backwardInto<Op>(grad_output, self, padding, m.outputs[0]);
  return std::move(m.outputs[0]);
}

template <class Meta, const PadOp& Op>
Tensor& structuredBackwardOut(const Tensor& grad_output, const Tensor& self, IntArrayRef padding,
                              Tensor& grad_input) {
  launch::OutOp<Meta> m(grad_input);
  m.meta(grad_output, self, padding);
  backwardInto<Op>(grad_output, self, padding, m.maybe_get_output(0));
  m.finish();
  return grad_input;
}

// ---- ops torch does not structure: CPU's checks ----

// reflection_pad2d's output sizes, after CPU's checks.
std::vector<int64_t> reflectionPad2dSizes(const Tensor& input, IntArrayRef padding) {
  at::native::padding::check_valid_input<2>(input, padding);
  const int64_t dim_w = input.dim() == 4 ? 3 : 2, dim_h = dim_w - 1;
  const int64_t in_h = input.size(dim_h), in_w = input.size(dim_w);
  const int64_t out_h = in_h + padding[2] + padding[3], out_w = in_w + padding[0] + padding[1];
  TORCH_CHECK(padding[0] < in_w && padding[1] < in_w,
              "Argument #4: Padding size should be less than the corresponding input dimension, but got: padding (",
              padding[0], ", ", padding[1], ") at dimension ", dim_w, " of input ", input.sizes());
  TORCH_CHECK(padding[2] < in_h && padding[3] < in_h,
              "Argument #6: Padding size should be less than the corresponding input dimension, but got: padding (",
              padding[2], ", ", padding[3], ") at dimension ", dim_h, " of input ", input.sizes());
  TORCH_CHECK(out_w >= 1 || out_h >= 1, "input (H: ", in_h, ", W: ", in_w,
              ") is too small. Calculated output H: ", out_h, " W: ", out_w);
  std::vector<int64_t> sizes(input.sizes().begin(), input.sizes().end());
  sizes[dim_h] = out_h, sizes[dim_w] = out_w;
  return sizes;
}

Tensor reflectionPad2d(const Tensor& self, IntArrayRef padding) {
  const auto sizes = reflectionPad2dSizes(self, padding);
  Tensor out = at::empty(sizes, self.options().memory_format(self.suggest_memory_format()));
  forwardInto<kReflect2d>(self, padding, out);
  return out;
}

Tensor& reflectionPad2dOut(const Tensor& self, IntArrayRef padding, Tensor& out) {
  const auto sizes = reflectionPad2dSizes(self, padding);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "Expected out tensor to have dtype ", self.scalar_type(),
              ", but got ", out.scalar_type(), " instead");
  at::native::resize_output(out, sizes);
  forwardInto<kReflect2d>(self, padding, out);
  return out;
}

// CPU's checks of the 2-d backwards: the padding, and grad_output of the padded size.
void check2dBackward(const Tensor& grad_output, const Tensor& input, IntArrayRef padding) {
  TORCH_CHECK(padding.size() == 4, "padding size is expected to be 4");
  TORCH_CHECK(input.dim() == 3 || input.dim() == 4, "Expected 3D or 4D (batch mode) tensor for input, but got: ",
              input.sizes());
  TORCH_CHECK(grad_output.dim() == input.dim(), "Expected grad_output to have ", input.dim(),
              " dimensions, but got: ", grad_output.sizes());
  const int64_t dim_w = input.dim() == 4 ? 3 : 2, dim_h = dim_w - 1;
  const int64_t out_h = input.size(dim_h) + padding[2] + padding[3];
  const int64_t out_w = input.size(dim_w) + padding[0] + padding[1];
  TORCH_CHECK(out_w == grad_output.size(dim_w), "gradOutput width unexpected. Expected: ", out_w, ", Got: ",
              grad_output.size(dim_w));
  TORCH_CHECK(out_h == grad_output.size(dim_h), "gradOutput height unexpected. Expected: ", out_h, ", Got: ",
              grad_output.size(dim_h));
}

template <const PadOp& Op>
Tensor backward2d(const Tensor& grad_output, const Tensor& self, IntArrayRef padding) {
  check2dBackward(grad_output, self, padding);
  Tensor grad_input = at::empty(self.sizes(), grad_output.options().memory_format(self.suggest_memory_format()));
  backwardInto<Op>(grad_output, self, padding, grad_input);
  return grad_input;
}

template <const PadOp& Op>
Tensor& backward2dOut(const Tensor& grad_output, const Tensor& self, IntArrayRef padding, Tensor& grad_input) {
  check2dBackward(grad_output, self, padding);
  TORCH_CHECK(grad_input.scalar_type() == grad_output.scalar_type(), "Expected grad_input to have dtype ",
              grad_output.scalar_type(), ", but got ", grad_input.scalar_type(), " instead");
  at::native::resize_output(grad_input, self.sizes());
  backwardInto<Op>(grad_output, self, padding, grad_input);
  return grad_input;
}

using Reflect1dMeta = at::meta::structured_reflection_pad1d;
using Reflect1dBackwardMeta = at::meta::structured_reflection_pad1d_backward;
using Replicate1dMeta = at::meta::structured_replication_pad1d;
using Replicate1dBackwardMeta = at::meta::structured_replication_pad1d_backward;
using Replicate2dMeta = at::meta::structured_replication_pad2d;

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("reflection_pad1d", TORCH_FN((structuredForward<Reflect1dMeta, kReflect1d>)));
  m.impl("reflection_pad1d.out", TORCH_FN((structuredForwardOut<Reflect1dMeta, kReflect1d>)));
  m.impl("reflection_pad1d_backward", TORCH_FN((structuredBackward<Reflect1dBackwardMeta, kReflect1d>)));
  m.impl("reflection_pad1d_backward.grad_input",
         TORCH_FN((structuredBackwardOut<Reflect1dBackwardMeta, kReflect1d>)));
  m.impl("reflection_pad2d", TORCH_FN(reflectionPad2d));
  m.impl("reflection_pad2d.out", TORCH_FN(reflectionPad2dOut));
  m.impl("reflection_pad2d_backward", TORCH_FN(backward2d<kReflect2d>));
  m.impl("reflection_pad2d_backward.grad_input", TORCH_FN(backward2dOut<kReflect2d>));
  m.impl("replication_pad1d", TORCH_FN((structuredForward<Replicate1dMeta, kReplicate1d>)));
  m.impl("replication_pad1d.out", TORCH_FN((structuredForwardOut<Replicate1dMeta, kReplicate1d>)));
  m.impl("replication_pad1d_backward", TORCH_FN((structuredBackward<Replicate1dBackwardMeta, kReplicate1d>)));
  m.impl("replication_pad1d_backward.grad_input",
         TORCH_FN((structuredBackwardOut<Replicate1dBackwardMeta, kReplicate1d>)));
  m.impl("replication_pad2d", TORCH_FN((structuredForward<Replicate2dMeta, kReplicate2d>)));
  m.impl("replication_pad2d.out", TORCH_FN((structuredForwardOut<Replicate2dMeta, kReplicate2d>)));
  m.impl("replication_pad2d_backward", TORCH_FN(backward2d<kReplicate2d>));
  m.impl("replication_pad2d_backward.grad_input", TORCH_FN(backward2dOut<kReplicate2d>));
}

}  // namespace
}  // namespace metalx
