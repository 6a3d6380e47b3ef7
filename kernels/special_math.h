// Float functions MSL's standard library lacks (expm1, log1p, erf, erfc, erfinv,
// lgamma, digamma), written for float32 accuracy close to CPU PyTorch's.
#pragma once
#include <metal_stdlib>
using namespace metal;

#define METALX_PI_F 3.14159265358979323846f

// exp(x) - 1 without the cancellation near 0: (u - 1) * x / log(u) recovers the rounding
// error of u = exp(x) (Kahan's method). The ratio x / log(u) (close to 1) is formed
// first: (u - 1) * x overflows float for x past ~83.8 while the result is finite to 88.7.
inline float metalx_expm1(float x) {
  const float u = exp(x);
  if (u == 1.0f) return x;
  const float um1 = u - 1.0f;
  if (um1 == -1.0f) return -1.0f;
  if (isinf(u)) return u;
  return um1 * (x / log(u));
}

// log(1 + x), the same way round (x / (u - 1) first, as log(u) * x overflows for huge x).
inline float metalx_log1p(float x) {
  const float u = 1.0f + x;
  if (u == 1.0f) return x;
  if (u == INFINITY) return u;
  return log(u) * (x / (u - 1.0f));
}

// erfc for x >= 0 from the rational-exponential approximation with relative error below
// 1.2e-7 (Numerical Recipes' erfcc).
METAL_FUNC float metalx_erfc_nonneg(float z) {
  const float t = 1.0f / (1.0f + 0.5f * z);
  const float p =
      -z * z - 1.26551223f +
      t * (1.00002368f +
           t * (0.37409196f +
                t * (0.09678418f +
                     t * (-0.18628806f +
                          t * (0.27886807f +
                               t * (-1.13520398f + t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f))))))));
  return t * exp(p);
}

// Both branches are computed and one is selected, with no loop or early return: on a
// GPU the SIMD group never diverges, and the simulator's compiler vectorises it.
// METAL_FUNC (always inline), as metalx_erfc_nonneg: a call left in an element loop
// keeps the loop scalar, and GCC stops inlining in the big kernel files.
METAL_FUNC float metalx_erf(float x) {
  const float z = fabs(x);
  // |x| < 0.5: the Maclaurin series 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1)), whose
  // first nine terms are exact to float precision there, as a polynomial in x^2.
  const float x2 = x * x;
  const float series =
      x * (1.1283791670955126f +
           x2 * (-0.37612638903183754f +
                 x2 * (0.11283791670955126f +
                       x2 * (-0.026866170645131252f +
                             x2 * (0.005223977625442188f +
                                   x2 * (-0.0008548327023450852f +
                                         x2 * (0.00012055332981789664f +
                                               x2 * (-1.492565035840625e-05f + x2 * 1.6462114365889246e-06f))))))));
  // Elsewhere 1 - erfc(|x|) with x's sign (NaN stays NaN: z < 0.5 is false for it).
  const float tail = copysign(1.0f - metalx_erfc_nonneg(z), x);
  return z < 0.5f ? series : tail;
}

inline float metalx_erfc(float x) {
  if (isnan(x)) return x;
  if (fabs(x) < 0.5f) return 1.0f - metalx_erf(x);
  return x < 0.0f ? 2.0f - metalx_erfc_nonneg(-x) : metalx_erfc_nonneg(x);
}

// Inverse of erf: Winitzki's closed-form estimate, then Newton steps on erf.
inline float metalx_erfinv(float y) {
  if (isnan(y) || y < -1.0f || y > 1.0f) return NAN;
  if (y == 1.0f) return INFINITY;
  if (y == -1.0f) return -INFINITY;
  if (y == 0.0f) return y;
  const float a = 0.147f;
  const float l = log((1.0f - y) * (1.0f + y));
  const float b = 2.0f / (METALX_PI_F * a) + 0.5f * l;
  float x = sqrt(sqrt(b * b - l / a) - b);
  x = y < 0.0f ? -x : x;
  for (int i = 0; i < 3; ++i) {
    const float e = metalx_erf(x) - y;
    x -= e / (1.1283791670955126f * exp(-x * x));
  }
  return x;
}

// log|Gamma(x)| for x >= 0.5: Lanczos' series (g = 7, 9 terms).
inline float metalx_lgamma_positive(float x) {
  const float c[9] = {0.99999999999980993f, 676.5203681218851f,   -1259.1392167224028f,
                      771.32342877765313f,  -176.61502916214059f, 12.507343278686905f,
                      -0.13857109526572012f, 9.9843695780195716e-6f, 1.5056327351493116e-7f};
  const float z = x - 1.0f;
  float sum = c[0];
  for (int i = 1; i < 9; ++i) sum += c[i] / (z + float(i));
  const float t = z + 7.5f;
  return 0.91893853320467274f + (z + 0.5f) * log(t) - t + log(sum);
}

// The reflection formulas' sin(pi x) and tan(pi x) have period 1 (up to sign), so they
// take x - rint(x) in [-0.5, 0.5], which is exact in float: multiplying x itself by pi
// loses the fraction's low bits for large |x| (at x = -22.0000x, lgamma was 0.09 off).
inline float metalx_frac_nearest(float x) { return x - rint(x); }

// log|Gamma(x)|; below 0.5 through the reflection formula (MSL has no recursion);
// poles (0, -1, -2, ...) give +inf as in C.
inline float metalx_lgamma(float x) {
  if (isnan(x)) return x;
  if (isinf(x)) return INFINITY;
  if (x <= 0.0f && floor(x) == x) return INFINITY;
  if (x >= 0.5f) return metalx_lgamma_positive(x);
  const float s = sin(METALX_PI_F * metalx_frac_nearest(x));
  return log(METALX_PI_F / fabs(s)) - metalx_lgamma_positive(1.0f - x);
}

// The logarithmic derivative of Gamma for x > 0: recurrence up to x >= 6, then the
// asymptotic series.
inline float metalx_digamma_positive(float x) {
  float acc = 0.0f;
  while (x < 6.0f) {
    acc -= 1.0f / x;
    x += 1.0f;
  }
  const float r = 1.0f / (x * x);
  const float series =
      r * (1.0f / 12.0f - r * (1.0f / 120.0f - r * (1.0f / 252.0f - r * (1.0f / 240.0f - r * (1.0f / 132.0f)))));
  return acc + log(x) - 0.5f / x - series;
}

// digamma; negative x through the reflection formula. At 0 it is -inf with 0's sign
// flipped (CPU's convention), at negative integers NaN.
inline float metalx_digamma(float x) {
  if (isnan(x)) return x;
  if (x == 0.0f) return signbit(x) ? INFINITY : -INFINITY;
  if (x > 0.0f) return metalx_digamma_positive(x);
  if (floor(x) == x) return NAN;
  return metalx_digamma_positive(1.0f - x) - METALX_PI_F / tan(METALX_PI_F * metalx_frac_nearest(x));
}
