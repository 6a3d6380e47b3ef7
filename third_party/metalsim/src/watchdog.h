// The kernel watchdog: a GPU ends a kernel that runs too long with a timeout error
// ("Caused GPU Timeout Error"); the simulator does the same for run-time compiled
// kernels (built with loop checks, prelude/metalsim_prelude/checked.h), after
// METALSIM_KERNEL_TIMEOUT_S.
//
// A dispatch arms a deadline while it runs. One thread sleeps until the earliest
// deadline; when it passes it marks that dispatch expired and raises the shared alarm
// flag, which the kernels' loop checks read; a kernel that sees the alarm asks whether
// its own dispatch expired and, if so, unwinds with the timeout error.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace metalsim {

class Watchdog {
 public:
  static Watchdog& instance();

  // The deadline of one dispatch, armed for the lifetime of the object.
  class Deadline {
   public:
    Deadline(Watchdog& dog, double seconds);
    ~Deadline();
    Deadline(const Deadline&) = delete;
    Deadline& operator=(const Deadline&) = delete;
    const std::atomic<bool>& flag() const { return state_->expired; }

    struct State {
      double due;  // seconds on the steady clock
      std::atomic<bool> expired{false};
    };

   private:
    Watchdog& dog_;
    std::shared_ptr<State> state_;
  };

  // Nonzero while an armed dispatch is past its deadline.
  const volatile uint32_t* alarm() const { return &alarm_; }

 private:
  Watchdog() = default;
  struct Impl;
  Impl* impl();
  volatile uint32_t alarm_ = 0;
};

}  // namespace metalsim
