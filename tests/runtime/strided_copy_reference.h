// A host reference for the strided copy tests: CPU PyTorch's element conversion rules
// (c10's static_cast) written with the host's native types, including double, so the
// kernels' integer-only float64 arithmetic is checked against real IEEE hardware.
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "strided_copy.h"

namespace metalx::kernels::testing {

struct BF16 {
  uint16_t bits;
};

inline float bf16ToFloat(BF16 b) {
  uint32_t u = uint32_t(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// c10::BFloat16(float): round to nearest even, every NaN -> 0x7FC0.
inline BF16 bf16FromFloat(float f) {
  if (std::isnan(f)) return {0x7FC0};
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return {uint16_t(u >> 16)};
}

using c64 = std::complex<float>;
using c128 = std::complex<double>;

template <class T> constexpr bool kIsComplex = std::is_same_v<T, c64> || std::is_same_v<T, c128>;
template <class T> constexpr bool kIsHalfLike = std::is_same_v<T, _Float16> || std::is_same_v<T, BF16>;
template <class T> struct RealOf { using type = T; };
template <> struct RealOf<c64> { using type = float; };
template <> struct RealOf<c128> { using type = double; };

inline float halfLikeToFloat(_Float16 h) { return float(h); }
inline float halfLikeToFloat(BF16 b) { return bf16ToFloat(b); }

template <class D, class S>
D refCast(S s) {
  if constexpr (std::is_same_v<D, S>) {
    return s;  // a same-dtype copy keeps every bit
  } else if constexpr (kIsComplex<S>) {
    if constexpr (kIsComplex<D>) {
      using R = typename RealOf<D>::type;
      return D(refCast<R>(s.real()), refCast<R>(s.imag()));
    } else if constexpr (std::is_same_v<D, bool>) {
      return s.real() != 0 || s.imag() != 0;
    } else {
      return refCast<D>(s.real());
    }
  } else if constexpr (kIsComplex<D>) {
    using R = typename RealOf<D>::type;
    return D(refCast<R>(s), R(0));
  } else if constexpr (kIsHalfLike<S>) {
    return refCast<D>(halfLikeToFloat(s));  // c10::Half/BFloat16 convert through float
  } else if constexpr (std::is_same_v<D, bool>) {
    return s != 0;
  } else if constexpr (std::is_same_v<D, _Float16>) {
    return _Float16(float(s));  // c10::Half(float(x)): rounds twice from double, as CPU
  } else if constexpr (std::is_same_v<D, BF16>) {
    return bf16FromFloat(float(s));
  } else if constexpr (std::is_same_v<D, uint8_t> && std::is_floating_point_v<S>) {
    return uint8_t(int64_t(s));  // c10 goes through int64 for uint8
  } else {
    return static_cast<D>(s);
  }
}

template <class D>
D refNegate(D v) {
  if constexpr (std::is_same_v<D, bool>) return v;
  else if constexpr (std::is_same_v<D, BF16>) return BF16{uint16_t(v.bits ^ 0x8000u)};
  else if constexpr (std::is_integral_v<D>) return D(std::make_unsigned_t<D>(0) - std::make_unsigned_t<D>(v));
  else return -v;
}

template <class D>
D refConj(D v) {
  if constexpr (kIsComplex<D>) return std::conj(v);
  else return v;
}

// Calls fn(T{}) with the host type of `t`.
template <class Fn>
void withHostType(DType t, Fn&& fn) {
  switch (t) {
    case DType::Bool: return fn(bool{});
    case DType::UInt8: return fn(uint8_t{});
    case DType::Int8: return fn(int8_t{});
    case DType::Int16: return fn(int16_t{});
    case DType::Int32: return fn(int32_t{});
    case DType::Int64: return fn(int64_t{});
    case DType::Float16: return fn(_Float16{});
    case DType::BFloat16: return fn(BF16{});
    case DType::Float32: return fn(float{});
    case DType::Float64: return fn(double{});
    case DType::Complex64: return fn(c64{});
    case DType::Complex128: return fn(c128{});
  }
}

// Converts one element at `in` (dtype s) to `out` (dtype d) with the flags.
inline void refConvert(DType d, void* out, DType s, const void* in, CopyFlags flags) {
  withHostType(s, [&](auto s_tag) {
    using S = decltype(s_tag);
    S sv;
    std::memcpy(&sv, in, sizeof(S));
    withHostType(d, [&](auto d_tag) {
      using D = decltype(d_tag);
      D dv = refCast<D>(sv);
      if (flags.negate) dv = refNegate(dv);
      if (flags.conjugate) dv = refConj(dv);
      std::memcpy(out, &dv, sizeof(D));
    });
  });
}

// Whether converting the value at `in` (dtype s) to dtype d is defined in C++: a
// floating value going to an integer type must be finite and in range (c10 sends
// uint8 through int64, so there the range is int64's).
inline bool conversionDefined(DType d, DType s, const void* in) {
  bool defined = true;
  withHostType(s, [&](auto s_tag) {
    using S = decltype(s_tag);
    if constexpr (std::is_integral_v<S>) {
      return;
    } else {
      S sv;
      std::memcpy(&sv, in, sizeof(S));
      double r;
      if constexpr (kIsComplex<S>) r = double(sv.real());
      else if constexpr (kIsHalfLike<S>) r = double(halfLikeToFloat(sv));
      else r = double(sv);
      double lo = 0, hi = 0;  // trunc(r) must lie in [lo, hi]
      switch (d) {
        case DType::Int8: lo = -128, hi = 127; break;
        case DType::Int16: lo = -32768, hi = 32767; break;
        case DType::Int32: lo = -2147483648.0, hi = 2147483647.0; break;
        case DType::UInt8:
        case DType::Int64: lo = -9223372036854775808.0, hi = 9223372036854774784.0; break;
        default: return;  // bool and floating destinations: always defined
      }
      defined = std::isfinite(r) && std::trunc(r) >= lo && std::trunc(r) <= hi;
    }
  });
  return defined;
}

// NaN payloads through float16 follow the hardware's conversion instructions, which
// C++ does not pin down: for those, any NaN matches any NaN.
inline bool isNanBits(DType t, const unsigned char* p) {
  switch (t) {
    case DType::Float16: { uint16_t u; std::memcpy(&u, p, 2); return (u & 0x7FFF) > 0x7C00; }
    case DType::Float32: { uint32_t u; std::memcpy(&u, p, 4); return (u & 0x7FFFFFFFu) > 0x7F800000u; }
    case DType::Float64: { uint64_t u; std::memcpy(&u, p, 8); return (u << 1) > (uint64_t(0x7FF) << 53); }
    default: return false;
  }
}

inline bool sameElement(DType d, DType s, const unsigned char* got, const unsigned char* want) {
  size_t n = elementSize(d);
  if (std::memcmp(got, want, n) == 0) return true;
  if (d != DType::Float16 && s != DType::Float16) return false;
  // Component-wise NaN tolerance (complex destinations hold two components).
  DType part = d == DType::Complex64 ? DType::Float32 : d == DType::Complex128 ? DType::Float64 : d;
  size_t pn = elementSize(part);
  for (size_t o = 0; o < n; o += pn) {
    if (std::memcmp(got + o, want + o, pn) == 0) continue;
    if (!(isNanBits(part, got + o) && isNanBits(part, want + o))) return false;
  }
  return true;
}

}  // namespace metalx::kernels::testing
