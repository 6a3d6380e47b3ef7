// MSL scalar types: uint/ushort/uchar/ulong, half, bfloat, and metal::numeric_limits.
//
// MSL code names these types both unqualified and as metal::X, so every name exists
// globally and in namespace metal. The global name is the declaration; namespace metal
// gets a using-declaration of it. That way `using namespace metal;` never makes a name
// ambiguous (both lookups find the same declaration), and glibc's own `uint`/`ushort`
// typedefs (sys/types.h) are simply redeclared to the same type, which C++ allows.
#pragma once

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;  // 64-bit on LP64 Linux, as MSL's ulong

// MSL half is IEEE binary16. _Float16 is supported by GCC >= 12 (x86-64, aarch64) and
// clang; arithmetic may be carried out in float, results round to half when stored.
typedef _Float16 half;

namespace metal {

using ::uchar;
using ::ushort;
using ::uint;
using ::ulong;
using ::half;
using std::size_t;
using std::ptrdiff_t;

namespace detail {

// std::is_floating_point / is_arithmetic are false for _Float16 in libstdc++ 12, so the
// prelude asks these instead. bfloat is deliberately not included: it is a class.
template <class T>
struct is_fp : std::integral_constant<bool, std::is_floating_point<T>::value ||
                                                std::is_same<std::remove_cv_t<T>, _Float16>::value> {};
template <class T>
struct is_arith : std::integral_constant<bool, std::is_integral<T>::value || is_fp<T>::value> {};

template <class To, class From>
constexpr To bit_cast(const From& f) noexcept {
  static_assert(sizeof(To) == sizeof(From), "bit_cast needs equal sizes");
  return __builtin_bit_cast(To, f);  // GCC >= 11 and clang: constexpr-capable memcpy
}

// float -> bfloat16 bits with round-to-nearest-even. NaNs stay NaN (quieted, sign and
// top payload bits kept): plain rounding could carry a NaN's payload into infinity.
// Always inlined (as the bfloat(float) constructor below): every bfloat kernel's element
// loop stores through it, and a call there keeps the loop scalar (GCC left the
// constructor out of line in the big kernel files).
__attribute__((__always_inline__)) constexpr uint16_t float_to_bfloat_bits(float f) noexcept {
  uint32_t u = bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

constexpr float bfloat_bits_to_float(uint16_t b) noexcept {
  return bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

}  // namespace detail

// MSL bfloat (brain float, 8-bit exponent, 7-bit mantissa). There is no native C++ type
// to lean on, so it is a struct holding the bits and computing through float, which is
// exact for every bfloat operand; each result is rounded back to bfloat like hardware.
struct bfloat {
  uint16_t bits;

  bfloat() = default;  // uninitialised like any MSL scalar; keeps it trivially copyable
  // Always inlined, as float_to_bfloat_bits: a bfloat kernel stores every element
  // through it.
  __attribute__((__always_inline__)) constexpr bfloat(float f) noexcept
      : bits(detail::float_to_bfloat_bits(f)) {}
  // Everything else (int, double, half) converts through float. A template instead of
  // a list of constructors keeps `bfloat b = 1;` and `bfloat(x)` unambiguous.
  template <class U, std::enable_if_t<detail::is_arith<U>::value && !std::is_same<U, float>::value, int> = 0>
  constexpr bfloat(U u) noexcept : bfloat(static_cast<float>(u)) {}

  constexpr operator float() const noexcept { return detail::bfloat_bits_to_float(bits); }

  static constexpr bfloat from_bits(uint16_t b) noexcept {
    bfloat r{};
    r.bits = b;
    return r;
  }

  bfloat& operator+=(float o) noexcept { return *this = bfloat(float(*this) + o); }
  bfloat& operator-=(float o) noexcept { return *this = bfloat(float(*this) - o); }
  bfloat& operator*=(float o) noexcept { return *this = bfloat(float(*this) * o); }
  bfloat& operator/=(float o) noexcept { return *this = bfloat(float(*this) / o); }
  bfloat& operator++() noexcept { return *this += 1.0f; }
  bfloat& operator--() noexcept { return *this -= 1.0f; }
  bfloat operator++(int) noexcept { bfloat t = *this; *this += 1.0f; return t; }
  bfloat operator--(int) noexcept { bfloat t = *this; *this -= 1.0f; return t; }
  constexpr bfloat operator-() const noexcept { return from_bits(static_cast<uint16_t>(bits ^ 0x8000u)); }
  constexpr bfloat operator+() const noexcept { return *this; }
};

namespace detail {

// Mixed arithmetic with bfloat. bfloat converts implicitly to float and float converts
// implicitly to bfloat, so without these templates `b * 2.0f` would be ambiguous
// between the built-in float operator and a bfloat one. The result follows MSL's usual
// conversions: with an integer or another bfloat it stays bfloat, with a wider floating
// type (half counts as float here, MSL has no half/bfloat mixing) it is that type.
template <class T> struct is_bf : std::is_same<std::remove_cv_t<T>, bfloat> {};

template <class A, class B>
struct bf_mix {
  static constexpr bool ok = (is_bf<A>::value || is_bf<B>::value) &&
                             (is_bf<A>::value || is_arith<A>::value) &&
                             (is_bf<B>::value || is_arith<B>::value);
  using other = std::conditional_t<is_bf<A>::value, B, A>;
  // Computed lazily: for types that are not arithmetic at all (enums, structs) this
  // must stay a substitution failure of the operators below, not a hard error.
  template <class O, bool Wider> struct pick { using type = bfloat; };
  template <class O> struct pick<O, true> { using type = decltype(float() + std::declval<O>()); };
  using type = typename pick<other, ok && is_fp<other>::value && !is_bf<other>::value>::type;
};

template <class A, class B>
using bf_result_t = std::enable_if_t<bf_mix<A, B>::ok, typename bf_mix<A, B>::type>;
template <class A, class B>
using bf_bool_t = std::enable_if_t<bf_mix<A, B>::ok, bool>;

// Operand as float (or double when the other side is double).
template <class R, class X>
constexpr auto bf_widen(X x) noexcept {
  return static_cast<std::conditional_t<std::is_same<R, double>::value, double, float>>(x);
}

}  // namespace detail

#define METALSIM_BF_ARITH(op)                                                          \
  template <class A, class B>                                                        \
  constexpr detail::bf_result_t<A, B> operator op(A a, B b) noexcept {               \
    using R = detail::bf_result_t<A, B>;                                             \
    return R(detail::bf_widen<R>(a) op detail::bf_widen<R>(b));                      \
  }
#define METALSIM_BF_CMP(op)                                                            \
  template <class A, class B>                                                        \
  constexpr detail::bf_bool_t<A, B> operator op(A a, B b) noexcept {                 \
    using R = detail::bf_result_t<A, B>;                                             \
    return detail::bf_widen<R>(a) op detail::bf_widen<R>(b);                         \
  }
METALSIM_BF_ARITH(+)
METALSIM_BF_ARITH(-)
METALSIM_BF_ARITH(*)
METALSIM_BF_ARITH(/)
METALSIM_BF_CMP(==)
METALSIM_BF_CMP(!=)
METALSIM_BF_CMP(<)
METALSIM_BF_CMP(<=)
METALSIM_BF_CMP(>)
METALSIM_BF_CMP(>=)
#undef METALSIM_BF_ARITH
#undef METALSIM_BF_CMP

// metal::numeric_limits: std's for every standard type. libstdc++ 12 has no
// numeric_limits<_Float16>, and specialising std:: for it would clash with newer
// libraries that do, so half and bfloat get their own specialisations here instead.
template <class T>
struct numeric_limits : std::numeric_limits<T> {};

namespace detail {
// Limits of a binary floating format given as bit patterns, so the values are exact.
template <class T, class Bits, int Digits, int MinExp, int MaxExp>
struct float_format_limits {
  static constexpr T from(Bits b) noexcept { return bit_cast<T>(b); }
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr std::float_denorm_style has_denorm = std::denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr bool is_iec559 = true;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = Digits;
  static constexpr int radix = 2;
  static constexpr int min_exponent = MinExp;
  static constexpr int max_exponent = MaxExp;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;
};
}  // namespace detail

template <>
struct numeric_limits<half> : detail::float_format_limits<half, uint16_t, 11, -13, 16> {
  static constexpr int digits10 = 3;
  static constexpr int max_digits10 = 5;
  static constexpr int min_exponent10 = -4;
  static constexpr int max_exponent10 = 4;
  static constexpr half min() noexcept { return from(0x0400); }
  static constexpr half max() noexcept { return from(0x7bff); }
  static constexpr half lowest() noexcept { return from(0xfbff); }
  static constexpr half epsilon() noexcept { return from(0x1400); }  // 2^-10
  static constexpr half round_error() noexcept { return from(0x3800); }
  static constexpr half infinity() noexcept { return from(0x7c00); }
  static constexpr half quiet_NaN() noexcept { return from(0x7e00); }
  static constexpr half signaling_NaN() noexcept { return from(0x7d00); }
  static constexpr half denorm_min() noexcept { return from(0x0001); }
};

template <>
struct numeric_limits<bfloat> : detail::float_format_limits<bfloat, uint16_t, 8, -125, 128> {
  static constexpr int digits10 = 2;
  static constexpr int max_digits10 = 4;
  static constexpr int min_exponent10 = -37;
  static constexpr int max_exponent10 = 38;
  static constexpr bfloat min() noexcept { return bfloat::from_bits(0x0080); }
  static constexpr bfloat max() noexcept { return bfloat::from_bits(0x7f7f); }
  static constexpr bfloat lowest() noexcept { return bfloat::from_bits(0xff7f); }
  static constexpr bfloat epsilon() noexcept { return bfloat::from_bits(0x3c00); }  // 2^-7
  static constexpr bfloat round_error() noexcept { return bfloat::from_bits(0x3f00); }
  static constexpr bfloat infinity() noexcept { return bfloat::from_bits(0x7f80); }
  static constexpr bfloat quiet_NaN() noexcept { return bfloat::from_bits(0x7fc0); }
  static constexpr bfloat signaling_NaN() noexcept { return bfloat::from_bits(0x7fa0); }
  static constexpr bfloat denorm_min() noexcept { return bfloat::from_bits(0x0001); }
};

}  // namespace metal

using metal::bfloat;

// MSL's predefined constants. <cmath> (glibc) already defines some (INFINITY, NAN,
// HUGE_VALF, MAXFLOAT with _GNU_SOURCE), hence the #ifndef guards. Defined from compiler
// builtins so <cfloat>/<climits> need not be included.
#ifndef MAXFLOAT
#define MAXFLOAT __FLT_MAX__
#endif
#ifndef HUGE_VALF
#define HUGE_VALF __builtin_huge_valf()
#endif
#ifndef INFINITY
#define INFINITY __builtin_inff()
#endif
#ifndef NAN
#define NAN __builtin_nanf("")
#endif
#ifndef FLT_MAX
#define FLT_MAX __FLT_MAX__
#endif
#ifndef FLT_MIN
#define FLT_MIN __FLT_MIN__
#endif
#ifndef FLT_EPSILON
#define FLT_EPSILON __FLT_EPSILON__
#endif
#ifndef FLT_MANT_DIG
#define FLT_MANT_DIG __FLT_MANT_DIG__
#endif
#ifndef FLT_DIG
#define FLT_DIG __FLT_DIG__
#endif
#ifndef HALF_MAX
#define HALF_MAX (metal::numeric_limits<half>::max())
#endif
#ifndef HALF_MIN
#define HALF_MIN (metal::numeric_limits<half>::min())
#endif
#ifndef HALF_EPSILON
#define HALF_EPSILON (metal::numeric_limits<half>::epsilon())
#endif
#ifndef MAXHALF
#define MAXHALF HALF_MAX
#endif
#ifndef CHAR_BIT
#define CHAR_BIT __CHAR_BIT__
#endif
#ifndef SCHAR_MAX
#define SCHAR_MAX __SCHAR_MAX__
#endif
#ifndef SCHAR_MIN
#define SCHAR_MIN (-__SCHAR_MAX__ - 1)
#endif
#ifndef UCHAR_MAX
#define UCHAR_MAX (__SCHAR_MAX__ * 2 + 1)
#endif
#ifndef CHAR_MAX
#define CHAR_MAX SCHAR_MAX  // MSL char is signed
#endif
#ifndef CHAR_MIN
#define CHAR_MIN SCHAR_MIN
#endif
#ifndef SHRT_MAX
#define SHRT_MAX __SHRT_MAX__
#endif
#ifndef SHRT_MIN
#define SHRT_MIN (-__SHRT_MAX__ - 1)
#endif
#ifndef USHRT_MAX
#define USHRT_MAX (__SHRT_MAX__ * 2 + 1)
#endif
#ifndef INT_MAX
#define INT_MAX __INT_MAX__
#endif
#ifndef INT_MIN
#define INT_MIN (-__INT_MAX__ - 1)
#endif
#ifndef UINT_MAX
#define UINT_MAX (__INT_MAX__ * 2U + 1U)
#endif
#ifndef LONG_MAX
#define LONG_MAX __LONG_MAX__
#endif
#ifndef LONG_MIN
#define LONG_MIN (-__LONG_MAX__ - 1L)
#endif
#ifndef ULONG_MAX
#define ULONG_MAX (__LONG_MAX__ * 2UL + 1UL)
#endif

// Mathematical constants, float (_F) and half (_H) flavours as MSL spells them.
#define METALSIM_MATH_CONST(name, value) \
  constexpr float name##_F = value##f;   \
  constexpr half name##_H = static_cast<half>(value##f);
METALSIM_MATH_CONST(M_E, 2.718281828459045235360287471352662498)
METALSIM_MATH_CONST(M_LOG2E, 1.442695040888963407359924681001892137)
METALSIM_MATH_CONST(M_LOG10E, 0.434294481903251827651128918916605082)
METALSIM_MATH_CONST(M_LN2, 0.693147180559945309417232121458176568)
METALSIM_MATH_CONST(M_LN10, 2.302585092994045684017991454684364208)
METALSIM_MATH_CONST(M_PI, 3.141592653589793238462643383279502884)
METALSIM_MATH_CONST(M_PI_2, 1.570796326794896619231321691639751442)
METALSIM_MATH_CONST(M_PI_4, 0.785398163397448309615660845819875721)
METALSIM_MATH_CONST(M_1_PI, 0.318309886183790671537767526745028724)
METALSIM_MATH_CONST(M_2_PI, 0.636619772367581343075535053490057448)
METALSIM_MATH_CONST(M_2_SQRTPI, 1.128379167095512573896158903121545172)
METALSIM_MATH_CONST(M_SQRT2, 1.414213562373095048801688724209698079)
METALSIM_MATH_CONST(M_SQRT1_2, 0.707106781186547524400844362104849039)
#undef METALSIM_MATH_CONST
