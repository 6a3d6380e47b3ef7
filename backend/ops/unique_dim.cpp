// torch.unique and torch.unique_consecutive along a dim (unique_dim,
// unique_dim_consecutive) on metalx: the unique slices along `dim`, each slice's group
// (inverse) and each group's size (counts), from native sorts, compares, scans and
// scatters; no kernel of their own.
//
// The slices, flattened to rows of an [n, d] matrix, are ordered lexicographically as
// CPU's comparator orders them, without sorting rows element by element d times: every
// column is replaced by its dense rank among the rows (one batched sort of all columns),
// then adjacent columns are paired into one key, rank_a * n + rank_b, which orders the
// pairs lexicographically, and ranked again; after log2(d) rounds one column is left:
// each row's rank among the distinct rows, which is its group. NaN is never equal to
// itself (every NaN its own rank, above every number), so a row holding NaN is unique,
// as at::equal makes it on CPU; among such rows the order is the sort's (CPU's
// comparator leaves it unspecified).
// The number of groups sizes the outputs: one synchronisation, as on CPU and CUDA.
// Empty inputs (CPU's special cases and errors), 0-dim inputs and dtypes without sort
// kernels run CPU's kernel on the fallback.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <limits>

#include "cpu_fallback.h"
#include "sort_lines.h"

namespace metalx {
namespace {

using at::Tensor;
using Result = std::tuple<Tensor, Tensor, Tensor>;

// Whether the device path covers `self`: the rank keys (rank * n + rank) must fit int64.
bool coversUniqueDim(const Tensor& self) {
  return self.dim() > 0 && self.numel() > 0 && canSortLines(self) &&
         self.numel() < int64_t(std::numeric_limits<int32_t>::max());
}

// Row i's first-of-run flag: whether row i differs from row i - 1 in any column (row 0
// starts the first run). `rows`: [n, d].
Tensor runStarts(const Tensor& rows) {
  const int64_t n = rows.size(0);
  Tensor starts = at::ones({n}, rows.options().dtype(at::kBool));
  if (n > 1) {
    Tensor rest = starts.narrow(0, 1, n - 1);
    at::any_out(rest, rows.narrow(0, 1, n - 1).ne(rows.narrow(0, 0, n - 1)), 1);
  }
  return starts;
}

// The dense rank of every element of `keys` ([n, d]) within its column: equal values
// share a rank, ranks grow with the values.
Tensor columnRanks(const Tensor& keys) {
  const int64_t n = keys.size(0);
  auto [sorted, order] = at::sort(keys, /*stable=*/true, 0, /*descending=*/false);
  Tensor starts = at::ones(sorted.sizes(), keys.options().dtype(at::kBool));
  if (n > 1) {
    Tensor rest = starts.narrow(0, 1, n - 1);
    at::ne_out(rest, sorted.narrow(0, 1, n - 1), sorted.narrow(0, 0, n - 1));
  }
  const Tensor sorted_rank = at::cumsum(starts, 0, at::kLong).sub_(1);
  return at::empty_like(sorted_rank).scatter_(0, order, sorted_rank);
}

// Each row's rank among the distinct rows of `rows` ([n, d]) in lexicographic order.
Tensor rowRanks(const Tensor& rows) {
  const int64_t n = rows.size(0);
  Tensor ranks = columnRanks(rows);
  while (ranks.size(1) > 1) {
    const int64_t d = ranks.size(1), pairs = d / 2;
    const Tensor paired = ranks.narrow(1, 0, 2 * pairs).reshape({n, pairs, 2});
    Tensor keys = paired.select(2, 0) * n + paired.select(2, 1);
    if (d % 2 == 1) keys = at::cat({keys, ranks.narrow(1, d - 1, 1)}, 1);
    ranks = columnRanks(keys);
  }
  return ranks.view({n});
}

// The outputs from each slice's group: the first slice of every group (in input order),
// the groups, and their sizes. `moved`: the input with `dim` moved first.
Result fromGroups(const Tensor& moved, int64_t dim, const Tensor& group, int64_t groups) {
  const int64_t n = moved.size(0);
  const auto long_options = group.options();
  const Tensor first = at::full({groups}, n, long_options)
                           .scatter_reduce_(0, group, at::arange(n, long_options), "amin", /*include_self=*/true);
  const Tensor counts = at::zeros({groups}, long_options).scatter_add_(0, group, at::ones({n}, long_options));
  return {moved.index_select(0, first).movedim(0, dim), group, counts};
}

Result uniqueDim(const Tensor& self, int64_t dim_, bool sorted, bool return_inverse, bool return_counts) {
  if (!coversUniqueDim(self))
    return resultTensors<3>(cpuFallbackCall("aten::unique_dim", "", self, dim_, sorted, return_inverse, return_counts));
  const int64_t dim = at::maybe_wrap_dim(dim_, self.dim());
  const Tensor moved = self.movedim(dim, 0);
  const Tensor group = rowRanks(moved.reshape({moved.size(0), -1}));
  const int64_t groups = group.max().item<int64_t>() + 1;
  return fromGroups(moved, dim, group, groups);
}

Result uniqueDimConsecutive(const Tensor& self, int64_t dim_, bool return_inverse, bool return_counts) {
  if (!coversUniqueDim(self))
    return resultTensors<3>(
        cpuFallbackCall("aten::unique_dim_consecutive", "", self, dim_, return_inverse, return_counts));
  const int64_t dim = at::maybe_wrap_dim(dim_, self.dim());
  const Tensor moved = self.movedim(dim, 0);
  const int64_t n = moved.size(0);
  const Tensor group = at::cumsum(runStarts(moved.reshape({n, -1})), 0, at::kLong).sub_(1);
  const int64_t groups = group.narrow(0, n - 1, 1).item<int64_t>() + 1;
  return fromGroups(moved, dim, group, groups);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("unique_dim", TORCH_FN(uniqueDim));
  m.impl("unique_dim_consecutive", TORCH_FN(uniqueDimConsecutive));
}

}  // namespace
}  // namespace metalx
