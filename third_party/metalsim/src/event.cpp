// A simulated MTLSharedEvent (see event.h).
#include "event.h"

#include <deque>
#include <thread>

#include "device.h"

namespace metalsim {
namespace {

// Listeners run here, one after another, never on the thread that signalled: a
// signaller may hold locks its listener also takes (as with Metal's listener queue).
class ListenerThread {
 public:
  static ListenerThread& instance() {
    static ListenerThread* t = new ListenerThread();  // lives until exit, like a GCD queue
    return *t;
  }
  void post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      work_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }

 private:
  ListenerThread() {
    std::thread([this] {
      for (;;) {
        std::function<void()> fn;
        {
          std::unique_lock<std::mutex> lock(mutex_);
          cv_.wait(lock, [&] { return !work_.empty(); });
          fn = std::move(work_.front());
          work_.pop_front();
        }
        try {
          fn();
        } catch (...) {
          // Nowhere to report it; keep serving the other listeners.
        }
      }
    }).detach();
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> work_;
};

}  // namespace

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
  for (auto& fn : ready) ListenerThread::instance().post(std::move(fn));
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
  ListenerThread::instance().post(std::move(fn));
}

}  // namespace metalsim
