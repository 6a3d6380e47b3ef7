// sort, topk and kthvalue on metalx (functional and out=; argsort, msort and sort without
// `stable` are torch composites over sort.stable). torch's structured meta functions
// check the arguments and size the outputs, so errors are CPU's; sort_lines.cpp does the
// work. Every sort is stable (CPU's stable order, which its unstable sort also gives for
// distinct values), so indices match CPU's wherever CPU's are defined. float64, complex
// and the unsigned 16-64 bit dtypes run CPU's kernel on the fallback.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/SortingUtils.h>
#include <ATen/ops/sort_meta.h>
#include <ATen/ops/topk_meta.h>
#include <torch/library.h>

#include "launch/structured.h"
#include "sort_lines.h"

namespace metalx {
namespace {

using at::Tensor;

// A source the outputs can be written from: self, or a copy of it when `values` shares
// its memory (sort(x, out=(x, i)) reads x while writing it).
Tensor readableSource(const Tensor& self, const Tensor& values) {
  return values.is_alias_of(self) ? self.clone() : self;
}

const c10::OperatorHandle& sortOutOperator() {
  static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::sort", "values_stable");
  return op;
}

const c10::OperatorHandle& topkOutOperator() {
  static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::topk", "values");
  return op;
}

void sortInto(const Tensor& self, std::optional<bool> stable, int64_t dim, bool descending, const Tensor& values,
              const Tensor& indices) {
  if (!canSortLines(self)) {
    launch::cpuFallbackOut(sortOutOperator(), {values, indices}, self, stable, dim, descending);
    return;
  }
  const int64_t wrapped = self.dim() == 0 ? 0 : at::maybe_wrap_dim(dim, self.dim());
  const Tensor source = readableSource(self, values);
  const int64_t n = self.dim() == 0 ? 1 : self.size(wrapped);
  sortLines(source, wrapped, descending, n, &values, indices);
}

void topkInto(const Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted, const Tensor& values,
              const Tensor& indices) {
  // As CPU and CUDA, which have no bool topk.
  TORCH_CHECK(self.scalar_type() != at::kBool, "topk does not support bool dtypes on metalx");
  if (!canSortLines(self)) {
    launch::cpuFallbackOut(topkOutOperator(), {values, indices}, self, k, dim, largest, sorted);
    return;
  }
  const int64_t wrapped = self.dim() == 0 ? 0 : at::maybe_wrap_dim(dim, self.dim());
  // sorted=False leaves the order to the implementation: the sorted one is as good.
  sortLines(readableSource(self, values), wrapped, largest, k, &values, indices);
}

const c10::OperatorHandle& kthvalueOutOperator() {
  static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::kthvalue", "values");
  return op;
}

// kthvalue: the line sorted ascending, position k - 1 (the first of equal values in
// input order: CPU leaves which one open). Checks and output shapes are CPU's.
std::tuple<Tensor&, Tensor&> kthvalueOut(const Tensor& self, int64_t k, int64_t dim_, bool keepdim, Tensor& values,
                                         Tensor& indices) {
  const int64_t dim = at::maybe_wrap_dim(dim_, self.dim(), /*wrap_scalar=*/true);
  const int64_t n = self.dim() == 0 ? 1 : self.size(dim);
  at::native::zero_numel_check_dims(self, dim, "kthvalue()");
  TORCH_CHECK(k >= 1 && k <= n, "kthvalue(): selected number k out of range for dimension ", dim);
  at::assert_no_overlap(self, values);
  if (!canSortLines(self)) {
    launch::cpuFallbackOut(kthvalueOutOperator(), {values, indices}, self, k, dim_, keepdim);
    return {values, indices};
  }
  // Sized with `dim` kept (the launcher's shape), squeezed after, as CPU does.
  at::native::_reduction_with_indices_allocate_or_resize_output(values, indices, self, dim_, keepdim);
  sortLines(self, dim, /*descending=*/false, 1, &values, indices, k - 1);
  if (!keepdim && self.dim() > 0) {
    values.squeeze_(dim);
    indices.squeeze_(dim);
  }
  return {values, indices};
}

using SortMeta = at::meta::structured_sort_stable;
using TopkMeta = at::meta::structured_topk;

std::tuple<Tensor, Tensor> sortStable(const Tensor& self, std::optional<bool> stable, int64_t dim, bool descending) {
  launch::FunctionalOp<SortMeta, 2> op;
  op.meta(self, stable, dim, descending);
  sortInto(self, stable, dim, descending, op.outputs[0], op.outputs[1]);
  return {std::move(op.outputs[0]), std::move(op.outputs[1])};
}

std::tuple<Tensor&, Tensor&> sortStableOut(const Tensor& self, std::optional<bool> stable, int64_t dim,
                                           bool descending, Tensor& values, Tensor& indices) {
  launch::OutOp<SortMeta, 2> op(values, indices);
  op.meta(self, stable, dim, descending);
  sortInto(self, stable, dim, descending, op.maybe_get_output(0), op.maybe_get_output(1));
  op.finish();
  return {values, indices};
}

std::tuple<Tensor, Tensor> topk(const Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted) {
  launch::FunctionalOp<TopkMeta, 2> op;
  op.meta(self, k, dim, largest, sorted);
  topkInto(self, k, dim, largest, sorted, op.outputs[0], op.outputs[1]);
  return {std::move(op.outputs[0]), std::move(op.outputs[1])};
}

std::tuple<Tensor&, Tensor&> topkOut(const Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted,
                                     Tensor& values, Tensor& indices) {
  launch::OutOp<TopkMeta, 2> op(values, indices);
  op.meta(self, k, dim, largest, sorted);
  topkInto(self, k, dim, largest, sorted, op.maybe_get_output(0), op.maybe_get_output(1));
  op.finish();
  return {values, indices};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sort.stable", TORCH_FN(sortStable));
  m.impl("sort.values_stable", TORCH_FN(sortStableOut));
  m.impl("topk", TORCH_FN(topk));
  m.impl("topk.values", TORCH_FN(topkOut));
  m.impl("kthvalue.values", TORCH_FN(kthvalueOut));
}

}  // namespace
}  // namespace metalx
