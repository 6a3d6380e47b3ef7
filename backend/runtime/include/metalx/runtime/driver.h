// Choosing the implementation of the interface: real Metal or the simulator.
//
// METALX_DRIVER=metal|sim picks one of the drivers this build contains; without it the
// Metal driver is used where it was built and finds a device, the simulator otherwise.
// Devices are opened once per process, on first use, and live until exit.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "metalx/runtime/device.h"

namespace metalx::rt {

// The selected driver's name ("metal" or "sim"). Throws Error(NotFound) if
// METALX_DRIVER names a driver this build does not contain.
const std::string& driverName();
// Refuses (Error(Unsupported), suggesting the 'spawn' start method) in a fork() child
// of a process that had opened the devices: the child has their memory but none of
// their threads (the simulator's workers, Metal's), so any use would hang, as CUDA's
// would. One relaxed load: callers on every op's path (the current stream, the
// allocator) check it too.
namespace detail {
extern std::atomic<bool> forked_child;
}
[[noreturn]] void throwForkedChild();
inline void checkNotForkedChild() {
  if (detail::forked_child.load(std::memory_order_relaxed)) throwForkedChild();
}

// The selected driver's devices (possibly none: a Mac without a usable GPU).
const std::vector<DevicePtr>& devices();
// devices()[index], or Error(NotFound) naming the valid range.
Device& device(int index);
// The drivers compiled into this build, e.g. {"sim"} on Linux.
std::vector<std::string> availableDrivers();

}  // namespace metalx::rt
