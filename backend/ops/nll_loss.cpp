// nll_loss and nll_loss2d on metalx, forward and backward (what cross_entropy and
// NLLLoss decompose into), with class weights, ignore_index and every reduction.
// nll_loss runs torch's structured meta functions for its checks and shapes;
// nll_loss2d, which has none, checks its inputs here as CPU does. Float32, float16 and
// bfloat16 inputs with int64 targets run kernels/nll_loss.metal; other dtypes (float64,
// uint8 targets) run CPU's kernels through the fallback.
//
// A target out of range raises CPU's IndexError ("Target 7 is out of bounds.") through
// the device-side index check (ops/index_check.h): at the next host wait, or at the op
// with METALX_SYNC_INDEX_CHECKS=1; the kernels skip such targets, so a forward costs no
// host wait.
#include <ATen/ATen.h>
#include <ATen/core/Reduction.h>
#include <ATen/ops/nll_loss_backward_meta.h>
#include <ATen/ops/nll_loss_forward_meta.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>

#include "allocator.h"
#include "core/stream_pool.h"
#include "launch/kernel_table.h"
#include "launch/threads.h"
#include "launch/structured.h"
#include "ops/index_check.h"

namespace metalx {
namespace {

using at::Tensor;
using launch::KernelFamily;
using launch::Variant;
using kernels::DType;

constexpr uint32_t kGroup = 256;  // kernels/nll_loss.metal's METALX_NLL_GROUP

// Mirrors kernels/nll_loss.metal's NllShape.
struct NllShape {
  uint64_t batch = 1, classes = 1, spatial = 1;
  int64_t ignore_index = -100;
  uint32_t has_weight = 0;
  uint32_t mean = 0;
  uint32_t threads = 1;
  uint32_t cascade = 0;
  uint32_t per_target = 0;
};

KernelFamily none_kernels("nll_loss_none", launch::kFloatTypes);
KernelFamily reduce_kernels("nll_loss_reduce", launch::kFloatTypes);
KernelFamily backward_kernels("nll_loss_backward", launch::kFloatTypes);

std::optional<DType> floatKernelType(c10::ScalarType t) {
  switch (t) {
    case at::kFloat: return DType::Float32;
    case at::kHalf: return DType::Float16;
    case at::kBFloat16: return DType::BFloat16;
    default: return std::nullopt;
  }
}

bool hasWeight(const std::optional<Tensor>& w) { return w.has_value() && w->defined(); }

at::OptionalTensorRef weightRef(const std::optional<Tensor>& w) {
  return hasWeight(w) ? at::OptionalTensorRef(*w) : at::OptionalTensorRef();
}

// The kernels' dtypes: a float self, int64 targets, a weight of self's dtype.
std::optional<DType> nativeType(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight) {
  const std::optional<DType> t = floatKernelType(self.scalar_type());
  if (!t || target.scalar_type() != at::kLong) return std::nullopt;
  if (hasWeight(weight) && weight->scalar_type() != self.scalar_type()) return std::nullopt;
  return t;
}

// [batch, classes, spatial] of self: 1-d [C], 2-d [N, C] or 4-d [N, C, H, W].
NllShape shapeOf(const Tensor& self, const std::optional<Tensor>& weight, int64_t reduction, int64_t ignore_index) {
  NllShape s;
  if (self.dim() == 1) {
    s.classes = self.size(0);
  } else {
    s.batch = self.size(0);
    s.classes = self.size(1);
    for (int64_t d = 2; d < self.dim(); ++d) s.spatial *= self.size(d);
  }
  s.ignore_index = ignore_index;
  s.has_weight = hasWeight(weight) ? 1 : 0;
  s.mean = reduction == at::Reduction::Mean ? 1 : 0;
  return s;
}

uint64_t ceilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Writes output (and total_weight) of self's nll loss.
void forward(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight, int64_t reduction,
             int64_t ignore_index, DType type, const Tensor& output, const Tensor& total_weight) {
  const Tensor x = self.contiguous();
  const Tensor t = target.contiguous();
  const Tensor w = hasWeight(weight) ? weight->contiguous() : x;
  NllShape s = shapeOf(x, weight, reduction, ignore_index);
  const bool none = reduction == at::Reduction::None && x.dim() != 1;
  Stream& stream = currentStream(self.device().index());
  const bool simulated = stream.device().info().is_simulated;
  // Half and bfloat reduce in CPU's order and roundings, on one thread (the kernel's
  // comment says why). Otherwise a thread on the simulator walks the targets as one
  // loop; a GPU takes a threadgroup.
  s.cascade = type == DType::Float32 ? 0 : 1;
  s.threads = simulated || s.cascade ? 1 : kGroup;
  const Tensor out = none && !output.is_contiguous() ? at::empty(output.sizes(), output.options()) : output;
  const Tensor tw = total_weight.is_contiguous() ? total_weight : at::empty({}, total_weight.options());
  const uint64_t items = s.batch * s.spatial;
  if (none) {
    tw.zero_();
    if (items == 0) return;
  } else if (items == 0) {  // nothing to bind: the sum of nothing, and 0 / 0 for 'mean'
    out.fill_(s.mean ? std::numeric_limits<double>::quiet_NaN() : 0.0);
    tw.zero_();
    if (!out.is_same(output)) output.copy_(out);
    if (!tw.is_same(total_weight)) total_weight.copy_(tw);
    return;
  }
  if (none) {
    launch::encodeKernel(stream, none_kernels.pipeline(stream, Variant::Plain, type), {&x, &t, &w, &out}, s,
                         launch::Grid::threads(items, kGroup));
  } else {
    launch::encodeKernel(stream, reduce_kernels.pipeline(stream, Variant::Plain, type), {&x, &t, &w, &out, &tw}, s,
                         launch::Grid::groups(1, s.threads));
  }
  IndexCheck check;
  check.high = static_cast<int64_t>(s.classes);
  check.ignore = ignore_index;
  check.message = IndexMessage::Target;
  checkIndicesOnDevice(t, check, "nll_loss");
  if (!out.is_same(output)) output.copy_(out);
  if (!tw.is_same(total_weight)) total_weight.copy_(tw);
}

void backward(const Tensor& grad_output, const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight,
              int64_t reduction, int64_t ignore_index, const Tensor& total_weight, DType type,
              const Tensor& grad_input) {
  const Tensor g = grad_output.contiguous();
  const Tensor t = target.contiguous();
  const Tensor w = hasWeight(weight) ? weight->contiguous() : g;
  const Tensor tw = total_weight.contiguous();
  const Tensor gi = grad_input.is_contiguous() ? grad_input : at::empty(grad_input.sizes(), grad_input.options());
  gi.zero_();
  NllShape s = shapeOf(self, weight, reduction, ignore_index);
  s.per_target = reduction == at::Reduction::None && self.dim() != 1 ? 1 : 0;
  const uint64_t items = s.batch * s.spatial;
  if (items > 0 && gi.numel() > 0)
    launch::encodeThreads(backward_kernels, Variant::Plain, type, {&g, &t, &w, &tw, &gi}, s, items);
  if (!gi.is_same(grad_input)) grad_input.copy_(gi);
}

c10::OperatorHandle op(const char* name, const char* overload) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
}

// ---- nll_loss (structured) ----

using ForwardMeta = at::meta::structured_nll_loss_forward;
using BackwardMeta = at::meta::structured_nll_loss_backward;

void nllForwardInto(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight, int64_t reduction,
                    int64_t ignore_index, const Tensor& output, const Tensor& total_weight) {
  if (const auto type = nativeType(self, target, weight)) {
    forward(self, target, weight, reduction, ignore_index, *type, output, total_weight);
    return;
  }
  static const c10::OperatorHandle out_op = op("aten::nll_loss_forward", "output");
  launch::cpuFallbackOut(out_op, {output, total_weight}, self, target, weight, reduction, ignore_index);
}

std::tuple<Tensor, Tensor> nllForward(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight,
                                      int64_t reduction, int64_t ignore_index) {
  launch::FunctionalOp<ForwardMeta, 2> m;
  m.meta(self, target, weightRef(weight), reduction, ignore_index);
  nllForwardInto(self, target, weight, reduction, ignore_index, m.outputs[0], m.outputs[1]);
  return {std::move(m.outputs[0]), std::move(m.outputs[1])};
}

std::tuple<Tensor&, Tensor&> nllForwardOut(const Tensor& self, const Tensor& target,
                                           const std::optional<Tensor>& weight, int64_t reduction,
                                           int64_t ignore_index, Tensor& output, Tensor& total_weight) {
  launch::OutOp<ForwardMeta, 2> m(output, total_weight);
  m.meta(self, target, weightRef(weight), reduction, ignore_index);
  nllForwardInto(self, target, weight, reduction, ignore_index, m.maybe_get_output(0), m.maybe_get_output(1));
  m.finish();
  return {output, total_weight};
}

void nllBackwardInto(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                     const std::optional<Tensor>& weight, int64_t reduction, int64_t ignore_index,
                     const Tensor& total_weight, const Tensor& grad_input) {
  const auto type = nativeType(self, target, weight);
  if (type && grad_output.scalar_type() == self.scalar_type() && total_weight.scalar_type() == self.scalar_type()) {
    backward(grad_output, self, target, weight, reduction, ignore_index, total_weight, *type, grad_input);
    return;
  }
  static const c10::OperatorHandle out_op = op("aten::nll_loss_backward", "grad_input");
  launch::cpuFallbackOut(out_op, {grad_input}, grad_output, self, target, weight, reduction, ignore_index,
                         total_weight);
}

Tensor nllBackward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                   const std::optional<Tensor>& weight, int64_t reduction, int64_t ignore_index,
                   const Tensor& total_weight) {
  launch::FunctionalOp<BackwardMeta> m;
  m.meta(grad_output, self, target, weightRef(weight), reduction, ignore_index,
         total_weight);
  nllBackwardInto(grad_output, self, target, weight, reduction, ignore_index, total_weight, m.outputs[0]);
  return std::move(m.outputs[0]);
}

Tensor& nllBackwardOut(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                       const std::optional<Tensor>& weight, int64_t reduction, int64_t ignore_index,
                       const Tensor& total_weight, Tensor& grad_input) {
  launch::OutOp<BackwardMeta> m(grad_input);
  m.meta(grad_output, self, target, weightRef(weight), reduction, ignore_index,
         total_weight);
  nllBackwardInto(grad_output, self, target, weight, reduction, ignore_index, total_weight, m.maybe_get_output(0));
  m.finish();
  return grad_input;
}

// ---- nll_loss2d (no meta function in torch: its checks, as CPU makes them) ----

void check2d(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight) {
  TORCH_CHECK(target.dim() == 3,
              "only batches of spatial targets supported (3D tensors) but got targets of dimension: ", target.dim());
  TORCH_CHECK(self.dim() == 4, "only batches of spatial inputs supported (4D tensors), but got input of dimension: ",
              self.dim());
  TORCH_CHECK(!hasWeight(weight) || weight->numel() == self.size(1),
              "weight tensor should be defined either for all or no classes");
  TORCH_CHECK(self.size(0) == target.size(0) && self.size(2) == target.size(1) && self.size(3) == target.size(2),
              "input and target batch or spatial sizes don't match: target ", target.sizes(), ", input ",
              self.sizes());
}

std::vector<int64_t> output2dSizes(const Tensor& self, int64_t reduction) {
  if (reduction == at::Reduction::None) return {self.size(0), self.size(2), self.size(3)};
  return {};
}

std::tuple<Tensor&, Tensor&> nll2dForwardOut(const Tensor& self, const Tensor& target,
                                             const std::optional<Tensor>& weight, int64_t reduction,
                                             int64_t ignore_index, Tensor& output, Tensor& total_weight) {
  const auto type = nativeType(self, target, weight);
  if (!type) {
    static const c10::OperatorHandle out_op = op("aten::nll_loss2d_forward", "output");
    launch::cpuFallbackOut(out_op, {output, total_weight}, self, target, weight, reduction, ignore_index);
    return {output, total_weight};
  }
  check2d(self, target, weight);
  at::native::resize_output(output, output2dSizes(self, reduction));
  at::native::resize_output(total_weight, {});
  forward(self, target, weight, reduction, ignore_index, *type, output, total_weight);
  return {output, total_weight};
}

std::tuple<Tensor, Tensor> nll2dForward(const Tensor& self, const Tensor& target,
                                        const std::optional<Tensor>& weight, int64_t reduction,
                                        int64_t ignore_index) {
  Tensor output = at::empty({0}, self.options());
  Tensor total_weight = at::empty({}, self.options());
  nll2dForwardOut(self, target, weight, reduction, ignore_index, output, total_weight);
  return {output, total_weight};
}

Tensor& nll2dBackwardOut(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                         const std::optional<Tensor>& weight, int64_t reduction, int64_t ignore_index,
                         const Tensor& total_weight, Tensor& grad_input) {
  const auto type = nativeType(self, target, weight);
  if (!type || grad_output.scalar_type() != self.scalar_type() || total_weight.scalar_type() != self.scalar_type()) {
    static const c10::OperatorHandle out_op = op("aten::nll_loss2d_backward", "grad_input");
    launch::cpuFallbackOut(out_op, {grad_input}, grad_output, self, target, weight, reduction, ignore_index,
                           total_weight);
    return grad_input;
  }
  check2d(self, target, weight);
  TORCH_CHECK(total_weight.numel() == 1, "expected total_weight to be a single element tensor, got: ",
              total_weight.sizes(), " (", total_weight.numel(), " elements)");
  if (reduction == at::Reduction::None) {
    TORCH_CHECK(grad_output.dim() == 3 && grad_output.sizes() == c10::IntArrayRef(output2dSizes(self, reduction)),
                "grad_output must have the shape of the per-element loss ", c10::IntArrayRef(output2dSizes(self, reduction)),
                ", got ", grad_output.sizes());
  } else {
    TORCH_CHECK(grad_output.numel() == 1, "expected grad_output to be a single element tensor, got: ",
                grad_output.sizes());
  }
  at::native::resize_output(grad_input, self.sizes());
  backward(grad_output, self, target, weight, reduction, ignore_index, total_weight, *type, grad_input);
  return grad_input;
}

Tensor nll2dBackward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                     const std::optional<Tensor>& weight, int64_t reduction, int64_t ignore_index,
                     const Tensor& total_weight) {
  Tensor grad_input = at::empty(self.sizes(), self.options());
  nll2dBackwardOut(grad_output, self, target, weight, reduction, ignore_index, total_weight, grad_input);
  return grad_input;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nll_loss_forward", TORCH_FN(nllForward));
  m.impl("nll_loss_forward.output", TORCH_FN(nllForwardOut));
  m.impl("nll_loss_backward", TORCH_FN(nllBackward));
  m.impl("nll_loss_backward.grad_input", TORCH_FN(nllBackwardOut));
  m.impl("nll_loss2d_forward", TORCH_FN(nll2dForward));
  m.impl("nll_loss2d_forward.output", TORCH_FN(nll2dForwardOut));
  m.impl("nll_loss2d_backward", TORCH_FN(nll2dBackward));
  m.impl("nll_loss2d_backward.grad_input", TORCH_FN(nll2dBackwardOut));
}

}  // namespace
}  // namespace metalx
