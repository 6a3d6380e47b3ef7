// The fallback report (see fallback_report.h).
#include "fallback_report.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>

namespace metalx {
namespace {

std::atomic<FallbackMode>& mode() {
  static std::atomic<FallbackMode> m{[] {
    const char* v = std::getenv("METALX_FALLBACK");
    return (v && *v) ? parseFallbackMode(v) : FallbackMode::Allow;
  }()};
  return m;
}

std::mutex& mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, int64_t>& counts() {
  static std::map<std::string, int64_t> c;
  return c;
}
std::set<std::string>& warned() {
  static std::set<std::string> w;
  return w;
}

std::atomic<int64_t> result_copies{0};

std::string fullName(const c10::OperatorName& op) {
  return op.overload_name.empty() ? op.name : op.name + "." + op.overload_name;
}

}  // namespace

FallbackMode parseFallbackMode(const std::string& text) {
  if (text == "allow") return FallbackMode::Allow;
  if (text == "warn") return FallbackMode::Warn;
  if (text == "error") return FallbackMode::Error;
  TORCH_CHECK(false, "METALX_FALLBACK='", text, "' is not a fallback mode; use allow, warn or error");
}

FallbackMode fallbackMode() { return mode().load(); }
void setFallbackMode(FallbackMode m) { mode().store(m); }

void reportFallback(const c10::OperatorName& op) {
  const std::string name = fullName(op);
  const FallbackMode m = fallbackMode();
  TORCH_CHECK(m != FallbackMode::Error, "metalx has no kernel for ", name,
              " and METALX_FALLBACK=error forbids running it on the CPU");
  bool first_warning = false;
  {
    std::lock_guard<std::mutex> lock(mutex());
    ++counts()[name];
    if (m == FallbackMode::Warn) first_warning = warned().insert(name).second;
  }
  if (first_warning)
    TORCH_WARN("metalx has no kernel for ", name, "; it runs on the CPU (METALX_FALLBACK=warn)");
}

std::map<std::string, int64_t> fallbackCounts() {
  std::lock_guard<std::mutex> lock(mutex());
  return counts();
}

void resetFallbackCounts() {
  std::lock_guard<std::mutex> lock(mutex());
  counts().clear();
  result_copies = 0;
}

void countFallbackResultCopy() { ++result_copies; }
int64_t fallbackResultCopies() { return result_copies.load(); }

}  // namespace metalx
