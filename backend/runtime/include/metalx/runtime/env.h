// Settings read from environment variables (METALX_*, METALSIM_*), parsed one way
// everywhere: unset or empty means the default; anything else must parse completely
// and lie in range, or an rt::Error (Validation) names the variable, the value and
// what is accepted. A typo in a setting is reported, never silently ignored.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>

namespace metalx::rt::env {

// The variable's value, or nullopt when it is unset or empty.
std::optional<std::string> get(const char* name);

// An integer in [min_value, max_value].
int64_t integer(const char* name, int64_t fallback, int64_t min_value,
                int64_t max_value = std::numeric_limits<int64_t>::max());

// A number greater than `above`.
double number(const char* name, double fallback, double above);

// 0 or 1.
bool flag(const char* name, bool fallback);

// One of `accepted`.
std::string choice(const char* name, const std::string& fallback, std::initializer_list<const char*> accepted);

}  // namespace metalx::rt::env
