// How many times the host has waited for device work: Stream::synchronize() and
// StreamEvent::synchronize() calls, on every stream of every device. Tests read it
// (torch.metalx.host_wait_count()) to prove that a path, such as a training step, has
// no hidden host waits.
#pragma once

#include <cstdint>

namespace metalx {

uint64_t hostWaitCount();
void countHostWait();

}  // namespace metalx
