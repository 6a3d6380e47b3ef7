// Unary math: one functor per op, instantiated per dtype (kernels/elementwise.h has the
// kernel templates and the naming scheme). Torch registrations: backend/ops/unary.cpp.
//
// Floating ops run in float for half and bfloat (as CPU PyTorch's opmath); ops CPU
// defines on integers run on them in their own type. Integer inputs of ops that only
// exist for floats (exp of an int tensor) were promoted by torch's meta function and
// cast by the launcher before they get here.
#include <metal_stdlib>
#include "elementwise.h"
#include "float64_bits.h"
#include "special_math.h"
using namespace metal;

#define METALX_FLOAT_UNARY(NAME, EXPR)                      \
  template <typename M> struct NAME##_op : elementwise_fn { \
    METAL_FUNC M operator()(M x) const { return EXPR; }     \
  };                                                        \
  METALX_FOR_FLOATS(METALX_UNARY_KERNELS, NAME, NAME##_op)

METALX_FLOAT_UNARY(exp, exp(x))
METALX_FLOAT_UNARY(exp2, exp2(x))
METALX_FLOAT_UNARY(expm1, metalx_expm1(x))
METALX_FLOAT_UNARY(log, log(x))
METALX_FLOAT_UNARY(log2, log2(x))
METALX_FLOAT_UNARY(log10, log10(x))
METALX_FLOAT_UNARY(log1p, metalx_log1p(x))
METALX_FLOAT_UNARY(sqrt, sqrt(x))
METALX_FLOAT_UNARY(rsqrt, 1.0f / sqrt(x))
METALX_FLOAT_UNARY(reciprocal, 1.0f / x)
METALX_FLOAT_UNARY(sin, sin(x))
METALX_FLOAT_UNARY(cos, cos(x))
METALX_FLOAT_UNARY(tan, tan(x))
METALX_FLOAT_UNARY(asin, asin(x))
METALX_FLOAT_UNARY(acos, acos(x))
METALX_FLOAT_UNARY(atan, atan(x))
METALX_FLOAT_UNARY(sinh, sinh(x))
METALX_FLOAT_UNARY(cosh, cosh(x))
METALX_FLOAT_UNARY(tanh, tanh(x))
METALX_FLOAT_UNARY(asinh, asinh(x))
METALX_FLOAT_UNARY(acosh, acosh(x))
METALX_FLOAT_UNARY(atanh, atanh(x))
METALX_FLOAT_UNARY(erf, metalx_erf(x))
METALX_FLOAT_UNARY(erfc, metalx_erfc(x))
METALX_FLOAT_UNARY(erfinv, metalx_erfinv(x))
METALX_FLOAT_UNARY(sigmoid, 1.0f / (1.0f + exp(-x)))
METALX_FLOAT_UNARY(lgamma, metalx_lgamma(x))
METALX_FLOAT_UNARY(digamma, metalx_digamma(x))
METALX_FLOAT_UNARY(frac, x - trunc(x))

// float64 reciprocal, in integer arithmetic (float64_bits.h): GradScaler takes the
// reciprocal of its scale in float64 every step, and a training step should not leave
// the device for one number.
template <> struct reciprocal_op<float64> : elementwise_fn {
  METAL_FUNC float64 operator()(float64 x) const { return float64{f64_reciprocal(x.bits)}; }
};
METALX_UNARY_KERNELS(reciprocal, reciprocal_op, float64)

// logit with the optional clamp of its input to [eps, 1 - eps] (scalar 0 = eps, scalar
// 1 = 1 when eps was given).
template <typename M> struct logit_op : elementwise_fn {
  float eps;
  bool clamp;
  void load(constant OpScalars& k) {
    eps = k.f[0];
    clamp = k.f[1] != 0.0f;
  }
  METAL_FUNC M operator()(M x) const {
    if (clamp) x = x < eps ? eps : (x > 1.0f - eps ? 1.0f - eps : x);
    return log(x / (1.0f - x));
  }
};
METALX_FOR_FLOATS(METALX_UNARY_KERNELS, logit, logit_op)

// isposinf / isneginf (attention masks test for -inf); integer inputs take the CPU path.
template <typename M> struct isposinf_op : predicate_fn {
  METAL_FUNC bool operator()(M x) const { return isinf(x) && x > M(0); }
};
template <typename M> struct isneginf_op : predicate_fn {
  METAL_FUNC bool operator()(M x) const { return isinf(x) && x < M(0); }
};
METALX_FOR_FLOATS(METALX_UNARY_KERNELS, isposinf, isposinf_op)
METALX_FOR_FLOATS(METALX_UNARY_KERNELS, isneginf, isneginf_op)

// ---- ops on every number type ----

template <typename M> struct neg_op : elementwise_fn {
  METAL_FUNC M operator()(M x) const { return -x; }
};
METALX_FOR_NUMBERS(METALX_UNARY_KERNELS, neg, neg_op)

template <typename M> struct abs_op : elementwise_fn {
  METAL_FUNC M operator()(M x) const { return x < M(0) ? M(-x) : (x == M(0) ? M(0) : x); }
};
METALX_FOR_NUMBERS(METALX_UNARY_KERNELS, abs, abs_op)

// sign: -1, 0 or 1; NaN gives 0, as CPU's sign.
template <typename M> struct sign_op : elementwise_fn {
  METAL_FUNC M operator()(M x) const { return M(M(0) < x) - M(x < M(0)); }
};
METALX_FOR_NUMBERS(METALX_UNARY_KERNELS, sign, sign_op)

template <typename M> struct signbit_op : predicate_fn {
  METAL_FUNC bool operator()(M x) const { return x < M(0); }
};
template <> struct signbit_op<float> : predicate_fn {
  METAL_FUNC bool operator()(float x) const { return signbit(x); }
};
METALX_FOR_NUMBERS(METALX_UNARY_KERNELS, signbit, signbit_op)

// Rounding is the identity on integers (CPU returns a copy).
template <typename M> struct ceil_op : elementwise_fn {
  METAL_FUNC M operator()(M x) const { return x; }
};
template <> struct ceil_op<float> : elementwise_fn {
  METAL_FUNC float operator()(float x) const { return ceil(x); }
};
template <typename M> struct floor_op : elementwise_fn {
  METAL_FUNC M operator()(M x) const { return x; }
};
template <> struct floor_op<float> : elementwise_fn {
  METAL_FUNC float operator()(float x) const { return floor(x); }
};
template <typename M> struct trunc_op : elementwise_fn {
  METAL_FUNC M operator()(M x) const { return x; }
};
template <> struct trunc_op<float> : elementwise_fn {
  METAL_FUNC float operator()(float x) const { return trunc(x); }
};
// Half to even, as std::nearbyint in CPU PyTorch.
template <typename M> struct round_op : elementwise_fn {
  METAL_FUNC M operator()(M x) const { return x; }
};
template <> struct round_op<float> : elementwise_fn {
  METAL_FUNC float operator()(float x) const { return rint(x); }
};
METALX_FOR_NUMBERS(METALX_UNARY_KERNELS, ceil, ceil_op)
METALX_FOR_NUMBERS(METALX_UNARY_KERNELS, floor, floor_op)
METALX_FOR_NUMBERS(METALX_UNARY_KERNELS, trunc, trunc_op)
METALX_FOR_NUMBERS(METALX_UNARY_KERNELS, round, round_op)

// round(decimals): scalar 0 = 10^|decimals|, scalar 1 = 1 if decimals < 0 (CPU scales
// by the power, rounds, and scales back).
template <typename M> struct round_decimals_op : elementwise_fn {
  float ten_pow;
  bool negative;
  void load(constant OpScalars& k) {
    ten_pow = k.f[0];
    negative = k.f[1] != 0.0f;
  }
  METAL_FUNC M operator()(M x) const { return negative ? rint(x / ten_pow) * ten_pow : rint(x * ten_pow) / ten_pow; }
};
METALX_FOR_FLOATS(METALX_UNARY_KERNELS, round_decimals, round_decimals_op)

// nan_to_num: scalars 0, 1, 2 = the replacements of NaN, +inf and -inf in the dtype's
// range (the host clamps them to it).
template <typename M> struct nan_to_num_op : elementwise_fn {
  float nan_value, posinf, neginf;
  void load(constant OpScalars& k) {
    nan_value = k.f[0];
    posinf = k.f[1];
    neginf = k.f[2];
  }
  METAL_FUNC M operator()(M x) const {
    if (isnan(x)) return nan_value;
    if (isinf(x)) return x > 0.0f ? posinf : neginf;
    return x;
  }
};
METALX_FOR_FLOATS(METALX_UNARY_KERNELS, nan_to_num, nan_to_num_op)

// ---- integer and boolean ----

template <typename M> struct bitwise_not_op : elementwise_fn {
  METAL_FUNC M operator()(M x) const { return ~x; }
};
template <> struct bitwise_not_op<bool> : elementwise_fn {
  METAL_FUNC bool operator()(bool x) const { return !x; }
};
METALX_FOR_INTS(METALX_UNARY_KERNELS, bitwise_not, bitwise_not_op)
METALX_UNARY_KERNELS(bitwise_not, bitwise_not_op, bool)

template <typename M> struct logical_not_op : predicate_fn {
  METAL_FUNC bool operator()(M x) const { return !bool(x); }
};
METALX_FOR_ALL(METALX_UNARY_KERNELS, logical_not, logical_not_op)
