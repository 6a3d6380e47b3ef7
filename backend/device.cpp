#include "device.h"
#include "host_wait.h"
#include "device_index_errors.h"

#include <c10/util/Exception.h>

#include <limits>

#include "core/stream_pool.h"
#include "metalx/runtime/driver.h"
#include "metalx/runtime/error.h"

namespace metalx {
namespace {

thread_local c10::DeviceIndex current_device = 0;

}  // namespace

c10::DeviceIndex deviceCount() noexcept {
  try {
    return static_cast<c10::DeviceIndex>(rt::devices().size());
  } catch (...) {
    // Callers that must not throw (the guard's deviceCount, isAvailable) treat a
    // runtime that cannot start as "no devices"; driver_name() reports the reason.
    return 0;
  }
}

void checkDeviceIndex(c10::DeviceIndex index) {
  withTorchErrors([] { rt::checkNotForkedChild(); });  // before "0 devices available"
  const c10::DeviceIndex count = deviceCount();
  // No devices because the runtime could not start (a bad METALSIM_*/METALX_* setting,
  // a driver missing): that reason, not "0 devices".
  if (count == 0) withTorchErrors([] { (void)rt::devices(); });
  TORCH_CHECK(index >= 0 && index < count, "metalx device ", static_cast<int>(index),
              " does not exist; ", static_cast<int>(count),
              count == 1 ? " device" : " devices", " available");
}

rt::Device& runtimeDevice(c10::DeviceIndex index) {
  checkDeviceIndex(index);
  return rt::device(index);
}

c10::DeviceIndex currentDevice() { return current_device; }

void setCurrentDevice(c10::DeviceIndex index) {
  checkDeviceIndex(index);
  current_device = index;
}

void setCurrentDeviceUnchecked(c10::DeviceIndex index) noexcept { current_device = index; }

c10::DeviceIndex existingDeviceIndex(c10::DeviceIndex index) {
  const c10::DeviceIndex resolved = resolveDeviceIndex(index);
  checkDeviceIndex(resolved);
  return resolved;
}

c10::DeviceIndex toDeviceIndex(int64_t index) {
  TORCH_CHECK(index >= 0 && index <= std::numeric_limits<c10::DeviceIndex>::max(),
              "metalx device index must be non-negative, got ", index);
  return static_cast<c10::DeviceIndex>(index);
}

c10::DeviceIndex resolveDeviceIndex(c10::DeviceIndex index) {
  return index == -1 ? current_device : index;
}

void synchronizeDevice(c10::DeviceIndex index) {
  checkDeviceIndex(index);
  withTorchErrors([&] { synchronizeAllStreams(index); });
  raiseDeviceIndexError(index);
}

void synchronizeCurrentStream(c10::DeviceIndex index) {
  checkDeviceIndex(index);
  Stream& stream = currentStream(index);
  // The interruptible wait is not inside withTorchErrors: an interrupt (host_wait.h)
  // must reach Python as itself. Failures are reported once, as torch errors.
  if (stream.completedSequence() < stream.currentSequence()) waitUntilIdle(stream);
  withTorchErrors([&] { stream.synchronize(); });
  raiseDeviceIndexError(index);
}

bool synchronizeDevicePolling(c10::DeviceIndex index, const std::function<bool()>& keep_waiting) {
  checkDeviceIndex(index);
  const bool done = withTorchErrors([&] { return synchronizeAllStreamsPolling(index, keep_waiting); });
  if (done) raiseDeviceIndexError(index);
  return done;
}

bool synchronizeStreamPolling(const c10::Stream& stream, const std::function<bool()>& keep_waiting) {
  Stream& s = streamFor(stream);
  const bool done = withTorchErrors([&] {
    if (!s.waitAllPolling(keep_waiting)) return false;
    s.synchronize();
    return true;
  });
  if (done) raiseDeviceIndexError(static_cast<c10::DeviceIndex>(s.deviceIndex()));
  return done;
}

Stream& streamFor(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1, "expected a metalx stream, got a ",
              c10::DeviceTypeName(stream.device_type()), " stream");
  checkDeviceIndex(stream.device_index());
  try {
    return streamById(stream.device_index(), stream.id());
  } catch (const std::out_of_range& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
}

}  // namespace metalx
