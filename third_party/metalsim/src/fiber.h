// Fibers: one stack per simulated thread of a threadgroup that synchronises, so a
// barrier or SIMD-group function can suspend that thread and run the others up to the
// same point, as lockstep hardware would. A switch costs a few register saves.
#pragma once

#include <cstddef>
#include <vector>

#include "metalsim/kernel_abi.h"

namespace metalsim {

// Every fiber stack is a mapping of this many bytes (a power of two, at least the
// configured stack plus its guard page) starting at a multiple of it, with the
// thread's kabi::LaneHeader in its top bytes: kernel code finds the header by masking
// its frame address (see kabi::LaneHeader).
size_t fiberStackSpan();

class Fiber {
 public:
  using Entry = void (*)(void* arg);
  Fiber();
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Prepares the fiber to run entry(arg) from the top of its stack on the next resume.
  void reset(Entry entry, void* arg);
  // Runs the fiber until it calls suspend() (or its entry switches back); returns then.
  void resume();
  // Called on the fiber: returns control to the thread that resumed it.
  void suspend();
  // Called first thing on the fiber's own stack (bookkeeping for sanitizers).
  void started();
  // The header at the top of this fiber's stack.
  kabi::LaneHeader* header() const;

 private:
  void* stack_ = nullptr;  // the mapping (fiberStackSpan() bytes, aligned to it), guard page first
  size_t mapped_ = 0;
  void* sp_ = nullptr;         // saved stack pointer of the fiber
  void* caller_sp_ = nullptr;  // saved stack pointer of the thread that resumed it
  void* fake_stack_ = nullptr;  // AddressSanitizer bookkeeping
  const void* caller_bottom_ = nullptr;
  size_t caller_size_ = 0;
  struct Impl;
  Impl* impl_ = nullptr;  // ucontext fallback where no assembly switch exists
  friend struct FiberAccess;
};

// A per-OS-thread pool of fibers, grown on demand and reused across dispatches.
class FiberPool {
 public:
  ~FiberPool();
  Fiber& get(size_t i);

 private:
  std::vector<Fiber*> fibers_;
};

}  // namespace metalsim
