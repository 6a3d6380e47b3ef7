// Events, as MTLSharedEvent: a 64-bit counter that command buffers signal and wait on,
// and that the host can read, set and wait for. They order work across queues and let
// the host wait for a point inside a queue without waiting for the whole queue.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace metalx::rt {

class Device;

class Event {
 public:
  virtual ~Event() = default;
  virtual Device& device() = 0;
  virtual uint64_t signaledValue() const = 0;
  // Host-side signal. Values only move forward, as on Metal: a smaller value is ignored.
  virtual void signal(uint64_t value) = 0;
  // Blocks until signaledValue() >= value; false if the timeout passed first.
  virtual bool waitUntilSignaled(uint64_t value, std::chrono::milliseconds timeout) = 0;
  // Calls `fn` once, on a runtime thread, when signaledValue() >= value (at once if
  // it already is). As MTLSharedEventListener.
  virtual void notify(uint64_t value, std::function<void()> fn) = 0;
};

using EventPtr = std::shared_ptr<Event>;

}  // namespace metalx::rt
