// Reads the simulator's settings (see config.h).
#include "config.h"

#include <unistd.h>

#include <cstdlib>
#include <thread>

namespace metalsim {
namespace {

long long envInt(const char* name, long long fallback, long long min_value) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long long n = std::strtoll(v, &end, 10);
  if (!end || *end != '\0' || n < min_value) return fallback;
  return n;
}

std::string envStr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

Config load() {
  Config c;
  c.device_count = static_cast<int>(envInt("METALSIM_DEVICE_COUNT", 1, 0));
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  c.threads = static_cast<int>(envInt("METALSIM_THREADS", cores > 0 ? cores : 1, 1));
  c.strict = envInt("METALSIM_STRICT", 0, 0) != 0;
  c.strict_delay_us = static_cast<uint32_t>(envInt("METALSIM_STRICT_DELAY_US", 2000, 0));
  uint64_t phys = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                  static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  long long mb = envInt("METALSIM_MEMORY_MB", 0, 1);
  c.memory_capacity = mb > 0 ? static_cast<uint64_t>(mb) << 20 : phys;
  std::string home = envStr("HOME", "/tmp");
  std::string xdg = envStr("XDG_CACHE_HOME", home + "/.cache");
  c.cache_dir = envStr("METALSIM_CACHE_DIR", xdg + "/metalx/kernels");
  c.cache_bytes = static_cast<uint64_t>(envInt("METALSIM_CACHE_MB", 512, 1)) << 20;
  c.cxx = envStr("METALSIM_CXX", envStr("CXX", METALSIM_CXX_COMPILER));
  c.fiber_stack_bytes = static_cast<size_t>(envInt("METALSIM_FIBER_STACK_KB", 256, 16)) << 10;
  c.event_timeout_s = static_cast<double>(envInt("METALSIM_EVENT_TIMEOUT_S", 60, 1));
  c.kernel_isa = envStr("METALSIM_KERNEL_ISA", "auto");
  return c;
}

}  // namespace

const Config& config() {
  static const Config c = load();
  return c;
}

}  // namespace metalsim
