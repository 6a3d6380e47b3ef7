// Reads the simulator's settings (see config.h).
#include "config.h"

#include <unistd.h>

#include <cstdint>
#include <thread>

#include "metalx/runtime/env.h"

namespace metalsim {
namespace {

using metalx::rt::env::choice;
using metalx::rt::env::flag;
using metalx::rt::env::integer;

std::string envStr(const char* name, const std::string& fallback) {
  return metalx::rt::env::get(name).value_or(fallback);
}

Config load() {
  Config c;
  c.device_count = static_cast<int>(integer("METALSIM_DEVICE_COUNT", 1, 0, 64));
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  c.threads = static_cast<int>(integer("METALSIM_THREADS", cores > 0 ? cores : 1, 1, 1024));
  c.strict = flag("METALSIM_STRICT", false);
  c.strict_delay_us = static_cast<uint32_t>(integer("METALSIM_STRICT_DELAY_US", 2000, 0, 10000000));
  uint64_t phys = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                  static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const int64_t mb = integer("METALSIM_MEMORY_MB", 0, 1);
  c.memory_capacity = mb > 0 ? static_cast<uint64_t>(mb) << 20 : phys;
  std::string home = envStr("HOME", "/tmp");
  std::string xdg = envStr("XDG_CACHE_HOME", home + "/.cache");
  c.cache_dir = envStr("METALSIM_CACHE_DIR", xdg + "/metalx/kernels");
  c.cache_bytes = static_cast<uint64_t>(integer("METALSIM_CACHE_MB", 512, 1, int64_t(1) << 40)) << 20;
  c.cxx = envStr("METALSIM_CXX", envStr("CXX", METALSIM_CXX_COMPILER));
  c.fiber_stack_bytes = static_cast<size_t>(integer("METALSIM_FIBER_STACK_KB", 256, 16, int64_t(1) << 20)) << 10;
  c.event_timeout_s = static_cast<double>(integer("METALSIM_EVENT_TIMEOUT_S", 60, 1));
  const std::string validation = choice("METALSIM_SHADER_VALIDATION", "1", {"0", "1", "all"});
  c.shader_validation = validation != "0";
  c.validate_builtin_kernels = validation == "all";
  c.kernel_timeout_s = static_cast<double>(integer("METALSIM_KERNEL_TIMEOUT_S", 10, 0, 86400));
  c.kernel_isa = choice("METALSIM_KERNEL_ISA", "auto", {"auto", "baseline", "x86-64-v3", "x86-64-v4"});
  return c;
}

}  // namespace

const Config& config() {
  static const Config c = load();
  return c;
}

}  // namespace metalsim
