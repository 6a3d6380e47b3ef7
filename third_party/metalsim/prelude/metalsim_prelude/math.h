// MSL math, integer and geometric functions (namespace metal, also metal::precise and
// metal::fast).
//
// Scalars: explicit overloads for float, half and bfloat (half/bfloat compute in float
// and round the result back, like GPUs without native paths do). Non-template overloads
// make calls with literals behave: `fmax(x, 0)` picks the float version.
// Mixed scalar arguments (`min(gid, 5)`, `fmax(h, 0.0f)`) go to a template that
// converts both to a common type, since otherwise C++ would call them ambiguous.
// Vectors: one generic template per function, accepting vecs, swizzle views and
// scalars (broadcast) in any mix, applying the scalar overload element-wise.
//
// Both metal::precise:: and metal::fast:: map to the same (precise) versions: the
// simulator favours reproducibility over speed. exp, exp2, log, log2 and tanh are the
// prelude's own straight-line versions (math_branchless.h: within 2 ulp, vectorisable),
// the rest come from <cmath>. The functions live in the inline
// namespace metal::precise, so metal::sin, metal::precise::sin and, through a
// using-directive, metal::fast::sin all name them.
#pragma once

#include "metalsim_prelude/math_branchless.h"

namespace metal {

namespace detail {

template <class T>
struct is_scalar_arg : std::integral_constant<bool, is_arith<T>::value || is_bf<T>::value> {};

// MSL-ish common type of two different scalar types for the mixed-argument templates.
// A floating type wins over an integer; half with bfloat, or either with float, gives
// float; double (an unsuffixed literal) counts as float, since MSL has no double.
template <class T>
using fp_norm_t = std::conditional_t<std::is_same<T, double>::value || std::is_same<T, long double>::value,
                                     float, T>;
template <class A, class B>
struct common2 {
  static constexpr bool fa = is_fp<A>::value || is_bf<A>::value;
  static constexpr bool fb = is_fp<B>::value || is_bf<B>::value;
  using type = std::conditional_t<
      fa && fb, std::conditional_t<std::is_same<fp_norm_t<A>, fp_norm_t<B>>::value, fp_norm_t<A>, float>,
      std::conditional_t<fa, fp_norm_t<A>,
                         std::conditional_t<fb, fp_norm_t<B>, decltype(std::declval<A>() + std::declval<B>())>>>;
};
template <class A, class B>
using common2_t = typename common2<A, B>::type;

// Enables the mixed-scalar templates only for two *different* scalar types, so calls
// with matching types always pick the exact, non-template overloads.
template <class A, class B>
using mixed_t = std::enable_if_t<is_scalar_arg<A>::value && is_scalar_arg<B>::value &&
                                     !std::is_same<A, B>::value,
                                 common2_t<A, B>>;
template <class A, class B, class C>
using mixed3_t = std::enable_if_t<is_scalar_arg<A>::value && is_scalar_arg<B>::value &&
                                      is_scalar_arg<C>::value &&
                                      !(std::is_same<A, B>::value && std::is_same<B, C>::value),
                                  common2_t<common2_t<A, B>, C>>;

// The vector type of a call mixing vectors/swizzles and scalars; SFINAE-fails unless at
// least one argument is vector-like and all vector-like ones have the same vec type.
template <class X, class R, bool = vec_of<X>::value>
struct arg_fits : is_scalar_arg<X> {};
template <class X, class R>
struct arg_fits<X, R, true> : std::is_same<typename vec_of<X>::type, R> {};

template <class... X>
struct first_vec {
  using type = void;
};
template <class X, class... Rest>
struct first_vec<X, Rest...> {
  using type = typename std::conditional_t<vec_of<X>::value, vec_of<X>, first_vec<Rest...>>::type;
};

template <class R, class... X>
struct vec_call {};
template <class T, int N, class... X>
struct vec_call<vec<T, N>, X...> : std::enable_if<(arg_fits<X, vec<T, N>>::value && ...), vec<T, N>> {};
template <class... X>
using vec_ok_t = typename vec_call<typename first_vec<X...>::type, X...>::type;

// An argument of a vector call as a vector of R (scalars broadcast).
template <class R, class X>
constexpr R vec_arg(const X& x) noexcept {
  if constexpr (vec_of<X>::value) {
    return R(x);
  } else {
    return R(static_cast<typename R::value_type>(x));
  }
}

// Float versions of helpers MSL has and <cmath> has not.
inline float fract_f(float x, float below_one) noexcept {
  return std::fmin(x - std::floor(x), below_one);
}
inline float sign_f(float x) noexcept {
  return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : (x != x ? 0.0f : x);
}
constexpr double kPi = 3.141592653589793238462643383279502884;

}  // namespace detail

inline namespace precise {

// glibc declares int abs(int) globally; using it (rather than declaring an own
// abs(int)) keeps `abs(i)` unambiguous under `using namespace metal;`.
using ::abs;

// ---- float-family unary functions ---------------------------------------------------
// F(x) for float/half/bfloat scalars plus the element-wise vector form. `expr` uses a
// float named x; BELOW_ONE is the largest value < 1 in the result type (for fract).
#define METALSIM_UNARY_FP(name, expr)                                                    \
  METALSIM_MATH_INLINE float name(float x) noexcept {                                  \
    constexpr float below_one = 0x1.fffffep-1f;                                        \
    (void)below_one;                                                                   \
    return expr;                                                                       \
  }                                                                                    \
  /* GPUs have no double: a double literal argument (`log(2.0)`) computes in float. */ \
  METALSIM_MATH_INLINE float name(double d) noexcept { return name(static_cast<float>(d)); } \
  METALSIM_MATH_INLINE half name(half h) noexcept {                                    \
    const float x = h;                                                                 \
    constexpr float below_one = 0x1.ffcp-1f;                                           \
    (void)below_one;                                                                   \
    return static_cast<half>(expr);                                                    \
  }                                                                                    \
  METALSIM_MATH_INLINE bfloat name(bfloat b) noexcept {                                \
    const float x = b;                                                                 \
    constexpr float below_one = 0x1.fep-1f;                                            \
    (void)below_one;                                                                   \
    return bfloat(expr);                                                               \
  }                                                                                    \
  template <class V, class R = detail::vec_ok_t<V>>                                    \
  inline R name(const V& a) noexcept {                                                 \
    R x = a;                                                                           \
    for (int i = 0; i < R::size; ++i) x.v[i] = name(x.v[i]);                           \
    return x;                                                                          \
  }

METALSIM_UNARY_FP(fabs, std::fabs(x))
METALSIM_UNARY_FP(sqrt, std::sqrt(x))
METALSIM_UNARY_FP(rsqrt, 1.0f / std::sqrt(x))
METALSIM_UNARY_FP(exp, detail::exp_f(x))
METALSIM_UNARY_FP(exp2, detail::exp2_f(x))
METALSIM_UNARY_FP(exp10, std::pow(10.0f, x))
METALSIM_UNARY_FP(log, detail::log_f(x))
METALSIM_UNARY_FP(log2, detail::log2_f(x))
METALSIM_UNARY_FP(log10, std::log10(x))
METALSIM_UNARY_FP(sin, std::sin(x))
METALSIM_UNARY_FP(cos, std::cos(x))
METALSIM_UNARY_FP(tan, std::tan(x))
METALSIM_UNARY_FP(asin, std::asin(x))
METALSIM_UNARY_FP(acos, std::acos(x))
METALSIM_UNARY_FP(atan, std::atan(x))
METALSIM_UNARY_FP(sinh, std::sinh(x))
METALSIM_UNARY_FP(cosh, std::cosh(x))
METALSIM_UNARY_FP(tanh, detail::tanh_f(x))
METALSIM_UNARY_FP(asinh, std::asinh(x))
METALSIM_UNARY_FP(acosh, std::acosh(x))
METALSIM_UNARY_FP(atanh, std::atanh(x))
METALSIM_UNARY_FP(sinpi, static_cast<float>(std::sin(detail::kPi * x)))
METALSIM_UNARY_FP(cospi, static_cast<float>(std::cos(detail::kPi * x)))
METALSIM_UNARY_FP(tanpi, static_cast<float>(std::tan(detail::kPi * x)))
METALSIM_UNARY_FP(floor, std::floor(x))
METALSIM_UNARY_FP(ceil, std::ceil(x))
METALSIM_UNARY_FP(round, std::round(x))  // halfway cases away from zero, as MSL
METALSIM_UNARY_FP(rint, std::rint(x))    // halfway cases to even
METALSIM_UNARY_FP(trunc, std::trunc(x))
METALSIM_UNARY_FP(fract, detail::fract_f(x, below_one))  // never rounds up to 1
METALSIM_UNARY_FP(sign, detail::sign_f(x))
METALSIM_UNARY_FP(saturate, std::fmin(std::fmax(x, 0.0f), 1.0f))
#undef METALSIM_UNARY_FP

// ---- classification: bool for scalars, boolN for vectors ----------------------------
#define METALSIM_CLASSIFY(name, expr)                                                    \
  inline bool name(float x) noexcept { return expr; }                                  \
  inline bool name(half h) noexcept { const float x = h; return expr; }                \
  inline bool name(bfloat b) noexcept { const float x = b; return expr; }              \
  template <class V, class R = detail::vec_ok_t<V>>                                    \
  inline typename R::bool_type name(const V& a) noexcept {                             \
    R x = a;                                                                           \
    typename R::bool_type r{};                                                         \
    for (int i = 0; i < R::size; ++i) r.v[i] = name(x.v[i]);                           \
    return r;                                                                          \
  }
METALSIM_CLASSIFY(isnan, std::isnan(x))
METALSIM_CLASSIFY(isinf, std::isinf(x))
METALSIM_CLASSIFY(isfinite, std::isfinite(x))
METALSIM_CLASSIFY(isnormal, std::isnormal(x))
// The sign bit read directly: GCC 12 fails with an internal compiler error vectorising
// std::signbit over half/bfloat loops (-fvect-cost-model=dynamic).
METALSIM_CLASSIFY(signbit, static_cast<int>(__builtin_bit_cast(unsigned, x)) < 0)
#undef METALSIM_CLASSIFY

// isunordered(a, b): either is NaN; isordered: neither is.
inline bool isunordered(float a, float b) noexcept { return a != a || b != b; }
inline bool isordered(float a, float b) noexcept { return a == a && b == b; }

// ---- binary functions ----------------------------------------------------------------
// `expr` uses floats x and y. Mixed scalar types convert to their common type first.
#define METALSIM_BINARY_FP(name, expr)                                                   \
  inline float name(float x, float y) noexcept { return expr; }                        \
  inline half name(half a, half b) noexcept {                                          \
    const float x = a, y = b;                                                          \
    return static_cast<half>(expr);                                                    \
  }                                                                                    \
  inline bfloat name(bfloat a, bfloat b) noexcept {                                    \
    const float x = a, y = b;                                                          \
    return bfloat(expr);                                                               \
  }                                                                                    \
  template <class A, class B>                                                          \
  inline detail::mixed_t<A, B> name(A a, B b) noexcept {                               \
    using C = detail::mixed_t<A, B>;                                                   \
    return name(static_cast<C>(a), static_cast<C>(b));                                 \
  }                                                                                    \
  template <class A, class B, class R = detail::vec_ok_t<A, B>>                        \
  inline R name(const A& a, const B& b) noexcept {                                     \
    R x = detail::vec_arg<R>(a);                                                       \
    const R y = detail::vec_arg<R>(b);                                                 \
    for (int i = 0; i < R::size; ++i) x.v[i] = name(x.v[i], y.v[i]);                  \
    return x;                                                                          \
  }

METALSIM_BINARY_FP(pow, std::pow(x, y))
METALSIM_BINARY_FP(powr, std::pow(x, y))  // MSL: x >= 0 assumed
METALSIM_BINARY_FP(fmin, std::fmin(x, y))
METALSIM_BINARY_FP(fmax, std::fmax(x, y))
METALSIM_BINARY_FP(fmod, std::fmod(x, y))
METALSIM_BINARY_FP(fdim, std::fdim(x, y))
METALSIM_BINARY_FP(copysign, std::copysign(x, y))
METALSIM_BINARY_FP(atan2, std::atan2(x, y))
METALSIM_BINARY_FP(step, y < x ? 0.0f : 1.0f)  // step(edge, x)
#undef METALSIM_BINARY_FP

// ---- ternary functions -----------------------------------------------------------------
#define METALSIM_TERNARY_FP(name, expr)                                                  \
  inline float name(float x, float y, float z) noexcept { return expr; }               \
  inline half name(half a, half b, half c) noexcept {                                  \
    const float x = a, y = b, z = c;                                                   \
    return static_cast<half>(expr);                                                    \
  }                                                                                    \
  inline bfloat name(bfloat a, bfloat b, bfloat c) noexcept {                          \
    const float x = a, y = b, z = c;                                                   \
    return bfloat(expr);                                                               \
  }                                                                                    \
  template <class A, class B, class C>                                                 \
  inline detail::mixed3_t<A, B, C> name(A a, B b, C c) noexcept {                      \
    using T = detail::mixed3_t<A, B, C>;                                               \
    return name(static_cast<T>(a), static_cast<T>(b), static_cast<T>(c));              \
  }                                                                                    \
  template <class A, class B, class C, class R = detail::vec_ok_t<A, B, C>>            \
  inline R name(const A& a, const B& b, const C& c) noexcept {                         \
    R x = detail::vec_arg<R>(a);                                                       \
    const R y = detail::vec_arg<R>(b), z = detail::vec_arg<R>(c);                      \
    for (int i = 0; i < R::size; ++i) x.v[i] = name(x.v[i], y.v[i], z.v[i]);           \
    return x;                                                                          \
  }

METALSIM_TERNARY_FP(fma, std::fma(x, y, z))
METALSIM_TERNARY_FP(mix, x + (y - x) * z)
METALSIM_TERNARY_FP(smoothstep, [&] {
  const float t = std::fmin(std::fmax((z - x) / (y - x), 0.0f), 1.0f);
  return t * t * (3.0f - 2.0f * t);
}())
#undef METALSIM_TERNARY_FP

// ---- functions over integers and floats: abs, min, max, clamp ----------------------------
// Floats follow fmin/fmax (a NaN operand is ignored), as MSL's min/max do.
#define METALSIM_INT_MINMAX(T)                                                           \
  constexpr T min(T a, T b) noexcept { return b < a ? b : a; }                         \
  constexpr T max(T a, T b) noexcept { return a < b ? b : a; }                         \
  constexpr T clamp(T x, T lo, T hi) noexcept { return min(max(x, lo), hi); }
METALSIM_INT_MINMAX(char)
METALSIM_INT_MINMAX(signed char)
METALSIM_INT_MINMAX(uchar)
METALSIM_INT_MINMAX(short)
METALSIM_INT_MINMAX(ushort)
METALSIM_INT_MINMAX(int)
METALSIM_INT_MINMAX(uint)
METALSIM_INT_MINMAX(long)
METALSIM_INT_MINMAX(ulong)
METALSIM_INT_MINMAX(long long)
METALSIM_INT_MINMAX(unsigned long long)
#undef METALSIM_INT_MINMAX

#define METALSIM_FP_MINMAX(T)                                                            \
  inline T min(T a, T b) noexcept { return fmin(a, b); }                               \
  inline T max(T a, T b) noexcept { return fmax(a, b); }                               \
  inline T clamp(T x, T lo, T hi) noexcept { return fmin(fmax(x, lo), hi); }
METALSIM_FP_MINMAX(float)
METALSIM_FP_MINMAX(half)
METALSIM_FP_MINMAX(bfloat)
#undef METALSIM_FP_MINMAX

template <class A, class B>
inline detail::mixed_t<A, B> min(A a, B b) noexcept {
  using C = detail::mixed_t<A, B>;
  return min(static_cast<C>(a), static_cast<C>(b));
}
template <class A, class B>
inline detail::mixed_t<A, B> max(A a, B b) noexcept {
  using C = detail::mixed_t<A, B>;
  return max(static_cast<C>(a), static_cast<C>(b));
}
template <class A, class B, class C>
inline detail::mixed3_t<A, B, C> clamp(A x, B lo, C hi) noexcept {
  using T = detail::mixed3_t<A, B, C>;
  return clamp(static_cast<T>(x), static_cast<T>(lo), static_cast<T>(hi));
}
template <class A, class B, class R = detail::vec_ok_t<A, B>>
inline R min(const A& a, const B& b) noexcept {
  R x = detail::vec_arg<R>(a);
  const R y = detail::vec_arg<R>(b);
  for (int i = 0; i < R::size; ++i) x.v[i] = min(x.v[i], y.v[i]);
  return x;
}
template <class A, class B, class R = detail::vec_ok_t<A, B>>
inline R max(const A& a, const B& b) noexcept {
  R x = detail::vec_arg<R>(a);
  const R y = detail::vec_arg<R>(b);
  for (int i = 0; i < R::size; ++i) x.v[i] = max(x.v[i], y.v[i]);
  return x;
}
template <class A, class B, class C, class R = detail::vec_ok_t<A, B, C>>
inline R clamp(const A& a, const B& b, const C& c) noexcept {
  R x = detail::vec_arg<R>(a);
  const R lo = detail::vec_arg<R>(b), hi = detail::vec_arg<R>(c);
  for (int i = 0; i < R::size; ++i) x.v[i] = clamp(x.v[i], lo.v[i], hi.v[i]);
  return x;
}

// abs: int comes from ::abs (above); the other signed types here; unsigned is identity.
constexpr char abs(char x) noexcept { return x < 0 ? static_cast<char>(-x) : x; }
constexpr signed char abs(signed char x) noexcept { return x < 0 ? static_cast<signed char>(-x) : x; }
constexpr short abs(short x) noexcept { return x < 0 ? static_cast<short>(-x) : x; }
constexpr long abs(long x) noexcept { return x < 0 ? -x : x; }
constexpr uchar abs(uchar x) noexcept { return x; }
constexpr ushort abs(ushort x) noexcept { return x; }
constexpr uint abs(uint x) noexcept { return x; }
constexpr ulong abs(ulong x) noexcept { return x; }
inline float abs(float x) noexcept { return std::fabs(x); }
inline half abs(half x) noexcept { return static_cast<half>(std::fabs(static_cast<float>(x))); }
inline bfloat abs(bfloat x) noexcept { return bfloat::from_bits(static_cast<uint16_t>(x.bits & 0x7fffu)); }
template <class V, class R = detail::vec_ok_t<V>>
inline R abs(const V& a) noexcept {
  R x = a;
  for (int i = 0; i < R::size; ++i) x.v[i] = abs(x.v[i]);
  return x;
}

// ---- integer bit functions (result has the argument's type, as in MSL) -----------------
template <class T, std::enable_if_t<std::is_integral<T>::value, int> = 0>
constexpr T popcount(T x) noexcept {
  return static_cast<T>(__builtin_popcountll(static_cast<std::make_unsigned_t<T>>(x)));
}
template <class T, std::enable_if_t<std::is_integral<T>::value, int> = 0>
constexpr T clz(T x) noexcept {
  const auto u = static_cast<unsigned long long>(static_cast<std::make_unsigned_t<T>>(x));
  constexpr int bits = sizeof(T) * 8;
  return static_cast<T>(u == 0 ? bits : __builtin_clzll(u) - (64 - bits));
}
template <class T, std::enable_if_t<std::is_integral<T>::value, int> = 0>
constexpr T ctz(T x) noexcept {
  const auto u = static_cast<unsigned long long>(static_cast<std::make_unsigned_t<T>>(x));
  return static_cast<T>(u == 0 ? int(sizeof(T) * 8) : __builtin_ctzll(u));
}
template <class T, std::enable_if_t<std::is_integral<T>::value, int> = 0>
constexpr T reverse_bits(T x) noexcept {
  using U = std::make_unsigned_t<T>;
  U u = static_cast<U>(x), r = 0;
  for (unsigned i = 0; i < sizeof(T) * 8; ++i, u >>= 1) r = static_cast<U>((r << 1) | (u & 1u));
  return static_cast<T>(r);
}
#define METALSIM_INT_VEC(name)                                                           \
  template <class T, int N>                                                            \
  constexpr vec<T, N> name(vec<T, N> x) noexcept {                                     \
    for (int i = 0; i < N; ++i) x.v[i] = name(x.v[i]);                                 \
    return x;                                                                          \
  }
METALSIM_INT_VEC(popcount)
METALSIM_INT_VEC(clz)
METALSIM_INT_VEC(ctz)
METALSIM_INT_VEC(reverse_bits)
#undef METALSIM_INT_VEC

// ---- a few scalar extras ----------------------------------------------------------------
inline float ldexp(float x, int e) noexcept { return std::ldexp(x, e); }
inline half ldexp(half x, int e) noexcept { return static_cast<half>(std::ldexp(static_cast<float>(x), e)); }
inline float sincos(float x, float& cosval) noexcept {
  cosval = std::cos(x);
  return std::sin(x);
}
inline half sincos(half x, half& cosval) noexcept {
  cosval = static_cast<half>(std::cos(static_cast<float>(x)));
  return static_cast<half>(std::sin(static_cast<float>(x)));
}

// ---- geometric functions ------------------------------------------------------------------
template <class A, class B, class R = detail::vec_ok_t<A, B>>
inline typename R::value_type dot(const A& a, const B& b) noexcept {
  const R x = detail::vec_arg<R>(a), y = detail::vec_arg<R>(b);
  using T = typename R::value_type;
  // Accumulate in float for half/bfloat (a GPU's dot does not round between terms).
  using Acc = std::conditional_t<detail::is_fp<T>::value || detail::is_bf<T>::value, float, T>;
  Acc s = Acc(x.v[0]) * Acc(y.v[0]);
  for (int i = 1; i < R::size; ++i) s += Acc(x.v[i]) * Acc(y.v[i]);
  return static_cast<T>(s);
}
template <class A, class R = detail::vec_ok_t<A>>
inline typename R::value_type length_squared(const A& a) noexcept {
  return dot(a, a);
}
template <class A, class R = detail::vec_ok_t<A>>
inline typename R::value_type length(const A& a) noexcept {
  return sqrt(dot(a, a));
}
template <class A, class B, class R = detail::vec_ok_t<A, B>>
inline typename R::value_type distance(const A& a, const B& b) noexcept {
  return length(detail::vec_arg<R>(a) - detail::vec_arg<R>(b));
}
template <class A, class B, class R = detail::vec_ok_t<A, B>>
inline typename R::value_type distance_squared(const A& a, const B& b) noexcept {
  return length_squared(detail::vec_arg<R>(a) - detail::vec_arg<R>(b));
}
template <class A, class R = detail::vec_ok_t<A>>
inline R normalize(const A& a) noexcept {
  const R x = a;
  return x * rsqrt(dot(x, x));
}
template <class A, class B, class R = detail::vec_ok_t<A, B>, std::enable_if_t<R::size == 3, int> = 0>
inline R cross(const A& a, const B& b) noexcept {
  const R x = detail::vec_arg<R>(a), y = detail::vec_arg<R>(b);
  return R(x.v[1] * y.v[2] - x.v[2] * y.v[1], x.v[2] * y.v[0] - x.v[0] * y.v[2],
           x.v[0] * y.v[1] - x.v[1] * y.v[0]);
}
template <class A, class B, class R = detail::vec_ok_t<A, B>>
inline R reflect(const A& i, const B& n) noexcept {
  const R x = i, y = n;
  return x - typename R::value_type(2) * dot(y, x) * y;
}

}  // inline namespace precise

namespace fast {
using namespace metal::precise;
}

}  // namespace metal
