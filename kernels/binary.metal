// Binary ops: arithmetic, comparisons, logical and bitwise ops. One functor per op,
// instantiated per dtype (kernels/elementwise.h). Torch registrations:
// backend/ops/binary.cpp. Integer division by zero never gets here: the host raises
// first, as CPU PyTorch does.
#include <metal_stdlib>
#include "elementwise.h"
#include "binary_vm.h"
using namespace metal;

// True when the compute type is a floating type (float: half and bfloat compute in it).
template <typename M> inline bool is_float_math() { return false; }
template <> inline bool is_float_math<float>() { return true; }

// ---- arithmetic ----

// add and sub take alpha (scalar 0): a + alpha * b.
template <typename M> struct add_op : elementwise_fn {
  M alpha;
  void load(constant OpScalars& k) { alpha = scalar_arg<M>(k, 0); }
  METAL_FUNC M operator()(M a, M b) const { return a + alpha * b; }
};
template <> struct add_op<bool> : elementwise_fn {
  bool alpha;
  void load(constant OpScalars& k) { alpha = scalar_arg<bool>(k, 0); }
  METAL_FUNC bool operator()(bool a, bool b) const { return a || (alpha && b); }
};
template <typename M> struct sub_op : elementwise_fn {
  M alpha;
  void load(constant OpScalars& k) { alpha = scalar_arg<M>(k, 0); }
  METAL_FUNC M operator()(M a, M b) const { return a - alpha * b; }
};
template <typename M> struct mul_op : elementwise_fn {
  METAL_FUNC M operator()(M a, M b) const { return a * b; }
};
template <> struct mul_op<bool> : elementwise_fn {
  METAL_FUNC bool operator()(bool a, bool b) const { return a && b; }
};
// half and bfloat: CPU rounds alpha to the tensor's type, then alpha * b, then the sum
// (its scalar loop, which runs non-contiguous operands, short tensors and the tails of
// long ones). Its vectorised loop over long contiguous runs fuses alpha * b + a into one
// rounding instead: the two differ by one ulp where alpha * b is not exact in T, which
// only alpha other than +-1 and powers of two can make.
template <typename T> struct add_rounded {
  template <typename M> struct op : elementwise_fn {
    M alpha;
    void load(constant OpScalars& k) { alpha = M(T(scalar_arg<M>(k, 0))); }
    METAL_FUNC M operator()(M a, M b) const { return a + M(T(alpha * b)); }
  };
};
template <typename T> struct sub_rounded {
  template <typename M> struct op : elementwise_fn {
    M alpha;
    void load(constant OpScalars& k) { alpha = M(T(scalar_arg<M>(k, 0))); }
    METAL_FUNC M operator()(M a, M b) const { return a - M(T(alpha * b)); }
  };
};
METALX_BINARY_KERNELS(add, add_op, float)
METALX_BINARY_KERNELS(add, add_rounded<half>::op, half)
METALX_BINARY_KERNELS(add, add_rounded<bfloat>::op, bfloat)
METALX_FOR_INTS(METALX_BINARY_KERNELS, add, add_op)
METALX_BINARY_KERNELS(add, add_op, bool)
METALX_BINARY_KERNELS(sub, sub_op, float)
METALX_BINARY_KERNELS(sub, sub_rounded<half>::op, half)
METALX_BINARY_KERNELS(sub, sub_rounded<bfloat>::op, bfloat)
METALX_FOR_INTS(METALX_BINARY_KERNELS, sub, sub_op)
METALX_FOR_ALL(METALX_BINARY_KERNELS, mul, mul_op)
// A half or bfloat tensor times one value: CPU keeps that value in float (the _vm
// variants), as it does for the divisors of the three divisions below.
METALX_FOR_REDUCED_FLOATS(METALX_BINARY_VM_KERNELS, mul, mul_op)

template <typename M> struct div_true_op : elementwise_fn {
  METAL_FUNC M operator()(M a, M b) const { return a / b; }
};
METALX_FOR_FLOATS(METALX_BINARY_KERNELS, div_true, div_true_op)
METALX_FOR_REDUCED_FLOATS(METALX_BINARY_VM_KERNELS, div_true, div_true_op)

// Rounding division: C's truncating division for integers.
template <typename M> struct div_trunc_op : elementwise_fn {
  METAL_FUNC M operator()(M a, M b) const { return a / b; }
};
template <> struct div_trunc_op<float> : elementwise_fn {
  METAL_FUNC float operator()(float a, float b) const { return trunc(a / b); }
};

// Floor division. For floats it is computed from fmod, so that the quotient of exactly
// representable operands is exact (CPU PyTorch's, and Python's, definition).
template <typename M> struct div_floor_op : elementwise_fn {
  METAL_FUNC M operator()(M a, M b) const {
    const M q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? M(q - 1) : q;
  }
};
template <> struct div_floor_op<float> : elementwise_fn {
  METAL_FUNC float operator()(float a, float b) const {
    if (b == 0.0f) return a / b;
    const float mod = fmod(a, b);
    float div = (a - mod) / b;
    if (mod != 0.0f && ((b < 0.0f) != (mod < 0.0f))) div -= 1.0f;
    if (div == 0.0f) return copysign(0.0f, a / b);
    float fl = floor(div);
    if (div - fl > 0.5f) fl += 1.0f;
    return fl;
  }
};
// half and bfloat: CPU truncates the quotient rounded to the storage type.
template <typename T> struct div_trunc_rounded {
  template <typename M> struct op : elementwise_fn {
    METAL_FUNC M operator()(M a, M b) const { return trunc(M(T(a / b))); }
  };
};
METALX_BINARY_KERNELS(div_trunc, div_trunc_op, float)
METALX_BINARY_KERNELS(div_trunc, div_trunc_rounded<half>::op, half)
METALX_BINARY_KERNELS(div_trunc, div_trunc_rounded<bfloat>::op, bfloat)
METALX_FOR_INTS(METALX_BINARY_KERNELS, div_trunc, div_trunc_op)
// By one value kept in float, CPU truncates the float quotient (no rounding to T first).
METALX_FOR_REDUCED_FLOATS(METALX_BINARY_VM_KERNELS, div_trunc, div_trunc_op)
// half and bfloat: CPU computes the floor division in the storage type, each step
// rounded to it.
template <typename T> struct div_floor_rounded {
  template <typename M> struct op : elementwise_fn {
    METAL_FUNC M operator()(M a, M b) const {
      if (b == 0.0f) return a / b;
      const M mod = M(T(fmod(a, b)));
      M div = M(T(M(T(a - mod)) / b));
      if (mod != 0.0f && ((b < 0.0f) != (mod < 0.0f))) div = M(T(div - 1.0f));
      if (div == 0.0f) return copysign(0.0f, a / b);
      M fl = floor(div);
      if (M(T(div - fl)) > 0.5f) fl = M(T(fl + 1.0f));
      return fl;
    }
  };
};
METALX_BINARY_KERNELS(div_floor, div_floor_op, float)
METALX_BINARY_KERNELS(div_floor, div_floor_rounded<half>::op, half)
METALX_BINARY_KERNELS(div_floor, div_floor_rounded<bfloat>::op, bfloat)
METALX_FOR_INTS(METALX_BINARY_KERNELS, div_floor, div_floor_op)
// By one value kept in float, CPU's floor division runs in float, rounded once.
METALX_FOR_REDUCED_FLOATS(METALX_BINARY_VM_KERNELS, div_floor, div_floor_op)

// remainder has the sign of the divisor (Python's %); fmod the sign of the dividend.
template <typename M> struct remainder_op : elementwise_fn {
  METAL_FUNC M operator()(M a, M b) const {
    const M r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? M(r + b) : r;
  }
};
template <> struct remainder_op<float> : elementwise_fn {
  METAL_FUNC float operator()(float a, float b) const {
    const float r = fmod(a, b);
    return (r != 0.0f && ((b < 0.0f) != (r < 0.0f))) ? r + b : r;
  }
};
template <typename M> struct fmod_op : elementwise_fn {
  METAL_FUNC M operator()(M a, M b) const { return a % b; }
};
template <> struct fmod_op<float> : elementwise_fn {
  METAL_FUNC float operator()(float a, float b) const { return fmod(a, b); }
};
METALX_FOR_NUMBERS(METALX_BINARY_KERNELS, remainder, remainder_op)
METALX_FOR_NUMBERS(METALX_BINARY_KERNELS, fmod, fmod_op)

// Integer powers by squaring; a negative exponent gives 0 except for bases 1 and -1
// (CPU PyTorch's rule).
template <typename M> inline M metalx_ipow(M base, M exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == M(-1)) return (exp & 1) ? M(-1) : M(1);
    return 0;
  }
  M result = 1;
  while (exp) {
    if (exp & 1) result = M(result * base);
    exp = M(exp >> 1);
    base = M(base * base);
  }
  return result;
}
template <typename M> struct pow_op : elementwise_fn {
  METAL_FUNC M operator()(M a, M b) const { return metalx_ipow(a, b); }
};
template <> struct pow_op<float> : elementwise_fn {
  METAL_FUNC float operator()(float a, float b) const { return pow(a, b); }
};
METALX_FOR_NUMBERS(METALX_BINARY_KERNELS, pow, pow_op)

template <typename M> struct atan2_op : elementwise_fn {
  METAL_FUNC M operator()(M a, M b) const { return atan2(a, b); }
};
METALX_FOR_FLOATS(METALX_BINARY_KERNELS, atan2, atan2_op)

// hypot correctly rounded in float, as CPU's (glibc's hypotf, Sleef's u05): a half or
// bfloat result is that float rounded again, so a float off by one ulp next to a
// rounding boundary of T rounds the other way (hi * sqrt(1 + (lo/hi)^2) is off by a
// few). hi^2 + lo^2 is kept exactly as a float pair (fma for the products' low parts,
// a two-sum for the sum), its square root corrected by one Newton step on the pair.
// Operands are scaled by an exact power of two where the squares would overflow or
// lose bits to underflow; inf wins over NaN.
template <typename M> struct hypot_op : elementwise_fn {
  METAL_FUNC M operator()(M a, M b) const {
    a = fabs(a);
    b = fabs(b);
    if (isinf(a) || isinf(b)) return INFINITY;
    if (isnan(a) || isnan(b)) return NAN;
    M hi = max(a, b), lo = min(a, b);
    if (hi == 0.0f) return 0.0f;
    M scale = 1.0f;
    if (hi > 1152921504606846976.0f) {  // 2^60: down by 2^70
      scale = 1180591620717411303424.0f;
      hi *= 8.470329472543003e-22f;
      lo *= 8.470329472543003e-22f;
    } else if (hi < 8.673617379884035e-19f) {  // 2^-60 (subnormals too): up by 2^100
      scale = 7.888609052210118e-31f;
      hi *= 1267650600228229401496703205376.0f;
      lo *= 1267650600228229401496703205376.0f;
    }
    const M p = hi * hi, p_low = fma(hi, hi, -p);
    const M q = lo * lo, q_low = fma(lo, lo, -q);
    const M s = p + q, q_part = s - p;
    const M s_low = (p - (s - q_part)) + (q - q_part) + p_low + q_low;
    const M r = sqrt(s);
    const M residual = fma(-r, r, s) + s_low;  // (s + s_low) - r^2
    return scale * (r + residual / (2.0f * r));
  }
};
METALX_FOR_FLOATS(METALX_BINARY_KERNELS, hypot, hypot_op)

template <typename M> struct copysign_op : elementwise_fn {
  METAL_FUNC M operator()(M a, M b) const { return copysign(a, b); }
};
METALX_FOR_FLOATS(METALX_BINARY_KERNELS, copysign, copysign_op)

// xlogy: 0 where x is 0 (unless y is NaN). T is the storage type: CPU's half/bfloat16
// kernel is scalar code whose log returns the dtype, so log(y) is rounded to T before
// the product (computing it in float leaves results an ulp off CPU's).
template <typename T> struct xlogy_rounded {
  template <typename M> struct op : elementwise_fn {
    METAL_FUNC M operator()(M x, M y) const {
      if (isnan(y)) return NAN;
      if (x == 0.0f) return 0.0f;
      return x * M(T(log(y)));
    }
  };
};
METALX_BINARY_KERNELS(xlogy, xlogy_rounded<float>::op, float)
METALX_BINARY_KERNELS(xlogy, xlogy_rounded<half>::op, half)
METALX_BINARY_KERNELS(xlogy, xlogy_rounded<bfloat>::op, bfloat)

// maximum/minimum propagate NaN; fmax/fmin ignore it.
template <typename M> struct maximum_op : elementwise_fn {
  METAL_FUNC M operator()(M a, M b) const {
    if (is_float_math<M>() && (a != a || b != b)) return a != a ? a : b;
    return a > b ? a : b;
  }
};
template <typename M> struct minimum_op : elementwise_fn {
  METAL_FUNC M operator()(M a, M b) const {
    if (is_float_math<M>() && (a != a || b != b)) return a != a ? a : b;
    return a < b ? a : b;
  }
};
template <typename M> struct fmax_op : elementwise_fn {
  METAL_FUNC M operator()(M a, M b) const {
    if (a != a) return b;
    if (b != b) return a;
    return a > b ? a : b;
  }
};
template <typename M> struct fmin_op : elementwise_fn {
  METAL_FUNC M operator()(M a, M b) const {
    if (a != a) return b;
    if (b != b) return a;
    return a < b ? a : b;
  }
};
METALX_FOR_ALL(METALX_BINARY_KERNELS, maximum, maximum_op)
METALX_FOR_ALL(METALX_BINARY_KERNELS, minimum, minimum_op)
METALX_FOR_NUMBERS(METALX_BINARY_KERNELS, fmax, fmax_op)
METALX_FOR_NUMBERS(METALX_BINARY_KERNELS, fmin, fmin_op)

// ---- comparisons and logical ops (bool results) ----

#define METALX_PREDICATE(NAME, EXPR)                       \
  template <typename M> struct NAME##_op : predicate_fn { \
    METAL_FUNC bool operator()(M a, M b) const { return EXPR; }      \
  };                                                       \
  METALX_FOR_ALL(METALX_BINARY_KERNELS, NAME, NAME##_op)

METALX_PREDICATE(eq, a == b)
METALX_PREDICATE(ne, a != b)
METALX_PREDICATE(lt, a < b)
METALX_PREDICATE(le, a <= b)
METALX_PREDICATE(gt, a > b)
METALX_PREDICATE(ge, a >= b)
METALX_PREDICATE(logical_and, bool(a) && bool(b))
METALX_PREDICATE(logical_or, bool(a) || bool(b))
METALX_PREDICATE(logical_xor, bool(a) != bool(b))

// ---- bitwise (integers and bool) ----

#define METALX_BITWISE(NAME, EXPR)                           \
  template <typename M> struct NAME##_op : elementwise_fn { \
    METAL_FUNC M operator()(M a, M b) const { return EXPR; }           \
  };                                                         \
  METALX_FOR_INTS(METALX_BINARY_KERNELS, NAME, NAME##_op)   \
  METALX_BINARY_KERNELS(NAME, NAME##_op, bool)

METALX_BITWISE(bitwise_and, a & b)
METALX_BITWISE(bitwise_or, a | b)
METALX_BITWISE(bitwise_xor, a ^ b)

// Shifts as CPU PyTorch: the left shift works on the unsigned pattern; shifting by a
// negative amount or by the width or more gives 0 (left) or the sign fill (right).
template <typename M> struct unsigned_of { typedef M type; };
template <> struct unsigned_of<long> { typedef ulong type; };
template <> struct unsigned_of<int> { typedef uint type; };
template <> struct unsigned_of<short> { typedef ushort type; };
template <> struct unsigned_of<char> { typedef uchar type; };

template <typename M> struct lshift_op : elementwise_fn {
  METAL_FUNC M operator()(M a, M b) const {
    typedef typename unsigned_of<M>::type U;
    const M width = M(sizeof(M) * 8);
    if (b < 0 || b >= width) return 0;
    return M(U(a) << U(b));
  }
};
template <typename M> struct rshift_op : elementwise_fn {
  METAL_FUNC M operator()(M a, M b) const {
    const M width = M(sizeof(M) * 8);
    if (b < 0 || b >= width) return a < 0 ? M(-1) : M(0);
    return M(a >> b);
  }
};
METALX_FOR_INTS(METALX_BINARY_KERNELS, lshift, lshift_op)
METALX_FOR_INTS(METALX_BINARY_KERNELS, rshift, rshift_op)
