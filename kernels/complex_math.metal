// complex64 elementwise math: one functor per op over kernels/complex.h, instantiated
// once each with the kernel names of the real dtypes' ops ("<op>_<variant>_complex64"),
// so the ops' registrations (backend/ops/unary.cpp, binary.cpp) find them by dtype.
// Ops whose complex result is a real one (abs, angle) run as real kernels on the
// tensor's (real, imag) view instead and have no kernel here.
#include <metal_stdlib>
#include "complex.h"
#include "elementwise.h"
#include "special_math.h"
using namespace metal;

// The op's complex scalar k: the host lays complex scalars out as (f[2k], f[2k+1]).
inline complex64 complex_scalar(constant OpScalars& s, int k) { return complex64(s.f[2 * k], s.f[2 * k + 1]); }

// ---- binary ----

template <typename M> struct cadd_op : elementwise_fn {
  complex64 alpha;
  void load(constant OpScalars& k) { alpha = complex_scalar(k, 0); }
  complex64 operator()(complex64 a, complex64 b) const { return a + cmul(alpha, b); }
};
template <typename M> struct csub_op : elementwise_fn {
  complex64 alpha;
  void load(constant OpScalars& k) { alpha = complex_scalar(k, 0); }
  complex64 operator()(complex64 a, complex64 b) const { return a - cmul(alpha, b); }
};
template <typename M> struct cmul_op : elementwise_fn {
  complex64 operator()(complex64 a, complex64 b) const { return cmul(a, b); }
};
template <typename M> struct cmul_fused_op : elementwise_fn {
  complex64 operator()(complex64 a, complex64 b) const { return cmul_fused(a, b); }
};
template <typename M> struct cdiv_op : elementwise_fn {
  complex64 operator()(complex64 a, complex64 b) const { return cdiv(a, b); }
};
template <typename M> struct ceq_op : predicate_fn {
  bool operator()(complex64 a, complex64 b) const { return a.x == b.x && a.y == b.y; }
};
template <typename M> struct cne_op : predicate_fn {
  bool operator()(complex64 a, complex64 b) const { return a.x != b.x || a.y != b.y; }
};
METALX_BINARY_KERNELS(add, cadd_op, complex64)
METALX_BINARY_KERNELS(sub, csub_op, complex64)
// mul: the dense variants round as CPU's vectorised loop, the strided ones as its
// strided loop (complex.h): one instantiation per variant, as for the other ops.
template [[host_name("mul_dense_complex64")]] kernel decltype(binary_dense<cmul_op, complex64>)
    binary_dense<cmul_op, complex64>;
template [[host_name("mul_dense_sv_complex64")]] kernel decltype(binary_dense_sv<cmul_op, complex64>)
    binary_dense_sv<cmul_op, complex64>;
template [[host_name("mul_dense_vs_complex64")]] kernel decltype(binary_dense_vs<cmul_op, complex64>)
    binary_dense_vs<cmul_op, complex64>;
template [[host_name("mul_strided_complex64")]] kernel decltype(binary_strided<cmul_fused_op, complex64, uint>)
    binary_strided<cmul_fused_op, complex64, uint>;
template [[host_name("mul_strided64_complex64")]] kernel decltype(binary_strided<cmul_fused_op, complex64, ulong>)
    binary_strided<cmul_fused_op, complex64, ulong>;
METALX_BINARY_KERNELS(div_true, cdiv_op, complex64)
METALX_BINARY_KERNELS(eq, ceq_op, complex64)
METALX_BINARY_KERNELS(ne, cne_op, complex64)

// ---- pow ----

// a * b as C99's Annex G multiplies (libgcc's __mulsc3, which CPU's complex pow
// reaches): the plain products, and where both parts come out NaN although an operand
// or a product is infinite, the infinity recovered (inf * (1 + 0i) is inf, not NaN).
// A product as rounded_product, but a zero keeps its sign (-0 * 1 is -0, which the
// exponential turns into the sign of a zero imaginary part).
inline float signed_product(float a, float b) {
  const float p = rounded_product(a, b);
  return p == 0.0f ? (signbit(a) != signbit(b) ? -0.0f : 0.0f) : p;
}
inline complex64 cmul_c99(complex64 p, complex64 q) {
  float a = p.x, b = p.y, c = q.x, d = q.y;
  const float ac = signed_product(a, c), bd = signed_product(b, d);
  const float ad = signed_product(a, d), bc = signed_product(b, c);
  const complex64 plain = complex64(ac - bd, ad + bc);
  if (!isnan(plain.x) || !isnan(plain.y)) return plain;
  bool again = false;
  if (isinf(a) || isinf(b)) {
    a = copysign(isinf(a) ? 1.0f : 0.0f, a);
    b = copysign(isinf(b) ? 1.0f : 0.0f, b);
    if (isnan(c)) c = copysign(0.0f, c);
    if (isnan(d)) d = copysign(0.0f, d);
    again = true;
  }
  if (isinf(c) || isinf(d)) {
    c = copysign(isinf(c) ? 1.0f : 0.0f, c);
    d = copysign(isinf(d) ? 1.0f : 0.0f, d);
    if (isnan(a)) a = copysign(0.0f, a);
    if (isnan(b)) b = copysign(0.0f, b);
    again = true;
  }
  if (!again && (isinf(ac) || isinf(bd) || isinf(ad) || isinf(bc))) {
    if (isnan(a)) a = copysign(0.0f, a);
    if (isnan(b)) b = copysign(0.0f, b);
    if (isnan(c)) c = copysign(0.0f, c);
    if (isnan(d)) d = copysign(0.0f, d);
    again = true;
  }
  if (!again) return plain;
  return complex64(INFINITY * (a * c - b * d), INFINITY * (a * d + b * c));
}
// x ** y = exp(y log x), CPU's cpowf (0 ** 0 is NaN there, as here).
template <typename M> struct cpow_op : elementwise_fn {
  complex64 operator()(complex64 x, complex64 y) const { return cexp(cmul_c99(y, clog(x))); }
};
METALX_BINARY_KERNELS(pow, cpow_op, complex64)

// ---- unary ----

#define METALX_COMPLEX_UNARY(NAME, EXPR)                     \
  template <typename M> struct c##NAME##_op : elementwise_fn { \
    complex64 operator()(complex64 z) const { return EXPR; }   \
  };                                                           \
  METALX_UNARY_KERNELS(NAME, c##NAME##_op, complex64)

METALX_COMPLEX_UNARY(neg, -z)
METALX_COMPLEX_UNARY(conj_physical, complex64(z.x, -z.y))
METALX_COMPLEX_UNARY(exp, cexp(z))
METALX_COMPLEX_UNARY(log, clog(z))
METALX_COMPLEX_UNARY(sqrt, csqrt(z))
METALX_COMPLEX_UNARY(rsqrt, cdiv(complex64(1.0f, 0.0f), csqrt(z)))
METALX_COMPLEX_UNARY(reciprocal, cdiv(complex64(1.0f, 0.0f), z))
METALX_COMPLEX_UNARY(sin, csin(z))
METALX_COMPLEX_UNARY(cos, ccos(z))
METALX_COMPLEX_UNARY(sinh, csinh(z))
METALX_COMPLEX_UNARY(cosh, ccosh(z))
METALX_COMPLEX_UNARY(sigmoid, cdiv(complex64(1.0f, 0.0f), complex64(1.0f, 0.0f) + cexp(-z)))
// sgn: z / |z|, and 0 for 0. Named "sign" because sgn's registration shares sign's
// kernels for real dtypes (torch.sign itself refuses complex before any kernel runs).
METALX_COMPLEX_UNARY(sign, (z.x == 0.0f && z.y == 0.0f) ? complex64(0.0f, 0.0f) : z / cabs(z))

// ---- exponentials and logarithms CPU computes from exp and log ----

// CPU's vectorised exp2 scales both parts by ln 2 (a float constant) and takes exp.
METALX_COMPLEX_UNARY(exp2, cexp(z * 0.693147180559945309f))
// log2 and log10: log z with both parts divided by the float constant, as CPU's
// vectorised loop divides.
METALX_COMPLEX_UNARY(log2, clog(z) / 0.693147180559945309f)
METALX_COMPLEX_UNARY(log10, clog(z) / 2.302585092994045684f)

// expm1 without the cancellation of exp(z) - 1 near 0, as c10::complex's expm1 writes
// it: Re = expm1(x) cos y - 2 sin^2(y/2), Im = e^x sin y (so an infinite x with y = 0
// gives a NaN imaginary part there, as on CPU).
// Past |x| = 1, e^x - 1 does not cancel (and metalx_expm1's rescaling would overflow
// near float's limit).
inline complex64 cexpm1(complex64 z) {
  const float h = sin(z.y / 2.0f);
  const float em1 = fabs(z.x) < 1.0f ? metalx_expm1(z.x) : exp(z.x) - 1.0f;
  return complex64(em1 * cos(z.y) - 2.0f * h * h, exp(z.x) * sin(z.y));
}
METALX_COMPLEX_UNARY(expm1, cexpm1(z))

// log1p as c10::complex's CPU version: u = 1 + z; z itself where u rounds to 1, log u
// where u - 1 recovers z exactly, else log u rescaled by z / (u - 1), which restores the
// bits of z that 1 + z lost.
inline complex64 clog1p(complex64 z) {
  const complex64 u = complex64(z.x + 1.0f, z.y);
  if (u.x == 1.0f && u.y == 0.0f) return z;
  const complex64 log_u = clog(u);
  const complex64 um1 = complex64(u.x - 1.0f, u.y);
  if (um1.x == z.x && um1.y == z.y) return log_u;
  return cmul_fused(log_u, cdiv(z, um1));
}
METALX_COMPLEX_UNARY(log1p, clog1p(z))

// ---- tanh, tan ----

// tanh(x + iy) = (sinh x cosh x + i sin y cos y) / (sinh^2 x + cos^2 y), which neither
// cancels nor overflows for |x| <= 44; past that tanh is +-1 and the imaginary part
// 4 sin y cos y e^(-2|x|), scaled in two steps so that e^(2|x|) never overflows.
// Non-finite inputs take C99's special values, as CPU's ctanhf gives them.
inline complex64 ctanh(complex64 z) {
  const float x = z.x, y = z.y;
  if (!isfinite(x) || !isfinite(y)) {
    if (isinf(x)) {
      const float im = isfinite(y) && fabs(y) > 1.0f ? sin(y) * cos(y) : y;
      return complex64(copysign(1.0f, x), copysign(0.0f, im));
    }
    if (y == 0.0f) return z;
    return complex64(x == 0.0f ? x : NAN, NAN);
  }
  const float sin_y = fabs(y) > FLT_MIN ? sin(y) : y;
  const float cos_y = fabs(y) > FLT_MIN ? cos(y) : 1.0f;
  const float limit = 44.0f;
  if (fabs(x) > limit) {
    const float exp_2limit = exp(2.0f * limit);
    const float rest = fabs(x) - limit;
    float im = 4.0f * sin_y * cos_y / exp_2limit;
    im = rest > limit ? im / exp_2limit : im / exp(2.0f * rest);
    return complex64(copysign(1.0f, x), im);
  }
  const float sinh_x = fabs(x) > FLT_MIN ? sinh(x) : x;
  const float cosh_x = fabs(x) > FLT_MIN ? cosh(x) : 1.0f;
  const float den = fabs(sinh_x) > fabs(cos_y) * FLT_EPSILON ? sinh_x * sinh_x + cos_y * cos_y : cos_y * cos_y;
  return complex64(sinh_x * cosh_x / den, sin_y * cos_y / den);
}
// tan z = -i tanh(iz).
inline complex64 ctan(complex64 z) { return times_minus_i(ctanh(times_i(z))); }
METALX_COMPLEX_UNARY(tanh, ctanh(z))
METALX_COMPLEX_UNARY(tan, ctan(z))

// ---- inverse functions ----
// Finite inputs use Kahan's formulas ("Branch cuts for complex elementary functions"),
// built from square roots of 1 - z and 1 + z so that the branch cuts follow the signs of
// zero parts and nothing cancels near +-1; non-finite inputs take C99's special values
// (Annex G), which CPU's casinhf/cacosf/catanhf return.

constant float kHalfPi = 1.57079632679489662f;
constant float kQuarterPi = 0.785398163397448310f;

// asin of a finite z: Re = atan(x / Re(sqrt(1 - z) sqrt(1 + z))),
// Im = asinh(Im(conj(sqrt(1 - z)) sqrt(1 + z))).
inline complex64 casin_finite(complex64 z) {
  const complex64 a = csqrt(complex64(1.0f - z.x, -z.y));
  const complex64 b = csqrt(complex64(1.0f + z.x, z.y));
  return complex64(atan(z.x / (a.x * b.x - a.y * b.y)), asinh(a.x * b.y - a.y * b.x));
}

inline complex64 casinh(complex64 z) {
  const float x = z.x, y = z.y;
  if (isnan(x)) {
    if (y == 0.0f) return z;
    return complex64(isinf(y) ? INFINITY : NAN, NAN);
  }
  if (isinf(x)) {
    if (isnan(y)) return complex64(x, y);
    return complex64(x, isinf(y) ? copysign(kQuarterPi, y) : copysign(0.0f, y));
  }
  if (isinf(y)) return complex64(copysign(INFINITY, x), copysign(kHalfPi, y));
  if (isnan(y)) return complex64(NAN, NAN);
  // asinh z = -i asin(iz)
  return times_minus_i(casin_finite(times_i(z)));
}
// asin z = -i asinh(iz), special values included (C99 defines them so), but for an
// infinite real part with a NaN imaginary one: CPU gives the infinity the NaN's sign.
inline complex64 casin(complex64 z) {
  if (isinf(z.x) && isnan(z.y)) return complex64(NAN, copysign(INFINITY, z.y));
  return times_minus_i(casinh(times_i(z)));
}

// acos of a finite z: Re = 2 atan(Re sqrt(1 - z) / Re sqrt(1 + z)),
// Im = asinh(Im(conj(sqrt(1 + z)) sqrt(1 - z))).
inline complex64 cacos(complex64 z) {
  const float x = z.x, y = z.y;
  if (!isfinite(x) || !isfinite(y)) {
    if (isinf(x)) {
      if (isnan(y)) return complex64(NAN, -copysign(INFINITY, y));  // pi/2 - asin z
      if (isinf(y)) return complex64(x < 0.0f ? 3.0f * kQuarterPi : kQuarterPi, -y);
      return complex64(x < 0.0f ? METALX_PI_F : 0.0f, copysign(INFINITY, -y));
    }
    if (isinf(y)) return complex64(isnan(x) ? x : kHalfPi, -y);
    // a NaN and no infinity
    return complex64(x == 0.0f ? kHalfPi : NAN, NAN);
  }
  const complex64 a = csqrt(complex64(1.0f - x, -y));
  const complex64 b = csqrt(complex64(1.0f + x, y));
  return complex64(2.0f * atan(a.x / b.x), asinh(b.x * a.y - b.y * a.x));
}
// acosh z = +-i acos z, the sign that makes the real part >= 0: i for Im z >= +0.
inline complex64 cacosh(complex64 z) {
  const complex64 w = cacos(z);
  if (isnan(z.x) && isinf(z.y)) return complex64(INFINITY, w.x);
  if (isinf(z.x) && isnan(z.y)) return complex64(INFINITY, z.y);
  return signbit(z.y) ? times_minus_i(w) : times_i(w);
}

// atanh z = (log1p(z) - log1p(-z)) / 2: Re = log1p(4|x| / ((1 - |x|)^2 + y^2)) / 4 with
// x's sign, Im = atan2(2y, (1 - |x|)(1 + |x|) - y^2) / 2. Past 1e18 the squares would
// overflow; there atanh z = 1/z +- i pi/2 to float precision.
inline complex64 catanh(complex64 z) {
  const float x = z.x, y = z.y, ax = fabs(x), ay = fabs(y);
  if (isinf(x) || isinf(y)) return complex64(copysign(0.0f, x), isnan(y) ? y : copysign(kHalfPi, y));
  if (isnan(x) || isnan(y)) return complex64(x == 0.0f ? x : NAN, NAN);
  if (ax > 1e18f || ay > 1e18f) {
    const float r = cabs(z);
    return complex64((x / r) / r, copysign(kHalfPi, y));
  }
  const float one_minus = 1.0f - ax;
  // Near +-1 the squares underflow: there the log1p is a log, taken of the parts apart.
  const float near = cabs(complex64(one_minus, y));
  const float re = near < 1e-15f ? 0.25f * log(4.0f * ax) - 0.5f * log(near)
                                 : 0.25f * metalx_log1p(4.0f * ax / (one_minus * one_minus + y * y));
  return complex64(copysign(re, x), 0.5f * atan2(2.0f * y, one_minus * (1.0f + ax) - y * y));
}
// atan z = -i atanh(iz)
inline complex64 catan(complex64 z) { return times_minus_i(catanh(times_i(z))); }

METALX_COMPLEX_UNARY(asin, casin(z))
METALX_COMPLEX_UNARY(acos, cacos(z))
METALX_COMPLEX_UNARY(atan, catan(z))
METALX_COMPLEX_UNARY(asinh, casinh(z))
METALX_COMPLEX_UNARY(acosh, cacosh(z))
METALX_COMPLEX_UNARY(atanh, catanh(z))
