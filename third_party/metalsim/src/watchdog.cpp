// The kernel watchdog (see watchdog.h).
#include "watchdog.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace metalsim {
namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

struct Watchdog::Impl {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::shared_ptr<Deadline::State>> armed;
  uint32_t expired_armed = 0;  // how many armed deadlines have passed (alarm_ mirrors it)
  bool thread_started = false;
};

Watchdog& Watchdog::instance() {
  // Never destroyed: its thread may still sleep on it while the process exits.
  static Watchdog* dog = new Watchdog();
  return *dog;
}

Watchdog::Impl* Watchdog::impl() {
  static Impl* i = new Impl();
  return i;
}

Watchdog::Deadline::Deadline(Watchdog& dog, double seconds) : dog_(dog), state_(std::make_shared<State>()) {
  state_->due = now() + seconds;
  Impl& im = *dog.impl();
  std::lock_guard<std::mutex> lock(im.mutex);
  const bool was_idle = im.armed.empty();
  im.armed.push_back(state_);
  if (!im.thread_started) {
    im.thread_started = true;
    Watchdog* self = &dog;
    std::thread([self, &im] {
      std::unique_lock<std::mutex> lock(im.mutex);
      for (;;) {
        double next = 0;
        const double t = now();
        for (auto& s : im.armed) {
          if (s->expired.load(std::memory_order_relaxed)) continue;
          if (s->due <= t) {
            s->expired.store(true, std::memory_order_release);
            self->alarm_ = ++im.expired_armed;
          } else if (next == 0 || s->due < next) {
            next = s->due;
          }
        }
        if (next == 0) im.changed.wait(lock);
        else im.changed.wait_for(lock, std::chrono::duration<double>(next - t));
      }
    }).detach();
  }
  // Deadlines come in order (one timeout for all), so the thread only needs waking
  // when it was sleeping with nothing armed.
  if (was_idle) im.changed.notify_one();
}

Watchdog::Deadline::~Deadline() {
  Impl& im = *dog_.impl();
  std::lock_guard<std::mutex> lock(im.mutex);
  for (auto it = im.armed.begin(); it != im.armed.end(); ++it)
    if (*it == state_) {
      im.armed.erase(it);
      break;
    }
  if (state_->expired.load(std::memory_order_relaxed)) dog_.alarm_ = --im.expired_armed;
}

}  // namespace metalsim
