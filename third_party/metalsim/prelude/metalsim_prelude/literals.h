// MSL literal suffixes C++ lacks: 1.5h (half). C++ reserves suffixes without a leading
// underscore for the standard library and warns about declaring them; marking this
// header as a system header is the sanctioned way to do it anyway, like libstdc++'s
// own `h` (hours) suffix. The operators live in namespace metal, so the suffix works
// in code that says `using namespace metal;`, which MSL sources do.
#pragma once
#pragma GCC system_header

namespace metal {
constexpr half operator""h(long double v) noexcept { return static_cast<half>(v); }
constexpr half operator""H(long double v) noexcept { return static_cast<half>(v); }
constexpr half operator""h(unsigned long long v) noexcept { return static_cast<half>(v); }
}  // namespace metal
