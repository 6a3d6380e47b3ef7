// softmax and log_softmax on metalx: aten::_softmax, _log_softmax and their
// _backward_data, each functional and out=, through torch's structured meta functions
// (the dim and dtype checks, the contiguous output). Float32, float16 and bfloat16 run
// kernels/softmax.metal (float accumulation); half_to_float (a half input, a float
// output) runs too, as on CUDA. Other dtypes go to CPU's kernel through the fallback.
#include <ATen/ATen.h>
#include <ATen/ops/_log_softmax_backward_data_meta.h>
#include <ATen/ops/_log_softmax_meta.h>
#include <ATen/ops/_softmax_backward_data_meta.h>
#include <ATen/ops/_softmax_meta.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <algorithm>

#include "allocator.h"
#include "core/stream_pool.h"
#include "launch/kernel_table.h"
#include "launch/threads.h"
#include "launch/structured.h"

namespace metalx {
namespace {

using at::Tensor;
using launch::KernelFamily;
using launch::Variant;
using kernels::DType;

constexpr uint32_t kGroup = 256;  // kernels/softmax.metal's METALX_SOFTMAX_GROUP

// Mirrors kernels/softmax.metal's SoftmaxShape.
struct SoftmaxShape {
  uint64_t outer = 1, dim = 1, inner = 1;
  uint32_t log = 0;
  uint32_t threads_per_row = 32;
};

KernelFamily forward_kernels("softmax", launch::kFloatTypes);
KernelFamily half_to_float_kernels("softmax_half_to_float", {DType::Float16});
KernelFamily backward_kernels("softmax_backward", launch::kFloatTypes);
KernelFamily backward_to_half_kernels("softmax_backward_to_half", {DType::Float32});

std::optional<DType> floatKernelType(c10::ScalarType t) {
  switch (t) {
    case at::kFloat: return DType::Float32;
    case at::kHalf: return DType::Float16;
    case at::kBFloat16: return DType::BFloat16;
    default: return std::nullopt;
  }
}

SoftmaxShape shapeAlong(const Tensor& t, int64_t dim, bool log) {
  SoftmaxShape s;
  s.log = log ? 1 : 0;
  if (t.dim() == 0) return s;
  for (int64_t d = 0; d < dim; ++d) s.outer *= t.size(d);
  s.dim = t.size(dim);
  for (int64_t d = dim + 1; d < t.dim(); ++d) s.inner *= t.size(d);
  return s;
}

uint64_t ceilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Rows kernels for the last dim on a GPU; on the simulator only for a few long rows
// (there a SIMD group's lanes are fibers: a thread per row is cheaper, unless that
// leaves the cores idle).
Variant chooseVariant(SoftmaxShape& s, Stream& stream) {
  if (s.inner != 1) return Variant::Columns;
  const bool simulated = stream.device().info().is_simulated;
  if (simulated && !(s.outer < 8 && s.dim >= 4096)) return Variant::Columns;
  s.threads_per_row = s.dim >= 1024 ? kGroup : 32;
  return Variant::Rows;
}

// Runs one softmax kernel over contiguous tensors: the inputs, then the output last.
void launch(KernelFamily& family, DType key, SoftmaxShape s, std::initializer_list<const Tensor*> tensors) {
  const Tensor& out = *tensors.end()[-1];
  if (out.numel() == 0) return;
  Stream& stream = currentStream(out.device().index());
  const Variant variant = chooseVariant(s, stream);
  const launch::Grid grid = variant == Variant::Rows
                                ? launch::Grid::groups(ceilDiv(s.outer, kGroup / s.threads_per_row), kGroup)
                                : launch::Grid::threads(s.outer * s.inner, kGroup);
  launch::encodeKernel(stream, family.pipeline(stream, variant, key), tensors, s, grid);
}

// The output the kernel writes: `out` itself when contiguous, else a temporary copied
// into it by finishOutput.
Tensor kernelOutput(const Tensor& out) { return out.is_contiguous() ? out : at::empty(out.sizes(), out.options()); }
void finishOutput(const Tensor& out, const Tensor& written) {
  if (!written.is_same(out)) out.copy_(written);
}

c10::OperatorHandle outOp(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "out");
}

// ---- forward ----

void softmaxForward(const Tensor& input, int64_t dim, bool half_to_float, bool log, const Tensor& out) {
  const std::optional<DType> in_type = floatKernelType(input.scalar_type());
  const bool native = in_type && (!half_to_float || *in_type == DType::Float16);
  if (!native) {
    static const c10::OperatorHandle softmax_out = outOp("aten::_softmax");
    static const c10::OperatorHandle log_softmax_out = outOp("aten::_log_softmax");
    launch::cpuFallbackOut(log ? log_softmax_out : softmax_out, {out}, input, dim, half_to_float);
    return;
  }
  const int64_t d = at::maybe_wrap_dim(dim, input.dim());
  const Tensor x = input.contiguous();
  const Tensor y = kernelOutput(out);
  KernelFamily& family = half_to_float ? half_to_float_kernels : forward_kernels;
  launch(family, *in_type, shapeAlong(x, d, log), {&x, &y});
  finishOutput(out, y);
}

template <class Meta, bool kLog>
Tensor forwardFunctional(const Tensor& self, int64_t dim, bool half_to_float) {
  launch::FunctionalOp<Meta> op;
  op.meta(self, dim, half_to_float);
  softmaxForward(self, dim, half_to_float, kLog, op.outputs[0]);
  return std::move(op.outputs[0]);
}

template <class Meta, bool kLog>
Tensor& forwardOut(const Tensor& self, int64_t dim, bool half_to_float, Tensor& out) {
  launch::OutOp<Meta> op(out);
  op.meta(self, dim, half_to_float);
  softmaxForward(self, dim, half_to_float, kLog, op.maybe_get_output(0));
  op.finish();
  return out;
}

// ---- backward ----

void softmaxBackward(const Tensor& grad, const Tensor& output, int64_t dim, c10::ScalarType input_dtype, bool log,
                     const Tensor& grad_input) {
  const std::optional<DType> grad_type = floatKernelType(grad.scalar_type());
  const bool to_half = input_dtype != grad.scalar_type();  // the meta allows only float -> half
  const bool native = grad_type && output.scalar_type() == grad.scalar_type() &&
                      (!to_half || (*grad_type == DType::Float32 && input_dtype == at::kHalf));
  if (!native) {
    static const c10::OperatorHandle softmax_out = outOp("aten::_softmax_backward_data");
    static const c10::OperatorHandle log_softmax_out = outOp("aten::_log_softmax_backward_data");
    launch::cpuFallbackOut(log ? log_softmax_out : softmax_out, {grad_input}, grad, output, dim, input_dtype);
    return;
  }
  const int64_t d = at::maybe_wrap_dim(dim, grad.dim());
  const Tensor g = grad.contiguous();
  const Tensor y = output.contiguous();
  const Tensor gi = kernelOutput(grad_input);
  launch(to_half ? backward_to_half_kernels : backward_kernels, *grad_type, shapeAlong(g, d, log), {&g, &y, &gi});
  finishOutput(grad_input, gi);
}

template <class Meta, bool kLog>
Tensor backwardFunctional(const Tensor& grad, const Tensor& output, int64_t dim, c10::ScalarType input_dtype) {
  launch::FunctionalOp<Meta> op;
  op.meta(grad, output, dim, input_dtype);
  softmaxBackward(grad, output, dim, input_dtype, kLog, op.outputs[0]);
  return std::move(op.outputs[0]);
}

template <class Meta, bool kLog>
Tensor& backwardOut(const Tensor& grad, const Tensor& output, int64_t dim, c10::ScalarType input_dtype,
                    Tensor& out) {
  launch::OutOp<Meta> op(out);
  op.meta(grad, output, dim, input_dtype);
  softmaxBackward(grad, output, dim, input_dtype, kLog, op.maybe_get_output(0));
  op.finish();
  return out;
}

using SoftmaxMeta = at::meta::structured__softmax;
using LogSoftmaxMeta = at::meta::structured__log_softmax;
using SoftmaxBackwardMeta = at::meta::structured__softmax_backward_data;
using LogSoftmaxBackwardMeta = at::meta::structured__log_softmax_backward_data;

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_softmax", TORCH_FN((forwardFunctional<SoftmaxMeta, false>)));
  m.impl("_softmax.out", TORCH_FN((forwardOut<SoftmaxMeta, false>)));
  m.impl("_log_softmax", TORCH_FN((forwardFunctional<LogSoftmaxMeta, true>)));
  m.impl("_log_softmax.out", TORCH_FN((forwardOut<LogSoftmaxMeta, true>)));
  m.impl("_softmax_backward_data", TORCH_FN((backwardFunctional<SoftmaxBackwardMeta, false>)));
  m.impl("_softmax_backward_data.out", TORCH_FN((backwardOut<SoftmaxBackwardMeta, false>)));
  m.impl("_log_softmax_backward_data", TORCH_FN((backwardFunctional<LogSoftmaxBackwardMeta, true>)));
  m.impl("_log_softmax_backward_data.out", TORCH_FN((backwardOut<LogSoftmaxBackwardMeta, true>)));
}

}  // namespace
}  // namespace metalx
