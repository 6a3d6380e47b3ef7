// Copies between CPU and metalx and within metalx, and reading one element.
//
// Device memory is shared storage that the CPU can address, so once the device is
// idle a copy is a memcpy. For now only the memcpy case is supported: same dtype
// and the same dense layout on both sides (what .to("metalx"), .cpu() and the CPU
// fallback produce for contiguous tensors).
// TODO(metalx strided copies): casting and strided/non-dense copies (a GPU gather/
// scatter + cast kernel for metalx<->metalx, staging for CPU<->metalx).
#include <ATen/core/Tensor.h>
#include <ATen/ops/_local_scalar_dense.h>
#include <ATen/ops/from_blob.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cstring>

#include "device.h"

namespace metalx {
namespace {

bool isMetalx(const at::Tensor& t) { return t.device().type() == c10::DeviceType::PrivateUse1; }

// A plain byte copy is correct when both tensors lay the same elements out the same
// way over one dense, non-overlapping block of memory.
bool isMemcpyCompatible(const at::Tensor& src, const at::Tensor& dst) {
  if (src.dtype() != dst.dtype() || src.sizes() != dst.sizes()) return false;
  if (src.is_contiguous() && dst.is_contiguous()) return true;
  return src.is_non_overlapping_and_dense() && dst.is_non_overlapping_and_dense() &&
         src.strides() == dst.strides();
}

void copyBytes(const at::Tensor& src, const at::Tensor& dst) {
  TORCH_CHECK(src.sizes() == dst.sizes(), "metalx copy: size mismatch, source ", src.sizes(),
              " vs destination ", dst.sizes());
  TORCH_CHECK(isMemcpyCompatible(src, dst),
              "metalx copy from ", src.device(), " (", src.scalar_type(), ", strides ",
              src.strides(), ") to ", dst.device(), " (", dst.scalar_type(), ", strides ",
              dst.strides(), ") is not yet supported: only copies between tensors of the "
              "same dtype and the same dense layout are implemented. Make both contiguous "
              "and of one dtype first (e.g. t.contiguous().to(dtype)) on the CPU side.");
  if (src.numel() == 0) return;
  // The CPU side may only touch device memory when no queued work uses it.
  if (isMetalx(src)) synchronizeDevice(src.device().index());
  if (isMetalx(dst)) synchronizeDevice(dst.device().index());
  std::memmove(dst.data_ptr(), src.data_ptr(), src.nbytes());
}

// Schema: _copy_from(Tensor self, Tensor dst, bool non_blocking) copies self into dst.
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  // Synchronous for now: non_blocking only promises the copy may be asynchronous.
  copyBytes(self, dst);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::native::resize_output(dst, self.sizes());
  copyBytes(self, dst);
  return dst;
}

// .item(): read the one element in place through a CPU tensor aliasing it.
c10::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  synchronizeDevice(self.device().index());
  const at::Tensor alias = at::from_blob(self.data_ptr(), {1},
                                         self.options().device(c10::DeviceType::CPU));
  return at::_local_scalar_dense(alias);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
}

}  // namespace
}  // namespace metalx
