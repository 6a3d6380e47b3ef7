// complex64 for the kernels: a float2 holding (real, imag), the layout of torch's
// c10::complex<float>. Arithmetic on float2 is componentwise, which is right for + and
// - and wrong for * and /: complex ops use the helpers below. The formulas follow the
// usual textbook ones; where a plain formula turns special values into NaN that CPU
// PyTorch does not (exp of a real infinity), the helper says so.
#pragma once
#include <metal_stdlib>
#include "special_math.h"  // metalx_log1p, for clog near the unit circle
using namespace metal;

typedef float2 complex64;

// a * b rounded to float, as a value no compiler fuses into the sum it feeds: with
// floating-point contraction on (GCC's default where the ISA has FMA, as in the
// simulator's x86-64-v3/v4 kernel builds) `a*b - c*d` becomes fma(a, b, -c*d). Adding
// +0 cannot be dropped (it turns -0 into +0), so the product goes through it (fused or
// not, still one rounding) and the subtraction sees no product to fuse.
inline float rounded_product(float a, float b) { return a * b + 0.0f; }

// Both products of each part rounded, then added: CPU's vectorised complex multiply
// over contiguous runs (AVX-512).
inline complex64 cmul(complex64 a, complex64 b) {
  return complex64(rounded_product(a.x, b.x) - rounded_product(a.y, b.y),
                   rounded_product(a.x, b.y) + rounded_product(a.y, b.x));
}
// One product of each part rounded, the other fused into the sum: CPU's loop over
// strided operands (c10::complex's operator*, which its compiler contracts). Where the
// two products nearly cancel (ad + bc of conjugate-like pairs) the two forms differ by
// far more than a rounding, so each access pattern uses CPU's.
inline complex64 cmul_fused(complex64 a, complex64 b) {
  return complex64(fma(a.x, b.x, -(a.y * b.y)), fma(a.x, b.y, a.y * b.x));
}

// Division by scaling with the larger part of the divisor (Smith's method), as
// c10::complex's operator/ does: no overflow of |b|^2 for large divisors, and a zero
// divisor gives the infinities or NaN of dividing each part by zero.
inline complex64 cdiv(complex64 a, complex64 b) {
  const float abs_c = fabs(b.x), abs_d = fabs(b.y);
  if (abs_c >= abs_d) {
    if (abs_c == 0.0f && abs_d == 0.0f) return complex64(a.x / abs_c, a.y / abs_d);
    const float rat = b.y / b.x;
    const float scl = 1.0f / (b.x + b.y * rat);
    return complex64((a.x + a.y * rat) * scl, (a.y - a.x * rat) * scl);
  }
  const float rat = b.x / b.y;
  const float scl = 1.0f / (b.y + b.x * rat);
  return complex64((a.x * rat + a.y) * scl, (a.y * rat - a.x) * scl);
}

// |z| without overflow or underflow of the squares; inf if either part is inf, even
// with a NaN in the other (C99's hypot).
inline float cabs(complex64 z) {
  const float a = fabs(z.x), b = fabs(z.y);
  if (isinf(a) || isinf(b)) return INFINITY;
  if (isnan(a) || isnan(b)) return NAN;
  const float m = max(a, b), n = min(a, b);
  if (m == 0.0f) return 0.0f;
  const float r = n / m;
  return m * sqrt(1.0f + r * r);
}

// C99's special cases, as CPU's std::exp gives them: a real input stays real (no
// inf * 0), and an infinite real part with a non-finite imaginary one gives (inf, nan)
// for +inf and a signed zero for -inf. A finite real part past e^x's float range
// (x > 88) whose result can still be finite (a tiny sin y or cos y) is scaled as CPU's
// cexpf scales it: e^x is applied as e^88 (once or twice) times the rest, multiplied
// into cos y and sin y first.
inline complex64 cexp(complex64 z) {
  const float limit = 88.0f;
  if (z.x > limit && isfinite(z.x) && isfinite(z.y) && z.y != 0.0f) {
    const float e_limit = exp(limit);
    float x = z.x - limit, s = sin(z.y) * e_limit, c = cos(z.y) * e_limit;
    if (x > limit) {
      x -= limit;
      s *= e_limit;
      c *= e_limit;
    }
    if (x > limit) return complex64(FLT_MAX * c, FLT_MAX * s);  // overflows as CPU's does
    const float e = exp(x);
    return complex64(e * c, e * s);
  }
  const float e = exp(z.x);
  if (z.y == 0.0f) return complex64(e, z.y);
  if (isinf(z.x) && !isfinite(z.y)) return z.x > 0.0f ? complex64(z.x, NAN) : complex64(0.0f, copysign(0.0f, z.y));
  return complex64(e * cos(z.y), e * sin(z.y));
}

// a + b as the rounded sum and its exact rounding error (Knuth's two-sum).
inline float2 two_sum(float a, float b) {
  const float s = a + b;
  const float bb = s - a;
  return float2(s, (a - (s - bb)) + (b - bb));
}
// log z. Near the unit circle log|z| = log1p(|z|^2 - 1) / 2 with |z|^2 - 1 formed from
// the exact squares (a product and its fma remainder) so that it does not cancel, as
// CPU's clogf does; elsewhere log|z| from the overflow-free |z|.
inline complex64 clog(complex64 z) {
  const float big = max(fabs(z.x), fabs(z.y)), small = min(fabs(z.x), fabs(z.y));
  const float b2 = rounded_product(big, big), s2 = rounded_product(small, small);
  float re;
  if (b2 + s2 >= 0.5f && b2 + s2 <= 2.0f && !isnan(z.x) && !isnan(z.y)) {  // max/min drop a NaN
    const float2 t = two_sum(b2, -1.0f);
    const float2 u = two_sum(t.x, s2);
    const float rest = t.y + u.y + fma(big, big, -b2) + fma(small, small, -s2);
    re = 0.5f * metalx_log1p(u.x + rest);
  } else {
    re = log(cabs(z));
  }
  return complex64(re, atan2(z.y, z.x));
}

// The principal root, computed from the larger of |re| and |z| so that neither
// cancels: t = sqrt((|re| + |z|) / 2), then the other part is im / (2t).
inline complex64 csqrt(complex64 z) {
  if (z.x == 0.0f && z.y == 0.0f) return complex64(0.0f, z.y);
  if (isinf(z.y)) return complex64(INFINITY, z.y);
  if (isnan(z.x)) return complex64(z.x, isinf(z.y) ? z.y : NAN);
  if (isinf(z.x)) {
    if (z.x > 0.0f) return complex64(z.x, isnan(z.y) ? z.y : copysign(0.0f, z.y));
    return complex64(isnan(z.y) ? z.y : 0.0f, copysign(INFINITY, z.y));
  }
  // Halve before adding, so that |re| + |z| near FLT_MAX does not overflow.
  const float t = sqrt(0.5f * fabs(z.x) + 0.5f * cabs(z));
  if (z.x >= 0.0f) return complex64(t, z.y / (2.0f * t));
  return complex64(fabs(z.y) / (2.0f * t), copysign(t, z.y));
}

inline complex64 csinh(complex64 z) { return complex64(sinh(z.x) * cos(z.y), cosh(z.x) * sin(z.y)); }
inline complex64 ccosh(complex64 z) { return complex64(cosh(z.x) * cos(z.y), sinh(z.x) * sin(z.y)); }

// sin and cos through their hyperbolic twins: sin z = -i sinh(iz), cos z = cosh(iz),
// with iz = (-im, re). (tan and tanh, whose C99 special cases for infinite and huge
// inputs these products do not match, are kernels/complex_math.metal's.)
inline complex64 times_i(complex64 z) { return complex64(-z.y, z.x); }
inline complex64 times_minus_i(complex64 z) { return complex64(z.y, -z.x); }
inline complex64 csin(complex64 z) { return times_minus_i(csinh(times_i(z))); }
inline complex64 ccos(complex64 z) { return ccosh(times_i(z)); }
