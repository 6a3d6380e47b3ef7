// The caching allocator: device memory for tensors, from runtime buffers.
//
// Creating a Metal buffer is a system call and zero-fills memory, far too slow per
// tensor, so memory is kept and reused:
// - Requests up to 1 MiB are carved from 2 MiB buffers ("small" pool); larger ones get
//   buffers rounded up to 2 MiB, which are split when much larger than the request.
// - A free block is reused for the smallest request it fits (best fit); neighbouring
//   free blocks of one buffer merge again.
// - A freed block may still be read or written by command buffers already encoded on
//   its stream: it becomes reusable only when those have completed (the stream's
//   numbered command buffers tell when; streams recorded with recordStream too).
// - Memory held from the device is capped (the limit: METALX_HIGH_WATERMARK_RATIO x the
//   device's recommended working set). Past it, cached free memory is released and the
//   request retried; failing that, OutOfMemoryError says how much was asked for, held
//   by tensors, cached, and what the limit is.
// All methods are thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/stream.h"
#include "metalx/runtime/runtime.h"

namespace metalx {

class OutOfMemoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct AllocatorStats {
  uint64_t allocated_bytes = 0, peak_allocated_bytes = 0;  // in blocks handed out
  uint64_t requested_bytes = 0, peak_requested_bytes = 0;  // as asked for
  uint64_t reserved_bytes = 0, peak_reserved_bytes = 0;    // buffers held from the device
  uint64_t pending_free_bytes = 0;  // freed, waiting for in-flight work to finish
  uint64_t active_blocks = 0;
  uint64_t allocations = 0, frees = 0;
  uint64_t buffer_allocations = 0, buffer_frees = 0;  // device buffers created/released
  uint64_t cache_hits = 0;     // allocations served from cached memory
  uint64_t oom_retries = 0;    // times the cache was emptied to serve a request
  uint64_t ooms = 0;
};

// The allocator's state at one moment, for torch.metalx.memory_snapshot(): every
// device buffer it holds (a segment) and the blocks it is cut into, by address.
struct BlockSnapshot {
  enum class State { Allocated, PendingFree, Free };
  size_t offset = 0, size = 0;
  size_t requested = 0;  // as asked for (0 unless allocated)
  State state = State::Free;
  int64_t stream = -1;  // id of the stream the block was allocated on; -1 when free
};
struct SegmentSnapshot {
  uintptr_t address = 0;
  size_t size = 0;
  bool small = false;
  std::vector<BlockSnapshot> blocks;
};

class CachingAllocator {
 public:
  struct Block;

  // `limit_bytes`: most memory to hold from the device (0: the default limit).
  CachingAllocator(rt::Device& device, int device_index, uint64_t limit_bytes = 0);
  ~CachingAllocator();

  // A block of at least `bytes` (> 0) bytes, first used on `stream`.
  Block* allocate(size_t bytes, Stream& stream);
  void free(Block* block);
  // `block` is also used on `stream`: it is not reused until that stream's work
  // encoded before the block is freed has completed too.
  void recordStream(Block* block, Stream& stream);

  // Gives every cached buffer with no live block back to the device.
  void emptyCache();
  AllocatorStats stats() const;
  void resetPeakStats();
  uint64_t limit() const;
  int deviceIndex() const { return device_index_; }
  void setLimit(uint64_t bytes);
  // The limit as a multiple of the device's recommended working set, as
  // torch.metalx.set_per_process_memory_fraction sets it (> 0). memoryFraction() is
  // the multiple in effect, set or from METALX_HIGH_WATERMARK_RATIO.
  void setMemoryFraction(double fraction);
  double memoryFraction() const;

  std::vector<SegmentSnapshot> snapshot() const;

  // The buffer and byte offset behind a pointer inside a live block.
  bool lookup(const void* ptr, rt::BufferPtr* buffer, size_t* offset) const;

  static void* pointer(const Block* block);
  static size_t size(const Block* block);
  // The allocator a block came from (to free it through).
  static CachingAllocator& owner(const Block* block);
  // The buffer a block is carved from and the block's byte offset in it. Lock-free:
  // neither changes while the block is allocated.
  static const rt::BufferPtr& buffer(const Block* block);
  static size_t offset(const Block* block);

  // Defaults: METALX_HIGH_WATERMARK_RATIO (1.7, as MPS) x recommended working set.
  static uint64_t defaultLimit(const rt::Device& device);

 private:
  struct Segment;
  struct BySize {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BySize>;

  Block* allocateLocked(size_t rounded, bool small, Stream& stream);
  Block* takeFromPool(Pool& pool, size_t rounded, bool small);
  Segment* newSegment(size_t bytes, bool small);
  void insertFree(Block* block);  // merges with free neighbours
  void releaseFreeSegments();
  void finishFree(Block* block);  // its in-flight work is done: make it reusable
  // Makes reusable the blocks of pending_ whose stream has completed their work.
  void reclaimCompletedLocked();
  // For const methods that report state: reclaiming is logically const (it does what
  // the completion of the work did before anyone looked).
  void reclaimCompletedLocked() const { const_cast<CachingAllocator*>(this)->reclaimCompletedLocked(); }
  std::string oomMessage(size_t requested) const;

  rt::Device& device_;
  const int device_index_;
  mutable std::mutex mutex_;
  uint64_t limit_;
  double fraction_ = 0;  // set by setMemoryFraction; 0: the limit comes from elsewhere
  Pool small_pool_, large_pool_;
  std::map<uintptr_t, Segment*> segments_;  // by base address, for lookup()
  // Blocks freed while work on their one stream may still use them, per stream in the
  // order freed: a stream's sequence numbers only grow, so each queue is sorted and
  // reclaiming pops from its front. Checked on allocation (and by stats, snapshots and
  // emptyCache), so a free costs no completion callback.
  struct PendingFree {
    Block* block;
    uint64_t sequence;
  };
  struct StreamFrees {
    std::shared_ptr<const std::atomic<uint64_t>> completed;  // the stream's completedCounter()
    std::deque<PendingFree> frees;
  };
  std::vector<StreamFrees> pending_;
  AllocatorStats stats_;
};

}  // namespace metalx
