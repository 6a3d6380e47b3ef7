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

// Scalar bounds: scalar 0 = min, 1 = max, 2 = has min, 3 = has max.
template <typename M> struct clamp_scalar_op : elementwise_fn {
  M lo, hi;
  bool has_lo, has_hi;
  void load(constant OpScalars& k) {
    lo = scalar_arg<M>(k, 0);
    hi = scalar_arg<M>(k, 1);
    has_lo = k.i[2] != 0;
    has_hi = k.i[3] != 0;
  }
  M operator()(M x) const {
    if (has_lo) x = clamp_below(x, lo);
    if (has_hi) x = clamp_above(x, hi);
    return x;
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
