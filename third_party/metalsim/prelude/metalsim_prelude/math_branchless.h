// float exp, exp2, log, log2 and tanh as straight-line code (metal::detail::*_f; math.h
// maps MSL's functions to them).
//
// Why: libm's expf/logf/tanhf are calls with branches inside, so a kernel loop calling
// them never vectorises, while CPU PyTorch runs the same ops on vectorised (SLEEF) code.
// These use only multiplies, adds, integer shifts on the bits and selects, so the host
// compiler inlines them and vectorises the kernel loops around them (exp, sigmoid, gelu,
// silu, softplus, softmax, ...).
//
// Accuracy: within 1-2 ulp over the whole float range (tests/runtime/
// test_prelude_math.cpp measures it against double-precision libm), inside MSL's
// precise-mode bounds (exp/exp2/log/log2 4 ulp, tanh 5 ulp). Special values follow
// IEEE: exp(+inf) = inf, exp(-inf) = +0, log(0) = -inf, log(x < 0) = NaN, NaN in gives
// NaN out, tanh(-0) = -0; overflow gives inf, underflow goes through the subnormals.
// Written to be correct with and without FMA contraction (the x86-64-v3/v4 builds
// contract a*b+c into one fma, the baseline build does not).
//
// Polynomial coefficients: weighted least-squares fits on Chebyshev nodes of each
// function's reduced range, rounded to float (near-minimax; errors below 1e-8 relative).
//
// Always inlined (and so are math.h's scalar overloads that call them): vectorising a
// kernel loop needs every call in it inlined, and GCC's inliner stops inlining into a
// large translation unit once it has grown by --param inline-unit-growth (40%), which
// the big kernel files (activation.metal, unary.metal) reach: there exp_f stayed a
// call in elu, softplus, mish and strided loops, and in gelu once its formula changed.
#pragma once

#define METALSIM_MATH_INLINE inline __attribute__((__always_inline__))

namespace metal {
namespace detail {

METALSIM_MATH_INLINE float bits_as_float(uint32_t u) noexcept { return __builtin_bit_cast(float, u); }
METALSIM_MATH_INLINE uint32_t float_bits(float f) noexcept { return __builtin_bit_cast(uint32_t, f); }

// ln 2 split so that k * kLn2Hi is exact for |k| < 512 (kLn2Hi has 15 significant bits).
constexpr float kLn2Hi = 0x1.62e4p-1f;
constexpr float kLn2Lo = 0x1.7f7d1cp-20f;
constexpr float kLog2E = 0x1.715476p+0f;
// Adding 1.5 * 2^23 rounds a float of magnitude < 2^22 to an integer, which then sits
// in the low mantissa bits.
constexpr float kRoundShifter = 0x1.8p23f;

// exp(r) for |r| <= ln2 / 2: 1 + r + r^2 Q(r).
METALSIM_MATH_INLINE float exp_reduced(float r) noexcept {
  const float q =
      0.5f + r * (0.16666516661643982f +
                  r * (0.04166626185178757f + r * (0.008369151502847672f + r * 0.0013946446124464273f)));
  return 1.0f + (r + r * r * q);
}

// p * 2^k for p in [0.7, 1.5) and k in [-152, 130]: two normal power-of-two factors, so
// only the last multiply rounds (into the subnormals or to inf when it must).
METALSIM_MATH_INLINE float scale_by_pow2(float p, int32_t k) noexcept {
  const int32_t k1 = k >> 1;
  const int32_t k2 = k - k1;
  return p * bits_as_float(static_cast<uint32_t>(k1 + 127) << 23) *
         bits_as_float(static_cast<uint32_t>(k2 + 127) << 23);
}

// exp(x) = 2^k exp(r), k = round(x / ln2), r = x - k ln2 (Cody-Waite, two parts).
// Clamping x to [-104, 89] keeps k in scale_by_pow2's range; exp(-104) rounds to 0 and
// exp(89) overflows, as every x beyond them does. A NaN passes both comparisons.
METALSIM_MATH_INLINE float exp_f(float x) noexcept {
  x = x < -104.0f ? -104.0f : x;
  x = x > 89.0f ? 89.0f : x;
  const float t = x * kLog2E + kRoundShifter;
  const float k = t - kRoundShifter;
  const int32_t ki = static_cast<int32_t>(float_bits(t) - float_bits(kRoundShifter));
  const float r = (x - k * kLn2Hi) - k * kLn2Lo;
  return scale_by_pow2(exp_reduced(r), ki);
}

// 2^x = 2^k exp((x - k) ln 2); x - k is exact.
METALSIM_MATH_INLINE float exp2_f(float x) noexcept {
  x = x < -152.0f ? -152.0f : x;
  x = x > 129.0f ? 129.0f : x;
  const float t = x + kRoundShifter;
  const float k = t - kRoundShifter;
  const int32_t ki = static_cast<int32_t>(float_bits(t) - float_bits(kRoundShifter));
  const float f = x - k;
  return scale_by_pow2(exp_reduced(f * kLn2Hi + f * kLn2Lo), ki);
}

// For a positive finite x: x = 2^e (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)); returns f
// (exact) and e. Subnormals are scaled into the normals first.
METALSIM_MATH_INLINE float log_split(float x, float& e) noexcept {
  const bool subnormal = x < 0x1p-126f;
  const float xs = subnormal ? x * 0x1p23f : x;
  const uint32_t bits = float_bits(xs);
  const int32_t ei = static_cast<int32_t>(bits - float_bits(0x1.6a09e6p-1f)) >> 23;
  e = static_cast<float>(ei) - (subnormal ? 23.0f : 0.0f);
  return bits_as_float(bits - (static_cast<uint32_t>(ei) << 23)) - 1.0f;
}

// log(1 + f) - f + f^2 / 2 for f in [sqrt(1/2) - 1, sqrt(2) - 1], as f^3 Q(f).
METALSIM_MATH_INLINE float log1p_tail(float f) noexcept {
  const float q =
      0.3333331048488617f +
      f * (-0.25000014901161194f +
           f * (0.20002204179763794f +
                f * (-0.16667643189430237f +
                     f * (0.14217890799045563f +
                          f * (-0.12411268800497055f +
                               f * (0.1190471202135086f + f * (-0.11646434664726257f + f * 0.06675271689891815f)))))));
  return f * f * f * q;
}

// The IEEE results of log-family functions outside the positive finite numbers.
METALSIM_MATH_INLINE float log_special(float x, float r) noexcept {
  r = x == __builtin_inff() ? x : r;
  r = x == 0.0f ? -__builtin_inff() : r;
  r = x < 0.0f ? __builtin_nanf("") : r;
  return x != x ? x : r;
}

// log(x) = e ln2 + log(1 + f), the small parts summed first.
METALSIM_MATH_INLINE float log_f(float x) noexcept {
  float e;
  const float f = log_split(x, e);
  const float half_f2 = 0.5f * f * f;
  const float r = e * kLn2Hi + (f - (half_f2 - (log1p_tail(f) + e * kLn2Lo)));
  return log_special(x, r);
}

// log2(x) = e + log(1 + f) / ln 2 (exact e, so log2 of a power of two is exact).
METALSIM_MATH_INLINE float log2_f(float x) noexcept {
  float e;
  const float f = log_split(x, e);
  const float l = f - (0.5f * f * f - log1p_tail(f));
  return log_special(x, e + l * kLog2E);
}

// tanh(x): x itself below 2^-12 (keeps -0, whose cube term would add +0), an odd
// polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) with x's sign above (exp's overflow
// gives exactly 1 for large |x|; a NaN comes through the formula).
METALSIM_MATH_INLINE float tanh_f(float x) noexcept {
  const float x2 = x * x;
  const float p =
      -0.3333333134651184f +
      x2 * (0.13333211839199066f +
            x2 * (-0.05394745245575905f +
                  x2 * (0.021703999489545822f + x2 * (-0.008184662088751793f + x2 * 0.0021489840000867844f))));
  const float small = x + x * x2 * p;
  const uint32_t sign = float_bits(x) & 0x80000000u;
  const float a = bits_as_float(float_bits(x) ^ sign);
  const float big = 1.0f - 2.0f / (exp_f(2.0f * a) + 1.0f);
  const float r = a < 0.625f ? small : bits_as_float(float_bits(big) | sign);
  return a < 0x1p-12f ? x : r;
}

}  // namespace detail
}  // namespace metal
