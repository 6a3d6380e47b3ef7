// searchsorted and bucketize (Tensor and Scalar values, out=, right/side, sorter,
// out_int32) on the device (kernels/searchsorted.metal): a thread per value runs a
// binary search in its row of boundaries. The argument checks, the promotion of values
// and boundaries to one dtype and the output's sizing are torch's own helpers
// (ATen/native/BucketizationUtils.h), so errors are CPU's. float64 (and dtypes CPU
// rejects, such as bool) run CPU's kernel on the fallback.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/BucketizationUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <algorithm>

#include "allocator.h"
#include "core/stream_pool.h"
#include "cpu_fallback.h"
#include "launch/kernel_table.h"
#include "launch/threads.h"
#include "launch/torch_dtype.h"

namespace metalx {
namespace {

using at::Tensor;
using kernels::DType;

// Mirrors kernels/searchsorted.metal's SearchParams.
struct SearchParams {
  uint64_t count = 0;
  uint64_t inner = 1;
  uint64_t bd_len = 0;
  uint32_t bd_rows = 0;
  uint32_t right = 0;
  uint32_t has_sorter = 0;
  uint32_t out_int32 = 0;
};
static_assert(sizeof(SearchParams) == 40, "SearchParams must match the kernel");

launch::KernelFamily searchKernels("searchsorted", launch::kNumberTypes);

std::optional<DType> kernelType(c10::ScalarType t) {
  const auto d = launch::storageDtype(t);
  if (d && searchKernels.supports(*d)) return d;
  return std::nullopt;
}

c10::IValue sideValue(std::optional<c10::string_view> side) {
  if (!side) return c10::IValue();
  return std::string(*side);
}

Tensor& searchsortedOut(const Tensor& sorted, const Tensor& self, bool out_int32, bool right,
                        std::optional<c10::string_view> side, const std::optional<Tensor>& sorter_opt,
                        Tensor& result) {
  c10::MaybeOwned<Tensor> sorter_owned = at::borrow_from_optional_tensor(sorter_opt);
  const Tensor& sorter = *sorter_owned;
  at::native::searchsorted_pre_check(sorted, self, result, out_int32, right, side, sorter);
  at::native::resize_output(result, self.sizes());
  if (self.numel() == 0) return result;
  const bool is_right = side ? *side == "right" : right;

  Tensor trimmed_input, trimmed_boundaries, trimmed_sorter;
  at::native::searchsorted_maybe_trim_input_tensors(trimmed_input, trimmed_boundaries, trimmed_sorter, self, sorted,
                                                    sorter);
  const Tensor& values = trimmed_input.defined() ? trimmed_input : self;
  const Tensor& boundaries = trimmed_boundaries.defined() ? trimmed_boundaries : sorted;
  const Tensor& order = trimmed_sorter.defined() ? trimmed_sorter : sorter;
  const auto type = kernelType(values.scalar_type());
  if (!type || !self.device().is_privateuseone()) {
    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::searchsorted", "Tensor_out");
    torch::jit::Stack stack{sorted, self, out_int32, right, sideValue(side), sorter_opt, result};
    cpuFallback(op, &stack);
    return result;
  }

  Tensor out = result.is_contiguous() ? result : at::empty(result.sizes(), result.options());
  SearchParams p;
  p.count = static_cast<uint64_t>(values.numel());
  p.inner = values.dim() == 0 ? 1 : static_cast<uint64_t>(values.size(-1));
  p.bd_len = static_cast<uint64_t>(boundaries.size(-1));
  p.bd_rows = boundaries.dim() == 1 ? 0 : 1;
  p.right = is_right ? 1 : 0;
  p.has_sorter = order.defined() ? 1 : 0;
  p.out_int32 = out_int32 ? 1 : 0;

  Stream& stream = currentStream(self.device().index());
  const Tensor& sorter_or_unread = order.defined() ? order : boundaries;  // unread without a sorter
  // out is bound twice: as the kernel's int64 and int32 outputs (p.out_int32 picks one).
  launch::encodeKernel(stream, searchKernels.pipeline(stream, launch::Variant::Plain, *type),
                       {&values, &boundaries, &sorter_or_unread, &out, &out}, p,
                       launch::Grid::threads(std::min<uint64_t>(p.count, launch::kGridStrideThreads)));
  if (!out.is_same(result)) result.copy_(out);
  return result;
}

Tensor emptyResult(const Tensor& like, bool out_int32) {
  return at::empty({0}, like.options().dtype(out_int32 ? at::kInt : at::kLong), at::MemoryFormat::Contiguous);
}

Tensor searchsortedTensor(const Tensor& sorted, const Tensor& self, bool out_int32, bool right,
                    std::optional<c10::string_view> side, const std::optional<Tensor>& sorter) {
  Tensor result = emptyResult(self, out_int32);
  return searchsortedOut(sorted, self, out_int32, right, side, sorter, result);
}

Tensor& searchsortedScalarOut(const Tensor& sorted, const at::Scalar& self, bool out_int32, bool right,
                              std::optional<c10::string_view> side, const std::optional<Tensor>& sorter,
                              Tensor& result) {
  const Tensor value = at::native::searchsorted_scalar_tensor(self, sorted.device());
  return searchsortedOut(sorted, value, out_int32, right, side, sorter, result);
}

Tensor searchsortedScalar(const Tensor& sorted, const at::Scalar& self, bool out_int32, bool right,
                          std::optional<c10::string_view> side, const std::optional<Tensor>& sorter) {
  const Tensor value = at::native::searchsorted_scalar_tensor(self, sorted.device());
  return searchsortedTensor(sorted, value, out_int32, right, side, sorter);
}

Tensor& bucketizeOut(const Tensor& self, const Tensor& boundaries, bool out_int32, bool right, Tensor& result) {
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(", boundaries.dim(), ")");
  return searchsortedOut(boundaries, self, out_int32, right, std::nullopt, std::nullopt, result);
}

Tensor bucketizeTensor(const Tensor& self, const Tensor& boundaries, bool out_int32, bool right) {
  Tensor result = emptyResult(self, out_int32);
  return bucketizeOut(self, boundaries, out_int32, right, result);
}

Tensor& bucketizeScalarOut(const at::Scalar& self, const Tensor& boundaries, bool out_int32, bool right,
                           Tensor& result) {
  return bucketizeOut(at::native::searchsorted_scalar_tensor(self, boundaries.device()), boundaries, out_int32, right,
                      result);
}

Tensor bucketizeScalar(const at::Scalar& self, const Tensor& boundaries, bool out_int32, bool right) {
  return bucketizeTensor(at::native::searchsorted_scalar_tensor(self, boundaries.device()), boundaries, out_int32,
                         right);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("searchsorted.Tensor", TORCH_FN(searchsortedTensor));
  m.impl("searchsorted.Tensor_out", TORCH_FN(searchsortedOut));
  m.impl("searchsorted.Scalar", TORCH_FN(searchsortedScalar));
  m.impl("searchsorted.Scalar_out", TORCH_FN(searchsortedScalarOut));
  m.impl("bucketize.Tensor", TORCH_FN(bucketizeTensor));
  m.impl("bucketize.Tensor_out", TORCH_FN(bucketizeOut));
  m.impl("bucketize.Scalar", TORCH_FN(bucketizeScalar));
  m.impl("bucketize.Scalar_out", TORCH_FN(bucketizeScalarOut));
}

}  // namespace
}  // namespace metalx
