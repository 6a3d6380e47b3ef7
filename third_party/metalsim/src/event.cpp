// A simulated MTLSharedEvent (see event.h).
#include "event.h"

#include "device.h"

namespace metalsim {

metalx::rt::Device& SimEvent::device() { return device_; }

uint64_t SimEvent::signaledValue() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return value_;
}

void SimEvent::signal(uint64_t value) {
  std::vector<std::function<void()>> ready;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (value <= value_) return;
    value_ = value;
    auto end = listeners_.upper_bound(value);
    for (auto it = listeners_.begin(); it != end; ++it) ready.push_back(std::move(it->second));
    listeners_.erase(listeners_.begin(), end);
  }
  cv_.notify_all();
  for (auto& fn : ready) fn();  // outside the lock: a listener may touch the event
}

bool SimEvent::waitUntilSignaled(uint64_t value, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return cv_.wait_for(lock, timeout, [&] { return value_ >= value; });
}

void SimEvent::notify(uint64_t value, std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (value_ < value) {
      listeners_.emplace(value, std::move(fn));
      return;
    }
  }
  fn();
}

}  // namespace metalsim
