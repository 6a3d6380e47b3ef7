// metalx storages in OS shared memory, so torch.multiprocessing can pass metalx tensors
// between processes the way it passes CPU tensors: both processes map the same pages
// and each wraps them as its own device buffer (Device::wrapHostMemory, Metal's
// newBufferWithBytesNoCopy). Writes in one process are seen by the other, as with CPU
// and CUDA IPC tensors; ordering the two processes' device work is the user's job (as
// with CUDA: synchronize, then signal the other process).
//
// The shared memory itself (the file descriptor or file name, its reference counts and
// the pickling) is torch's: a shared storage keeps the CPU storage torch made for it.
#pragma once

#include <c10/core/Storage.h>
#include <c10/core/StorageImpl.h>

#include <cstddef>
#include <utility>

#include "metalx/runtime/buffer.h"

namespace metalx {

// The CPU storage in shared memory behind `storage`, or an empty Storage if `storage`
// is ordinary device memory.
c10::Storage sharedHostStorage(const c10::StorageImpl& storage);

// Moves `storage` onto `host`, a CPU storage in shared memory at least as large: waits
// for the device's work, copies the bytes, and from then on the storage's data pointer
// is `host`'s memory (the old device memory goes back to the allocator). Views of the
// storage stay valid: they hold the storage, not its old pointer.
void moveStorageToSharedMemory(c10::StorageImpl& storage, const c10::Storage& host);

// A new metalx storage on device `index` whose memory is `host`'s (a CPU storage in
// shared memory, typically mapped from another process), without copying.
c10::Storage wrapSharedMemory(const c10::Storage& host, c10::DeviceIndex index);

// For bufferFor(): the buffer and byte offset of `data` when `storage` is a shared
// storage; false for any other storage.
bool sharedBufferFor(const c10::DataPtr& storage, const void* data, rt::BufferPtr* buffer, size_t* offset);

// For bufferFor(pointer) and deviceOfPointer(): finds the shared storage containing
// `ptr`. `buffer`/`offset` may be null.
bool lookupSharedPointer(const void* ptr, rt::BufferPtr* buffer, size_t* offset, c10::DeviceIndex* device);

}  // namespace metalx
