// cat (and through it stack, hstack, ...) on the device.
//
// torch's structured meta function decides the output's size, dtype (type promotion)
// and memory format (channels_last when the inputs are), with CPU's errors. Each input
// then lands in its slice of the output through the device copy, which handles any
// layout on either side and converts dtypes: one strided copy kernel per input.
#include <ATen/ATen.h>
#include <ATen/native/TensorShape.h>
#include <ATen/ops/cat_meta.h>
#include <torch/library.h>

#include "launch/structured.h"

namespace metalx {
namespace {

void catInto(const at::Tensor& out, const at::ITensorListRef& tensors, int64_t dim) {
  if (out.numel() == 0) return;
  int64_t offset = 0;
  for (const at::Tensor& t : tensors) {
    if (at::native::cat_should_skip_tensor(t)) continue;  // legacy 1-d empty inputs
    const int64_t size = t.size(dim);
    if (size > 0) out.narrow(dim, offset, size).copy_(t);
    offset += size;
  }
}

at::Tensor catFunctional(const at::ITensorListRef& tensors, int64_t dim) {
  launch::FunctionalOp<at::meta::structured_cat> op;
  auto pre = op.meta(tensors, dim);
  catInto(op.outputs[0], tensors, pre.dim);
  return std::move(op.outputs[0]);
}

at::Tensor& catOut(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  launch::OutOp<at::meta::structured_cat> op(out);
  auto pre = op.meta(tensors, dim);
  catInto(op.maybe_get_output(0), tensors, pre.dim);
  op.finish();
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cat", TORCH_FN(catFunctional));
  m.impl("cat.out", TORCH_FN(catOut));
}

}  // namespace
}  // namespace metalx
