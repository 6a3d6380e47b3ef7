// More of MSL's integer and math functions, for scalars: mulhi, rotate, extract_bits,
// insert_bits, absdiff, hadd, rhadd, min3/max3/median3, frexp, modf, nextafter, divide.
// (metal::precise and metal::fast get the float ones through math.h's namespaces.)
// Needs math.h.
#pragma once

namespace metal {

namespace detail {
template <class T>
using int_only_t = std::enable_if_t<std::is_integral<T>::value && !std::is_same<T, bool>::value, T>;
template <class T>
using fp_only_t = std::enable_if_t<is_fp<T>::value || is_bf<T>::value, T>;
}  // namespace detail

// High half of the full product.
template <class T>
constexpr detail::int_only_t<T> mulhi(T x, T y) noexcept {
  if constexpr (sizeof(T) == 8) {
    using W = std::conditional_t<std::is_signed<T>::value, __int128, unsigned __int128>;
    return static_cast<T>((W(x) * W(y)) >> 64);
  } else {
    using W = std::conditional_t<std::is_signed<T>::value, int64_t, uint64_t>;
    return static_cast<T>((W(x) * W(y)) >> (8 * sizeof(T)));
  }
}
// Rotate left by n bits (modulo the width).
template <class T>
constexpr detail::int_only_t<T> rotate(T v, T n) noexcept {
  using U = std::make_unsigned_t<T>;
  constexpr unsigned bits = 8 * sizeof(T);
  const unsigned s = unsigned(U(n)) % bits;
  return s == 0 ? v : static_cast<T>((U(v) << s) | (U(v) >> (bits - s)));
}
// Bits [offset, offset + bits) of x, sign-extended for signed types.
template <class T>
constexpr detail::int_only_t<T> extract_bits(T x, uint offset, uint bits) noexcept {
  using U = std::make_unsigned_t<T>;
  constexpr uint width = 8 * sizeof(T);
  if (bits == 0) return 0;
  const U field = static_cast<U>(U(x) >> offset) & (bits >= width ? U(~U(0)) : U((U(1) << bits) - 1));
  if constexpr (std::is_signed<T>::value) {
    const uint shift = width - bits;
    return static_cast<T>(static_cast<T>(U(field << shift)) >> shift);
  }
  return static_cast<T>(field);
}
template <class T>
constexpr detail::int_only_t<T> insert_bits(T base, T insert, uint offset, uint bits) noexcept {
  using U = std::make_unsigned_t<T>;
  constexpr uint width = 8 * sizeof(T);
  if (bits == 0) return base;
  const U mask = static_cast<U>((bits >= width ? U(~U(0)) : U((U(1) << bits) - 1)) << offset);
  return static_cast<T>((U(base) & ~mask) | ((U(insert) << offset) & mask));
}
template <class T>
constexpr std::make_unsigned_t<detail::int_only_t<T>> absdiff(T x, T y) noexcept {
  using U = std::make_unsigned_t<T>;
  return x > y ? U(U(x) - U(y)) : U(U(y) - U(x));
}
// (x + y) >> 1 and (x + y + 1) >> 1 without overflow.
template <class T>
constexpr detail::int_only_t<T> hadd(T x, T y) noexcept {
  return static_cast<T>((x >> 1) + (y >> 1) + (x & y & 1));
}
template <class T>
constexpr detail::int_only_t<T> rhadd(T x, T y) noexcept {
  return static_cast<T>((x >> 1) + (y >> 1) + ((x | y) & 1));
}

template <class T>
inline T min3(T a, T b, T c) noexcept {
  return min(min(a, b), c);
}
template <class T>
inline T max3(T a, T b, T c) noexcept {
  return max(max(a, b), c);
}
template <class T>
inline T median3(T a, T b, T c) noexcept {
  return max(min(a, b), min(max(a, b), c));
}

inline namespace precise {

template <class T>
inline detail::fp_only_t<T> frexp(T x, int& exponent) noexcept {
  return T(std::frexp(float(x), &exponent));
}
template <class T>
inline detail::fp_only_t<T> modf(T x, T& integral_part) noexcept {
  float i = 0;
  const float f = std::modf(float(x), &i);
  integral_part = T(i);
  return T(f);
}
inline float nextafter(float x, float y) noexcept { return std::nextafter(x, y); }
inline float divide(float x, float y) noexcept { return x / y; }

}  // inline namespace precise

}  // namespace metal
