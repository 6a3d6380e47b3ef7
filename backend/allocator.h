// Device memory for metalx tensors.
//
// Every tensor storage on a metalx device is one runtime buffer (shared storage:
// the CPU can address it). The storage's data pointer is the buffer's contents(),
// so kernels need the buffer back from a tensor: bufferFor(tensor) reads it from the
// storage's allocation; bufferFor(pointer) finds it in the registry of live buffers.
//
// Memory comes from a caching allocator per device (core/caching_allocator.h): size
// classes, reuse after in-flight work, a hard limit, statistics.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/StorageImpl.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "core/caching_allocator.h"
#include "metalx/runtime/buffer.h"

namespace at {
class Tensor;
}

namespace metalx {

// The allocator registered for the metalx device type (REGISTER_ALLOCATOR).
c10::DeviceAllocator* deviceAllocator();

// `nbytes` of device memory on device `index`, as tensors get it.
c10::DataPtr allocateOn(c10::DeviceIndex index, size_t nbytes);

// The live buffer containing `ptr` and the byte offset of `ptr` inside it. `ptr` may
// also point one past the end of a buffer (an empty view at its end). Throws a
// c10::Error if no live metalx allocation contains `ptr`.
std::pair<rt::BufferPtr, size_t> bufferFor(const void* ptr);
// The buffer holding `tensor`'s first element (data_ptr()) and that element's byte
// offset in it. Constant time and lock-free for storages metalx allocated (what a
// kernel launch binds per op); others go through the registry as bufferFor(pointer).
std::pair<rt::BufferPtr, size_t> bufferFor(const at::Tensor& tensor);

// The device index owning `ptr`, or -1 if `ptr` is not in a live metalx allocation.
c10::DeviceIndex deviceOfPointer(const void* ptr);

// The caching allocator's statistics of one device, and their controls.
AllocatorStats allocatorStats(c10::DeviceIndex index);
void resetPeakAllocatorStats(c10::DeviceIndex index);
void emptyAllocatorCache();

// Introspection and the per-process limit (torch.metalx.memory_snapshot,
// set_per_process_memory_fraction, mem_get_info).
std::vector<SegmentSnapshot> allocatorSnapshot(c10::DeviceIndex index);
void setAllocatorMemoryFraction(c10::DeviceIndex index, double fraction);
double allocatorMemoryFraction(c10::DeviceIndex index);
uint64_t allocatorLimit(c10::DeviceIndex index);
// (free, total) bytes: total is the allocator's limit, free what of it is not held by
// tensors (cached blocks count as free: they are released on demand).
std::pair<size_t, size_t> allocatorMemoryInfo(c10::DeviceIndex index);

// Grows or shrinks a metalx storage to `nbytes`, keeping the common prefix of its
// contents (Storage.resize_, Tensor.resize_).
void resizeStorageBytes(c10::StorageImpl& storage, size_t nbytes);

}  // namespace metalx
