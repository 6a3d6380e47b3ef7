// The _foreach_* ops' functors and kernels (kernels/multi_tensor.h has the multi-tensor
// kernel templates). Torch registrations: backend/ops/foreach.cpp.
//
// A functor's load(args, scalar) reads what it needs of the dispatch's scalars
// (args.f[0] is alpha for add and sub) and of the tensor's own scalar.
#include <metal_stdlib>
#include "multi_tensor.h"
using namespace metal;

struct mt_fn {
  void load(constant MultiTensorArgs &, float) {}
};

// ---- unary ----

template <typename M> struct mt_sqrt_op : mt_fn {
  M operator()(M a) const { return sqrt(a); }
};
template <typename M> struct mt_neg_op : mt_fn {
  M operator()(M a) const { return -a; }
};
template <typename M> struct mt_abs_op : mt_fn {
  M operator()(M a) const { return fabs(a); }
};
template <typename M> struct mt_exp_op : mt_fn {
  M operator()(M a) const { return exp(a); }
};
// 0 for zeros and NaN, as CPU's sign.
template <typename M> struct mt_sign_op : mt_fn {
  M operator()(M a) const { return M(0 < a) - M(a < 0); }
};
template <typename M> struct mt_reciprocal_op : mt_fn {
  M operator()(M a) const { return M(1) / a; }
};
template <typename M> struct mt_copy_op : mt_fn {
  M operator()(M a) const { return a; }
};

// zero_: every element becomes the tensor's scalar.
template <typename M> struct mt_fill_op {
  M value;
  void load(constant MultiTensorArgs &, float s) { value = s; }
  M operator()(M) const { return value; }
};

METALX_MT_FLOATS(mt_unary, foreach_fill, mt_fill_op)
METALX_MT_FLOATS(mt_unary, foreach_sqrt, mt_sqrt_op)
METALX_MT_FLOATS(mt_unary, foreach_neg, mt_neg_op)
METALX_MT_FLOATS(mt_unary, foreach_abs, mt_abs_op)
METALX_MT_FLOATS(mt_unary, foreach_exp, mt_exp_op)
METALX_MT_FLOATS(mt_unary, foreach_sign, mt_sign_op)
METALX_MT_FLOATS(mt_unary, foreach_reciprocal, mt_reciprocal_op)
METALX_MT_FLOATS(mt_unary, foreach_copy, mt_copy_op)

// ---- binary: the second operand a tensor, the tensor's scalar or a device scalar ----

template <typename M> struct mt_add_op {
  M alpha;
  void load(constant MultiTensorArgs &args, float) { alpha = args.f[0]; }
  M operator()(M a, M b) const { return a + alpha * b; }
};
template <typename M> struct mt_sub_op {
  M alpha;
  void load(constant MultiTensorArgs &args, float) { alpha = args.f[0]; }
  M operator()(M a, M b) const { return a - alpha * b; }
};
template <typename M> struct mt_mul_op : mt_fn {
  M operator()(M a, M b) const { return a * b; }
};
template <typename M> struct mt_div_op : mt_fn {
  M operator()(M a, M b) const { return a / b; }
};
// NaN from either side, as torch.maximum and clamp_min (which are the same function).
template <typename M> struct mt_maximum_op : mt_fn {
  M operator()(M a, M b) const { return (a != a || b != b) ? M(NAN) : (a > b ? a : b); }
};
template <typename M> struct mt_minimum_op : mt_fn {
  M operator()(M a, M b) const { return (a != a || b != b) ? M(NAN) : (a < b ? a : b); }
};

// a ** b with C's rules for negative bases (Metal's pow leaves them undefined).
template <typename M> inline M mt_pow(M a, M b) {
  if (b == M(2)) return a * a;
  if (b == M(1)) return a;
  if (b == M(0)) return M(1);
  const M magnitude = pow(fabs(a), b);
  if (a >= M(0) || a != a) return magnitude;
  if (b != floor(b)) return M(NAN);  // a negative base to a fractional power
  return fmod(fabs(b), M(2)) == M(1) ? -magnitude : magnitude;
}
template <typename M> struct mt_pow_op : mt_fn {
  M operator()(M a, M b) const { return mt_pow(a, b); }
};
// scalar ** a (pow.ScalarAndTensor)
template <typename M> struct mt_rpow_op : mt_fn {
  M operator()(M a, M s) const { return mt_pow(s, a); }
};

// start + weight * (end - start), from the nearer end (CPU's lerp).
template <typename M> inline M mt_lerp(M start, M end, M weight) {
  const M diff = end - start;
  return fabs(weight) < M(0.5) ? start + weight * diff : end - diff * (M(1) - weight);
}
template <typename M> struct mt_lerp_op : mt_fn {
  M operator()(M start, M end, M weight) const { return mt_lerp(start, end, weight); }
};
template <typename M> struct mt_lerp_scalar_op : mt_fn {
  M operator()(M start, M end) const { return mt_lerp(start, end, weight); }
  M weight;
  void load(constant MultiTensorArgs &, float s) { weight = s; }
};

METALX_MT_FLOATS(mt_binary_list, foreach_add_list, mt_add_op)
METALX_MT_FLOATS(mt_binary_list, foreach_sub_list, mt_sub_op)
METALX_MT_FLOATS(mt_binary_list, foreach_mul_list, mt_mul_op)
METALX_MT_FLOATS(mt_binary_list, foreach_div_list, mt_div_op)
METALX_MT_FLOATS(mt_binary_list, foreach_maximum_list, mt_maximum_op)
METALX_MT_FLOATS(mt_binary_list, foreach_minimum_list, mt_minimum_op)
METALX_MT_FLOATS(mt_binary_list, foreach_pow_list, mt_pow_op)
METALX_MT_FLOATS(mt_binary_list, foreach_lerp_scalar, mt_lerp_scalar_op)

METALX_MT_FLOATS(mt_binary_scalar, foreach_add_scalar, mt_add_op)
METALX_MT_FLOATS(mt_binary_scalar, foreach_sub_scalar, mt_sub_op)
METALX_MT_FLOATS(mt_binary_scalar, foreach_mul_scalar, mt_mul_op)
METALX_MT_FLOATS(mt_binary_scalar, foreach_div_scalar, mt_div_op)
METALX_MT_FLOATS(mt_binary_scalar, foreach_maximum_scalar, mt_maximum_op)
METALX_MT_FLOATS(mt_binary_scalar, foreach_minimum_scalar, mt_minimum_op)
METALX_MT_FLOATS(mt_binary_scalar, foreach_pow_scalar, mt_pow_op)
METALX_MT_FLOATS(mt_binary_scalar, foreach_rpow_scalar, mt_rpow_op)

METALX_MT_FLOATS(mt_binary_tensor, foreach_add_tensor, mt_add_op)
METALX_MT_FLOATS(mt_binary_tensor, foreach_mul_tensor, mt_mul_op)
METALX_MT_FLOATS(mt_binary_tensor, foreach_div_tensor, mt_div_op)

// ---- ternary ----

// self + value * t1 * t2 and self + value * (t1 / t2); value is the tensor's scalar.
template <typename M> struct mt_addcmul_op {
  M value;
  void load(constant MultiTensorArgs &, float s) { value = s; }
  M operator()(M self, M t1, M t2) const { return self + value * t1 * t2; }
};
template <typename M> struct mt_addcdiv_op {
  M value;
  void load(constant MultiTensorArgs &, float s) { value = s; }
  M operator()(M self, M t1, M t2) const { return self + value * (t1 / t2); }
};

METALX_MT_FLOATS(mt_ternary, foreach_addcmul, mt_addcmul_op)
METALX_MT_FLOATS(mt_ternary, foreach_addcdiv, mt_addcdiv_op)
METALX_MT_FLOATS(mt_ternary, foreach_lerp_list, mt_lerp_op)

// ---- norm: |x|_1, |x|_2, |x|_inf per tensor, in passes ----
// Each pass writes one float per thread (over its per_thread elements) into a partials
// tensor, at index begin / per_thread; passes repeat over the partials until each tensor
// has one, which foreach_norm_finish turns into the norm in the tensor's dtype.
#define METALX_NORM_L1 1u
#define METALX_NORM_L2 2u
#define METALX_NORM_INF 3u
#define METALX_NORM_COMBINE 4u  // inputs are partials: add (or take the max of) them as they are

inline float norm_max(float acc, float v) { return (acc != acc || v != v) ? (acc != acc ? acc : v) : max(acc, v); }

template <typename T>
kernel void foreach_norm_partial(METALX_MT_SLOT_PARAMS) {
  METALX_MT_PROLOGUE
  if (begin >= end) return;
  const uint mode = args.flags & 3u;
  const bool combine = args.flags & METALX_NORM_COMBINE;
  device const T *a = mt_ptr<T>(slots, e.loc[0]);
  device float *partials = mt_ptr<float>(slots, e.loc[1]);
  float acc = 0.0f;
  for (ulong i = begin; i < end; ++i) {
    const float x = float(a[i]);
    if (combine) acc = mode == METALX_NORM_INF ? norm_max(acc, x) : acc + x;
    else if (mode == METALX_NORM_L1) acc += fabs(x);
    else if (mode == METALX_NORM_L2) acc += x * x;
    else acc = norm_max(acc, fabs(x));
  }
  partials[begin / args.per_thread] = acc;
}
template [[host_name("foreach_norm_partial_float")]] kernel decltype(foreach_norm_partial<float>) foreach_norm_partial<float>;
template [[host_name("foreach_norm_partial_half")]] kernel decltype(foreach_norm_partial<half>) foreach_norm_partial<half>;
template [[host_name("foreach_norm_partial_bfloat")]] kernel decltype(foreach_norm_partial<bfloat>) foreach_norm_partial<bfloat>;

// out[0] = the norm from a tensor's last partial (sqrt for L2), in T.
template <typename T>
kernel void foreach_norm_finish(METALX_MT_SLOT_PARAMS) {
  METALX_MT_PROLOGUE
  if (begin >= end) return;
  const float p = *mt_ptr<float>(slots, e.loc[0]);
  *mt_ptr<T>(slots, e.loc[1]) = T((args.flags & 3u) == METALX_NORM_L2 ? sqrt(p) : p);
}
template [[host_name("foreach_norm_finish_float")]] kernel decltype(foreach_norm_finish<float>) foreach_norm_finish<float>;
template [[host_name("foreach_norm_finish_half")]] kernel decltype(foreach_norm_finish<half>) foreach_norm_finish<half>;
template [[host_name("foreach_norm_finish_bfloat")]] kernel decltype(foreach_norm_finish<bfloat>) foreach_norm_finish<bfloat>;
