// The streams of each device, and which one is current on each thread.
//
// Each device has its default stream (id 0) and a pool of kStreamPoolSize more (ids
// 1..kStreamPoolSize), created on first use and kept for the life of the process, as
// CUDA's stream pools are. A stream is a Metal command queue, which Apple means to be
// long-lived (and which on the simulator owns a thread), so "new" streams are handed
// out round-robin from the pool instead of being created without bound.
//
// The current stream is per thread and per device, and is the default stream until a
// thread sets another: every op encodes its work on the current stream of its device.
// All streams of a device share one pipeline cache.
#pragma once

#include <cstdint>
#include <functional>

#include "core/stream.h"

namespace metalx {

constexpr int kStreamPoolSize = 8;

Stream& defaultStream(int device_index);
// The stream with this id on this device; std::out_of_range names the valid ids.
Stream& streamById(int device_index, int64_t id);
// The next stream of the device's pool (round-robin), never the default stream.
Stream& streamFromPool(int device_index);

Stream& currentStream(int device_index);
// Makes `stream` current on this thread for its device; returns the previous one.
Stream& setCurrentStream(Stream& stream);

// Calls fn on every stream of the device created so far (default first).
void forEachStream(int device_index, const std::function<void(Stream&)>& fn);
// Waits for every stream of the device; throws the first failure found.
void synchronizeAllStreams(int device_index);
// synchronizeAllStreams, waiting in slices and asking `keep_waiting` after each slice
// that did not finish; false (at once) when it said no, e.g. on Ctrl-C: the work keeps
// running and a later synchronize waits for it.
bool synchronizeAllStreamsPolling(int device_index, const std::function<bool()>& keep_waiting);

rt::PipelineCache& devicePipelines(int device_index);

}  // namespace metalx
