// A simulated MTLSharedEvent.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "metalx/runtime/event.h"

namespace metalsim {

class SimDevice;

class SimEvent final : public metalx::rt::Event {
 public:
  explicit SimEvent(SimDevice& device) : device_(device) {}
  metalx::rt::Device& device() override;
  uint64_t signaledValue() const override;
  void signal(uint64_t value) override;
  bool waitUntilSignaled(uint64_t value, std::chrono::milliseconds timeout) override;
  void notify(uint64_t value, std::function<void()> fn) override;
  SimDevice& simDevice() { return device_; }

 private:
  SimDevice& device_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  uint64_t value_ = 0;
  std::multimap<uint64_t, std::function<void()>> listeners_;
};

}  // namespace metalsim
