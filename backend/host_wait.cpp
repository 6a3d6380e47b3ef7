// Interruptible host waits (see host_wait.h).
#include "host_wait.h"

#include <atomic>

namespace metalx {
namespace {

std::atomic<HostWaitInterruptCheck> interrupt_check{nullptr};

}  // namespace

void setHostWaitInterruptCheck(HostWaitInterruptCheck check) {
  interrupt_check.store(check, std::memory_order_release);
}

void waitForHost(Stream& stream) {
  if (HostWaitInterruptCheck check = interrupt_check.load(std::memory_order_acquire))
    stream.waitAllPolling([check] {
      check();  // throws to stop
      return true;
    });
  stream.synchronize();  // the failures of what completed
}

}  // namespace metalx
