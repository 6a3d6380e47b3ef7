// The caching allocator (see caching_allocator.h).
#include "core/caching_allocator.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "metalx/runtime/env.h"

namespace metalx {
namespace {

constexpr size_t kSmallRequest = 1 << 20;     // up to this: the small pool
constexpr size_t kSmallSegment = 2 << 20;     // buffers of the small pool
constexpr size_t kLargeRounding = 2 << 20;    // large buffers are multiples of this
constexpr size_t kBlockAlignment = 256;       // Metal's buffer offset alignment is 256 for
                                              // most uses; every block starts at a multiple
constexpr size_t kMinLargeSplit = 1 << 20;    // keep a large remainder only if at least this

size_t roundUp(size_t n, size_t m) { return (n + m - 1) / m * m; }

std::string bytes(uint64_t n) {
  std::ostringstream s;
  s.precision(2);
  if (n >= (1ull << 30)) s << std::fixed << double(n) / (1ull << 30) << " GiB";
  else if (n >= (1ull << 20)) s << std::fixed << double(n) / (1ull << 20) << " MiB";
  else if (n >= (1ull << 10)) s << std::fixed << double(n) / (1ull << 10) << " KiB";
  else s << n << " bytes";
  return s.str();
}

double highWatermarkRatio() { return rt::env::number("METALX_HIGH_WATERMARK_RATIO", 1.7, 0.0); }

}  // namespace

struct CachingAllocator::Segment {
  CachingAllocator* owner;
  rt::BufferPtr buffer;
  size_t size;
  bool small;
  size_t live_blocks = 0;  // allocated or pending
  Block* head = nullptr;   // the block at offset 0: merges keep the left block, so it
                           // lives as long as the segment (for snapshot())
};

struct CachingAllocator::Block {
  Segment* segment;
  size_t offset, size, requested = 0;
  bool allocated = false, pending = false;
  Block* prev = nullptr;  // neighbours in the segment, by address
  Block* next = nullptr;
  Stream* stream = nullptr;
  std::vector<Stream*> other_streams;
  int pending_streams = 0;
};

bool CachingAllocator::BySize::operator()(const Block* a, const Block* b) const {
  // Size first (best fit); then place, so equal sizes are distinct entries. A search
  // key has no segment (0) and so sorts before every real block of its size.
  auto place = [](const Block* x) { return std::make_pair(reinterpret_cast<uintptr_t>(x->segment), x->offset); };
  if (a->size != b->size) return a->size < b->size;
  return place(a) < place(b);
}

void* CachingAllocator::pointer(const Block* b) {
  return static_cast<char*>(b->segment->buffer->contents()) + b->offset;
}
size_t CachingAllocator::size(const Block* b) { return b->size; }
CachingAllocator& CachingAllocator::owner(const Block* b) { return *b->segment->owner; }
const rt::BufferPtr& CachingAllocator::buffer(const Block* b) { return b->segment->buffer; }
size_t CachingAllocator::offset(const Block* b) { return b->offset; }

uint64_t CachingAllocator::defaultLimit(const rt::Device& device) {
  return static_cast<uint64_t>(highWatermarkRatio() *
                               double(device.info().recommended_max_working_set_size));
}

CachingAllocator::CachingAllocator(rt::Device& device, int device_index, uint64_t limit_bytes)
    : device_(device), device_index_(device_index), limit_(limit_bytes ? limit_bytes : defaultLimit(device)) {}

CachingAllocator::~CachingAllocator() {
  // Blocks still allocated belong to their owners; the allocator outlives them in
  // practice (one per device for the process).
  for (StreamFrees& queue : pending_)
    for (PendingFree& f : queue.frees) delete f.block;
  for (Block* b : small_pool_) delete b;
  for (Block* b : large_pool_) delete b;
  for (auto& [base, segment] : segments_) delete segment;
}

CachingAllocator::Segment* CachingAllocator::newSegment(size_t size, bool small) {
  if (stats_.reserved_bytes + size > limit_) return nullptr;
  rt::BufferPtr buffer;
  try {
    buffer = device_.newBuffer(size);
  } catch (const rt::Error& e) {
    if (e.kind() == rt::ErrorKind::OutOfMemory) return nullptr;
    throw;
  }
  auto* s = new Segment{this, buffer, size, small};
  segments_[reinterpret_cast<uintptr_t>(buffer->contents())] = s;
  stats_.reserved_bytes += size;
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  ++stats_.buffer_allocations;
  return s;
}

CachingAllocator::Block* CachingAllocator::takeFromPool(Pool& pool, size_t rounded, bool small) {
  Block key{nullptr, 0, rounded};
  // Best fit: the smallest free block of at least `rounded` bytes.
  auto it = pool.lower_bound(&key);
  if (it == pool.end()) return nullptr;
  Block* b = *it;
  pool.erase(it);
  size_t rest = b->size - rounded;
  if (rest >= (small ? kBlockAlignment : kMinLargeSplit)) {
    auto* tail = new Block{b->segment, b->offset + rounded, rest};
    tail->prev = b;
    tail->next = b->next;
    if (b->next) b->next->prev = tail;
    b->next = tail;
    b->size = rounded;
    pool.insert(tail);
  }
  return b;
}

CachingAllocator::Block* CachingAllocator::allocateLocked(size_t rounded, bool small, Stream& stream) {
  Pool& pool = small ? small_pool_ : large_pool_;
  Block* b = takeFromPool(pool, rounded, small);
  if (b) {
    ++stats_.cache_hits;
  } else {
    size_t segment_size = small ? kSmallSegment : roundUp(rounded, kLargeRounding);
    Segment* s = newSegment(segment_size, small);
    if (!s) return nullptr;
    b = new Block{s, 0, segment_size};
    s->head = b;
    pool.insert(b);
    b = takeFromPool(pool, rounded, small);
  }
  b->allocated = true;
  b->stream = &stream;
  b->other_streams.clear();
  ++b->segment->live_blocks;
  return b;
}

CachingAllocator::Block* CachingAllocator::allocate(size_t requested, Stream& stream) {
  if (requested == 0) throw std::invalid_argument("CachingAllocator::allocate: zero bytes");
  const bool small = requested <= kSmallRequest;
  const size_t rounded = roundUp(requested, kBlockAlignment);
  std::lock_guard<std::mutex> lock(mutex_);
  reclaimCompletedLocked();
  Block* b = allocateLocked(rounded, small, stream);
  if (!b) {
    // Over the limit or out of device memory: give cached memory back and try again.
    ++stats_.oom_retries;
    releaseFreeSegments();
    b = allocateLocked(rounded, small, stream);
  }
  if (!b) {
    ++stats_.ooms;
    throw OutOfMemoryError(oomMessage(requested));
  }
  b->requested = requested;
  stats_.allocated_bytes += b->size;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  stats_.requested_bytes += requested;
  stats_.peak_requested_bytes = std::max(stats_.peak_requested_bytes, stats_.requested_bytes);
  ++stats_.active_blocks;
  ++stats_.allocations;
  return b;
}

void CachingAllocator::recordStream(Block* block, Stream& stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (&stream == block->stream) return;
  if (std::find(block->other_streams.begin(), block->other_streams.end(), &stream) ==
      block->other_streams.end())
    block->other_streams.push_back(&stream);
}

void CachingAllocator::free(Block* block) {
  // The block's owner is freeing it, so nothing else reads or changes its streams now
  // (recordStream needs the owner alive): they can be read before taking the lock.
  if (block->other_streams.empty()) {
    // Used on one stream only: reusable at once if everything encoded there has
    // completed (a tensor made and dropped with no work in flight), else once the
    // stream completes the command buffer encoded now (see pending_). The stream is
    // asked before taking mutex_ (stream locks come first).
    Stream& s = *block->stream;
    const uint64_t sequence = s.currentSequence();
    auto counter = s.completedCounter();
    std::lock_guard<std::mutex> lock(mutex_);
    block->allocated = false;
    stats_.allocated_bytes -= block->size;
    stats_.requested_bytes -= block->requested;
    --stats_.active_blocks;
    ++stats_.frees;
    if (counter->load(std::memory_order_acquire) >= sequence) {
      --block->segment->live_blocks;
      insertFree(block);
      return;
    }
    block->pending = true;
    stats_.pending_free_bytes += block->size;
    auto queue = std::find_if(pending_.begin(), pending_.end(),
                              [&](const StreamFrees& q) { return q.completed == counter; });
    if (queue == pending_.end()) queue = pending_.insert(pending_.end(), StreamFrees{std::move(counter), {}});
    queue->frees.push_back({block, sequence});
    return;
  }
  std::vector<Stream*> streams;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    block->allocated = false;
    block->pending = true;
    stats_.allocated_bytes -= block->size;
    stats_.requested_bytes -= block->requested;
    stats_.pending_free_bytes += block->size;
    --stats_.active_blocks;
    ++stats_.frees;
    streams.push_back(block->stream);
    streams.insert(streams.end(), block->other_streams.begin(), block->other_streams.end());
    block->pending_streams = static_cast<int>(streams.size());
  }
  // Outside the lock: a stream may call back at once, and encoding code may allocate
  // while holding the stream's lock (so the order is always stream, then allocator).
  for (Stream* s : streams) s->onCompleted(s->currentSequence(), [this, block] { finishFree(block); });
}

void CachingAllocator::reclaimCompletedLocked() {
  for (StreamFrees& queue : pending_) {
    const uint64_t completed = queue.completed->load(std::memory_order_acquire);
    while (!queue.frees.empty() && queue.frees.front().sequence <= completed) {
      Block* b = queue.frees.front().block;
      queue.frees.pop_front();
      b->pending = false;
      stats_.pending_free_bytes -= b->size;
      --b->segment->live_blocks;
      insertFree(b);
    }
  }
}

void CachingAllocator::finishFree(Block* block) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (--block->pending_streams > 0) return;
  block->pending = false;
  stats_.pending_free_bytes -= block->size;
  --block->segment->live_blocks;
  insertFree(block);
}

namespace {

// Joins `left` and the block after it in their buffer into `left`.
template <class Block>
void absorbNext(Block* left) {
  Block* right = left->next;
  left->size += right->size;
  left->next = right->next;
  if (right->next) right->next->prev = left;
  delete right;
}

}  // namespace

void CachingAllocator::insertFree(Block* block) {
  Pool& pool = block->segment->small ? small_pool_ : large_pool_;
  auto mergeable = [](Block* n) { return n && !n->allocated && !n->pending; };
  if (mergeable(block->prev)) {
    block = block->prev;
    pool.erase(block);
    absorbNext(block);
  }
  if (mergeable(block->next)) {
    pool.erase(block->next);
    absorbNext(block);
  }
  pool.insert(block);
}

void CachingAllocator::releaseFreeSegments() {
  for (Pool* pool : {&small_pool_, &large_pool_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      Segment* s = b->segment;
      // A segment is wholly free when its one remaining block spans it.
      if (s->live_blocks == 0 && b->offset == 0 && b->size == s->size) {
        it = pool->erase(it);
        segments_.erase(reinterpret_cast<uintptr_t>(s->buffer->contents()));
        stats_.reserved_bytes -= s->size;
        ++stats_.buffer_frees;
        delete b;
        delete s;
      } else {
        ++it;
      }
    }
  }
}

void CachingAllocator::emptyCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  reclaimCompletedLocked();
  releaseFreeSegments();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  reclaimCompletedLocked();
  return stats_;
}

void CachingAllocator::resetPeakStats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_requested_bytes = stats_.requested_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

uint64_t CachingAllocator::limit() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return limit_;
}

void CachingAllocator::setLimit(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  limit_ = bytes ? bytes : defaultLimit(device_);
  fraction_ = 0;
}

void CachingAllocator::setMemoryFraction(double fraction) {
  if (!(fraction > 0) || !std::isfinite(fraction))
    throw std::invalid_argument("memory fraction must be a finite number > 0");
  std::lock_guard<std::mutex> lock(mutex_);
  fraction_ = fraction;
  limit_ = static_cast<uint64_t>(fraction * double(device_.info().recommended_max_working_set_size));
}

double CachingAllocator::memoryFraction() const {
  std::lock_guard<std::mutex> lock(mutex_);
  // The multiple as it was given (a quotient of truncated byte counts is not exact).
  if (fraction_ > 0) return fraction_;
  if (limit_ == defaultLimit(device_)) return highWatermarkRatio();
  const double working_set = double(device_.info().recommended_max_working_set_size);
  return working_set > 0 ? double(limit_) / working_set : 0.0;
}

std::vector<SegmentSnapshot> CachingAllocator::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  reclaimCompletedLocked();
  std::vector<SegmentSnapshot> out;
  out.reserve(segments_.size());
  for (const auto& [base, segment] : segments_) {  // ordered by address
    SegmentSnapshot s{base, segment->size, segment->small, {}};
    for (const Block* b = segment->head; b; b = b->next) {
      BlockSnapshot block;
      block.offset = b->offset;
      block.size = b->size;
      if (b->allocated || b->pending) {
        block.state = b->allocated ? BlockSnapshot::State::Allocated : BlockSnapshot::State::PendingFree;
        block.requested = b->allocated ? b->requested : 0;
        block.stream = b->stream ? b->stream->id() : -1;
      }
      s.blocks.push_back(block);
    }
    out.push_back(std::move(s));
  }
  return out;
}

bool CachingAllocator::lookup(const void* ptr, rt::BufferPtr* buffer, size_t* offset) const {
  auto address = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = segments_.upper_bound(address);
  if (it == segments_.begin()) return false;
  --it;
  if (address - it->first >= it->second->size) return false;
  if (buffer) *buffer = it->second->buffer;
  if (offset) *offset = address - it->first;
  return true;
}

std::string CachingAllocator::oomMessage(size_t requested) const {
  uint64_t cached = stats_.reserved_bytes - stats_.allocated_bytes - stats_.pending_free_bytes;
  std::ostringstream m;
  m << "metalx out of memory on device " << device_index_ << ": tried to allocate " << bytes(requested)
    << "; " << bytes(stats_.allocated_bytes) << " is allocated by tensors, " << bytes(stats_.reserved_bytes)
    << " is reserved by metalx (" << bytes(cached) << " of it cached and free, " << bytes(stats_.pending_free_bytes)
    << " freed but still in use by queued GPU work); the limit is " << bytes(limit_) << " (";
  // Name where the limit came from, so the advice says which knob to turn.
  if (fraction_ > 0) {
    m << "torch.metalx.set_per_process_memory_fraction(" << fraction_ << ") x the device's recommended working set of "
      << bytes(device_.info().recommended_max_working_set_size)
      << "). Free tensors, call torch.metalx.empty_cache(), or raise the memory fraction.";
  } else {
    m << "METALX_HIGH_WATERMARK_RATIO=" << highWatermarkRatio() << " x the device's recommended working set of "
      << bytes(device_.info().recommended_max_working_set_size)
      << "). Free tensors, call torch.metalx.empty_cache(), or raise METALX_HIGH_WATERMARK_RATIO.";
  }
  return m.str();
}

}  // namespace metalx
