// Events on streams (see stream_event.h).
#include "core/stream_event.h"
#include "core/host_waits.h"

#include <stdexcept>
#include <string>

namespace metalx {

void StreamEvent::checkDevice(const Stream& stream, const char* what) const {
  if (stream.deviceIndex() != device_index_)
    throw std::invalid_argument(std::string("metalx: cannot ") + what + " an event of metalx:" +
                                std::to_string(device_index_) + " on a stream of metalx:" +
                                std::to_string(stream.deviceIndex()) +
                                " (Metal events belong to one device)");
}

bool StreamEvent::recorded() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return marker_ != nullptr;
}

void StreamEvent::record(Stream& stream) {
  checkDevice(stream, "record");
  std::lock_guard<std::mutex> lock(mutex_);
  if (!event_) event_ = stream.device().newEvent();
  const uint64_t value = value_ + 1;
  marker_ = stream.recordEvent(event_, value);
  value_ = value;
}

void StreamEvent::block(Stream& stream) const {
  checkDevice(stream, "wait for");
  rt::EventPtr event;
  uint64_t value;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!marker_) return;
    event = event_;
    value = value_;
  }
  stream.encodeWait(event, value);
}

namespace {

bool finished(const rt::CommandBuffer& cb) {
  const auto status = cb.status();
  return status == rt::CommandBufferStatus::Completed || status == rt::CommandBufferStatus::Error;
}

}  // namespace

bool StreamEvent::query() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!marker_) return true;
  // The point is reached when the signal has run; its command buffer is marked
  // finished a moment later. A failed command buffer never signals, but is finished.
  return event_->signaledValue() >= value_ || finished(*marker_);
}

void StreamEvent::synchronize() const {
  countHostWait();
  rt::CommandBufferPtr marker;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    marker = marker_;
  }
  if (!marker) return;
  // The marker is committed when recorded, so this wait always ends.
  marker->waitUntilCompleted();
  if (marker->status() == rt::CommandBufferStatus::Error)
    throw std::runtime_error("metalx: GPU work before the event failed: " + marker->error());
}

double StreamEvent::completedTime(const char* which) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!timing_)
    throw std::invalid_argument(std::string("metalx: elapsed_time: the ") + which +
                                " event was created without enable_timing=True");
  if (!marker_)
    throw std::invalid_argument(std::string("metalx: elapsed_time: the ") + which +
                                " event has not been recorded");
  if (event_->signaledValue() < value_ && !finished(*marker_))
    throw std::runtime_error(std::string("metalx: elapsed_time: the ") + which +
                             " event has not completed yet; synchronize() on it first");
  // Signalled: its command buffer ends at once; its end time is the event's time.
  marker_->waitUntilCompleted();
  if (marker_->status() != rt::CommandBufferStatus::Completed)
    throw std::runtime_error(std::string("metalx: elapsed_time: the work before the ") + which +
                             " event failed: " + marker_->error());
  return marker_->gpuEndTime();
}

double StreamEvent::elapsedMilliseconds(const StreamEvent& end) const {
  if (end.device_index_ != device_index_)
    throw std::invalid_argument("metalx: elapsed_time: the events are on different devices (metalx:" +
                                std::to_string(device_index_) + " and metalx:" +
                                std::to_string(end.device_index_) + ")");
  const double start_s = completedTime("start");
  const double end_s = end.completedTime("end");
  return (end_s - start_s) * 1000.0;
}

}  // namespace metalx
