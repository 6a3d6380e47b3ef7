// The pinned host allocator (see pinned_memory.h).
#include "pinned_memory.h"

#include <ATen/Context.h>
#include <ATen/core/CachingHostAllocator.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/stream_pool.h"
#include "device.h"
#include "metalx/runtime/device.h"

namespace metalx {
namespace {

size_t roundUp(size_t n, size_t m) { return (n + m - 1) / m * m; }

struct Block {
  void* ptr = nullptr;
  size_t size = 0;        // a multiple of the page size
  size_t requested = 0;
  bool allocated = false;
  bool pending = false;   // freed, waiting for recorded streams
  int pending_streams = 0;
  // Owns the host memory. Each wrapper's deallocator holds a copy, so the memory
  // outlives any runtime buffer that still refers to it.
  std::shared_ptr<void> memory;
  std::vector<rt::BufferPtr> wrappers;                 // by device index, made on demand
  std::vector<std::pair<Stream*, uint64_t>> uses;      // stream -> last sequence using it
};

class PinnedPool {
 public:
  Block* allocate(size_t requested) {
    const size_t rounded = roundUp(requested, rt::hostPageSize());
    std::lock_guard<std::mutex> lock(mutex_);
    Block* b = takeCached(rounded);
    if (b) {
      ++stats_.cache_hits;
    } else {
      b = newBlock(rounded);
    }
    b->allocated = true;
    b->requested = requested;
    stats_.allocated_bytes += b->size;
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
    ++stats_.active_blocks;
    stats_.peak_active_blocks = std::max(stats_.peak_active_blocks, stats_.active_blocks);
    ++stats_.allocations;
    return b;
  }

  void free(Block* b) {
    std::vector<std::pair<Stream*, uint64_t>> uses;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      b->allocated = false;
      stats_.allocated_bytes -= b->size;
      --stats_.active_blocks;
      ++stats_.frees;
      uses.swap(b->uses);
      if (uses.empty()) {
        free_.emplace(b->size, b);
        return;
      }
      b->pending = true;
      b->pending_streams = static_cast<int>(uses.size());
      stats_.pending_free_bytes += b->size;
    }
    // Outside the lock: onCompleted may run the callback at once, on this thread.
    for (auto& [stream, sequence] : uses) stream->onCompleted(sequence, [this, b] { finishFree(b); });
  }

  void recordUse(const void* ptr, Stream& stream, uint64_t sequence) {
    std::lock_guard<std::mutex> lock(mutex_);
    Block* b = liveBlockAt(ptr);
    TORCH_CHECK(b, "metalx: ", ptr, " is not in a live pinned allocation");
    for (auto& use : b->uses) {
      if (use.first == &stream) {
        use.second = std::max(use.second, sequence);
        return;
      }
    }
    b->uses.emplace_back(&stream, sequence);
  }

  bool isPinned(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    return liveBlockAt(ptr) != nullptr;
  }

  std::optional<PinnedRange> range(const void* ptr, size_t bytes, c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mutex_);
    Block* b = liveBlockAt(ptr);
    if (!b) return std::nullopt;
    const size_t offset = static_cast<const char*>(ptr) - static_cast<const char*>(b->ptr);
    if (bytes > b->size - offset) return std::nullopt;
    return PinnedRange{wrapperFor(b, device), offset};
  }

  void emptyCache() {
    std::lock_guard<std::mutex> lock(mutex_);
    emptyCacheLocked();
  }

  PinnedStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void resetPeakStats() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
    stats_.peak_reserved_bytes = stats_.reserved_bytes;
    stats_.peak_active_blocks = stats_.active_blocks;
  }

  void resetAccumulatedStats() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.allocations = stats_.frees = stats_.host_allocations = stats_.host_frees = 0;
    stats_.cache_hits = stats_.wrapped_buffers = 0;
  }

 private:
  Block* takeCached(size_t rounded) {
    // Best fit, but never more than twice the request: a huge cached block should not
    // be tied up by a small tensor.
    auto it = free_.lower_bound(rounded);
    if (it == free_.end() || it->first > 2 * rounded) return nullptr;
    Block* b = it->second;
    free_.erase(it);
    return b;
  }

  Block* newBlock(size_t rounded) {
    void* p = nullptr;
    if (posix_memalign(&p, rt::hostPageSize(), rounded) != 0 || !p) {
      // Cached blocks are memory too: give them back and try once more.
      emptyCacheLocked();
      if (posix_memalign(&p, rt::hostPageSize(), rounded) != 0 || !p)
        TORCH_CHECK_WITH(OutOfMemoryError, false, "metalx: cannot allocate ", rounded,
                         " bytes of pinned host memory");
    }
    auto* b = new Block();
    b->ptr = p;
    b->size = rounded;
    b->memory = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
    blocks_[reinterpret_cast<uintptr_t>(p)] = b;
    stats_.reserved_bytes += rounded;
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
    ++stats_.cached_blocks;
    ++stats_.host_allocations;
    return b;
  }

  // Gives the memory of every cached (free, not pending) block back to the system.
  void emptyCacheLocked() {
    for (auto& [size, b] : free_) {
      blocks_.erase(reinterpret_cast<uintptr_t>(b->ptr));
      stats_.reserved_bytes -= b->size;
      --stats_.cached_blocks;
      ++stats_.host_frees;
      delete b;  // drops the memory and its wrappers (the last owner frees it)
    }
    free_.clear();
  }

  void finishFree(Block* b) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--b->pending_streams > 0) return;
    b->pending = false;
    stats_.pending_free_bytes -= b->size;
    free_.emplace(b->size, b);
  }

  Block* liveBlockAt(const void* ptr) {
    auto address = reinterpret_cast<uintptr_t>(ptr);
    auto it = blocks_.upper_bound(address);
    if (it == blocks_.begin()) return nullptr;
    --it;
    Block* b = it->second;
    return (address - it->first < b->size && b->allocated) ? b : nullptr;
  }

  rt::BufferPtr wrapperFor(Block* b, c10::DeviceIndex device) {
    auto slot = static_cast<size_t>(device);
    if (b->wrappers.size() <= slot) b->wrappers.resize(slot + 1);
    if (!b->wrappers[slot]) {
      b->wrappers[slot] = runtimeDevice(device).wrapHostMemory(b->ptr, b->size, [memory = b->memory] {});
      ++stats_.wrapped_buffers;
    }
    return b->wrappers[slot];
  }

  std::mutex mutex_;
  std::map<uintptr_t, Block*> blocks_;   // every block held, by address
  std::multimap<size_t, Block*> free_;   // reusable blocks, by size
  PinnedStats stats_;
};

// Kept for the process, never destroyed: tensors freed during exit still return here,
// and runtime threads may still complete work that frees blocks.
PinnedPool& pool() {
  static auto* p = new PinnedPool();
  return *p;
}

void releasePinned(void* ctx) {
  if (ctx) pool().free(static_cast<Block*>(ctx));
}

void setStat(c10::CachingAllocator::Stat& s, uint64_t current, uint64_t peak, uint64_t allocated,
             uint64_t freed) {
  s.current = static_cast<int64_t>(current);
  s.peak = static_cast<int64_t>(peak);
  s.allocated = static_cast<int64_t>(allocated);
  s.freed = static_cast<int64_t>(freed);
}

class MetalxHostAllocator final : public at::HostAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    // is_pinned() answers false until torch has initialised the device type
    // (Context::isPinnedPtr checks its once-flag), and torch.empty(pin_memory=True)
    // reaches this allocator without initialising it: do it here.
    at::globalContext().lazyInitDevice(c10::DeviceType::PrivateUse1);
    if (nbytes == 0) return c10::DataPtr(nullptr, nullptr, &releasePinned, c10::DeviceType::CPU);
    Block* b = pool().allocate(nbytes);
    return c10::DataPtr(b->ptr, b, &releasePinned, c10::DeviceType::CPU);
  }

  void copy_data(void* dest, const void* src, size_t count) const override {
    if (count) std::memcpy(dest, src, count);
  }

  // torch's generic code (and users) may record that a stream uses a pinned tensor.
  // Recording the stream's current command buffer covers everything encoded so far.
  bool record_event(void* ptr, void* /*ctx*/, c10::Stream stream) override {
    if (stream.device_type() != c10::DeviceType::PrivateUse1 || !pool().isPinned(ptr)) return false;
    Stream& s = streamFor(stream);  // a c10::Error for an unknown stream
    pool().recordUse(ptr, s, s.currentSequence());
    return true;
  }

  void empty_cache() override { pool().emptyCache(); }

  at::HostStats get_stats() override {
    const PinnedStats s = pool().stats();
    at::HostStats h;
    setStat(h.active_requests, s.active_blocks, s.peak_active_blocks, s.allocations, s.frees);
    setStat(h.active_bytes, s.allocated_bytes, s.peak_allocated_bytes, 0, 0);
    setStat(h.allocations, s.cached_blocks, s.cached_blocks, s.host_allocations, s.host_frees);
    setStat(h.allocated_bytes, s.reserved_bytes, s.peak_reserved_bytes, 0, 0);
    h.num_host_alloc = static_cast<int64_t>(s.host_allocations);
    h.num_host_free = static_cast<int64_t>(s.host_frees);
    return h;
  }

  void reset_accumulated_stats() override { pool().resetAccumulatedStats(); }
  void reset_peak_stats() override { pool().resetPeakStats(); }
};

MetalxHostAllocator host_allocator;

}  // namespace

REGISTER_HOST_ALLOCATOR(c10::DeviceType::PrivateUse1, &host_allocator)

c10::Allocator* pinnedAllocator() { return &host_allocator; }

bool isPinnedPointer(const void* ptr) { return ptr && pool().isPinned(ptr); }

std::optional<PinnedRange> pinnedRange(const void* ptr, size_t bytes, c10::DeviceIndex device) {
  if (!ptr) return std::nullopt;
  return pool().range(ptr, bytes, device);
}

void recordPinnedUse(const void* ptr, Stream& stream, uint64_t sequence) {
  pool().recordUse(ptr, stream, sequence);
}

PinnedStats pinnedStats() { return pool().stats(); }

}  // namespace metalx
