// The device guard torch uses to switch the current metalx device and to query
// streams (c10::DeviceGuard, torch.metalx.device, torch.accelerator).
//
// Streams: each device has exactly one stream for now, the default stream (id 0).
// Every stream query answers with it and "new" streams are that stream too, so the
// guard stays consistent until real streams exist.
// TODO(metalx streams): per-device stream pools backed by rt::CommandQueue, and
// events (record/block/query) backed by rt::Event.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "device.h"

namespace metalx {
namespace {

constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

c10::Stream defaultStream(c10::Device device) {
  return c10::Stream(c10::Stream::DEFAULT, device);
}

struct MetalxGuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kType; }

  c10::Device exchangeDevice(c10::Device device) const override {
    TORCH_INTERNAL_ASSERT(device.type() == kType);
    const c10::DeviceIndex previous = currentDevice();
    if (device.index() != previous) setCurrentDevice(device.index());
    return c10::Device(kType, previous);
  }

  c10::Device getDevice() const override { return c10::Device(kType, currentDevice()); }

  void setDevice(c10::Device device) const override {
    TORCH_INTERNAL_ASSERT(device.type() == kType);
    setCurrentDevice(device.index());
  }

  void uncheckedSetDevice(c10::Device device) const noexcept override {
    setCurrentDeviceUnchecked(device.index());
  }

  c10::Stream getStream(c10::Device device) const override { return defaultStream(device); }
  c10::Stream getDefaultStream(c10::Device device) const override {
    return defaultStream(device);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool) const override {
    return defaultStream(device);
  }
  c10::Stream getNewStream(c10::Device device, int) const override {
    return defaultStream(device);
  }
  c10::Stream exchangeStream(c10::Stream stream) const override {
    return defaultStream(stream.device());
  }

  c10::DeviceIndex deviceCount() const noexcept override { return metalx::deviceCount(); }

  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream& stream) const override {
    synchronizeDevice(stream.device_index());
  }
  void synchronizeDevice(const c10::DeviceIndex index) const override {
    metalx::synchronizeDevice(index);
  }
  // Memory is freed only when the last reference goes away, and no op runs
  // asynchronously yet, so there is no stream use to record.
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, MetalxGuardImpl);

}  // namespace
}  // namespace metalx
