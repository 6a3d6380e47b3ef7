// Pinned host memory for metalx: what torch calls "pinned" (`pin_memory=True`,
// `t.pin_memory()`, `t.is_pinned()`, DataLoader(pin_memory=True)).
//
// On Apple GPUs host and device share memory, so "pinned" means: page-aligned host
// memory the device can read and write in place, because it is wrapped as a runtime
// buffer (Device::wrapHostMemory, newBufferWithBytesNoCopy). Copies between pinned
// memory and metalx then need no staging memcpy, and may be asynchronous
// (non_blocking=True, ops_copy.cpp).
//
// Design:
// - Allocations are rounded up to the host page size and cached: a freed block is
//   reused for a later request it fits (best fit, at most twice the request), as
//   torch.cuda's host allocator does, because allocating and wrapping host memory per
//   batch is slow. torch.accelerator.empty_host_cache() gives cached blocks back; like
//   torch.cuda's, the cache is otherwise unbounded.
// - Buffers belong to one device (the runtime rejects another device's buffer in an
//   encoder), so a block is wrapped once per device that uses it, lazily, and the
//   wrappers live as long as the block's memory. Nothing is staged.
// - A block an asynchronous copy used may still be read or written by the device after
//   its tensor is freed. Each such use is recorded as (stream, command buffer
//   sequence); a freed block becomes reusable only once every recorded stream has
//   completed that sequence (Stream::onCompleted), never earlier. So a non_blocking
//   copy can never read host memory that was freed and handed to someone else.
// All functions are thread-safe.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>

#include <cstddef>
#include <cstdint>
#include <optional>

#include "metalx/runtime/buffer.h"

namespace metalx {

class Stream;

// The allocator torch gets from the hooks (getPinnedMemoryAllocator); the same object
// is registered as at::getHostAllocator(PrivateUse1) (an at::HostAllocator: stats,
// empty_cache, record_event). Returned as a plain Allocator so that callers need not
// include ATen's host allocator header.
c10::Allocator* pinnedAllocator();

// True if `ptr` is inside a live (allocated) pinned block.
bool isPinnedPointer(const void* ptr);

// Pinned bytes [ptr, ptr + bytes) as a buffer of device `device` and the byte offset
// of `ptr` in it; nullopt if they are not wholly inside one live pinned block.
struct PinnedRange {
  rt::BufferPtr buffer;
  size_t offset;
};
std::optional<PinnedRange> pinnedRange(const void* ptr, size_t bytes, c10::DeviceIndex device);

// The device may use the pinned block containing `ptr` until `stream` has completed
// command buffer `sequence`: the block is not reused before that.
void recordPinnedUse(const void* ptr, Stream& stream, uint64_t sequence);

struct PinnedStats {
  uint64_t allocated_bytes = 0, peak_allocated_bytes = 0;  // in blocks held by tensors
  uint64_t reserved_bytes = 0, peak_reserved_bytes = 0;    // all host memory held
  uint64_t pending_free_bytes = 0;  // freed, waiting for the device to finish with them
  uint64_t active_blocks = 0, peak_active_blocks = 0;
  uint64_t cached_blocks = 0;  // every block held: active, pending or free
  uint64_t allocations = 0, frees = 0;
  uint64_t host_allocations = 0, host_frees = 0;  // memory obtained from / given back to the OS
  uint64_t cache_hits = 0;
  uint64_t wrapped_buffers = 0;  // runtime buffers created (one per block and device)
};
PinnedStats pinnedStats();

}  // namespace metalx
