// MSL packed vectors (packed_float3 & co): N elements with no padding and only the
// element's alignment, for tightly packed buffer layouts (sizeof(packed_float3) == 12).
// They convert to and from the aligned vec types; arithmetic goes through those.
#pragma once

namespace metal {

namespace detail {
template <class T, int N> struct packed_storage;
template <class T> struct packed_storage<T, 2> { union { T v[2]; struct { T x, y; }; struct { T r, g; }; }; };
template <class T> struct packed_storage<T, 3> { union { T v[3]; struct { T x, y, z; }; struct { T r, g, b; }; }; };
template <class T> struct packed_storage<T, 4> { union { T v[4]; struct { T x, y, z, w; }; struct { T r, g, b, a; }; }; };
}  // namespace detail

// V is not meant to be given: as a template argument it makes vec<T, N> an associated
// class, so the vector operators (hidden friends of vec) apply to packed vectors too.
template <class T, int N, class V = vec<T, N>>
struct packed_vec : detail::packed_storage<T, N> {
  packed_vec() = default;
  packed_vec(const vec<T, N>& o) noexcept {  // implicit, as in MSL
    for (int i = 0; i < N; ++i) this->v[i] = o.v[i];
  }
  packed_vec& operator=(const vec<T, N>& o) noexcept { return *this = packed_vec(o); }
  operator vec<T, N>() const noexcept {
    vec<T, N> r;
    for (int i = 0; i < N; ++i) r.v[i] = this->v[i];
    return r;
  }
  T& operator[](int i) noexcept { return this->v[i]; }
  const T& operator[](int i) const noexcept { return this->v[i]; }
  // The aligned vector (p.vec_value().xy); p also converts wherever a vec is expected.
  vec<T, N> vec_value() const noexcept { return *this; }
};

// packed vectors take part in the vector math templates like swizzles do.
namespace detail {
template <class T, int N, class V> struct vec_of<packed_vec<T, N, V>> : vec_of<V> {};
}  // namespace detail

#define METALSIM_PACKED_NAMES(T, name) \
  using packed_##name##2 = packed_vec<T, 2>; \
  using packed_##name##3 = packed_vec<T, 3>; \
  using packed_##name##4 = packed_vec<T, 4>;
METALSIM_PACKED_NAMES(char, char)
METALSIM_PACKED_NAMES(uchar, uchar)
METALSIM_PACKED_NAMES(short, short)
METALSIM_PACKED_NAMES(ushort, ushort)
METALSIM_PACKED_NAMES(int, int)
METALSIM_PACKED_NAMES(uint, uint)
METALSIM_PACKED_NAMES(long, long)
METALSIM_PACKED_NAMES(ulong, ulong)
METALSIM_PACKED_NAMES(half, half)
METALSIM_PACKED_NAMES(bfloat, bfloat)
METALSIM_PACKED_NAMES(float, float)
#undef METALSIM_PACKED_NAMES

}  // namespace metal

#define METALSIM_PACKED_USING(name) \
  using metal::packed_##name##2;    \
  using metal::packed_##name##3;    \
  using metal::packed_##name##4;
METALSIM_PACKED_USING(char)
METALSIM_PACKED_USING(uchar)
METALSIM_PACKED_USING(short)
METALSIM_PACKED_USING(ushort)
METALSIM_PACKED_USING(int)
METALSIM_PACKED_USING(uint)
METALSIM_PACKED_USING(long)
METALSIM_PACKED_USING(ulong)
METALSIM_PACKED_USING(half)
METALSIM_PACKED_USING(bfloat)
METALSIM_PACKED_USING(float)
#undef METALSIM_PACKED_USING

static_assert(sizeof(packed_float3) == 12 && alignof(packed_float3) == 4, "packed_float3 layout");
