#include "allocator.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

#include "device.h"
#include "metalx/runtime/device.h"
#include "metalx/runtime/error.h"

namespace metalx {
namespace {

// Live allocations by base address. Ordered so that an interior pointer (a view's
// data_ptr) finds its allocation with one upper_bound.
class AllocationRegistry {
 public:
  void add(const rt::BufferPtr& buffer, c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_[base(buffer)] = Entry{buffer, device};
  }

  // Called before the buffer is released, so a new buffer at the same address can
  // never meet a stale entry.
  void remove(const void* base_address) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.erase(reinterpret_cast<uintptr_t>(base_address));
  }

  // The entry whose [base, base + length] contains ptr.
  bool find(const void* ptr, rt::BufferPtr* buffer, size_t* offset,
            c10::DeviceIndex* device) const {
    const auto address = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.upper_bound(address);
    if (it == live_.begin()) return false;
    --it;
    const size_t delta = address - it->first;
    if (delta > it->second.buffer->length()) return false;
    if (buffer) *buffer = it->second.buffer;
    if (offset) *offset = delta;
    if (device) *device = it->second.device;
    return true;
  }

 private:
  struct Entry {
    rt::BufferPtr buffer;
    c10::DeviceIndex device;
  };
  static uintptr_t base(const rt::BufferPtr& buffer) {
    return reinterpret_cast<uintptr_t>(buffer->contents());
  }

  mutable std::mutex mutex_;
  std::map<uintptr_t, Entry> live_;
};

AllocationRegistry& registry() {
  // Leaked on purpose: storages freed during static destruction at exit must still
  // find the registry.
  static auto* instance = new AllocationRegistry();
  return *instance;
}

// Owned by each DataPtr: keeps the buffer alive for as long as the storage holds it.
struct Allocation {
  rt::BufferPtr buffer;
};

void releaseAllocation(void* context) {
  auto* allocation = static_cast<Allocation*>(context);
  registry().remove(allocation->buffer->contents());
  delete allocation;
}

void releaseNothing(void*) {}

c10::DataPtr allocateOn(c10::DeviceIndex index, size_t nbytes) {
  const c10::Device device(c10::DeviceType::PrivateUse1, index);
  rt::Device& runtime = runtimeDevice(index);
  // The runtime rejects empty buffers; an empty storage needs no memory at all.
  if (nbytes == 0) return c10::DataPtr(nullptr, nullptr, &releaseNothing, device);

  rt::BufferPtr buffer;
  try {
    buffer = runtime.newBuffer(nbytes);
  } catch (const rt::Error& e) {
    TORCH_CHECK_WITH(OutOfMemoryError, e.kind() != rt::ErrorKind::OutOfMemory,
                     "metalx out of memory: could not allocate ", nbytes, " bytes on metalx:",
                     static_cast<int>(index), " (", e.what(), ")");
    TORCH_CHECK(false, "metalx could not allocate ", nbytes, " bytes on metalx:",
                static_cast<int>(index), ": ", e.what());
  }
  void* data = buffer->contents();
  registry().add(buffer, index);
  return c10::DataPtr(data, new Allocation{std::move(buffer)}, &releaseAllocation, device);
}

class SimpleDeviceAllocator final : public c10::Allocator {
 public:
  // On the calling thread's current device, as every device allocator does: the
  // empty* ops put a DeviceGuard around allocation.
  c10::DataPtr allocate(size_t nbytes) override { return allocateOn(currentDevice(), nbytes); }

  // Device memory is host-addressable (shared storage), so a byte copy is a memcpy
  // once the device is idle.
  void copy_data(void* dest, const void* src, size_t count) const override {
    if (count == 0) return;
    const c10::DeviceIndex device = deviceOfPointer(src);
    if (device >= 0) synchronizeDevice(device);
    std::memcpy(dest, src, count);
  }
};

SimpleDeviceAllocator allocator_instance;

}  // namespace

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &allocator_instance)

c10::Allocator* deviceAllocator() { return &allocator_instance; }

std::pair<rt::BufferPtr, size_t> bufferFor(const void* ptr) {
  rt::BufferPtr buffer;
  size_t offset = 0;
  TORCH_CHECK(registry().find(ptr, &buffer, &offset, nullptr), "metalx: pointer ", ptr,
              " is not in any live metalx allocation");
  return {std::move(buffer), offset};
}

c10::DeviceIndex deviceOfPointer(const void* ptr) {
  c10::DeviceIndex device = -1;
  return registry().find(ptr, nullptr, nullptr, &device) ? device : -1;
}

void resizeStorageBytes(c10::StorageImpl& storage, size_t nbytes) {
  TORCH_CHECK(storage.resizable(), "metalx: trying to resize a storage that is not resizable");
  TORCH_CHECK(storage.allocator() == &allocator_instance,
              "metalx: cannot resize a storage that metalx did not allocate");
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
