// The host's waits for a stream before it touches device memory on the stream's
// behalf: .item(), .cpu() and other blocking copies, the CPU fallback. They can be long
// (a slow kernel), so Ctrl-C must end them as it ends torch.metalx.synchronize().
//
// The Python module installs the interrupt check (it alone knows about Python signals);
// without one, a host wait is a plain Stream::synchronize().
#pragma once

#include "core/stream.h"

namespace metalx {

// Called between the 50 ms slices of an unfinished host wait, without metalx locks
// held. It returns to keep waiting, or throws to abandon the wait (the exception
// reaches the op's caller; the device work keeps running and a later wait reports it).
using HostWaitInterruptCheck = void (*)();
void setHostWaitInterruptCheck(HostWaitInterruptCheck check);

// Waits for all work queued on `stream` and throws its failures, as
// Stream::synchronize(); interruptible as above. Callers must leave nothing that the
// still-running work uses to be freed or reused if it throws.
void waitForHost(Stream& stream);

// The interruptible part alone: returns when everything queued on `stream` has
// completed, without reporting failures (the caller's synchronize() does, once).
void waitUntilIdle(Stream& stream);

}  // namespace metalx
