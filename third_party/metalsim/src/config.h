// The simulator's settings, read once from the environment.
//
//   METALSIM_DEVICE_COUNT   simulated devices (default 1), to test multi-device code
//   METALSIM_THREADS        CPU threads that run threadgroups (default: all cores)
//   METALSIM_STRICT=1       flush out missing synchronisation: every command buffer
//                           starts late (METALSIM_STRICT_DELAY_US, default 2000), new
//                           buffers and threadgroup memory hold garbage, not zeros
//   METALSIM_MEMORY_MB      device memory capacity (default: physical memory); the
//                           recommended working set is 3/4 of it
//   METALSIM_CACHE_DIR      where run-time compiled kernels are cached on disk
//   METALSIM_CACHE_MB       bound of that cache (default 512)
//   METALSIM_CXX            host compiler for run-time compiled kernels
//   METALSIM_FIBER_STACK_KB stack of each simulated thread that synchronises (256)
//   METALSIM_EVENT_TIMEOUT_S how long a command buffer may wait on an event before it
//                           fails, like Metal's GPU watchdog (default 60)
//   METALSIM_SHADER_VALIDATION 1 (default): run-time compiled kernels check every
//                           device/constant access against its buffer binding; 0: off;
//                           all: the built-in kernels too (compiled from their sources
//                           at first use, with the checks; see builtin_sources.h)
//   METALSIM_KERNEL_TIMEOUT_S a run-time compiled kernel running longer fails with a
//                           GPU timeout error (default 10; 0: no watchdog)
//   METALSIM_KERNEL_ISA     which build of the built-in kernels runs: auto (default),
//                           baseline, x86-64-v3 or x86-64-v4 (kernel_isa.h)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace metalsim {

struct Config {
  int device_count;
  int threads;
  bool strict;
  uint32_t strict_delay_us;
  uint64_t memory_capacity;
  std::string cache_dir;
  uint64_t cache_bytes;
  std::string cxx;
  size_t fiber_stack_bytes;
  double event_timeout_s;
  std::string kernel_isa;
  bool shader_validation;
  bool validate_builtin_kernels;  // implies shader_validation
  double kernel_timeout_s;  // 0: no watchdog
};

const Config& config();

// Byte written into fresh memory in strict mode, so reads of uninitialised memory
// produce obviously wrong values (0xCD..., a NaN-like float, a huge integer).
constexpr unsigned char kPoisonByte = 0xCD;

}  // namespace metalsim
