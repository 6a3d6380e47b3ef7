// median and nanmedian on metalx (the whole tensor, and along a dim with indices), over
// the device's stable sort (sort_lines.cpp) and native gather: no kernel of their own.
//
// Sorted ascending, NaN sort last, so each line's answer is one position of it:
// - median: the middle, (n - 1) / 2; in a line with a NaN, the first NaN (CPU returns NaN
//   there, with the index of the line's first NaN in input order, which the stable sort
//   keeps first among the NaNs);
// - nanmedian: the middle of the non-NaN values, (n - 1 - nans) / 2; an all-NaN line
//   gives NaN.
// Among equal median values CPU's nth_element picks any one's index (upstream treats the
// index as nondeterministic); the stable sort's is the k-th in input order. Argument
// errors are CPU's. Dtypes the sort has no kernel for (float64, complex, uint16-64) and
// empty tensors (whose NaN result CPU converts to each dtype its own way) run CPU's
// kernel on the fallback.
#include <ATen/ATen.h>
#include <ATen/TensorUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "cpu_fallback.h"
#include "launch/structured.h"
#include "sort_lines.h"

namespace metalx {
namespace {

using at::Tensor;

// Where each line's answer sits in the sorted line, shaped as a keepdim reduction of
// `line` over `dim`.
Tensor medianPositions(const Tensor& line, int64_t dim, bool ignore_nan) {
  const int64_t n = line.size(dim);
  std::vector<int64_t> shape = line.sizes().vec();
  shape[dim] = 1;
  const Tensor middle = at::full(shape, (n - 1) / 2, line.options().dtype(at::kLong));
  if (!at::isFloatingType(line.scalar_type())) return middle;
  const Tensor nans = line.isnan().sum(dim, /*keepdim=*/true);
  if (ignore_nan) return (n - 1 - nans).clamp_min_(0).div_(2, "floor");
  return at::where(nans.gt(0), n - nans, middle);
}

void medianAlongDim(const Tensor& self, int64_t dim_, bool keepdim, Tensor& values, Tensor& indices,
                    bool ignore_nan) {
  const int64_t dim = at::maybe_wrap_dim(dim_, self.dim(), /*wrap_scalar=*/true);
  at::checkDeviceType("median", {values, indices}, self.device().type());
  at::checkScalarType("median", {indices, "indices", 1}, at::kLong);
  at::checkSameType("median", {values, "values", 0}, {self, "self", 2});
  at::native::zero_numel_check_dims(self, dim, "median()");
  const Tensor line = self.dim() == 0 ? self.unsqueeze(0) : self;
  auto sorted = at::sort(line, /*stable=*/true, dim, /*descending=*/false);
  const Tensor position = medianPositions(line, dim, ignore_nan);
  Tensor v = std::get<0>(sorted).gather(dim, position);
  Tensor i = std::get<1>(sorted).gather(dim, position);
  if (!keepdim || self.dim() == 0) {
    v = v.squeeze(dim);
    i = i.squeeze(dim);
  }
  at::native::resize_output(values, v.sizes());
  at::native::resize_output(indices, i.sizes());
  values.copy_(v);
  indices.copy_(i);
}

c10::OperatorHandle schema(const char* name, const char* overload) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
}

Tensor medianAll(const Tensor& self, bool ignore_nan) {
  static const c10::OperatorHandle median_op = schema("aten::median", "");
  static const c10::OperatorHandle nanmedian_op = schema("aten::nanmedian", "");
  if (self.numel() == 0 || !canSortLines(self))
    return cpuFallbackCall(ignore_nan ? nanmedian_op : median_op, self).back().toTensor();
  Tensor values = at::empty({0}, self.options());
  Tensor indices = at::empty({0}, self.options().dtype(at::kLong));
  medianAlongDim(self.reshape({-1}), 0, /*keepdim=*/false, values, indices, ignore_nan);
  return values;
}

std::tuple<Tensor&, Tensor&> medianDimOut(const Tensor& self, int64_t dim, bool keepdim, Tensor& values,
                                          Tensor& indices, bool ignore_nan) {
  if (!canSortLines(self)) {
    static const c10::OperatorHandle median_op = schema("aten::median", "dim_values");
    static const c10::OperatorHandle nanmedian_op = schema("aten::nanmedian", "dim_values");
    launch::cpuFallbackOut(ignore_nan ? nanmedian_op : median_op, {values, indices}, self, dim, keepdim);
    return {values, indices};
  }
  medianAlongDim(self, dim, keepdim, values, indices, ignore_nan);
  return {values, indices};
}

Tensor median(const Tensor& self) { return medianAll(self, false); }
Tensor nanmedian(const Tensor& self) { return medianAll(self, true); }
std::tuple<Tensor&, Tensor&> medianOut(const Tensor& self, int64_t dim, bool keepdim, Tensor& values,
                                       Tensor& indices) {
  return medianDimOut(self, dim, keepdim, values, indices, false);
}
std::tuple<Tensor&, Tensor&> nanmedianOut(const Tensor& self, int64_t dim, bool keepdim, Tensor& values,
                                          Tensor& indices) {
  return medianDimOut(self, dim, keepdim, values, indices, true);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("median", TORCH_FN(median));
  m.impl("nanmedian", TORCH_FN(nanmedian));
  m.impl("median.dim_values", TORCH_FN(medianOut));
  m.impl("nanmedian.dim_values", TORCH_FN(nanmedianOut));
}

}  // namespace
}  // namespace metalx
