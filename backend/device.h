// Device indices as torch sees them, mapped onto the runtime's devices.
//
// Every torch-facing entry point that receives a device index (the guard, the hooks,
// the allocator, the Python module) validates it here, so a bad index produces one
// message everywhere: "metalx device 5 does not exist; 1 device available".
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <functional>
#include <stdexcept>

namespace metalx::rt {
class Device;
}

namespace metalx {

class Stream;

// Number of devices of the selected driver; 0 if the runtime cannot start (for
// instance METALX_DRIVER names a driver this build lacks).
c10::DeviceIndex deviceCount() noexcept;

// Throws a c10::Error naming the bad index and how many devices exist.
void checkDeviceIndex(c10::DeviceIndex index);

// The runtime device behind a (valid) torch device index.
rt::Device& runtimeDevice(c10::DeviceIndex index);

// The calling thread's current device (0 until set), as CUDA's is per thread.
c10::DeviceIndex currentDevice();
void setCurrentDevice(c10::DeviceIndex index);  // validates
// No validation: for restoring an index that was valid when it was saved.
void setCurrentDeviceUnchecked(c10::DeviceIndex index) noexcept;

// An index received as a plain integer (from Python): a c10::Error unless it is a
// non-negative value that fits a DeviceIndex. Does not check that the device exists.
c10::DeviceIndex toDeviceIndex(int64_t index);

// `index`, or the current device when `index` is -1 (torch's "no index given").
c10::DeviceIndex resolveDeviceIndex(c10::DeviceIndex index);
// resolveDeviceIndex, then checkDeviceIndex: a device that exists.
c10::DeviceIndex existingDeviceIndex(c10::DeviceIndex index);

// Runs fn, rethrowing the runtime's and the core's std::exceptions as c10::Errors with
// their message (std::invalid_argument as a ValueError); c10::Errors pass unchanged.
template <typename Fn>
auto withTorchErrors(Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const c10::Error&) {
    throw;
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  } catch (const std::exception& e) {
    TORCH_CHECK(false, e.what());
  }
}

// Waits until all work queued on the device, on every stream, has finished.
void synchronizeDevice(c10::DeviceIndex index);
// Waits for the calling thread's current stream of the device: what the host must do
// before it reads or writes device memory on that stream's behalf (item(), CPU
// fallback, blocking copies), as CUDA synchronises the current stream there.
void synchronizeCurrentStream(c10::DeviceIndex index);

// synchronizeDevice and a stream's synchronize for the Python API: they wait in slices
// of 50 ms and ask `keep_waiting` after each unfinished one; when it says no (Ctrl-C),
// they return false at once, the work keeps running, and a later synchronize waits for
// it and reports its failures. True when everything completed (failures thrown).
bool synchronizeDevicePolling(c10::DeviceIndex index, const std::function<bool()>& keep_waiting);
bool synchronizeStreamPolling(const c10::Stream& stream, const std::function<bool()>& keep_waiting);

// The metalx stream behind a torch stream; a c10::Error for a stream of another
// device type, a bad device or an unknown id.
Stream& streamFor(const c10::Stream& stream);

}  // namespace metalx
