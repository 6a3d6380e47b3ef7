// The device guard torch uses to switch the current metalx device and stream, and to
// drive events (c10::DeviceGuard, c10::StreamGuard, torch.Stream/torch.Event,
// torch.metalx.Stream/Event, torch.accelerator).
//
// A c10::Stream names a metalx stream by (device index, id): id 0 is the device's
// default stream, 1..kStreamPoolSize its pool (core/stream_pool.h). A c10::Event's
// opaque handle is a StreamEvent (core/stream_event.h).
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>


#include "allocator.h"
#include "core/stream_event.h"
#include "core/stream_pool.h"
#include "device.h"
#include "device_index_errors.h"

namespace metalx {
namespace {

constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

c10::Stream unwrap(Stream& stream) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kType, static_cast<c10::DeviceIndex>(stream.deviceIndex())),
                     stream.id());
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

  c10::DeviceIndex deviceCount() const noexcept override { return metalx::deviceCount(); }

  // ---- streams ----

  c10::Stream getStream(c10::Device device) const override {
    return unwrap(currentStream(existingDeviceIndex(device.index())));
  }
  c10::Stream getDefaultStream(c10::Device device) const override {
    return unwrap(defaultStream(existingDeviceIndex(device.index())));
  }
  // Metal queues have no priorities: every priority gets an ordinary pool stream.
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool /*isHighPriority*/) const override {
    return unwrap(streamFromPool(existingDeviceIndex(device.index())));
  }
  c10::Stream getNewStream(c10::Device device, int /*priority*/) const override {
    return unwrap(streamFromPool(existingDeviceIndex(device.index())));
  }
  c10::Stream exchangeStream(c10::Stream stream) const override {
    return unwrap(setCurrentStream(streamFor(stream)));
  }

  bool queryStream(const c10::Stream& stream) const override { return streamFor(stream).query(); }
  void synchronizeStream(const c10::Stream& stream) const override {
    Stream& s = streamFor(stream);
    withTorchErrors([&] { s.synchronize(); });
    raiseDeviceIndexError(static_cast<c10::DeviceIndex>(s.deviceIndex()));
  }
  void synchronizeDevice(const c10::DeviceIndex index) const override {
    metalx::synchronizeDevice(resolveDeviceIndex(index));
  }

  // The allocator keeps the memory from reuse until the stream's work encoded so far
  // has completed (Tensor.record_stream, and torch's own uses of it).
  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream) const override {
    deviceAllocator()->recordStream(data_ptr, stream);
  }

  // ---- events ----

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "metalx: the event is on metalx:",
                device_index, " but the stream recording it is on metalx:", stream.device_index());
    Stream& s = streamFor(stream);
    if (!*event) *event = new StreamEvent(s.deviceIndex(), flag == c10::EventFlag::BACKEND_DEFAULT);
    auto* e = static_cast<StreamEvent*>(*event);
    withTorchErrors([&] { e->record(s); });
  }

  void block(void* event, const c10::Stream& stream) const override {
    if (!event) return;  // never recorded: nothing to wait for
    Stream& s = streamFor(stream);
    withTorchErrors([&] { static_cast<StreamEvent*>(event)->block(s); });
  }

  bool queryEvent(void* event) const override {
    return !event || static_cast<StreamEvent*>(event)->query();
  }

  void synchronizeEvent(void* event) const override {
    if (!event) return;
    auto* e = static_cast<StreamEvent*>(event);
    withTorchErrors([&] { e->synchronize(); });
    raiseDeviceIndexError(static_cast<c10::DeviceIndex>(e->deviceIndex()));
  }

  double elapsedTime(void* start, void* end, const c10::DeviceIndex /*device_index*/) const override {
    TORCH_CHECK_VALUE(start && end, "metalx: elapsed_time: both events must be recorded first");
    return withTorchErrors(
        [&] { return static_cast<StreamEvent*>(start)->elapsedMilliseconds(*static_cast<StreamEvent*>(end)); });
  }

  void destroyEvent(void* event, const c10::DeviceIndex /*device_index*/) const noexcept override {
    delete static_cast<StreamEvent*>(event);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, MetalxGuardImpl);

}  // namespace
}  // namespace metalx
