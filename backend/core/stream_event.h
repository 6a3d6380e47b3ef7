// An event on a device's streams, as torch.Event and c10::Event use one.
//
// record() marks the point a stream's work has reached; another stream of the same
// device can wait for that point on the device (block), without the host waiting; the
// host can poll (query) or wait (synchronize); and two timing events give the device
// time between their points, on the runtime's clock (the GPU end time of the command
// buffer that signals each one, i.e. when all work before it had finished).
//
// Recording again moves the event to the new point, as cudaEventRecord does. Metal
// events belong to one device, so recording on, or waiting from, another device's
// stream is an error. All methods are thread-safe.
#pragma once

#include <cstdint>
#include <mutex>

#include "core/stream.h"

namespace metalx {

class StreamEvent {
 public:
  StreamEvent(int device_index, bool timing) : device_index_(device_index), timing_(timing) {}
  StreamEvent(const StreamEvent&) = delete;
  StreamEvent& operator=(const StreamEvent&) = delete;

  int deviceIndex() const { return device_index_; }
  bool timing() const { return timing_; }
  bool recorded() const;

  void record(Stream& stream);
  // Work encoded on `stream` from now on runs after the recorded point (nothing to
  // wait for if never recorded).
  void block(Stream& stream) const;
  // True when the recorded point has been reached (or nothing was recorded).
  bool query() const;
  // Waits until the recorded point has been reached; throws if the work before it failed.
  void synchronize() const;
  // Milliseconds of device time from this event to `end`; both must be timing events,
  // recorded and completed.
  double elapsedMilliseconds(const StreamEvent& end) const;

 private:
  void checkDevice(const Stream& stream, const char* what) const;
  double completedTime(const char* which) const;

  const int device_index_;
  const bool timing_;
  mutable std::mutex mutex_;
  rt::EventPtr event_;           // created on first record, on the device
  uint64_t value_ = 0;           // the value the last record signals
  rt::CommandBufferPtr marker_;  // the command buffer that signals it
};

}  // namespace metalx
