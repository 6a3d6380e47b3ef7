// The PrivateUse1 hooks: how ATen and torch.accelerator ask metalx about devices,
// generators and pointers.
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include "allocator.h"
#include "device.h"
#include "generator.h"
#include "pinned_memory.h"
#include "metalx/runtime/driver.h"

namespace metalx {
namespace {

struct MetalxHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return deviceCount() > 0; }
  c10::DeviceIndex deviceCount() const override { return metalx::deviceCount(); }

  // Opens the devices now rather than on first allocation, so a runtime that
  // cannot start fails here with its own message.
  void init() const override { (void)rt::devices(); }

  // Devices are opened once per process and stay open: any valid index has its
  // context.
  bool hasPrimaryContext(c10::DeviceIndex index) const override {
    return index >= 0 && index < metalx::deviceCount();
  }

  void setCurrentDevice(c10::DeviceIndex index) const override {
    metalx::setCurrentDevice(index);
  }
  c10::DeviceIndex getCurrentDevice() const override { return currentDevice(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex index) const override {
    const c10::DeviceIndex previous = currentDevice();
    if (index != previous) metalx::setCurrentDevice(index);
    return previous;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex index) const override {
    return exchangeDevice(index);
  }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    return defaultGenerator(index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    return newGenerator(index);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    const c10::DeviceIndex index = deviceOfPointer(data);
    TORCH_CHECK(index >= 0, "metalx: pointer ", data, " is not in any live metalx allocation");
    return at::Device(c10::DeviceType::PrivateUse1, index);
  }

  // Pinned memory is metalx's host allocator (pinned_memory.h): page-aligned host
  // blocks the device reads and writes in place. t.pin_memory() and
  // torch.empty(pin_memory=True) get the allocator here; t.is_pinned() asks
  // isPinnedPtr with the storage's pointer.
  bool isPinnedPtr(const void* data) const override { return isPinnedPointer(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinnedAllocator(); }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t nbytes) const override {
    resizeStorageBytes(*storage.unsafeGetStorageImpl(), nbytes);
  }
};

// Registered while _C loads: torch must see the hooks before any metalx tensor.
const bool registered = [] {
  static MetalxHooks hooks;
  at::RegisterPrivateUse1HooksInterface(&hooks);
  return true;
}();

}  // namespace
}  // namespace metalx
