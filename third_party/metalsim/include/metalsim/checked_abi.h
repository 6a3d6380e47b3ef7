// The contract between run-time compiled kernels built with shader validation or the
// kernel watchdog (prelude/metalsim_prelude/checked.h) and the simulator.
//
// Kept apart from kernel_abi.h on purpose: built-in kernels never include it, so
// changing it rebuilds no built-in kernel. A library compiled with checks exports
// `metalsim_checked_entry`; the simulator calls it with this table right after
// loading the library, before any of its kernels runs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "metalsim/kernel_abi.h"

namespace metalsim::checked_abi {

constexpr uint32_t kVersion = 2;

// An access a kernel attempted outside the range of the buffer binding or the
// threadgroup memory its pointer came from.
struct Access {
  const void* base;              // the binding's start (buffer contents + offset), or
                                 // the start of a threadgroup variable or argument
  const void* end;               // the end of the bound buffer (or of that memory)
  const void* address;           // first byte accessed
  size_t size;                   // bytes accessed
  const char* type;              // the element type, as the compiler spells it
  // The thread that made it: its linear position in the grid (x fastest), or ~0 when
  // unknown. A number, not the thread's ids: a pointer to those would make every
  // thread of a kernel store all of them, just in case.
  uint64_t thread_in_grid;
  // The threadgroup variable indexed (`threadgroup float tile[64]` -> "tile"), or null.
  const char* variable;
};

struct Api {
  uint32_t version;
  // Nonzero while some dispatch of a checked kernel is past its deadline: loop
  // back-edges read it and, only then, call watchdog_check.
  const volatile uint32_t* watchdog_alarm;
  // Throws (unwinding the kernel) when the calling thread's dispatch is past its deadline.
  void (*watchdog_check)();
  // For the dispatch the calling thread runs: bytes from each [[buffer(n)]] binding's
  // start to the end of its buffer (or of its inline bytes) at index n, and the length
  // set for each [[threadgroup(n)]] argument at index kMaxBindings + n.
  const uint64_t* (*bound_lengths)();
  // Fails the dispatch with a message naming the kernel, argument, offset, type and thread.
  [[noreturn]] void (*violation)(const Access* access);
};

using EntryFn = void (*)(const Api*);
constexpr const char* kEntryName = "metalsim_checked_entry";

}  // namespace metalsim::checked_abi
