// The allocator registered for metalx tensors: torch's view of the caching allocator
// (core/caching_allocator.h), one per device, plus the pointer -> (buffer, offset)
// lookup kernels need.
#include "allocator.h"

#include <ATen/core/Tensor.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "buffer_ref.h"
#include "core/caching_allocator.h"
#include "core/stream_pool.h"
#include "device.h"
#include "shared_storage.h"

namespace metalx {
namespace {

// One caching allocator per device, created on first use, kept for the process (leaked:
// storages freed during exit still reach it). Every allocation and bufferFor() asks for
// it, so once made it is read without a lock.
constexpr c10::DeviceIndex kMaxAllocatorDevices = 64;

CachingAllocator& cachingAllocator(c10::DeviceIndex index) {
  static std::atomic<CachingAllocator*> allocators[kMaxAllocatorDevices];
  if (index >= 0 && index < kMaxAllocatorDevices)
    if (CachingAllocator* a = allocators[index].load(std::memory_order_acquire)) return *a;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  checkDeviceIndex(index);
  TORCH_CHECK(index < kMaxAllocatorDevices, "metalx supports at most ", int(kMaxAllocatorDevices), " devices");
  CachingAllocator* a = allocators[index].load(std::memory_order_relaxed);
  if (!a) {
    a = new CachingAllocator(runtimeDevice(index), index);
    allocators[index].store(a, std::memory_order_release);
  }
  return *a;
}

// A DataPtr's context is its block, which knows its allocator.
void releaseAllocation(void* context) {
  auto* block = static_cast<CachingAllocator::Block*>(context);
  CachingAllocator::owner(block).free(block);
}

void releaseNothing(void*) {}

}  // namespace

c10::DataPtr allocateOn(c10::DeviceIndex index, size_t nbytes) {
  const c10::Device device(c10::DeviceType::PrivateUse1, index);
  // Metal has no empty buffers; an empty storage needs no memory at all.
  if (nbytes == 0) return c10::DataPtr(nullptr, nullptr, &releaseNothing, device);
  CachingAllocator& allocator = cachingAllocator(index);
  CachingAllocator::Block* block = nullptr;
  try {
    block = allocator.allocate(nbytes, currentStream(index));
  } catch (const OutOfMemoryError& e) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, e.what());
  }
  return c10::DataPtr(CachingAllocator::pointer(block), block, &releaseAllocation, device);
}

namespace {

void fillStat(c10::CachingDeviceAllocator::StatArray& array, uint64_t current, uint64_t peak) {
  // Only the aggregate entry: metalx does not split statistics by pool.
  auto& s = array[static_cast<size_t>(c10::CachingDeviceAllocator::StatType::AGGREGATE)];
  s.current = static_cast<int64_t>(current);
  s.peak = static_cast<int64_t>(peak);
}

class MetalxDeviceAllocator final : public c10::DeviceAllocator {
 public:
  // On the calling thread's current device, as every device allocator does: the
  // empty* ops put a DeviceGuard around allocation.
  c10::DataPtr allocate(size_t nbytes) override { return allocateOn(currentDevice(), nbytes); }

  // Device memory is host-addressable (shared storage), so a byte copy is a memcpy
  // once the device has finished writing it.
  void copy_data(void* dest, const void* src, size_t count) const override {
    if (count == 0) return;
    const c10::DeviceIndex device = deviceOfPointer(src);
    if (device >= 0) synchronizeDevice(device);
    std::memcpy(dest, src, count);
  }

  bool initialized() override { return deviceCount() > 0; }

  void emptyCache(c10::MempoolId_t /*mempool*/) override {
    for (c10::DeviceIndex i = 0; i < deviceCount(); ++i) cachingAllocator(i).emptyCache();
  }

  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    auto* block = static_cast<CachingAllocator::Block*>(ptr.get_context());
    if (!block || ptr.get_deleter() != &releaseAllocation) return;
    CachingAllocator& allocator = CachingAllocator::owner(block);
    TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
                "record_stream: the stream is not a metalx stream");
    TORCH_CHECK(stream.device_index() == allocator.deviceIndex(), "record_stream: the stream is on metalx:",
                stream.device_index(), " but the tensor's memory is on metalx:", allocator.deviceIndex());
    allocator.recordStream(block, streamFor(stream));
  }

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    AllocatorStats s = cachingAllocator(resolveDeviceIndex(device)).stats();
    c10::CachingDeviceAllocator::DeviceStats d;
    fillStat(d.allocated_bytes, s.allocated_bytes, s.peak_allocated_bytes);
    fillStat(d.active_bytes, s.allocated_bytes, s.peak_allocated_bytes);
    fillStat(d.requested_bytes, s.requested_bytes, s.peak_requested_bytes);
    fillStat(d.reserved_bytes, s.reserved_bytes, s.peak_reserved_bytes);
    fillStat(d.active, s.active_blocks, s.active_blocks);
    fillStat(d.allocation, s.active_blocks, s.active_blocks);
    fillStat(d.segment, s.buffer_allocations - s.buffer_frees, s.buffer_allocations - s.buffer_frees);
    d.num_alloc_retries = static_cast<int64_t>(s.oom_retries);
    d.num_ooms = static_cast<int64_t>(s.ooms);
    return d;
  }

  void resetAccumulatedStats(c10::DeviceIndex /*device*/) override {}

  void resetPeakStats(c10::DeviceIndex device) override {
    cachingAllocator(resolveDeviceIndex(device)).resetPeakStats();
  }

  // (free, total) as torch.accelerator.get_memory_info reports them: total is what
  // metalx may hold on this device (its limit), free what tensors leave of it (cached
  // blocks count as free: the allocator releases them when it needs the room).
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    CachingAllocator& a = cachingAllocator(resolveDeviceIndex(device));
    const uint64_t limit = a.limit(), allocated = a.stats().allocated_bytes;
    return {static_cast<size_t>(limit - std::min(limit, allocated)), static_cast<size_t>(limit)};
  }
};

MetalxDeviceAllocator allocator_instance;

}  // namespace

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &allocator_instance)

namespace {

// Tensor.record_stream(s): torch registers it for CUDA only; without this the boxed
// CPU fallback would get it and fail.
void recordStreamOp(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(self.device().type() == c10::DeviceType::PrivateUse1,
              "record_stream: expected a metalx tensor, got one on ", self.device());
  allocator_instance.recordStream(self.storage().data_ptr(), stream);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("record_stream", recordStreamOp); }

}  // namespace

c10::DeviceAllocator* deviceAllocator() { return &allocator_instance; }

std::pair<rt::BufferPtr, size_t> bufferFor(const void* ptr) {
  rt::BufferPtr buffer;
  size_t offset = 0;
  for (c10::DeviceIndex i = 0; i < deviceCount(); ++i)
    if (cachingAllocator(i).lookup(ptr, &buffer, &offset)) return {std::move(buffer), offset};
  if (lookupSharedPointer(ptr, &buffer, &offset, nullptr)) return {std::move(buffer), offset};
  TORCH_CHECK(false, "metalx: pointer ", ptr, " is not in any live metalx allocation");
}

std::pair<rt::BufferPtr, size_t> bufferFor(const at::Tensor& tensor) {
  rt::BufferPtr holder;
  size_t offset = 0;
  const rt::BufferPtr& buffer = bufferRefFor(tensor, &offset, &holder);
  return {buffer, offset};
}

const rt::BufferPtr& bufferRefFor(const at::Tensor& tensor, size_t* offset, rt::BufferPtr* holder) {
  const c10::DataPtr& storage = tensor.storage().data_ptr();
  if (storage.get_deleter() != &releaseAllocation) {
    if (!sharedBufferFor(storage, tensor.const_data_ptr(), holder, offset))
      std::tie(*holder, *offset) = bufferFor(tensor.const_data_ptr());
    return *holder;
  }
  // The storage keeps its block allocated, and an allocated block's buffer and offset
  // never change: no lock needed, and the block's reference serves the caller.
  const auto* block = static_cast<const CachingAllocator::Block*>(storage.get_context());
  const size_t into = static_cast<size_t>(static_cast<const char*>(tensor.const_data_ptr()) -
                                          static_cast<const char*>(storage.get()));
  *offset = CachingAllocator::offset(block) + into;
  return CachingAllocator::buffer(block);
}

c10::DeviceIndex deviceOfPointer(const void* ptr) {
  for (c10::DeviceIndex i = 0; i < deviceCount(); ++i)
    if (cachingAllocator(i).lookup(ptr, nullptr, nullptr)) return i;
  c10::DeviceIndex shared = -1;
  if (lookupSharedPointer(ptr, nullptr, nullptr, &shared)) return shared;
  return -1;
}

AllocatorStats allocatorStats(c10::DeviceIndex index) { return cachingAllocator(index).stats(); }
void resetPeakAllocatorStats(c10::DeviceIndex index) { cachingAllocator(index).resetPeakStats(); }
void emptyAllocatorCache() { allocator_instance.emptyCache({0, 0}); }

std::vector<SegmentSnapshot> allocatorSnapshot(c10::DeviceIndex index) {
  return cachingAllocator(index).snapshot();
}
void setAllocatorMemoryFraction(c10::DeviceIndex index, double fraction) {
  cachingAllocator(index).setMemoryFraction(fraction);
}
double allocatorMemoryFraction(c10::DeviceIndex index) { return cachingAllocator(index).memoryFraction(); }
uint64_t allocatorLimit(c10::DeviceIndex index) { return cachingAllocator(index).limit(); }
std::pair<size_t, size_t> allocatorMemoryInfo(c10::DeviceIndex index) {
  return allocator_instance.getMemoryInfo(index);
}

void resizeStorageBytes(c10::StorageImpl& storage, size_t nbytes) {
  TORCH_CHECK(storage.resizable(), "metalx: trying to resize a storage that is not resizable");
  TORCH_CHECK(storage.allocator() == &allocator_instance,
              "metalx: cannot resize a storage that metalx did not allocate");
  TORCH_CHECK(!sharedHostStorage(storage),
              "metalx: cannot resize a storage in shared memory (one passed between processes): other "
              "processes map its current size");
  const c10::DeviceIndex index = storage.device().index();
  c10::DataPtr fresh = allocateOn(index, nbytes);
  const size_t keep = std::min(nbytes, storage.nbytes());
  if (keep > 0 && storage.data() != nullptr) {
    synchronizeDevice(index);
    std::memcpy(fresh.get(), storage.data(), keep);
  }
  storage.set_data_ptr_noswap(std::move(fresh));
  storage.set_nbytes(nbytes);
}

}  // namespace metalx
