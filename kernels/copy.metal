// Strided copies: the kernels behind every metalx copy_ that is not a plain blit.
//
// Two families, both "copy every element of a strided source view into a strided
// destination view of the same shape":
//   copy_strided_<N>B         same dtype, no flags: moves N-byte elements as bits
//                             (N = 1, 2, 4, 8, 16), so one kernel serves every dtype
//                             of that size.
//   cast_strided_<S>_to_<D>   converts each element from dtype S to dtype D with CPU
//                             PyTorch's static_cast rules, then applies the neg / conj
//                             flags (as CPU copy_ does: convert, then neg_/conj_ the
//                             result). Also used for S == D when a flag is set.
// dtype names: the MSL scalar name where MSL has the type (bool uchar char short int
// long half bfloat float), the torch name where it has none (float64 complex64
// complex128). Host launcher: backend/ops/copy/strided_copy.cpp.
//
// float64 never touches `double` (Metal has none): float64 values are their 64-bit
// patterns (ulong) and every conversion to or from them is integer arithmetic with
// the rounding IEEE and C++ prescribe. float16 and bfloat16 are handled as 16-bit
// patterns converted with c10::Half's and c10::BFloat16's rounding in integer
// arithmetic, so results are bit-exact with CPU PyTorch on any device.
//
// Indexing (see StridedCopyParams): dim 0 is the innermost dimension of the coalesced
// iteration space. The grid's x covers dim 0 in tiles of `tile_inner` elements, y covers
// dim 1 in tiles of `tile_rows` rows, z covers the product of the outer dims. Each thread
// walks its tile with pointer increments, so the only divisions are those that split the
// outer index into coordinates, once per tile and only for 4+ dims. The host grows the
// tiles until x and y fit in a grid, and z is a grid-stride loop, so any element count
// works whatever grid can be dispatched (Metal grids are 32-bit per dimension). All
// offsets are 64-bit.
#include <metal_stdlib>
#include "float64_bits.h"
using namespace metal;

// ---- parameters (mirrored by backend/ops/copy/strided_copy_params.h) ----

// Macros rather than program-scope `constant` variables: plain literals everywhere.
#define COPY_NEGATE 1u     // result = -value (the tensor's neg bit)
#define COPY_CONJUGATE 2u  // complex result: imag = -imag (the conj bit)

struct StridedCopyParams {
  uint ndim;          // dims in use, 3..16 (the host pads with size-1 dims)
  uint flags;         // COPY_NEGATE | COPY_CONJUGATE; ignored by copy_strided_*
  uint tile_inner;    // elements of dim 0 per thread tile (>= 1)
  uint tile_rows;     // rows of dim 1 per thread tile (>= 1)
  ulong outer;        // product of sizes[2 .. ndim)
  ulong sizes[16];    // dim 0 innermost
  long src_strides[16];  // in elements of the source dtype
  long dst_strides[16];  // in elements of the destination dtype
};

// ---- the strided walk shared by every kernel ----

struct ElementOffsets {
  long src;
  long dst;
};

// Offsets of outer index `o` (coordinates in dims 2 .. ndim-1, dim 2 fastest).
inline ElementOffsets outer_offsets(constant StridedCopyParams& p, ulong o) {
  ElementOffsets r;
  r.src = 0;
  r.dst = 0;
  uint last = p.ndim - 1;
  for (uint d = 2; d < last; ++d) {
    ulong n = p.sizes[d];
    // A 32-bit division is several times cheaper than a 64-bit one on a GPU.
    ulong q = ((o | n) >> 32) == 0 ? ulong(uint(o) / uint(n)) : o / n;
    long i = long(o - q * n);
    r.src += i * p.src_strides[d];
    r.dst += i * p.dst_strides[d];
    o = q;
  }
  r.src += long(o) * p.src_strides[last];
  r.dst += long(o) * p.dst_strides[last];
  return r;
}

// One row of a tile: `count` elements, `s0` / `d0` elements apart. Unrolled by four
// with the loads before the stores: a compiler may then merge unit-stride groups into
// vector loads and stores (the simulator's C++ compiler does), and strided ones keep
// four independent loads in flight.
template <typename Op, typename ST, typename DT>
inline void copy_row(device const ST* ps, device DT* pd, ulong count, long s0, long d0,
                     uint flags) {
  Op op;
  ulong i = 0;
  if (s0 == 1 && d0 == 1) {
    for (; i + 4 <= count; i += 4) {
      DT a = op(ps[i], flags), b = op(ps[i + 1], flags);
      DT c = op(ps[i + 2], flags), d = op(ps[i + 3], flags);
      pd[i] = a;
      pd[i + 1] = b;
      pd[i + 2] = c;
      pd[i + 3] = d;
    }
    for (; i < count; ++i) pd[i] = op(ps[i], flags);
  } else {
    for (; i + 4 <= count; i += 4) {
      DT a = op(ps[0], flags), b = op(ps[s0], flags);
      DT c = op(ps[2 * s0], flags), d = op(ps[3 * s0], flags);
      pd[0] = a;
      pd[d0] = b;
      pd[2 * d0] = c;
      pd[3 * d0] = d;
      ps += 4 * s0;
      pd += 4 * d0;
    }
    for (; i < count; ++i) {
      *pd = op(*ps, flags);
      ps += s0;
      pd += d0;
    }
  }
}

// Copies this thread's tile: `tile_inner` elements of dim 0 times `tile_rows` rows of
// dim 1, for every outer index o = gid.z + k * grid.z. The host sizes the tiles so
// that the grid covers dims 0 and 1 in one pass; only the outer dims need the
// grid-stride loop (the grid's depth is capped).
template <typename Op, typename ST, typename DT>
inline void strided_walk(device const ST* src, device DT* dst, constant StridedCopyParams& p,
                         uint3 gid, uint3 grid) {
  // Copied to locals once: dst stores may alias `p` as far as a compiler can tell.
  const ulong n0 = p.sizes[0], n1 = p.sizes[1], outer = p.outer;
  const ulong i0 = ulong(gid.x) * p.tile_inner, j0 = ulong(gid.y) * p.tile_rows;
  if (i0 >= n0 || j0 >= n1) return;
  const ulong count = n0 - i0 < p.tile_inner ? n0 - i0 : ulong(p.tile_inner);
  const ulong rows = n1 - j0 < p.tile_rows ? n1 - j0 : ulong(p.tile_rows);
  const long s0 = p.src_strides[0], s1 = p.src_strides[1];
  const long d0 = p.dst_strides[0], d1 = p.dst_strides[1];
  const uint flags = p.flags;
  for (ulong o = gid.z; o < outer; o += grid.z) {
    ElementOffsets base = outer_offsets(p, o);
    device const ST* ps = src + (base.src + long(j0) * s1 + long(i0) * s0);
    device DT* pd = dst + (base.dst + long(j0) * d1 + long(i0) * d0);
    for (ulong j = 0; j < rows; ++j) {
      copy_row<Op, ST, DT>(ps, pd, count, s0, d0, flags);
      ps += s1;
      pd += d1;
    }
  }
}

// ---- same-dtype bit copies ----

// 16-byte elements (complex128) as two ulongs: only 8-byte alignment is required,
// which is what torch guarantees for complex128 storage (ulong2 would need 16).
struct Bits128 {
  ulong lo;
  ulong hi;
};

template <typename T>
struct BitCopy {
  T operator()(T v, uint flags) { return v; }
};

template <typename T>
kernel void copy_strided(device const T* src [[buffer(0)]],
                         device T* dst [[buffer(1)]],
                         constant StridedCopyParams& p [[buffer(2)]],
                         uint3 gid [[thread_position_in_grid]],
                         uint3 grid [[threads_per_grid]]) {
  strided_walk<BitCopy<T>, T, T>(src, dst, p, gid, grid);
}

template [[host_name("copy_strided_1B")]] kernel decltype(copy_strided<uchar>) copy_strided<uchar>;
template [[host_name("copy_strided_2B")]] kernel decltype(copy_strided<ushort>) copy_strided<ushort>;
template [[host_name("copy_strided_4B")]] kernel decltype(copy_strided<uint>) copy_strided<uint>;
template [[host_name("copy_strided_8B")]] kernel decltype(copy_strided<ulong>) copy_strided<ulong>;
template [[host_name("copy_strided_16B")]] kernel decltype(copy_strided<Bits128>) copy_strided<Bits128>;

// ---- float64 as bits: conversions in integer arithmetic ----

// (the bit helpers are in float64_bits.h)

// float64 -> float32, round to nearest even, as static_cast<float>(double) on x86-64 and
// arm64: overflow to inf, gradual underflow, NaN kept quiet with its sign and the top
// of its payload.
inline float f64_to_f32(ulong b) {
  uint sign = uint(b >> 32) & 0x80000000u;
  uint e = uint(b >> 52) & 0x7FFu;
  ulong m = b & F64_FRAC_MASK;
  if (e == 0x7FFu) {
    if (m == 0) return as_type<float>(sign | 0x7F800000u);
    return as_type<float>(sign | 0x7FC00000u | uint(m >> 29));
  }
  int exp = int(e) - 1023 + 127;  // float's biased exponent
  if (exp >= 0xFF) return as_type<float>(sign | 0x7F800000u);
  if (exp >= 1) {
    // A carry out of the mantissa bumps the exponent, up to inf: both are right.
    uint r = (uint(exp) << 23) + uint(shift_round_even(m, 29));
    return as_type<float>(sign | r);
  }
  // Below float's normal range: a subnormal (or zero) in units of 2^-149.
  // (e == 0, a float64 subnormal, is far below half of 2^-149 and lands here too.)
  uint shift = uint(926 - int(e));  // value = (2^52 + m) * 2^(e - 1075)
  if (e == 0 || shift >= 54) return as_type<float>(sign);
  return as_type<float>(sign | uint(shift_round_even(F64_IMPLICIT | m, shift)));
}

// float32 -> float64, exact; NaN quieted with its payload kept, as x86-64 and arm64 do.
inline ulong f32_to_f64(float f) {
  uint u = as_type<uint>(f);
  ulong sign = ulong(u & 0x80000000u) << 32;
  uint e = (u >> 23) & 0xFFu;
  uint m = u & 0x7FFFFFu;
  if (e == 0xFFu) {
    ulong r = sign | 0x7FF0000000000000UL | (ulong(m) << 29);
    return m != 0 ? (r | 0x0008000000000000UL) : r;
  }
  if (e == 0) {
    if (m == 0) return sign;
    uint top = 31u - clz(m);  // value = m * 2^-149, m's highest bit at `top`
    ulong frac = (ulong(m) << (52u - top)) & F64_FRAC_MASK;
    return sign | (ulong(top + 874u) << 52) | frac;
  }
  return sign | (ulong(e + 896u) << 52) | (ulong(m) << 29);
}

// float64 -> int64 truncating toward zero, as static_cast<int64_t>(double) for values
// in range. Out of range and NaN give INT64_MIN (what x86-64's cvttsd2si returns;
// C++ leaves it undefined).
inline long f64_to_i64(ulong b) {
  uint e = uint(b >> 52) & 0x7FFu;
  if (e < 1023u) return 0;                  // |x| < 1
  if (e >= 1023u + 63u) return long(F64_SIGN);
  ulong m = (b & F64_FRAC_MASK) | F64_IMPLICIT;
  ulong mag = e >= 1075u ? (m << (e - 1075u)) : (m >> (1075u - e));
  return (b & F64_SIGN) != 0 ? long(0UL - mag) : long(mag);
}

// int64 -> float64, round to nearest even (static_cast<double>(int64_t)).
inline ulong i64_to_f64(long v) {
  if (v == 0) return 0;
  ulong sign = v < 0 ? F64_SIGN : 0;
  ulong mag = v < 0 ? 0UL - ulong(v) : ulong(v);
  uint top = 63u - clz64(mag);
  // mant holds 53 bits with the implicit one at bit 52; rounding may carry it to
  // 2^53, which the addition below turns into the next exponent.
  ulong mant = top <= 52u ? mag << (52u - top) : shift_round_even(mag, top - 52u);
  return sign | ((ulong(top + 1023u) << 52) + (mant - F64_IMPLICIT));
}

// int64 -> float32, round to nearest even (static_cast<float>(int64_t)), without
// relying on how a GPU converts 64-bit integers.
inline float i64_to_f32(long v) {
  if (v > -16777216 && v < 16777216) return float(int(v));  // exact
  uint sign = v < 0 ? 0x80000000u : 0u;
  ulong mag = v < 0 ? 0UL - ulong(v) : ulong(v);
  uint top = 63u - clz64(mag);  // >= 24 here
  ulong mant = shift_round_even(mag, top - 23u);
  return as_type<float>(sign | (((top + 127u) << 23) + uint(mant - 0x800000UL)));
}

// float32 -> bfloat16 bits as c10::BFloat16: round to nearest even, NaN -> 0x7FC0.
inline ushort bf16_from_f32(float f) {
  uint u = as_type<uint>(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return ushort(0x7FC0);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return ushort(u >> 16);
}

inline float bf16_to_f32(ushort b) { return as_type<float>(uint(b) << 16); }

// float32 -> float16 bits, round to nearest even, as c10::Half(float) (NaN -> sign |
// 0x7E00). Integer arithmetic rather than `half(f)`: bit-exact with c10 on every
// device, and fast where half conversions are emulated (the simulator's CPU).
inline ushort f16_from_f32(float f) {
  uint u = as_type<uint>(f);
  uint sign = (u >> 16) & 0x8000u;
  uint a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return ushort(sign | 0x7E00u);   // NaN
  if (a >= 0x477FF000u) return ushort(sign | 0x7C00u);  // >= 65520 rounds to inf
  if (a >= 0x38800000u) {                               // normal half: >= 2^-14
    uint r = (a - 0x38000000u) >> 13;                   // rebias 127 -> 15
    uint rest = a & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (r & 1u) != 0)) r += 1;  // may carry into exp
    return ushort(sign | r);
  }
  if (a <= 0x33000000u) return ushort(sign);            // <= 2^-25: ties to even 0
  // Subnormal half, in units of 2^-24: value = m * 2^(e - 150).
  uint e = a >> 23;
  uint m = (a & 0x7FFFFFu) | 0x800000u;
  uint shift = 126u - e;                                // 14 .. 24
  uint r = m >> shift;
  uint rest = m & ((1u << shift) - 1u);
  uint half_way = 1u << (shift - 1u);
  if (rest > half_way || (rest == half_way && (r & 1u) != 0)) r += 1;
  return ushort(sign | r);
}

// float16 bits -> float32, exact; a NaN is quieted with its payload kept (as x86-64
// and arm64 conversions do).
inline float f16_to_f32(ushort h) {
  uint sign = uint(h & 0x8000u) << 16;
  uint e = (uint(h) >> 10) & 0x1Fu;
  uint m = uint(h) & 0x3FFu;
  if (e == 0x1Fu) return as_type<float>(sign | 0x7F800000u | (m << 13) | (m != 0 ? 0x400000u : 0u));
  if (e == 0) {
    if (m == 0) return as_type<float>(sign);
    uint top = 31u - clz(m);  // value = m * 2^-24
    return as_type<float>(sign | ((top + 103u) << 23) | ((m << (23u - top)) & 0x7FFFFFu));
  }
  return as_type<float>(sign | ((e + 112u) << 23) | (m << 13));
}

// ---- dtypes: storage and how a value reads as each kind of number ----
//
// Every source dtype answers: its real part as float32 (re_f32), as float64 bits
// (re_f64), truncated to int64 (re_i64), its imaginary part (im_f32 / im_f64; 0 for
// real dtypes), and whether it is nonzero. Destinations are then built from these
// the way c10's static_cast does (see `Cast` below).

struct Complex128 {
  ulong re;  // float64 bits
  ulong im;
};

struct DBool { typedef uchar T; };
struct DUInt8 { typedef uchar T; };
struct DInt8 { typedef char T; };
struct DInt16 { typedef short T; };
struct DInt32 { typedef int T; };
struct DInt64 { typedef long T; };
struct DHalf { typedef ushort T; };  // float16 bits
struct DBFloat { typedef ushort T; };
struct DFloat { typedef float T; };
struct DFloat64 { typedef ulong T; };
struct DComplex64 { typedef float2 T; };
struct DComplex128 { typedef Complex128 T; };

// Integers (and bool, whose bytes are 0 or 1; any nonzero byte reads as true).
inline long int_value(DBool, uchar v) { return v != 0 ? 1 : 0; }
inline long int_value(DUInt8, uchar v) { return long(v); }
inline long int_value(DInt8, char v) { return long(v); }
inline long int_value(DInt16, short v) { return long(v); }
inline long int_value(DInt32, int v) { return long(v); }
inline long int_value(DInt64, long v) { return v; }

template <typename S> inline float re_f32(S s, typename S::T v) { return i64_to_f32(int_value(s, v)); }
template <typename S> inline ulong re_f64(S s, typename S::T v) { return i64_to_f64(int_value(s, v)); }
template <typename S> inline long re_i64(S s, typename S::T v) { return int_value(s, v); }
template <typename S> inline float im_f32(S s, typename S::T v) { return 0.0f; }
template <typename S> inline ulong im_f64(S s, typename S::T v) { return 0; }
template <typename S> inline bool nonzero(S s, typename S::T v) { return int_value(s, v) != 0; }

// Floating point: float16, bfloat16 and float32 go through float32 as in c10
// (c10::Half and c10::BFloat16 convert via float); float -> int truncates, and
// float -> uint8 goes through int64 as c10 does (so -1.0 -> 255 as on CPU).
inline float float_value(DHalf, ushort v) { return f16_to_f32(v); }
inline float float_value(DBFloat, ushort v) { return bf16_to_f32(v); }
inline float float_value(DFloat, float v) { return v; }

inline bool f32_nonzero(float f) { return (as_type<uint>(f) << 1) != 0; }  // NaN is nonzero

#define METALX_FLOAT_SOURCE(D)                                                          \
  inline float re_f32(D s, D::T v) { return float_value(s, v); }                         \
  inline ulong re_f64(D s, D::T v) { return f32_to_f64(float_value(s, v)); }             \
  inline long re_i64(D s, D::T v) { return long(float_value(s, v)); }                    \
  inline float im_f32(D s, D::T v) { return 0.0f; }                                      \
  inline ulong im_f64(D s, D::T v) { return 0; }                                         \
  inline bool nonzero(D s, D::T v) { return f32_nonzero(float_value(s, v)); }
METALX_FLOAT_SOURCE(DHalf)
METALX_FLOAT_SOURCE(DBFloat)
METALX_FLOAT_SOURCE(DFloat)
#undef METALX_FLOAT_SOURCE

inline bool f64_nonzero(ulong b) { return (b << 1) != 0; }

inline float re_f32(DFloat64, ulong v) { return f64_to_f32(v); }
inline ulong re_f64(DFloat64, ulong v) { return v; }
inline long re_i64(DFloat64, ulong v) { return f64_to_i64(v); }
inline float im_f32(DFloat64, ulong v) { return 0.0f; }
inline ulong im_f64(DFloat64, ulong v) { return 0; }
inline bool nonzero(DFloat64, ulong v) { return f64_nonzero(v); }

// Complex -> real takes the real part; complex -> bool is true when either part is
// nonzero (both as CPU PyTorch).
inline float re_f32(DComplex64, float2 v) { return v.x; }
inline ulong re_f64(DComplex64, float2 v) { return f32_to_f64(v.x); }
inline long re_i64(DComplex64, float2 v) { return long(v.x); }
inline float im_f32(DComplex64, float2 v) { return v.y; }
inline ulong im_f64(DComplex64, float2 v) { return f32_to_f64(v.y); }
inline bool nonzero(DComplex64, float2 v) { return f32_nonzero(v.x) || f32_nonzero(v.y); }

inline float re_f32(DComplex128, Complex128 v) { return f64_to_f32(v.re); }
inline ulong re_f64(DComplex128, Complex128 v) { return v.re; }
inline long re_i64(DComplex128, Complex128 v) { return f64_to_i64(v.re); }
inline float im_f32(DComplex128, Complex128 v) { return f64_to_f32(v.im); }
inline ulong im_f64(DComplex128, Complex128 v) { return v.im; }
inline bool nonzero(DComplex128, Complex128 v) { return f64_nonzero(v.re) || f64_nonzero(v.im); }

// ---- building a destination value ----

template <typename S> inline uchar make(DBool, S s, typename S::T v) { return nonzero(s, v) ? 1 : 0; }
// Integer destinations wrap modulo 2^bits, as C++'s integer conversions.
template <typename S> inline uchar make(DUInt8, S s, typename S::T v) { return uchar(re_i64(s, v)); }
template <typename S> inline char make(DInt8, S s, typename S::T v) { return char(re_i64(s, v)); }
template <typename S> inline short make(DInt16, S s, typename S::T v) { return short(re_i64(s, v)); }
template <typename S> inline int make(DInt32, S s, typename S::T v) { return int(re_i64(s, v)); }
template <typename S> inline long make(DInt64, S s, typename S::T v) { return re_i64(s, v); }
// float64 -> half/bfloat round twice (via float32), exactly as c10::Half(float(x)).
template <typename S> inline ushort make(DHalf, S s, typename S::T v) { return f16_from_f32(re_f32(s, v)); }
template <typename S> inline ushort make(DBFloat, S s, typename S::T v) { return bf16_from_f32(re_f32(s, v)); }
template <typename S> inline float make(DFloat, S s, typename S::T v) { return re_f32(s, v); }
template <typename S> inline ulong make(DFloat64, S s, typename S::T v) { return re_f64(s, v); }
template <typename S> inline float2 make(DComplex64, S s, typename S::T v) {
  return float2(re_f32(s, v), im_f32(s, v));
}
template <typename S> inline Complex128 make(DComplex128, S s, typename S::T v) {
  Complex128 r;
  r.re = re_f64(s, v);
  r.im = im_f64(s, v);
  return r;
}

// ---- the neg and conj flags, in the destination dtype ----
// Floating values flip the sign bit (exactly unary minus, NaN included); integers wrap.

inline uchar negated(DBool, uchar v) { return v; }  // -true is still true
inline uchar negated(DUInt8, uchar v) { return uchar(0u - uint(v)); }
inline char negated(DInt8, char v) { return char(-int(v)); }
inline short negated(DInt16, short v) { return short(-int(v)); }
inline int negated(DInt32, int v) { return int(0u - uint(v)); }
inline long negated(DInt64, long v) { return long(0UL - ulong(v)); }
inline ushort negated(DHalf, ushort v) { return ushort(v ^ 0x8000u); }
inline ushort negated(DBFloat, ushort v) { return ushort(v ^ 0x8000u); }
inline float negated(DFloat, float v) { return as_type<float>(as_type<uint>(v) ^ 0x80000000u); }
inline ulong negated(DFloat64, ulong v) { return v ^ F64_SIGN; }
inline float2 negated(DComplex64, float2 v) {
  return float2(negated(DFloat(), v.x), negated(DFloat(), v.y));
}
inline Complex128 negated(DComplex128, Complex128 v) {
  Complex128 r;
  r.re = v.re ^ F64_SIGN;
  r.im = v.im ^ F64_SIGN;
  return r;
}

template <typename D> inline typename D::T conjugated(D, typename D::T v) { return v; }
inline float2 conjugated(DComplex64, float2 v) { return float2(v.x, negated(DFloat(), v.y)); }
inline Complex128 conjugated(DComplex128, Complex128 v) {
  Complex128 r = v;
  r.im = v.im ^ F64_SIGN;
  return r;
}

template <typename D>
inline typename D::T with_flags(D d, typename D::T r, uint flags) {
  if ((flags & COPY_NEGATE) != 0) r = negated(d, r);
  if ((flags & COPY_CONJUGATE) != 0) r = conjugated(d, r);
  return r;
}

template <typename S, typename D>
struct Cast {
  typename D::T operator()(typename S::T v, uint flags) {
    return with_flags(D(), make(D(), S(), v), flags);
  }
};

// Same dtype (used when a flag is set): the value as it is, every bit kept (a NaN's
// payload too), as a same-dtype copy on CPU.
template <typename D>
struct Cast<D, D> {
  typename D::T operator()(typename D::T v, uint flags) { return with_flags(D(), v, flags); }
};

template <typename S, typename D>
kernel void cast_strided(device const typename S::T* src [[buffer(0)]],
                         device typename D::T* dst [[buffer(1)]],
                         constant StridedCopyParams& p [[buffer(2)]],
                         uint3 gid [[thread_position_in_grid]],
                         uint3 grid [[threads_per_grid]]) {
  strided_walk<Cast<S, D>, typename S::T, typename D::T>(src, dst, p, gid, grid);
}

// Every ordered pair of the 12 dtypes (generated list; keep in the order of the names).
template [[host_name("cast_strided_bool_to_bool")]] kernel decltype(cast_strided<DBool, DBool>) cast_strided<DBool, DBool>;
template [[host_name("cast_strided_bool_to_uchar")]] kernel decltype(cast_strided<DBool, DUInt8>) cast_strided<DBool, DUInt8>;
template [[host_name("cast_strided_bool_to_char")]] kernel decltype(cast_strided<DBool, DInt8>) cast_strided<DBool, DInt8>;
template [[host_name("cast_strided_bool_to_short")]] kernel decltype(cast_strided<DBool, DInt16>) cast_strided<DBool, DInt16>;
template [[host_name("cast_strided_bool_to_int")]] kernel decltype(cast_strided<DBool, DInt32>) cast_strided<DBool, DInt32>;
template [[host_name("cast_strided_bool_to_long")]] kernel decltype(cast_strided<DBool, DInt64>) cast_strided<DBool, DInt64>;
template [[host_name("cast_strided_bool_to_half")]] kernel decltype(cast_strided<DBool, DHalf>) cast_strided<DBool, DHalf>;
template [[host_name("cast_strided_bool_to_bfloat")]] kernel decltype(cast_strided<DBool, DBFloat>) cast_strided<DBool, DBFloat>;
template [[host_name("cast_strided_bool_to_float")]] kernel decltype(cast_strided<DBool, DFloat>) cast_strided<DBool, DFloat>;
template [[host_name("cast_strided_bool_to_float64")]] kernel decltype(cast_strided<DBool, DFloat64>) cast_strided<DBool, DFloat64>;
template [[host_name("cast_strided_bool_to_complex64")]] kernel decltype(cast_strided<DBool, DComplex64>) cast_strided<DBool, DComplex64>;
template [[host_name("cast_strided_bool_to_complex128")]] kernel decltype(cast_strided<DBool, DComplex128>) cast_strided<DBool, DComplex128>;
template [[host_name("cast_strided_uchar_to_bool")]] kernel decltype(cast_strided<DUInt8, DBool>) cast_strided<DUInt8, DBool>;
template [[host_name("cast_strided_uchar_to_uchar")]] kernel decltype(cast_strided<DUInt8, DUInt8>) cast_strided<DUInt8, DUInt8>;
template [[host_name("cast_strided_uchar_to_char")]] kernel decltype(cast_strided<DUInt8, DInt8>) cast_strided<DUInt8, DInt8>;
template [[host_name("cast_strided_uchar_to_short")]] kernel decltype(cast_strided<DUInt8, DInt16>) cast_strided<DUInt8, DInt16>;
template [[host_name("cast_strided_uchar_to_int")]] kernel decltype(cast_strided<DUInt8, DInt32>) cast_strided<DUInt8, DInt32>;
template [[host_name("cast_strided_uchar_to_long")]] kernel decltype(cast_strided<DUInt8, DInt64>) cast_strided<DUInt8, DInt64>;
template [[host_name("cast_strided_uchar_to_half")]] kernel decltype(cast_strided<DUInt8, DHalf>) cast_strided<DUInt8, DHalf>;
template [[host_name("cast_strided_uchar_to_bfloat")]] kernel decltype(cast_strided<DUInt8, DBFloat>) cast_strided<DUInt8, DBFloat>;
template [[host_name("cast_strided_uchar_to_float")]] kernel decltype(cast_strided<DUInt8, DFloat>) cast_strided<DUInt8, DFloat>;
template [[host_name("cast_strided_uchar_to_float64")]] kernel decltype(cast_strided<DUInt8, DFloat64>) cast_strided<DUInt8, DFloat64>;
template [[host_name("cast_strided_uchar_to_complex64")]] kernel decltype(cast_strided<DUInt8, DComplex64>) cast_strided<DUInt8, DComplex64>;
template [[host_name("cast_strided_uchar_to_complex128")]] kernel decltype(cast_strided<DUInt8, DComplex128>) cast_strided<DUInt8, DComplex128>;
template [[host_name("cast_strided_char_to_bool")]] kernel decltype(cast_strided<DInt8, DBool>) cast_strided<DInt8, DBool>;
template [[host_name("cast_strided_char_to_uchar")]] kernel decltype(cast_strided<DInt8, DUInt8>) cast_strided<DInt8, DUInt8>;
template [[host_name("cast_strided_char_to_char")]] kernel decltype(cast_strided<DInt8, DInt8>) cast_strided<DInt8, DInt8>;
template [[host_name("cast_strided_char_to_short")]] kernel decltype(cast_strided<DInt8, DInt16>) cast_strided<DInt8, DInt16>;
template [[host_name("cast_strided_char_to_int")]] kernel decltype(cast_strided<DInt8, DInt32>) cast_strided<DInt8, DInt32>;
template [[host_name("cast_strided_char_to_long")]] kernel decltype(cast_strided<DInt8, DInt64>) cast_strided<DInt8, DInt64>;
template [[host_name("cast_strided_char_to_half")]] kernel decltype(cast_strided<DInt8, DHalf>) cast_strided<DInt8, DHalf>;
template [[host_name("cast_strided_char_to_bfloat")]] kernel decltype(cast_strided<DInt8, DBFloat>) cast_strided<DInt8, DBFloat>;
template [[host_name("cast_strided_char_to_float")]] kernel decltype(cast_strided<DInt8, DFloat>) cast_strided<DInt8, DFloat>;
template [[host_name("cast_strided_char_to_float64")]] kernel decltype(cast_strided<DInt8, DFloat64>) cast_strided<DInt8, DFloat64>;
template [[host_name("cast_strided_char_to_complex64")]] kernel decltype(cast_strided<DInt8, DComplex64>) cast_strided<DInt8, DComplex64>;
template [[host_name("cast_strided_char_to_complex128")]] kernel decltype(cast_strided<DInt8, DComplex128>) cast_strided<DInt8, DComplex128>;
template [[host_name("cast_strided_short_to_bool")]] kernel decltype(cast_strided<DInt16, DBool>) cast_strided<DInt16, DBool>;
template [[host_name("cast_strided_short_to_uchar")]] kernel decltype(cast_strided<DInt16, DUInt8>) cast_strided<DInt16, DUInt8>;
template [[host_name("cast_strided_short_to_char")]] kernel decltype(cast_strided<DInt16, DInt8>) cast_strided<DInt16, DInt8>;
template [[host_name("cast_strided_short_to_short")]] kernel decltype(cast_strided<DInt16, DInt16>) cast_strided<DInt16, DInt16>;
template [[host_name("cast_strided_short_to_int")]] kernel decltype(cast_strided<DInt16, DInt32>) cast_strided<DInt16, DInt32>;
template [[host_name("cast_strided_short_to_long")]] kernel decltype(cast_strided<DInt16, DInt64>) cast_strided<DInt16, DInt64>;
template [[host_name("cast_strided_short_to_half")]] kernel decltype(cast_strided<DInt16, DHalf>) cast_strided<DInt16, DHalf>;
template [[host_name("cast_strided_short_to_bfloat")]] kernel decltype(cast_strided<DInt16, DBFloat>) cast_strided<DInt16, DBFloat>;
template [[host_name("cast_strided_short_to_float")]] kernel decltype(cast_strided<DInt16, DFloat>) cast_strided<DInt16, DFloat>;
template [[host_name("cast_strided_short_to_float64")]] kernel decltype(cast_strided<DInt16, DFloat64>) cast_strided<DInt16, DFloat64>;
template [[host_name("cast_strided_short_to_complex64")]] kernel decltype(cast_strided<DInt16, DComplex64>) cast_strided<DInt16, DComplex64>;
template [[host_name("cast_strided_short_to_complex128")]] kernel decltype(cast_strided<DInt16, DComplex128>) cast_strided<DInt16, DComplex128>;
template [[host_name("cast_strided_int_to_bool")]] kernel decltype(cast_strided<DInt32, DBool>) cast_strided<DInt32, DBool>;
template [[host_name("cast_strided_int_to_uchar")]] kernel decltype(cast_strided<DInt32, DUInt8>) cast_strided<DInt32, DUInt8>;
template [[host_name("cast_strided_int_to_char")]] kernel decltype(cast_strided<DInt32, DInt8>) cast_strided<DInt32, DInt8>;
template [[host_name("cast_strided_int_to_short")]] kernel decltype(cast_strided<DInt32, DInt16>) cast_strided<DInt32, DInt16>;
template [[host_name("cast_strided_int_to_int")]] kernel decltype(cast_strided<DInt32, DInt32>) cast_strided<DInt32, DInt32>;
template [[host_name("cast_strided_int_to_long")]] kernel decltype(cast_strided<DInt32, DInt64>) cast_strided<DInt32, DInt64>;
template [[host_name("cast_strided_int_to_half")]] kernel decltype(cast_strided<DInt32, DHalf>) cast_strided<DInt32, DHalf>;
template [[host_name("cast_strided_int_to_bfloat")]] kernel decltype(cast_strided<DInt32, DBFloat>) cast_strided<DInt32, DBFloat>;
template [[host_name("cast_strided_int_to_float")]] kernel decltype(cast_strided<DInt32, DFloat>) cast_strided<DInt32, DFloat>;
template [[host_name("cast_strided_int_to_float64")]] kernel decltype(cast_strided<DInt32, DFloat64>) cast_strided<DInt32, DFloat64>;
template [[host_name("cast_strided_int_to_complex64")]] kernel decltype(cast_strided<DInt32, DComplex64>) cast_strided<DInt32, DComplex64>;
template [[host_name("cast_strided_int_to_complex128")]] kernel decltype(cast_strided<DInt32, DComplex128>) cast_strided<DInt32, DComplex128>;
template [[host_name("cast_strided_long_to_bool")]] kernel decltype(cast_strided<DInt64, DBool>) cast_strided<DInt64, DBool>;
template [[host_name("cast_strided_long_to_uchar")]] kernel decltype(cast_strided<DInt64, DUInt8>) cast_strided<DInt64, DUInt8>;
template [[host_name("cast_strided_long_to_char")]] kernel decltype(cast_strided<DInt64, DInt8>) cast_strided<DInt64, DInt8>;
template [[host_name("cast_strided_long_to_short")]] kernel decltype(cast_strided<DInt64, DInt16>) cast_strided<DInt64, DInt16>;
template [[host_name("cast_strided_long_to_int")]] kernel decltype(cast_strided<DInt64, DInt32>) cast_strided<DInt64, DInt32>;
template [[host_name("cast_strided_long_to_long")]] kernel decltype(cast_strided<DInt64, DInt64>) cast_strided<DInt64, DInt64>;
template [[host_name("cast_strided_long_to_half")]] kernel decltype(cast_strided<DInt64, DHalf>) cast_strided<DInt64, DHalf>;
template [[host_name("cast_strided_long_to_bfloat")]] kernel decltype(cast_strided<DInt64, DBFloat>) cast_strided<DInt64, DBFloat>;
template [[host_name("cast_strided_long_to_float")]] kernel decltype(cast_strided<DInt64, DFloat>) cast_strided<DInt64, DFloat>;
template [[host_name("cast_strided_long_to_float64")]] kernel decltype(cast_strided<DInt64, DFloat64>) cast_strided<DInt64, DFloat64>;
template [[host_name("cast_strided_long_to_complex64")]] kernel decltype(cast_strided<DInt64, DComplex64>) cast_strided<DInt64, DComplex64>;
template [[host_name("cast_strided_long_to_complex128")]] kernel decltype(cast_strided<DInt64, DComplex128>) cast_strided<DInt64, DComplex128>;
template [[host_name("cast_strided_half_to_bool")]] kernel decltype(cast_strided<DHalf, DBool>) cast_strided<DHalf, DBool>;
template [[host_name("cast_strided_half_to_uchar")]] kernel decltype(cast_strided<DHalf, DUInt8>) cast_strided<DHalf, DUInt8>;
template [[host_name("cast_strided_half_to_char")]] kernel decltype(cast_strided<DHalf, DInt8>) cast_strided<DHalf, DInt8>;
template [[host_name("cast_strided_half_to_short")]] kernel decltype(cast_strided<DHalf, DInt16>) cast_strided<DHalf, DInt16>;
template [[host_name("cast_strided_half_to_int")]] kernel decltype(cast_strided<DHalf, DInt32>) cast_strided<DHalf, DInt32>;
template [[host_name("cast_strided_half_to_long")]] kernel decltype(cast_strided<DHalf, DInt64>) cast_strided<DHalf, DInt64>;
template [[host_name("cast_strided_half_to_half")]] kernel decltype(cast_strided<DHalf, DHalf>) cast_strided<DHalf, DHalf>;
template [[host_name("cast_strided_half_to_bfloat")]] kernel decltype(cast_strided<DHalf, DBFloat>) cast_strided<DHalf, DBFloat>;
template [[host_name("cast_strided_half_to_float")]] kernel decltype(cast_strided<DHalf, DFloat>) cast_strided<DHalf, DFloat>;
template [[host_name("cast_strided_half_to_float64")]] kernel decltype(cast_strided<DHalf, DFloat64>) cast_strided<DHalf, DFloat64>;
template [[host_name("cast_strided_half_to_complex64")]] kernel decltype(cast_strided<DHalf, DComplex64>) cast_strided<DHalf, DComplex64>;
template [[host_name("cast_strided_half_to_complex128")]] kernel decltype(cast_strided<DHalf, DComplex128>) cast_strided<DHalf, DComplex128>;
template [[host_name("cast_strided_bfloat_to_bool")]] kernel decltype(cast_strided<DBFloat, DBool>) cast_strided<DBFloat, DBool>;
template [[host_name("cast_strided_bfloat_to_uchar")]] kernel decltype(cast_strided<DBFloat, DUInt8>) cast_strided<DBFloat, DUInt8>;
template [[host_name("cast_strided_bfloat_to_char")]] kernel decltype(cast_strided<DBFloat, DInt8>) cast_strided<DBFloat, DInt8>;
template [[host_name("cast_strided_bfloat_to_short")]] kernel decltype(cast_strided<DBFloat, DInt16>) cast_strided<DBFloat, DInt16>;
template [[host_name("cast_strided_bfloat_to_int")]] kernel decltype(cast_strided<DBFloat, DInt32>) cast_strided<DBFloat, DInt32>;
template [[host_name("cast_strided_bfloat_to_long")]] kernel decltype(cast_strided<DBFloat, DInt64>) cast_strided<DBFloat, DInt64>;
template [[host_name("cast_strided_bfloat_to_half")]] kernel decltype(cast_strided<DBFloat, DHalf>) cast_strided<DBFloat, DHalf>;
template [[host_name("cast_strided_bfloat_to_bfloat")]] kernel decltype(cast_strided<DBFloat, DBFloat>) cast_strided<DBFloat, DBFloat>;
template [[host_name("cast_strided_bfloat_to_float")]] kernel decltype(cast_strided<DBFloat, DFloat>) cast_strided<DBFloat, DFloat>;
template [[host_name("cast_strided_bfloat_to_float64")]] kernel decltype(cast_strided<DBFloat, DFloat64>) cast_strided<DBFloat, DFloat64>;
template [[host_name("cast_strided_bfloat_to_complex64")]] kernel decltype(cast_strided<DBFloat, DComplex64>) cast_strided<DBFloat, DComplex64>;
template [[host_name("cast_strided_bfloat_to_complex128")]] kernel decltype(cast_strided<DBFloat, DComplex128>) cast_strided<DBFloat, DComplex128>;
template [[host_name("cast_strided_float_to_bool")]] kernel decltype(cast_strided<DFloat, DBool>) cast_strided<DFloat, DBool>;
template [[host_name("cast_strided_float_to_uchar")]] kernel decltype(cast_strided<DFloat, DUInt8>) cast_strided<DFloat, DUInt8>;
template [[host_name("cast_strided_float_to_char")]] kernel decltype(cast_strided<DFloat, DInt8>) cast_strided<DFloat, DInt8>;
template [[host_name("cast_strided_float_to_short")]] kernel decltype(cast_strided<DFloat, DInt16>) cast_strided<DFloat, DInt16>;
template [[host_name("cast_strided_float_to_int")]] kernel decltype(cast_strided<DFloat, DInt32>) cast_strided<DFloat, DInt32>;
template [[host_name("cast_strided_float_to_long")]] kernel decltype(cast_strided<DFloat, DInt64>) cast_strided<DFloat, DInt64>;
template [[host_name("cast_strided_float_to_half")]] kernel decltype(cast_strided<DFloat, DHalf>) cast_strided<DFloat, DHalf>;
template [[host_name("cast_strided_float_to_bfloat")]] kernel decltype(cast_strided<DFloat, DBFloat>) cast_strided<DFloat, DBFloat>;
template [[host_name("cast_strided_float_to_float")]] kernel decltype(cast_strided<DFloat, DFloat>) cast_strided<DFloat, DFloat>;
template [[host_name("cast_strided_float_to_float64")]] kernel decltype(cast_strided<DFloat, DFloat64>) cast_strided<DFloat, DFloat64>;
template [[host_name("cast_strided_float_to_complex64")]] kernel decltype(cast_strided<DFloat, DComplex64>) cast_strided<DFloat, DComplex64>;
template [[host_name("cast_strided_float_to_complex128")]] kernel decltype(cast_strided<DFloat, DComplex128>) cast_strided<DFloat, DComplex128>;
template [[host_name("cast_strided_float64_to_bool")]] kernel decltype(cast_strided<DFloat64, DBool>) cast_strided<DFloat64, DBool>;
template [[host_name("cast_strided_float64_to_uchar")]] kernel decltype(cast_strided<DFloat64, DUInt8>) cast_strided<DFloat64, DUInt8>;
template [[host_name("cast_strided_float64_to_char")]] kernel decltype(cast_strided<DFloat64, DInt8>) cast_strided<DFloat64, DInt8>;
template [[host_name("cast_strided_float64_to_short")]] kernel decltype(cast_strided<DFloat64, DInt16>) cast_strided<DFloat64, DInt16>;
template [[host_name("cast_strided_float64_to_int")]] kernel decltype(cast_strided<DFloat64, DInt32>) cast_strided<DFloat64, DInt32>;
template [[host_name("cast_strided_float64_to_long")]] kernel decltype(cast_strided<DFloat64, DInt64>) cast_strided<DFloat64, DInt64>;
template [[host_name("cast_strided_float64_to_half")]] kernel decltype(cast_strided<DFloat64, DHalf>) cast_strided<DFloat64, DHalf>;
template [[host_name("cast_strided_float64_to_bfloat")]] kernel decltype(cast_strided<DFloat64, DBFloat>) cast_strided<DFloat64, DBFloat>;
template [[host_name("cast_strided_float64_to_float")]] kernel decltype(cast_strided<DFloat64, DFloat>) cast_strided<DFloat64, DFloat>;
template [[host_name("cast_strided_float64_to_float64")]] kernel decltype(cast_strided<DFloat64, DFloat64>) cast_strided<DFloat64, DFloat64>;
template [[host_name("cast_strided_float64_to_complex64")]] kernel decltype(cast_strided<DFloat64, DComplex64>) cast_strided<DFloat64, DComplex64>;
template [[host_name("cast_strided_float64_to_complex128")]] kernel decltype(cast_strided<DFloat64, DComplex128>) cast_strided<DFloat64, DComplex128>;
template [[host_name("cast_strided_complex64_to_bool")]] kernel decltype(cast_strided<DComplex64, DBool>) cast_strided<DComplex64, DBool>;
template [[host_name("cast_strided_complex64_to_uchar")]] kernel decltype(cast_strided<DComplex64, DUInt8>) cast_strided<DComplex64, DUInt8>;
template [[host_name("cast_strided_complex64_to_char")]] kernel decltype(cast_strided<DComplex64, DInt8>) cast_strided<DComplex64, DInt8>;
template [[host_name("cast_strided_complex64_to_short")]] kernel decltype(cast_strided<DComplex64, DInt16>) cast_strided<DComplex64, DInt16>;
template [[host_name("cast_strided_complex64_to_int")]] kernel decltype(cast_strided<DComplex64, DInt32>) cast_strided<DComplex64, DInt32>;
template [[host_name("cast_strided_complex64_to_long")]] kernel decltype(cast_strided<DComplex64, DInt64>) cast_strided<DComplex64, DInt64>;
template [[host_name("cast_strided_complex64_to_half")]] kernel decltype(cast_strided<DComplex64, DHalf>) cast_strided<DComplex64, DHalf>;
template [[host_name("cast_strided_complex64_to_bfloat")]] kernel decltype(cast_strided<DComplex64, DBFloat>) cast_strided<DComplex64, DBFloat>;
template [[host_name("cast_strided_complex64_to_float")]] kernel decltype(cast_strided<DComplex64, DFloat>) cast_strided<DComplex64, DFloat>;
template [[host_name("cast_strided_complex64_to_float64")]] kernel decltype(cast_strided<DComplex64, DFloat64>) cast_strided<DComplex64, DFloat64>;
template [[host_name("cast_strided_complex64_to_complex64")]] kernel decltype(cast_strided<DComplex64, DComplex64>) cast_strided<DComplex64, DComplex64>;
template [[host_name("cast_strided_complex64_to_complex128")]] kernel decltype(cast_strided<DComplex64, DComplex128>) cast_strided<DComplex64, DComplex128>;
template [[host_name("cast_strided_complex128_to_bool")]] kernel decltype(cast_strided<DComplex128, DBool>) cast_strided<DComplex128, DBool>;
template [[host_name("cast_strided_complex128_to_uchar")]] kernel decltype(cast_strided<DComplex128, DUInt8>) cast_strided<DComplex128, DUInt8>;
template [[host_name("cast_strided_complex128_to_char")]] kernel decltype(cast_strided<DComplex128, DInt8>) cast_strided<DComplex128, DInt8>;
template [[host_name("cast_strided_complex128_to_short")]] kernel decltype(cast_strided<DComplex128, DInt16>) cast_strided<DComplex128, DInt16>;
template [[host_name("cast_strided_complex128_to_int")]] kernel decltype(cast_strided<DComplex128, DInt32>) cast_strided<DComplex128, DInt32>;
template [[host_name("cast_strided_complex128_to_long")]] kernel decltype(cast_strided<DComplex128, DInt64>) cast_strided<DComplex128, DInt64>;
template [[host_name("cast_strided_complex128_to_half")]] kernel decltype(cast_strided<DComplex128, DHalf>) cast_strided<DComplex128, DHalf>;
template [[host_name("cast_strided_complex128_to_bfloat")]] kernel decltype(cast_strided<DComplex128, DBFloat>) cast_strided<DComplex128, DBFloat>;
template [[host_name("cast_strided_complex128_to_float")]] kernel decltype(cast_strided<DComplex128, DFloat>) cast_strided<DComplex128, DFloat>;
template [[host_name("cast_strided_complex128_to_float64")]] kernel decltype(cast_strided<DComplex128, DFloat64>) cast_strided<DComplex128, DFloat64>;
template [[host_name("cast_strided_complex128_to_complex64")]] kernel decltype(cast_strided<DComplex128, DComplex64>) cast_strided<DComplex128, DComplex64>;
template [[host_name("cast_strided_complex128_to_complex128")]] kernel decltype(cast_strided<DComplex128, DComplex128>) cast_strided<DComplex128, DComplex128>;
