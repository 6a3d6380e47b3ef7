// Environment settings (see env.h).
#include "metalx/runtime/env.h"

#include <cerrno>
#include <cstdlib>

#include "metalx/runtime/error.h"

namespace metalx::rt::env {
namespace {

[[noreturn]] void reject(const char* name, const std::string& value, const std::string& accepted) {
  throw Error(ErrorKind::Validation, std::string(name) + " must be " + accepted + ", not '" + value + "'");
}

}  // namespace

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

int64_t integer(const char* name, int64_t fallback, int64_t min_value, int64_t max_value) {
  const auto v = get(name);
  if (!v) return fallback;
  const std::string accepted = max_value == std::numeric_limits<int64_t>::max()
                                   ? "an integer >= " + std::to_string(min_value)
                                   : "an integer from " + std::to_string(min_value) + " to " + std::to_string(max_value);
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v->c_str(), &end, 10);
  if (end == v->c_str() || *end != '\0' || errno == ERANGE || n < min_value || n > max_value)
    reject(name, *v, accepted);
  return n;
}

double number(const char* name, double fallback, double above) {
  const auto v = get(name);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v->c_str(), &end);
  if (end == v->c_str() || *end != '\0' || errno == ERANGE || !(x > above))
    reject(name, *v, "a number > " + std::to_string(above));
  return x;
}

bool flag(const char* name, bool fallback) {
  const auto v = get(name);
  if (!v) return fallback;
  if (*v == "0") return false;
  if (*v == "1") return true;
  reject(name, *v, "0 or 1");
}

std::string choice(const char* name, const std::string& fallback, std::initializer_list<const char*> accepted) {
  const auto v = get(name);
  if (!v) return fallback;
  std::string list;
  for (const char* a : accepted) {
    if (*v == a) return *v;
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  reject(name, *v, "one of " + list);
}

}  // namespace metalx::rt::env
