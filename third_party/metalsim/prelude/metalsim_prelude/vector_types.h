// MSL vector types: metal::vec<T, N> (N = 2, 3, 4) and the floatN/intN/... names.
//
// Layout matches Metal, because kernels share buffers with the host: an N-wide vector
// is aligned to N elements, and a 3-wide one has the size and alignment of a 4-wide one
// (sizeof(float3) == 16). The storage is a union of `T v[N]`, the named members
// (.x .y .z .w / .r .g .b .a, anonymous structs: a GCC/clang extension) and read-only
// swizzle views (vector_storage.h), so all of them alias the same bytes.
//
// Operators are hidden friends of vec: they are found by argument-dependent lookup
// only, which keeps overload sets small (fast compiles) and lets implicit conversions
// apply (a swizzle converts to its vec type; a scalar broadcasts to a vector).
#pragma once

namespace metal {

template <class T, int N>
struct vec;

namespace detail {

struct init_tag {};
struct convert_tag {};

// Compile-time index lists for N <= 4 (std::index_sequence would pull in <utility>).
template <int... I> struct iseq {};
template <int N> struct make_iseq;
template <> struct make_iseq<2> { using type = iseq<0, 1>; };
template <> struct make_iseq<3> { using type = iseq<0, 1, 2>; };
template <> struct make_iseq<4> { using type = iseq<0, 1, 2, 3>; };

// A read-only swizzle view such as v.xy, living in the vector's union. V (the vec type
// it reads as) is a template argument on purpose: it makes V an associated class, so
// `v.xy * 2.0f` finds V's operators by argument-dependent lookup.
template <class V, class T, int N, int... I>
struct swizzle {
  T v[N];
  operator V() const noexcept { return V(v[I]...); }
  V operator()() const noexcept { return V(v[I]...); }  // explicit read: s()
  T operator[](int i) const noexcept { return V(v[I]...)[i]; }
  // Assignment through a swizzle (`v.zw = x`), element by element. Metal allows it
  // only for swizzles without a repeated component. (Assigning the same swizzle of
  // another vector, `a.xy = b.xy`, is the union member's trivial copy, which copies
  // every element: write `a.xy = float2(b.xy)` instead.)
  swizzle& operator=(const V& x) noexcept {
    static_assert(distinct(), "cannot assign to a swizzle that repeats a component");
    int k = 0;
    ((v[I] = x[k++]), ...);
    return *this;
  }
  swizzle& operator+=(const V& x) noexcept { return *this = V(*this) + x; }
  swizzle& operator-=(const V& x) noexcept { return *this = V(*this) - x; }
  swizzle& operator*=(const V& x) noexcept { return *this = V(*this) * x; }
  swizzle& operator/=(const V& x) noexcept { return *this = V(*this) / x; }

 private:
  static constexpr bool distinct() noexcept {
    const int idx[] = {I...};
    for (int a = 0; a < int(sizeof...(I)); ++a)
      for (int b = a + 1; b < int(sizeof...(I)); ++b)
        if (idx[a] == idx[b]) return false;
    return true;
  }
};

template <class T, int N>
struct vec_storage;

}  // namespace detail
}  // namespace metal

#include "vector_storage.h"

namespace metal {

namespace detail {
template <class T> struct is_vec : std::false_type {};
template <class T, int N> struct is_vec<vec<T, N>> : std::true_type {};

// Anything that reads as a vector: a vec or a swizzle view. vec_of gives its vec type.
template <class T> struct vec_of { static constexpr bool value = false; };
template <class T, int N> struct vec_of<vec<T, N>> {
  static constexpr bool value = true;
  using type = vec<T, N>;
  using elem = T;
  static constexpr int size = N;
};
template <class V, class T, int M, int... I> struct vec_of<swizzle<V, T, M, I...>> : vec_of<V> {};
template <class T> struct vec_of<const T> : vec_of<T> {};
}  // namespace detail

template <class T, int N>
struct alignas(sizeof(T) * (N == 3 ? 4 : N)) vec : detail::vec_storage<T, N> {
  static_assert(N >= 2 && N <= 4, "MSL vectors have 2, 3 or 4 elements");
  using base = detail::vec_storage<T, N>;
  using value_type = T;
  using bool_type = vec<bool, N>;
  static constexpr int size = N;

 private:
  template <class U, int... I>
  constexpr vec(detail::convert_tag, const vec<U, N>& o, detail::iseq<I...>) noexcept
      : base(detail::init_tag{}, static_cast<T>(o.v[I])...) {}
  template <int... I>
  constexpr vec(detail::convert_tag, T s, detail::iseq<I...>) noexcept
      : base(detail::init_tag{}, ((void)I, s)...) {}

 public:
  // Uninitialised, as in Metal; `= default` keeps vec trivially copyable/constructible.
  vec() = default;
  // Broadcast. Implicit: MSL converts a scalar to a vector where one is expected.
  constexpr vec(T s) noexcept : vec(detail::convert_tag{}, s, typename detail::make_iseq<N>::type{}) {}
  // Element-type conversion, e.g. float4(int4). Explicit, as in MSL.
  template <class U, std::enable_if_t<!std::is_same<U, T>::value, int> = 0>
  explicit constexpr vec(const vec<U, N>& o) noexcept
      : vec(detail::convert_tag{}, o, typename detail::make_iseq<N>::type{}) {}

  // Element-wise and piecewise construction. SFINAE on N keeps each width's set exact.
  template <int M = N, std::enable_if_t<M == 2, int> = 0>
  constexpr vec(T a, T b) noexcept : base(detail::init_tag{}, a, b) {}
  template <int M = N, std::enable_if_t<M == 3, int> = 0>
  constexpr vec(T a, T b, T c) noexcept : base(detail::init_tag{}, a, b, c) {}
  template <int M = N, std::enable_if_t<M == 3, int> = 0>
  constexpr vec(const vec<T, 2>& a, T b) noexcept : base(detail::init_tag{}, a.v[0], a.v[1], b) {}
  template <int M = N, std::enable_if_t<M == 3, int> = 0>
  constexpr vec(T a, const vec<T, 2>& b) noexcept : base(detail::init_tag{}, a, b.v[0], b.v[1]) {}
  template <int M = N, std::enable_if_t<M == 4, int> = 0>
  constexpr vec(T a, T b, T c, T d) noexcept : base(detail::init_tag{}, a, b, c, d) {}
  template <int M = N, std::enable_if_t<M == 4, int> = 0>
  constexpr vec(const vec<T, 2>& a, const vec<T, 2>& b) noexcept
      : base(detail::init_tag{}, a.v[0], a.v[1], b.v[0], b.v[1]) {}
  template <int M = N, std::enable_if_t<M == 4, int> = 0>
  constexpr vec(const vec<T, 3>& a, T b) noexcept : base(detail::init_tag{}, a.v[0], a.v[1], a.v[2], b) {}
  template <int M = N, std::enable_if_t<M == 4, int> = 0>
  constexpr vec(T a, const vec<T, 3>& b) noexcept : base(detail::init_tag{}, a, b.v[0], b.v[1], b.v[2]) {}
  template <int M = N, std::enable_if_t<M == 4, int> = 0>
  constexpr vec(const vec<T, 2>& a, T b, T c) noexcept : base(detail::init_tag{}, a.v[0], a.v[1], b, c) {}
  template <int M = N, std::enable_if_t<M == 4, int> = 0>
  constexpr vec(T a, const vec<T, 2>& b, T c) noexcept : base(detail::init_tag{}, a, b.v[0], b.v[1], c) {}
  template <int M = N, std::enable_if_t<M == 4, int> = 0>
  constexpr vec(T a, T b, const vec<T, 2>& c) noexcept : base(detail::init_tag{}, a, b, c.v[0], c.v[1]) {}

  constexpr T& operator[](int i) noexcept { return this->v[i]; }
  constexpr const T& operator[](int i) const noexcept { return this->v[i]; }
  // Indexing a device/threadgroup vector through a volatile path is rare; not provided.

  // ---- arithmetic (vector-vector, vector-scalar, scalar-vector) ----------------------
#define METALSIM_VEC_BINOP(op)                                                           \
  friend constexpr vec operator op(vec a, const vec& b) noexcept {                       \
    for (int i = 0; i < N; ++i) a.v[i] = static_cast<T>(a.v[i] op b.v[i]);             \
    return a;                                                                          \
  }                                                                                    \
  friend constexpr vec operator op(vec a, T b) noexcept {                                \
    for (int i = 0; i < N; ++i) a.v[i] = static_cast<T>(a.v[i] op b);                  \
    return a;                                                                          \
  }                                                                                    \
  friend constexpr vec operator op(T a, vec b) noexcept {                                \
    for (int i = 0; i < N; ++i) b.v[i] = static_cast<T>(a op b.v[i]);                  \
    return b;                                                                          \
  }                                                                                    \
  constexpr vec& operator op##=(const vec& b) noexcept { return *this = *this op b; }   \
  constexpr vec& operator op##=(T b) noexcept { return *this = *this op b; }
  METALSIM_VEC_BINOP(+)
  METALSIM_VEC_BINOP(-)
  METALSIM_VEC_BINOP(*)
  METALSIM_VEC_BINOP(/)
  METALSIM_VEC_BINOP(%)
  METALSIM_VEC_BINOP(&)
  METALSIM_VEC_BINOP(|)
  METALSIM_VEC_BINOP(^)
#undef METALSIM_VEC_BINOP

  // Shifts take the count modulo the element width, as MSL/OpenCL vectors do; C++
  // would make an oversized count undefined behaviour.
#define METALSIM_VEC_SHIFT(op)                                                           \
  friend constexpr vec operator op(vec a, const vec& b) noexcept {                       \
    for (int i = 0; i < N; ++i)                                                        \
      a.v[i] = static_cast<T>(a.v[i] op (b.v[i] & T(sizeof(T) * 8 - 1)));              \
    return a;                                                                          \
  }                                                                                    \
  friend constexpr vec operator op(vec a, T b) noexcept { return a op vec(b); }          \
  friend constexpr vec operator op(T a, const vec& b) noexcept { return vec(a) op b; }   \
  constexpr vec& operator op##=(const vec& b) noexcept { return *this = *this op b; }   \
  constexpr vec& operator op##=(T b) noexcept { return *this = *this op b; }
  METALSIM_VEC_SHIFT(<<)
  METALSIM_VEC_SHIFT(>>)
#undef METALSIM_VEC_SHIFT

  friend constexpr vec operator-(vec a) noexcept {
    for (int i = 0; i < N; ++i) a.v[i] = static_cast<T>(-a.v[i]);
    return a;
  }
  friend constexpr vec operator+(const vec& a) noexcept { return a; }
  friend constexpr vec operator~(vec a) noexcept {
    for (int i = 0; i < N; ++i) a.v[i] = static_cast<T>(~a.v[i]);
    return a;
  }
  constexpr vec& operator++() noexcept { return *this += T(1); }
  constexpr vec& operator--() noexcept { return *this -= T(1); }
  constexpr vec operator++(int) noexcept { vec t = *this; *this += T(1); return t; }
  constexpr vec operator--(int) noexcept { vec t = *this; *this -= T(1); return t; }

  // ---- comparisons and logic: element-wise, yielding boolN --------------------------
#define METALSIM_VEC_CMP(op)                                                             \
  friend constexpr bool_type operator op(const vec& a, const vec& b) noexcept {          \
    bool_type r{};                                                                     \
    for (int i = 0; i < N; ++i) r.v[i] = a.v[i] op b.v[i];                             \
    return r;                                                                          \
  }                                                                                    \
  friend constexpr bool_type operator op(const vec& a, T b) noexcept { return a op vec(b); } \
  friend constexpr bool_type operator op(T a, const vec& b) noexcept { return vec(a) op b; }
  METALSIM_VEC_CMP(==)
  METALSIM_VEC_CMP(!=)
  METALSIM_VEC_CMP(<)
  METALSIM_VEC_CMP(<=)
  METALSIM_VEC_CMP(>)
  METALSIM_VEC_CMP(>=)
  METALSIM_VEC_CMP(&&)
  METALSIM_VEC_CMP(||)
#undef METALSIM_VEC_CMP
  friend constexpr bool_type operator!(const vec& a) noexcept {
    bool_type r{};
    for (int i = 0; i < N; ++i) r.v[i] = !a.v[i];
    return r;
  }
};

// Reads a swizzle view as its vector (also the identity on vectors).
template <class V>
constexpr typename detail::vec_of<V>::type to_vec(const V& x) noexcept {
  return x;
}

// bool vector reductions.
template <int N>
constexpr bool all(const vec<bool, N>& b) noexcept {
  for (int i = 0; i < N; ++i)
    if (!b.v[i]) return false;
  return true;
}
template <int N>
constexpr bool any(const vec<bool, N>& b) noexcept {
  for (int i = 0; i < N; ++i)
    if (b.v[i]) return true;
  return false;
}
constexpr bool all(bool b) noexcept { return b; }
constexpr bool any(bool b) noexcept { return b; }

// select(a, b, c): c ? b : a (MSL argument order), per element for vectors.
template <class T, std::enable_if_t<!detail::vec_of<T>::value, int> = 0>
constexpr T select(T a, T b, bool c) noexcept {
  return c ? b : a;
}
template <class T, int N>
constexpr vec<T, N> select(const vec<T, N>& a, const vec<T, N>& b, const vec<bool, N>& c) noexcept {
  vec<T, N> r{};
  for (int i = 0; i < N; ++i) r.v[i] = c.v[i] ? b.v[i] : a.v[i];
  return r;
}
template <class T, int N>
constexpr vec<T, N> select(const vec<T, N>& a, const vec<T, N>& b, bool c) noexcept {
  return c ? b : a;
}

// as_type<T>(x): reinterpret the bits (same size required, as in MSL).
template <class To, class From>
inline To as_type(const From& x) noexcept {
  static_assert(sizeof(To) == sizeof(From), "as_type needs types of equal size");
  static_assert(std::is_trivially_copyable<To>::value && std::is_trivially_copyable<From>::value,
                "as_type needs trivially copyable types");
  To r;
  std::memcpy(static_cast<void*>(&r), static_cast<const void*>(&x), sizeof(To));
  return r;
}

// Named vector types: boolN, charN, ucharN, shortN, ushortN, intN, uintN, longN,
// ulongN, halfN, bfloatN, floatN. Declared in metal and re-declared globally below.
#define METALSIM_VEC_NAMES(T, name) \
  using name##2 = vec<T, 2>;        \
  using name##3 = vec<T, 3>;        \
  using name##4 = vec<T, 4>;
METALSIM_VEC_NAMES(bool, bool)
METALSIM_VEC_NAMES(char, char)  // plain char: MSL char is signed (see README)
METALSIM_VEC_NAMES(uchar, uchar)
METALSIM_VEC_NAMES(short, short)
METALSIM_VEC_NAMES(ushort, ushort)
METALSIM_VEC_NAMES(int, int)
METALSIM_VEC_NAMES(uint, uint)
METALSIM_VEC_NAMES(long, long)
METALSIM_VEC_NAMES(ulong, ulong)
METALSIM_VEC_NAMES(half, half)
METALSIM_VEC_NAMES(bfloat, bfloat)
METALSIM_VEC_NAMES(float, float)
#undef METALSIM_VEC_NAMES

}  // namespace metal

using metal::vec;
#define METALSIM_VEC_USING(name) \
  using metal::name##2;          \
  using metal::name##3;          \
  using metal::name##4;
METALSIM_VEC_USING(bool)
METALSIM_VEC_USING(char)
METALSIM_VEC_USING(uchar)
METALSIM_VEC_USING(short)
METALSIM_VEC_USING(ushort)
METALSIM_VEC_USING(int)
METALSIM_VEC_USING(uint)
METALSIM_VEC_USING(long)
METALSIM_VEC_USING(ulong)
METALSIM_VEC_USING(half)
METALSIM_VEC_USING(bfloat)
METALSIM_VEC_USING(float)
#undef METALSIM_VEC_USING

// Layout checks (they also instantiate the common vector classes up front, so a
// swizzle's operators are already declared when argument-dependent lookup needs them).
static_assert(sizeof(float2) == 8 && alignof(float2) == 8, "float2 layout");
static_assert(sizeof(float3) == 16 && alignof(float3) == 16, "float3 layout");
static_assert(sizeof(float4) == 16 && alignof(float4) == 16, "float4 layout");
static_assert(sizeof(half2) == 4 && sizeof(half3) == 8 && sizeof(half4) == 8, "halfN layout");
static_assert(sizeof(int2) == 8 && sizeof(int3) == 16 && sizeof(int4) == 16, "intN layout");
static_assert(sizeof(uint2) == 8 && sizeof(uint3) == 16 && sizeof(uint4) == 16, "uintN layout");
static_assert(std::is_trivially_copyable<float4>::value, "vectors must be trivially copyable");

// MSL's as_type is a built-in, found without `metal::` or `using namespace metal;`
// (PyTorch's headers call it unqualified from their own namespaces).
using metal::as_type;
