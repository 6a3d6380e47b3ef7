// float64 in kernels: Metal has no double, so a float64 element is its IEEE binary64
// bits, and what kernels compute on it is integer arithmetic, rounded exactly as the
// CPU's double arithmetic rounds (bit-identical results). copy.metal converts between
// float64 and the other dtypes; the few float64 compute ops live with their families.
#pragma once
#include <metal_stdlib>
using namespace metal;

#define F64_SIGN 0x8000000000000000UL
#define F64_FRAC_MASK 0x000FFFFFFFFFFFFFUL
#define F64_IMPLICIT 0x0010000000000000UL  // 2^52, the implicit leading one

// Leading zeros of a 64-bit value, from 32-bit clz (portable across MSL versions).
inline uint clz64(ulong x) {
  uint hi = uint(x >> 32);
  return hi != 0 ? clz(hi) : 32u + clz(uint(x));
}

// Rounds `mag >> shift` to nearest, ties to even (0 < shift < 64).
inline ulong shift_round_even(ulong mag, uint shift) {
  ulong kept = mag >> shift;
  ulong rest = mag & ((ulong(1) << shift) - 1);
  ulong half_way = ulong(1) << (shift - 1);
  if (rest > half_way || (rest == half_way && (kept & 1) != 0)) kept += 1;
  return kept;
}

// A float64 element as the elementwise kernels see it (kernels/elementwise.h): a
// distinct type, so no float arithmetic applies to its bits by accident.
struct float64 {
  ulong bits;
};

// 1 / x for float64 bits, correctly rounded (nearest, ties to even) as the CPU's
// division: specials as IEEE 754 says (1/±0 = ±inf, 1/±inf = ±0, NaN stays NaN,
// quieted), subnormal inputs and results, and overflow to inf (1 / tiny subnormals).
inline ulong f64_reciprocal(ulong b) {
  const ulong sign = b & F64_SIGN;
  const uint e = uint(b >> 52) & 0x7FFu;
  ulong m = b & F64_FRAC_MASK;
  if (e == 0x7FFu) return m != 0 ? (b | 0x0008000000000000UL) : sign;  // NaN, or 1/inf = 0
  if (e == 0 && m == 0) return sign | 0x7FF0000000000000UL;             // 1/0 = inf
  // x = m * 2^(p - 52) with m in [2^52, 2^53): normalise subnormals.
  int p = int(e) - 1023;
  if (e == 0) {
    const uint shift = clz64(m) - 11u;  // brings the top bit to bit 52
    m <<= shift;
    p = -1022 - int(shift);
  } else {
    m |= F64_IMPLICIT;
  }
  // q = floor(2^107 / m), in (2^54, 2^55] (2^55 only for m = 2^52), by long division:
  // 108 steps of one bit; the remainder stays below m < 2^53, so nothing overflows.
  ulong q = 0, r = 0;
  for (int i = 107; i >= 0; --i) {
    r = (r << 1) | (i == 107 ? 1UL : 0UL);
    q <<= 1;
    if (r >= m) {
      r -= m;
      q |= 1;
    }
  }
  const bool inexact_tail = r != 0;
  // 1/x = q' * 2^(-55 - p) with q' = 2^107 / m. Keep 53 bits: drop `drop` low bits of q.
  uint drop = q >> 55 != 0 ? 3u : 2u;
  int biased = int(drop) - 3 - p + 1023;  // exponent field of the result if normal
  if (biased >= 0x7FF) return sign | 0x7FF0000000000000UL;
  if (biased <= 0) {
    // Subnormal: drop 1 - biased more bits; the exponent field is 0 (and a carry out of
    // the rounding lands in it, giving the smallest normal, as it must).
    drop += uint(1 - biased);
    biased = 0;
    if (drop > 60) return sign;  // q < 2^56 is below half of 2^drop: rounds to 0
  }
  ulong kept = q >> drop;
  const ulong rest = q & ((1UL << drop) - 1);
  const ulong half_way = 1UL << (drop - 1);
  if (rest > half_way || (rest == half_way && (inexact_tail || (kept & 1) != 0))) kept += 1;
  // kept includes the implicit bit for normal results: adding it to (biased - 1) << 52
  // gives the exponent field `biased` (or biased + 1 after a carry, up to inf).
  const ulong field = biased > 0 ? ulong(biased - 1) << 52 : 0;
  return sign | (field + kept);
}
