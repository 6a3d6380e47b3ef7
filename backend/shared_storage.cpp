// metalx storages in OS shared memory (see shared_storage.h).
#include "shared_storage.h"

#include <c10/util/Exception.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>

#include "allocator.h"
#include "device.h"
#include "metalx/runtime/device.h"

namespace metalx {
namespace {

// A shared storage's DataPtr context. The buffer wraps whole pages (what
// wrapHostMemory takes), so the storage's first byte sits `offset` bytes into it:
// torch's shared memory may start past a header inside its first page.
struct SharedAllocation {
  c10::Storage host;  // keeps the mapping (and torch's reference count on it) alive
  rt::BufferPtr buffer;
  size_t offset = 0;
  c10::DeviceIndex device = 0;
};

// Shared storages by the address of their first byte, for the pointer lookups. Few
// and long-lived: a map under one lock is enough.
struct Registry {
  std::mutex mutex;
  std::multimap<uintptr_t, SharedAllocation*> by_address;  // two processes' views may wrap one mapping twice
};

Registry& registry() {
  static auto* r = new Registry();  // never destroyed: storages freed at exit still leave it
  return *r;
}

void releaseShared(void* context) {
  auto* allocation = static_cast<SharedAllocation*>(context);
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto [first, last] = r.by_address.equal_range(reinterpret_cast<uintptr_t>(allocation->host.data()));
    for (auto it = first; it != last; ++it)
      if (it->second == allocation) {
        r.by_address.erase(it);
        break;
      }
  }
  delete allocation;  // the buffer may outlive it in queued work; it holds the mapping too
}

c10::DataPtr sharedDataPtr(const c10::Storage& host, c10::DeviceIndex index) {
  TORCH_CHECK(host.device().is_cpu(), "metalx: shared memory must be a CPU storage, got one on ", host.device());
  TORCH_CHECK(host.nbytes() > 0 && host.data() != nullptr, "metalx: cannot share an empty storage");
  const size_t page = rt::hostPageSize();
  const auto first = reinterpret_cast<uintptr_t>(host.data());
  const uintptr_t page_start = first - first % page;
  const uintptr_t end = first + host.nbytes();
  const size_t length = (end - page_start + page - 1) / page * page;
  auto allocation = std::make_unique<SharedAllocation>();
  allocation->host = host;
  allocation->offset = static_cast<size_t>(first - page_start);
  allocation->device = index;
  // The mapping covers whole pages, so wrapping the pages around the storage's bytes
  // stays inside it. The buffer keeps the storage (and so the mapping) alive for as
  // long as queued work may use it.
  allocation->buffer = withTorchErrors([&] {
    return runtimeDevice(index).wrapHostMemory(reinterpret_cast<void*>(page_start), length, [keep = host] {});
  });
  SharedAllocation* raw = allocation.release();
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.by_address.emplace(first, raw);
  }
  return c10::DataPtr(host.mutable_data(), raw, &releaseShared, c10::Device(c10::DeviceType::PrivateUse1, index));
}

}  // namespace

c10::Storage sharedHostStorage(const c10::StorageImpl& storage) {
  if (storage.data_ptr().get_deleter() != &releaseShared) return {};
  return static_cast<const SharedAllocation*>(storage.data_ptr().get_context())->host;
}

void moveStorageToSharedMemory(c10::StorageImpl& storage, const c10::Storage& host) {
  TORCH_CHECK(storage.device().type() == c10::DeviceType::PrivateUse1,
              "metalx: expected a metalx storage, got one on ", storage.device());
  TORCH_CHECK(host.nbytes() >= storage.nbytes(), "metalx: shared memory of ", host.nbytes(),
              " bytes is too small for a storage of ", storage.nbytes(), " bytes");
  if (storage.data_ptr().get_deleter() == &releaseShared) return;
  const c10::DeviceIndex index = storage.device().index();
  c10::DataPtr shared = sharedDataPtr(host, index);
  if (storage.nbytes() > 0) {
    // Every stream may still write this storage: the copy must see all of it.
    synchronizeDevice(index);
    std::memcpy(shared.get(), storage.data(), storage.nbytes());
  }
  storage.set_data_ptr_noswap(std::move(shared));
}

c10::Storage wrapSharedMemory(const c10::Storage& host, c10::DeviceIndex index) {
  checkDeviceIndex(index);
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), host.nbytes(),
                                                            sharedDataPtr(host, index), deviceAllocator(),
                                                            /*resizable=*/false));
}

bool sharedBufferFor(const c10::DataPtr& storage, const void* data, rt::BufferPtr* buffer, size_t* offset) {
  if (storage.get_deleter() != &releaseShared) return false;
  const auto* allocation = static_cast<const SharedAllocation*>(storage.get_context());
  *buffer = allocation->buffer;
  *offset = allocation->offset +
            static_cast<size_t>(static_cast<const char*>(data) - static_cast<const char*>(storage.get()));
  return true;
}

bool lookupSharedPointer(const void* ptr, rt::BufferPtr* buffer, size_t* offset, c10::DeviceIndex* device) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  auto it = r.by_address.upper_bound(address);
  if (it == r.by_address.begin()) return false;
  --it;
  const SharedAllocation* allocation = it->second;
  // One past the end counts (an empty view at the end), as for device allocations.
  if (address - it->first > allocation->host.nbytes()) return false;
  if (buffer) *buffer = allocation->buffer;
  if (offset) *offset = allocation->offset + static_cast<size_t>(address - it->first);
  if (device) *device = allocation->device;
  return true;
}

}  // namespace metalx
