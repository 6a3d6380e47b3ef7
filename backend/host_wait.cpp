// Interruptible host waits (see host_wait.h).
#include "host_wait.h"

#include <atomic>

#include "device_index_errors.h"

namespace metalx {
namespace {

std::atomic<HostWaitInterruptCheck> interrupt_check{nullptr};

}  // namespace

void setHostWaitInterruptCheck(HostWaitInterruptCheck check) {
  interrupt_check.store(check, std::memory_order_release);
}

void waitUntilIdle(Stream& stream) {
  if (HostWaitInterruptCheck check = interrupt_check.load(std::memory_order_acquire))
    stream.waitAllPolling([check] {
      check();  // throws to stop
      return true;
    });
}

void waitForHost(Stream& stream) {
  waitUntilIdle(stream);
  stream.synchronize();  // the failures of what completed (or the whole wait, without a check)
  raiseDeviceIndexError(static_cast<c10::DeviceIndex>(stream.deviceIndex()));  // and its index errors
}

}  // namespace metalx
