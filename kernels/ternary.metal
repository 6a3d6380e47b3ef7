// where, clamp, lerp, addcmul and addcdiv (kernels/elementwise.h has the kernel
// templates). Torch registrations: backend/ops/ternary.cpp.
#include <metal_stdlib>
#include "complex.h"
#include "elementwise.h"
using namespace metal;

// where(condition, a, b): the condition keeps its own type (bool or uint8).
template <typename M> struct where_op : elementwise_fn {
  template <typename C> M operator()(C condition, M a, M b) const { return condition ? a : b; }
};
#define METALX_WHERE(NAME, OP, T) METALX_TERNARY_KERNELS_T0(NAME, OP, T, bool)
METALX_FOR_ALL(METALX_WHERE, where, where_op)
METALX_WHERE(where, where_op, complex64)

// ---- clamp: NaN in the input stays NaN; a NaN bound makes NaN (CPU's rules) ----

template <typename M> inline M clamp_below(M x, M lo) {
  if (x != x || lo != lo) return x != x ? x : lo;
  return x < lo ? lo : x;
}
template <typename M> inline M clamp_above(M x, M hi) {
  if (x != x || hi != hi) return x != x ? x : hi;
  return x > hi ? hi : x;
}

// Scalar bounds: scalar 0 = min, 1 = max, 2 = has min, 3 = has max. The bounds are
// uniform, so their cases are settled once in load(): a missing bound becomes the
// type's infinity (or extreme), and a NaN bound, which makes every result NaN, turns
// into a factor of NaN instead of 1. What remains per element is two compares and
// selects and a multiply, with no branch (relu is clamp_min(x, 0)): a GPU runs it
// without divergence, the simulator's compiler as vector code (a select between the
// result and a NaN stayed a branch there, and the loop scalar).
template <typename M> struct clamp_scalar_op : elementwise_fn {
  M lo, hi, nan_factor;
  void load(constant OpScalars& k) {
    lo = k.i[2] != 0 ? scalar_arg<M>(k, 0)
                     : (numeric_limits<M>::has_infinity ? -numeric_limits<M>::infinity() : numeric_limits<M>::lowest());
    hi = k.i[3] != 0 ? scalar_arg<M>(k, 1)
                     : (numeric_limits<M>::has_infinity ? numeric_limits<M>::infinity() : numeric_limits<M>::max());
    nan_factor = lo != lo ? lo : (hi != hi ? hi : M(1));
  }
  M operator()(M x) const {
    // A NaN x fails both compares and stays NaN; x * 1 is x exactly (-0 included).
    x = x < lo ? lo : x;
    x = x > hi ? hi : x;
    return x * nan_factor;
  }
};
METALX_FOR_NUMBERS(METALX_UNARY_KERNELS, clamp_scalar, clamp_scalar_op)

// Tensor bounds.
template <typename M> struct clamp_min_op : elementwise_fn {
  M operator()(M x, M lo) const { return clamp_below(x, lo); }
};
template <typename M> struct clamp_max_op : elementwise_fn {
  M operator()(M x, M hi) const { return clamp_above(x, hi); }
};
template <typename M> struct clamp_op : elementwise_fn {
  M operator()(M x, M lo, M hi) const { return clamp_above(clamp_below(x, lo), hi); }
};
METALX_FOR_NUMBERS(METALX_BINARY_KERNELS, clamp_min, clamp_min_op)
METALX_FOR_NUMBERS(METALX_BINARY_KERNELS, clamp_max, clamp_max_op)
METALX_FOR_NUMBERS(METALX_TERNARY_KERNELS, clamp, clamp_op)

// ---- lerp: start + weight * (end - start), from the nearer end for accuracy ----

template <typename M> inline M lerp_value(M start, M end, M weight) {
  const M diff = end - start;
  return fabs(weight) < 0.5f ? start + weight * diff : end - diff * (1.0f - weight);
}
template <typename M> struct lerp_op : elementwise_fn {
  M operator()(M start, M end, M weight) const { return lerp_value(start, end, weight); }
};
template <typename M> struct lerp_scalar_op : elementwise_fn {
  M weight;
  void load(constant OpScalars& k) { weight = k.f[0]; }
  M operator()(M start, M end) const { return lerp_value(start, end, weight); }
};
METALX_FOR_FLOATS(METALX_TERNARY_KERNELS, lerp, lerp_op)
METALX_FOR_FLOATS(METALX_BINARY_KERNELS, lerp_scalar, lerp_scalar_op)

// ---- addcmul / addcdiv: self + value * t1 (* or /) t2 ----

template <typename M> struct addcmul_op : elementwise_fn {
  M value;
  void load(constant OpScalars& k) { value = scalar_arg<M>(k, 0); }
  M operator()(M self, M t1, M t2) const { return self + value * t1 * t2; }
};
template <typename M> struct addcdiv_op : elementwise_fn {
  M value;
  void load(constant OpScalars& k) { value = scalar_arg<M>(k, 0); }
  M operator()(M self, M t1, M t2) const { return self + value * (t1 / t2); }
};
METALX_FOR_NUMBERS(METALX_TERNARY_KERNELS, addcmul, addcmul_op)
METALX_FOR_FLOATS(METALX_TERNARY_KERNELS, addcdiv, addcdiv_op)

// ---- complex64 lerp, addcmul, addcdiv (kernels/complex.h arithmetic) ----
// Scalars arrive as (f[2k], f[2k+1]) = (real, imag). The multiplications round each
// product, as CPU's vectorised complex loops do.

inline complex64 complex_scalar_arg(constant OpScalars& s, int k) { return complex64(s.f[2 * k], s.f[2 * k + 1]); }
// From the nearer end, as CPU's vectorised lerp: |weight| < 0.5 (the complex magnitude)
// gives start + weight (end - start), else end + (weight - 1)(end - start).
inline complex64 clerp(complex64 start, complex64 end, complex64 weight) {
  const bool small = cabs(weight) < 0.5f;
  const complex64 coeff = small ? weight : weight - complex64(1.0f, 0.0f);
  return cmul(coeff, end - start) + (small ? start : end);
}
template <typename M> struct clerp_op : elementwise_fn {
  complex64 operator()(complex64 start, complex64 end, complex64 weight) const { return clerp(start, end, weight); }
};
template <typename M> struct clerp_scalar_op : elementwise_fn {
  complex64 weight;
  void load(constant OpScalars& k) { weight = complex_scalar_arg(k, 0); }
  complex64 operator()(complex64 start, complex64 end) const { return clerp(start, end, weight); }
};
// self + (value * t1) * t2 and self + value * (t1 / t2), CPU's orders.
template <typename M> struct caddcmul_op : elementwise_fn {
  complex64 value;
  void load(constant OpScalars& k) { value = complex_scalar_arg(k, 0); }
  complex64 operator()(complex64 self, complex64 t1, complex64 t2) const { return self + cmul(cmul(value, t1), t2); }
};
template <typename M> struct caddcdiv_op : elementwise_fn {
  complex64 value;
  void load(constant OpScalars& k) { value = complex_scalar_arg(k, 0); }
  complex64 operator()(complex64 self, complex64 t1, complex64 t2) const { return self + cmul(value, cdiv(t1, t2)); }
};
METALX_TERNARY_KERNELS(lerp, clerp_op, complex64)
METALX_BINARY_KERNELS(lerp_scalar, clerp_scalar_op, complex64)
METALX_TERNARY_KERNELS(addcmul, caddcmul_op, complex64)
METALX_TERNARY_KERNELS(addcdiv, caddcdiv_op, complex64)
