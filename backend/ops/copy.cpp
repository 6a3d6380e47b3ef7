// copy_ for metalx: every direction, layout and dtype, with PyTorch's semantics.
//
// Device memory is shared storage the CPU can address, so the CPU side of a copy is
// always one memcpy of a contiguous byte range; everything that depends on layout or
// dtype (gathers, scatters, casts, the neg/conj bits) runs as kernels/copy.metal:
//   metalx -> metalx   a blit when it is a plain byte copy, else the strided kernel;
//   cpu -> metalx      the source's memory span is staged into device memory with one
//                      memcpy, and the kernel scatters it into the destination;
//   metalx -> cpu      the kernel gathers the source into a staging buffer laid out as
//                      the destination (holding the destination's current bytes when it
//                      has gaps), then one memcpy after the stream has finished;
//   metalx:i -> metalx:j  through a CPU tensor.
// Same dtype and the same dense layout on both sides skips the staging: a memcpy once
// the device no longer uses the memory (waiting only if the stream has work queued).
//
// Pinned host memory (pinned_memory.h) is itself a device buffer, so copies to and from
// it skip the staging too: a blit from/to the wrapped pinned buffer when the bytes can
// be copied as they are, else the strided kernel reading/writing it in place.
//
// Synchronous and asynchronous copies (non_blocking), as CUDA defines them:
// - Pageable host memory: always synchronous, whatever non_blocking says. The copy has
//   consumed (or filled) the host memory when it returns, so nothing ever reads host
//   memory that may be freed right after (the MPS bug: non_blocking copies reading
//   freed host memory).
// - Pinned host memory with non_blocking=True: encoded on the stream, committed, and
//   returns without waiting. The pinned block is recorded as used by that command
//   buffer and is not reused (even if its tensor is freed at once) until it completed.
//   As with CUDA, the user synchronizes (torch.metalx.synchronize()) before the CPU
//   reads the destination of a device -> host copy, or writes the source of a
//   host -> device copy; device work queued later on the stream is ordered after it.
//   t.to("cpu", non_blocking=True) allocates a pinned destination (torch's _to_copy
//   does so for PrivateUse1), so it is asynchronous too.
// - Device-side temporaries (staging) are freed at once; the caching allocator reuses
//   their memory only after the kernels that use them have completed.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cstdint>
#include <cstring>
#include <optional>

#include "allocator.h"
#include "core/stream_pool.h"
#include "device.h"
#include "host_wait.h"
#include "launch/kernel_table.h"
#include "launch/torch_dtype.h"
#include "ops/copy/strided_copy.h"
#include "pinned_memory.h"

namespace metalx {
namespace {

using kernels::DType;

bool isMetalx(const at::Tensor& t) { return t.device().type() == c10::DeviceType::PrivateUse1; }

std::optional<DType> kernelDType(c10::ScalarType t) { return launch::storageDtype(t); }

// Elements from the lowest to the highest address a tensor touches (strides are
// never negative in PyTorch, so the lowest is the one at data_ptr()).
int64_t spanElements(const at::Tensor& t) {
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return last + 1;
}

kernels::StridedView viewOf(const at::Tensor& t, const rt::BufferPtr& buffer, size_t byte_offset) {
  kernels::StridedView v;
  v.buffer = buffer;
  v.byte_offset = byte_offset;
  v.dtype = *kernelDType(t.scalar_type());
  v.sizes.assign(t.sizes().begin(), t.sizes().end());
  v.strides.assign(t.strides().begin(), t.strides().end());
  return v;
}

kernels::StridedView deviceView(const at::Tensor& t) {
  auto [buffer, offset] = bufferFor(t);  // from the storage: no registry lookup
  return viewOf(t, buffer, offset);
}

// Same dtype, same sizes, and the same dense layout: the bytes can be copied as they are.
bool sameDenseLayout(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         a.is_non_overlapping_and_dense() && b.is_non_overlapping_and_dense() &&
         (a.strides() == b.strides() || (a.is_contiguous() && b.is_contiguous()));
}

// A device tensor of raw bytes covering `elements` elements of `like`'s dtype.
at::Tensor deviceBytes(int64_t elements, const at::Tensor& like, c10::DeviceIndex device) {
  return at::empty({elements * static_cast<int64_t>(like.element_size())},
                   at::TensorOptions().dtype(at::kByte).device(c10::DeviceType::PrivateUse1, device));
}

// The copy kernels' pipelines: one slot per (destination dtype, source dtype) for the
// converting kernels, one per element size for the byte copies (slot = dtype's, src ==
// dst), so a copy looks its kernel up without building its name.
constexpr int kCopySlots = 2 * kernels::kNumDTypes * kernels::kNumDTypes;
launch::PipelineSlots<kCopySlots> copy_pipelines;

const rt::ComputePipelinePtr& copyPipeline(Stream& stream, const kernels::StridedView& dst,
                                           const kernels::StridedView& src, const kernels::CopyPlan& plan) {
  const int pair = static_cast<int>(dst.dtype) * kernels::kNumDTypes + static_cast<int>(src.dtype);
  return copy_pipelines.get(stream, (plan.bit_copy ? kernels::kNumDTypes * kernels::kNumDTypes : 0) + pair,
                            [&] { return kernels::stridedCopyKernelName(dst.dtype, src.dtype, plan.flags); });
}

void encodeKernelCopy(Stream& stream, const kernels::StridedView& dst, const kernels::StridedView& src,
                      kernels::CopyFlags flags) {
  const kernels::CopyPlan plan = kernels::planCopy(dst, src, flags);
  if (plan.empty) return;
  if (const auto& range = plan.bit_range; range && range->dst_offset % 4 == 0 &&
                                          range->src_offset % 4 == 0 && range->bytes % 4 == 0) {
    stream.encodeBlit([&](rt::BlitEncoder& b) {
      b.copyBuffer(src.buffer, range->src_offset, dst.buffer, range->dst_offset, range->bytes);
    });
    return;
  }
  const rt::ComputePipelinePtr& pipeline = copyPipeline(stream, dst, src, plan);
  stream.encodeCompute([&](rt::ComputeEncoder& e) { kernels::encodePlannedCopy(e, pipeline, plan, dst, src); });
}

// metalx -> metalx on one device. Partially overlapping memory goes through a
// temporary: a kernel must not read what it is overwriting.
void copyOnDevice(const at::Tensor& src, const at::Tensor& dst, kernels::CopyFlags flags) {
  Stream& stream = currentStream(dst.device().index());
  if (at::get_overlap_status(src, dst) == at::MemOverlapStatus::Partial) {
    at::Tensor temp = at::empty(src.sizes(), src.options());
    copyOnDevice(src, temp, {});
    copyOnDevice(temp, dst, flags);
    return;
  }
  encodeKernelCopy(stream, deviceView(dst), deviceView(src), flags);
}

// The CPU is about to touch device memory directly: wait for the stream only if it has
// work queued or running (which may use that memory); an idle stream costs nothing.
void waitForQueuedWork(Stream& stream) {
  if (stream.completedSequence() < stream.currentSequence()) waitForHost(stream);
}

// Dense, same layout: the copy is one memcpy of the bytes, done now.
void copyBytesNow(Stream& stream, const at::Tensor& src, const at::Tensor& dst) {
  waitForQueuedWork(stream);  // queued kernels may still read dst or write src
  std::memcpy(dst.data_ptr(), src.data_ptr(), dst.nbytes());
}

// A host tensor in pinned memory as a view of device `device`'s wrapped buffer (no
// copy); nullopt for pageable memory.
std::optional<kernels::StridedView> pinnedView(const at::Tensor& host, c10::DeviceIndex device) {
  const auto address = reinterpret_cast<uintptr_t>(host.data_ptr());
  if (address % host.element_size() != 0) return std::nullopt;  // kernels need aligned elements
  auto range = pinnedRange(host.data_ptr(), spanElements(host) * host.element_size(), device);
  if (!range) return std::nullopt;
  return viewOf(host, range->buffer, range->offset);
}

// After encoding a copy that reads or writes pinned `host`: either wait for it, or
// (non_blocking) protect the pinned block until its command buffer completes and start
// that command buffer now, so the copy overlaps with whatever the host does next.
void finishPinnedCopy(Stream& stream, const at::Tensor& host, bool non_blocking) {
  // Recorded for blocking copies too: if Ctrl-C ends the wait, the block must not be
  // reused while the copy still runs.
  recordPinnedUse(host.data_ptr(), stream, stream.currentSequence());
  if (!non_blocking) {
    waitForHost(stream);
    return;
  }
  stream.flush();
}

void cpuToDevice(const at::Tensor& src, const at::Tensor& dst, kernels::CopyFlags flags,
                 bool non_blocking) {
  const c10::DeviceIndex device = dst.device().index();
  Stream& stream = currentStream(device);
  const bool bytes_as_they_are = !flags.negate && !flags.conjugate && sameDenseLayout(src, dst);
  if (bytes_as_they_are && !non_blocking) {
    copyBytesNow(stream, src, dst);
    return;
  }
  if (auto host = pinnedView(src, device)) {
    encodeKernelCopy(stream, deviceView(dst), *host, flags);
    finishPinnedCopy(stream, src, non_blocking);
    return;
  }
  // Pageable memory: synchronous even when non_blocking (see the header).
  if (bytes_as_they_are) {
    copyBytesNow(stream, src, dst);
    return;
  }
  // Stage the source's whole memory span (it may have gaps or repeat elements), then
  // let the kernel apply its strides on the device.
  const int64_t span = spanElements(src);
  at::Tensor staged = deviceBytes(span, src, device);
  std::memcpy(staged.data_ptr(), src.data_ptr(), span * src.element_size());
  auto [buffer, offset] = bufferFor(staged.data_ptr());
  encodeKernelCopy(stream, deviceView(dst), viewOf(src, buffer, offset), flags);
  waitForHost(stream);  // synchronous copies: the data is in place on return
}

void deviceToCpu(const at::Tensor& src, const at::Tensor& dst, kernels::CopyFlags flags,
                 bool non_blocking) {
  const c10::DeviceIndex device = src.device().index();
  Stream& stream = currentStream(device);
  const bool bytes_as_they_are = !flags.negate && !flags.conjugate && sameDenseLayout(src, dst);
  if (bytes_as_they_are && !non_blocking) {
    copyBytesNow(stream, src, dst);
    return;
  }
  if (auto host = pinnedView(dst, device)) {
    // The kernel writes dst's elements in place: the bytes between them stay as they are.
    encodeKernelCopy(stream, *host, deviceView(src), flags);
    finishPinnedCopy(stream, dst, non_blocking);
    return;
  }
  if (bytes_as_they_are) {
    copyBytesNow(stream, src, dst);
    return;
  }
  // Gather into device memory laid out exactly as dst's span, then copy the span out.
  const int64_t span = spanElements(dst);
  const size_t span_bytes = span * dst.element_size();
  at::Tensor staged = deviceBytes(span, dst, device);
  if (!dst.is_non_overlapping_and_dense())  // keep the bytes between dst's elements
    std::memcpy(staged.data_ptr(), dst.data_ptr(), span_bytes);
  auto [buffer, offset] = bufferFor(staged.data_ptr());
  encodeKernelCopy(stream, viewOf(dst, buffer, offset), deviceView(src), flags);
  waitForHost(stream);
  std::memcpy(dst.data_ptr(), staged.data_ptr(), span_bytes);
}

// dtypes without a copy kernel (uint16/32/64, complex32, float8, quantized): the CPU
// converts, reading and writing device memory in place once the device is idle.
void copyOnCpuInPlace(const at::Tensor& src, const at::Tensor& dst) {
  auto alias = [](const at::Tensor& t) {
    if (!isMetalx(t)) return t;
    synchronizeCurrentStream(t.device().index());
    at::Tensor alias = at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(at::kCPU));
    alias._set_conj(t.is_conj());  // the alias reads the same values as t
    alias._set_neg(t.is_neg());
    return alias;
  };
  at::Tensor s = alias(src), d = alias(dst);
  d.copy_(s);
}

void copyImpl(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(isMetalx(self) || isMetalx(dst), "metalx copy called without a metalx tensor");
  if (dst.numel() == 0) return;
  at::assert_no_internal_overlap(dst);
  const at::Tensor src = self.sizes() == dst.sizes() ? self : self.expand(dst.sizes());
  if (!kernelDType(src.scalar_type()) || !kernelDType(dst.scalar_type())) {
    copyOnCpuInPlace(src, dst);
    return;
  }
  // The bits a view carries are resolved here: the destination's memory must hold the
  // values that, read through its own bits, equal the source's values.
  kernels::CopyFlags flags;
  flags.negate = src.is_neg() != dst.is_neg();
  flags.conjugate = src.is_conj() != dst.is_conj();
  if (isMetalx(src) && isMetalx(dst)) {
    if (src.device() == dst.device()) {
      copyOnDevice(src, dst, flags);
    } else {
      at::Tensor host = at::empty(dst.sizes(), dst.options().device(at::kCPU));
      deviceToCpu(src, host, flags, false);
      cpuToDevice(host, dst, {}, false);
    }
  } else if (isMetalx(dst)) {
    cpuToDevice(src, dst, flags, non_blocking);
  } else {
    deviceToCpu(src, dst, flags, non_blocking);
  }
}

// Schema: _copy_from(Tensor self, Tensor dst, bool non_blocking) copies self into dst.
at::Tensor copyFrom(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  copyImpl(self, dst, non_blocking);
  return dst;
}

at::Tensor copyFromAndResize(const at::Tensor& self, const at::Tensor& dst) {
  at::native::resize_output(dst, self.sizes());
  copyImpl(self, dst, false);
  return dst;
}

// .item(): read the one element in place through a CPU tensor aliasing it.
c10::Scalar localScalarDense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(), " elements cannot be converted to Scalar");
  synchronizeCurrentStream(self.device().index());
  const at::Tensor alias = at::from_blob(self.data_ptr(), {1}, self.options().device(c10::DeviceType::CPU));
  return at::_local_scalar_dense(alias);
}

// copyImpl resolves the neg and conj bits itself, in the kernel. Without these, torch's
// Negative/Conjugate fallbacks would materialise the view first with clone(), whose
// copy_ calls _copy_from on the same view again: endless recursion. (_copy_from is only
// reached for out-of-tree devices, so this changes nothing for CPU tensors.)
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(copyFrom));
  m.impl("_copy_from_and_resize", TORCH_FN(copyFromAndResize));
  m.impl("_local_scalar_dense", TORCH_FN(localScalarDense));
}

}  // namespace
}  // namespace metalx
