// Device memory for the fallback's CPU kernels (see fallback_memory.h).
#include "fallback_memory.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>

#include <mutex>
#include <unordered_map>

#include "allocator.h"

namespace metalx {
namespace {

thread_local c10::DeviceIndex t_device = -1;  // >= 0 inside a FallbackOutputScope

// Device memory handed to CPU code, by address. CPU code may release memory through
// raw_deallocate, which only passes the address, so the DataPtrs given out carry the
// address as their context and the real (metalx) DataPtr waits here.
std::mutex& mutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<void*, c10::DataPtr>& lent() {
  static auto* m = new std::unordered_map<void*, c10::DataPtr>();
  return *m;
}

c10::Allocator* original = nullptr;

void releaseLent(void* ptr) {
  c10::DataPtr owner;
  {
    std::lock_guard<std::mutex> lock(mutex());
    auto it = lent().find(ptr);
    if (it != lent().end()) {
      owner = std::move(it->second);  // freed (into the caching allocator) below
      lent().erase(it);
    }
  }
  if (!owner && original->raw_deleter()) original->raw_deleter()(ptr);
}

class FallbackCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    if (t_device < 0 || n == 0) return original->allocate(n);
    c10::DataPtr block = allocateOn(t_device, n);
    void* ptr = block.get();
    {
      std::lock_guard<std::mutex> lock(mutex());
      lent().emplace(ptr, std::move(block));
    }
    return c10::DataPtr(ptr, ptr, &releaseLent, c10::Device(c10::DeviceType::CPU));
  }
  // raw_deallocate must reach original memory through the original deleter, and lent
  // memory through ours: releaseLent tells them apart by address.
  c10::DeleterFnPtr raw_deleter() const override {
    return original->raw_deleter() ? &releaseLent : nullptr;
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    original->copy_data(dest, src, count);
  }
};

FallbackCpuAllocator wrapper;

}  // namespace

void installFallbackCpuAllocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    original = c10::GetCPUAllocator();
    // A priority above the default allocator's, so ours stays in place.
    c10::SetCPUAllocator(&wrapper, /*priority=*/1);
  });
}

FallbackOutputScope::FallbackOutputScope(c10::DeviceIndex device) : previous_(t_device) {
  t_device = original ? device : -1;
}
FallbackOutputScope::~FallbackOutputScope() { t_device = previous_; }

at::Tensor cpuAlias(const at::Tensor& t) {
  const c10::Storage& storage = t.storage();
  c10::Storage alias_storage(c10::Storage::use_byte_size_t(), storage.nbytes(),
                             c10::DataPtr(storage.mutable_data(), c10::Device(c10::DeviceType::CPU)),
                             c10::GetCPUAllocator(), /*resizable=*/true);
  at::Tensor alias = at::empty({0}, t.options().device(c10::DeviceType::CPU));
  alias.set_(alias_storage, t.storage_offset(), t.sizes(), t.strides());
  alias._set_neg(t.is_neg());
  alias._set_conj(t.is_conj());
  return alias;
}

std::optional<at::Tensor> adoptAsDeviceTensor(const at::Tensor& cpu) {
  if (!cpu.defined() || !cpu.has_storage()) return std::nullopt;
  c10::StorageImpl* storage = cpu.storage().unsafeGetStorageImpl();
  // Shared storage (another tensor views it) must stay where the others see it.
  if (storage->data_ptr().get_deleter() != &releaseLent || !cpu.storage().unique()) return std::nullopt;
  void* ptr = storage->mutable_data_ptr().get();
  c10::DataPtr block;
  {
    std::lock_guard<std::mutex> lock(mutex());
    auto it = lent().find(ptr);
    if (it == lent().end()) return std::nullopt;
    block = std::move(it->second);
    lent().erase(it);
  }
  storage->mutable_data_ptr().release_context();  // the CPU storage no longer owns it
  c10::Storage device_storage(c10::Storage::use_byte_size_t(), storage->nbytes(), std::move(block),
                              deviceAllocator(), /*resizable=*/true);
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
      std::move(device_storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), cpu.dtype());
  t.unsafeGetTensorImpl()->set_sizes_and_strides(cpu.sizes(), cpu.strides(), cpu.storage_offset());
  t._set_neg(cpu.is_neg());
  t._set_conj(cpu.is_conj());
  return t;
}

}  // namespace metalx
