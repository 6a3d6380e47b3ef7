// torch.unique (_unique2) and torch.unique_consecutive over all elements (dim=None) on
// metalx, from the sort launcher (sort_lines.cpp) and native elementwise, scan and
// scatter ops:
//   sort the flattened input (unique only; values and their positions), mark the first
//   element of each run of equal values (x[i] != x[i-1]: every NaN is its own run, as on
//   CPU), number the runs with a cumulative sum, then scatter each run's first value to
//   the output, each element's run number to its position (inverse) and each run's start
//   (counts are differences of starts).
// The number of distinct values sizes the output: one synchronisation, as CPU and CUDA.
// CPU's unique sorts whatever `sorted` says, and so does this. Dtypes without sort kernels
// run on the CPU fallback; the forms along a dim are in unique_dim.cpp.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "cpu_fallback.h"
#include "sort_lines.h"

namespace metalx {
namespace {

using at::Tensor;
using Result = std::tuple<Tensor, Tensor, Tensor>;

// unique of `values` (flattened, in the order runs are found) where `order[i]` is the
// position in the input of values[i]; `shape`: the input's, for the inverse.
Result uniqueOfRuns(const Tensor& values, const Tensor& order, at::IntArrayRef shape, bool return_inverse,
                    bool return_counts) {
  const int64_t n = values.numel();
  const auto long_options = values.options().dtype(at::kLong);
  Tensor first = at::empty({n}, values.options().dtype(at::kBool));
  first.narrow(0, 0, 1).fill_(true);
  if (n > 1) {
    Tensor rest = first.narrow(0, 1, n - 1);
    at::ne_out(rest, values.narrow(0, 1, n - 1), values.narrow(0, 0, n - 1));
  }
  const Tensor run = at::cumsum(first, 0, at::kLong).sub_(1);
  const int64_t runs = run.narrow(0, n - 1, 1).item<int64_t>() + 1;
  // Elements that start no run scatter to one spare slot past the end.
  const Tensor slot = at::where(first, run, at::scalar_tensor(runs, long_options));
  const Tensor output = at::empty({runs + 1}, values.options()).scatter_(0, slot, values).narrow(0, 0, runs);
  Tensor inverse = at::empty({0}, long_options), counts = at::empty({0}, long_options);
  if (return_inverse) {
    inverse = at::empty({n}, long_options);
    if (order.defined()) inverse.scatter_(0, order, run);
    else inverse.copy_(run);
    inverse = inverse.view(shape);
  }
  if (return_counts) {
    Tensor starts = at::empty({runs + 1}, long_options).scatter_(0, slot, at::arange(n, long_options));
    starts.narrow(0, runs, 1).fill_(n);
    counts = starts.narrow(0, 1, runs) - starts.narrow(0, 0, runs);
  }
  return {output.clone(), inverse, counts};
}

Result emptyResult(const Tensor& self, bool return_inverse) {
  const auto long_options = self.options().dtype(at::kLong);
  return {at::empty({0}, self.options()), at::empty(return_inverse ? self.sizes() : at::IntArrayRef{0}, long_options),
          at::empty({0}, long_options)};
}

Result unique2(const Tensor& self, bool sorted, bool return_inverse, bool return_counts) {
  if (!canSortLines(self))
    return resultTensors<3>(cpuFallbackCall("aten::_unique2", "", self, sorted, return_inverse, return_counts));
  if (self.numel() == 0) return emptyResult(self, return_inverse);
  const Tensor flat = self.reshape({-1});
  const int64_t n = flat.numel();
  Tensor values = at::empty({n}, self.options()), order = at::empty({n}, self.options().dtype(at::kLong));
  sortLines(flat, 0, /*descending=*/false, n, &values, order);
  return uniqueOfRuns(values, order, self.sizes(), return_inverse, return_counts);
}

Result uniqueConsecutive(const Tensor& self, bool return_inverse, bool return_counts, std::optional<int64_t> dim) {
  // Along a dim (but dim 0 of a vector, which is all elements) it is unique_dim_consecutive,
  // as CPU's kernel routes it (unique_dim.cpp).
  if (dim.has_value() && !(*dim == 0 && self.dim() == 1))
    return at::unique_dim_consecutive(self, *dim, return_inverse, return_counts);
  if (!canSortLines(self))
    return resultTensors<3>(cpuFallbackCall("aten::unique_consecutive", "", self, return_inverse, return_counts, dim));
  if (self.numel() == 0) return emptyResult(self, return_inverse);
  return uniqueOfRuns(self.reshape({-1}), Tensor(), self.sizes(), return_inverse, return_counts);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_unique2", TORCH_FN(unique2));
  m.impl("unique_consecutive", TORCH_FN(uniqueConsecutive));
}

}  // namespace
}  // namespace metalx
