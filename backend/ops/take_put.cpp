// take and put_ (put is torch's composite over put_) on the device: both address `self`
// as if it were flattened, so they run as index_select / index_put_ / index_add_
// (backend/ops/indexing.cpp's kernels) over a flat view of self, with negative indices
// wrapped first. Index values are checked on the device (ops/index_check.h), raising
// CPU's IndexError and message at the next host wait (at the op with
// METALX_SYNC_INDEX_CHECKS=1); argument errors are CPU's too.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "device.h"
#include "ops/index_check.h"

namespace metalx {
namespace {

using at::Tensor;

// CPU's IndexError for the first index outside [-numel, numel), naming `op`.
void checkFlatIndices(const Tensor& index, int64_t numel, const char* op) {
  checkIndicesOnDevice(index, boundsCheck(numel, 0, IndexMessage::FlatOutOfRange, /*negative_ok=*/true), op);
}

// The flat indices with negative ones wrapped, on self's device.
// A value below -numel (reported by the check) becomes numel, which the kernels below
// skip, rather than wrapping once into another negative index they would wrap again.
Tensor wrappedFlat(const Tensor& index, int64_t numel) {
  const Tensor flat = index.reshape(-1);
  const Tensor wrapped = at::where(flat.lt(0), flat.add(numel), flat);
  return wrapped.masked_fill(wrapped.lt(0), numel);
}

Tensor& takeOut(const Tensor& self, const Tensor& index, Tensor& out) {
  TORCH_CHECK(index.scalar_type() == at::kLong, "take(): Expected a long tensor for index, but got ",
              index.scalar_type());
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "take(): self and out expected to have the same dtype, but got "
              "self.dtype = ", self.scalar_type(), " and out.dtype = ", out.scalar_type());
  TORCH_CHECK(self.device() == out.device() && self.device() == index.device(),
              "take(): self, index and out expected to be in the same device, but got self.device = ", self.device(),
              ", index.device = ", index.device(), ", and out.device = ", out.device());
  TORCH_CHECK_INDEX(!(self.numel() == 0 && index.numel() != 0), "take(): tried to take from an empty tensor");
  checkFlatIndices(index, self.numel(), "take");
  at::native::resize_output(out, index.sizes());
  if (index.numel() == 0) return out;
  const Tensor taken = self.reshape(-1).index_select(0, wrappedFlat(index, self.numel()));
  out.copy_(taken.view(index.sizes()));
  return out;
}

Tensor take(const Tensor& self, const Tensor& index) {
  Tensor out = at::empty(index.sizes(), self.options());
  return takeOut(self, index, out);
}

Tensor& putInplace(Tensor& self, const Tensor& index, const Tensor& source, bool accumulate) {
  TORCH_CHECK(index.scalar_type() == at::kLong, "put_(): Expected a long tensor for index, but got ",
              index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "put_(): self and source expected to have the same dtype, "
              "but got self.dtype = ", self.scalar_type(), " and source.dtype = ", source.scalar_type());
  TORCH_CHECK(self.device() == source.device() && self.device() == index.device(),
              "put_(): self, index and source expected to be in the same device, but got self.device = ",
              self.device(), ", index.device = ", index.device(), ", and source.device = ", source.device());
  TORCH_CHECK_INDEX(source.numel() == index.numel(), "put_(): Expected source and index to have the same number of "
                    "elements, but got source.numel() = ", source.numel(), ", index.numel() = ", index.numel());
  TORCH_CHECK_INDEX(!(self.numel() == 0 && index.numel() != 0), "put_(): Tried to put elements into an empty tensor");
  at::assert_no_internal_overlap(self);
  at::assert_no_overlap(self, index);
  if (index.numel() == 0) return self;
  checkFlatIndices(index, self.numel(), "put_");
  const Tensor flat_index = wrappedFlat(index, self.numel());
  const Tensor flat_source = source.reshape(-1);
  // A view when self is contiguous, else a copy written back below.
  Tensor flat = self.is_contiguous() ? self.view(-1) : self.reshape(-1).clone();
  if (accumulate) {
    flat.index_add_(0, flat_index, flat_source);
  } else {
    flat.index_put_({flat_index}, flat_source);  // moves every dtype natively, float64 too
  }
  if (!self.is_contiguous()) self.copy_(flat.view(self.sizes()));
  return self;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("take", TORCH_FN(take));
  m.impl("take.out", TORCH_FN(takeOut));
  m.impl("put_", TORCH_FN(putInplace));
}

}  // namespace
}  // namespace metalx
