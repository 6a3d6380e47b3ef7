// torch.mode along a dim (and its out= form) on metalx, over the device's stable sort (sort_lines.cpp) and
// native scans, compares, argmax and gather: no kernel of its own.
//
// CPU's kernel sorts each line by value and walks the runs of equal values, keeping the
// first run that is strictly longer than every run before it: so the mode is the
// smallest of the most frequent values, and its index is that of the run's last element
// in the sorted line. CPU's sort keeps equal values in input order on lines as short as
// upstream's samples (insertion sort), so that is the value's last position in the line;
// the stable sort gives that position on every line. NaN is never equal to itself, so
// every NaN is a run of one (CPU's `!=` says the same); the stable sort puts NaN last.
// Argument errors are CPU's: empty inputs and the dtypes the sort has no kernels for
// (float64, complex, uint16-64) run CPU's kernel on the fallback.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "cpu_fallback.h"
#include "sort_lines.h"

namespace metalx {
namespace {

using at::Tensor;

std::tuple<Tensor, Tensor> mode(const Tensor& self, int64_t dim_, bool keepdim) {
  if (self.numel() == 0 || !canSortLines(self))
    return resultTensors<2>(cpuFallbackCall("aten::mode", "", self, dim_, keepdim));
  const int64_t dim = at::maybe_wrap_dim(dim_, self.dim(), /*wrap_scalar=*/true);
  const auto long_options = self.options().dtype(at::kLong);
  if (self.dim() == 0) return {self.clone(), at::zeros({}, long_options)};
  const int64_t n = self.size(dim);
  auto [sorted, order] = at::sort(self, /*stable=*/true, dim, /*descending=*/false);

  // Position of every element along dim, broadcast over the other dims.
  std::vector<int64_t> line_shape(self.dim(), 1);
  line_shape[dim] = n;
  const Tensor position = at::arange(n, long_options).view(line_shape).expand(self.sizes());

  // A run starts where an element differs from the one before it, and ends where it
  // differs from the one after it (the line's ends bound the first and last run).
  Tensor starts = at::ones(self.sizes(), self.options().dtype(at::kBool));
  Tensor ends = at::ones(self.sizes(), self.options().dtype(at::kBool));
  if (n > 1) {
    const Tensor differs = sorted.narrow(dim, 1, n - 1).ne(sorted.narrow(dim, 0, n - 1));
    starts.narrow(dim, 1, n - 1).copy_(differs);
    ends.narrow(dim, 0, n - 1).copy_(differs);
  }
  // Each element's run start (the latest start at or before it), so a run's length sits
  // at its last element; elsewhere the length is 0. argmax takes the first maximum: the
  // first of the longest runs, CPU's strict `>`.
  const Tensor run_start = std::get<0>(at::cummax(at::where(starts, position, 0), dim));
  const Tensor length = at::where(ends, position - run_start + 1, 0);
  const Tensor best = length.argmax(dim, /*keepdim=*/true);
  Tensor values = sorted.gather(dim, best);
  Tensor indices = order.gather(dim, best);
  if (!keepdim) {
    values = values.squeeze(dim);
    indices = indices.squeeze(dim);
  }
  return {values, indices};
}

// torch.mode(..., out=): CPU's argument checks (its composite refuses devices other than
// CPU, CUDA and XPU, so metalx provides this form too), then mode's results copied out.
std::tuple<Tensor&, Tensor&> modeOut(const Tensor& self, int64_t dim, bool keepdim, Tensor& values, Tensor& indices) {
  TORCH_CHECK(self.device() == values.device(), "expected device '", self.device(), "' but got '", values.device(),
              "' for values output");
  TORCH_CHECK(self.device() == indices.device(), "expected device '", self.device(), "' but got '",
              indices.device(), "' for indices output");
  TORCH_CHECK(self.scalar_type() == values.scalar_type(), "expected scalar type '", self.scalar_type(),
              "' but got '", values.scalar_type(), "' for values output");
  TORCH_CHECK(indices.scalar_type() == at::kLong, "expected scalar type '", at::kLong, "' but got '",
              indices.scalar_type(), "' for indices output");
  auto [v, i] = at::mode(self, dim, keepdim);
  at::native::resize_output(values, v.sizes());
  at::native::resize_output(indices, i.sizes());
  values.copy_(v);
  indices.copy_(i);
  return {values, indices};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mode", TORCH_FN(mode));
  m.impl("mode.values", TORCH_FN(modeOut));
}

}  // namespace
}  // namespace metalx
