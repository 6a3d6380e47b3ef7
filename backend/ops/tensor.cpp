// Tensor creation, views and storage manipulation on metalx: the ops every device
// must implement itself (they touch memory or TensorImpl metadata, so the CPU
// fallback cannot do them).
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "allocator.h"
#include "device.h"

namespace metalx {
namespace {

const c10::DispatchKeySet kKeys(c10::DispatchKey::PrivateUse1);

// Switches to the requested device for the allocation, after checking that it
// exists (the allocator allocates on the current device).
c10::OptionalDeviceGuard guardFor(std::optional<c10::Device> device) {
  if (device && device->has_index()) checkDeviceIndex(device->index());
  return c10::OptionalDeviceGuard(device);
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout,
                               std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "metalx supports only strided tensors, got layout ", *layout);
  auto guard = guardFor(device);
  return at::detail::empty_generic(size, deviceAllocator(), kKeys,
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "metalx supports only strided tensors, got layout ", *layout);
  auto guard = guardFor(device);
  return at::detail::empty_strided_generic(size, stride, deviceAllocator(), kKeys,
                                           c10::dtype_or_default(dtype));
}

// Sets sizes (and strides, or contiguous strides when none are given) and grows
// the storage if the new shape reaches past its end.
void reshapeInPlace(at::TensorImpl* self, c10::IntArrayRef size,
                    std::optional<c10::IntArrayRef> stride) {
  const size_t itemsize = self->dtype().itemsize();
  const int64_t offset = self->storage_offset();
  size_t needed = 0;
  if (stride) {
    self->set_sizes_and_strides(size, *stride);
    needed = at::detail::computeStorageNbytes(size, *stride, itemsize, offset);
  } else {
    self->set_sizes_contiguous(size);
    needed = at::detail::computeStorageNbytesContiguous(size, itemsize, offset);
  }
  // An empty tensor needs no storage, whatever its offset says.
  if (self->numel() == 0) return;
  const c10::Storage& storage = self->unsafe_storage();
  if (needed > storage.nbytes()) resizeStorageBytes(*storage.unsafeGetStorageImpl(), needed);
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  reshapeInPlace(self.unsafeGetTensorImpl(), size, std::nullopt);
  if (memory_format) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve,
                "resize_: unsupported memory format ", *memory_format);
    self.unsafeGetTensorImpl()->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& set_storage_offset(at::Tensor& self, c10::Storage source, int64_t storage_offset,
                               c10::IntArrayRef size, c10::IntArrayRef stride) {
  // An empty stride list (the schema's default) means "contiguous".
  const bool has_stride = !stride.empty() || size.empty();
  const c10::IntArrayRef checked_stride =
      has_stride ? stride : c10::IntArrayRef();
  at::native::checkSetStorage(self, std::move(source), storage_offset, size, checked_stride);
  self.unsafeGetTensorImpl()->set_storage_offset(storage_offset);
  reshapeInPlace(self.unsafeGetTensorImpl(), size,
                 has_stride ? std::optional<c10::IntArrayRef>(stride) : std::nullopt);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source) {
  const int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage_offset(self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.unsafeGetTensorImpl() == source.unsafeGetTensorImpl()) return self;
  return set_storage_offset(self, source.storage(), source.storage_offset(), source.sizes(),
                            source.strides());
}

// set_() with no source: an empty storage on self's device.
at::Tensor& set_empty(at::Tensor& self) {
  c10::OptionalDeviceGuard guard(self.device());
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, deviceAllocator(), /*resizable=*/true);
  return set_storage_offset(self, std::move(empty), 0, {0}, {});
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  // A view (as_strided), as on CPU/CUDA: repeat is unfold views of its output and one
  // device copy into them, so it runs natively through this.
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  // complex <-> (real, imag) pairs: views, no data moves (real, imag and complex64's
  // abs, angle, sum and mean go through them).
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage", TORCH_FN(set_storage));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage_offset));
  m.impl("set_.source_Tensor", TORCH_FN(set_tensor));
  m.impl("set_", TORCH_FN(set_empty));
}

}  // namespace
}  // namespace metalx
