// Sorting every line of a tensor along one dim on the device (kernels/sort.metal): the
// one launcher sort, argsort, topk, randperm, multinomial and unique are built on.
#pragma once

#include <ATen/core/Tensor.h>

namespace metalx {

// Whether sortLines can sort `self` natively (its dtype has kernels, its lines fit the
// kernels' dims and 32-bit positions); otherwise callers run the op's CPU fallback.
bool canSortLines(const at::Tensor& self);

// Sorts each line of `self` along `dim` (stable: equal values keep their order; NaN
// above everything, -0 equal to +0; `descending` reverses the order of values, not of
// ties) and writes `k` sorted positions of each line, from the `start`th, to `indices`
// (int64, self's sizes but `k` along dim) and, when `values` is given, the values at them
// (self's dtype and that shape). Any strides; `values` must not overlap `self`.
void sortLines(const at::Tensor& self, int64_t dim, bool descending, int64_t k, const at::Tensor* values,
               const at::Tensor& indices, int64_t start = 0);

}  // namespace metalx
