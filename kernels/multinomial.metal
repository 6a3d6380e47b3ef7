// multinomial with replacement: each sample inverts its row's cumulative distribution.
// Host side: backend/ops/multinomial.cpp (without replacement it is a topk of p / Exp(1)
// draws, kernels/sort.metal).
//
// The host gives dense float rows of running sums (cdf, rows x n); sample i of the
// output (row-major, rows x samples) draws word i of the reserved Philox range, scales
// it by the row's total and takes the first category whose running sum exceeds it. A
// category of probability 0 never does (its running sum equals the one before it).
#include <metal_stdlib>
#include "philox.h"
using namespace metal;

struct MultinomialParams {
  ulong count;    // samples in all (rows x samples)
  ulong group0;   // generator offset, in groups of four words
  uint seed_lo, seed_hi;
  uint n;         // categories
  uint samples;   // per row
};

kernel void multinomial_draw_float(device const float* cdf [[buffer(0)]],
                                   device long* out [[buffer(1)]],
                                   constant MultinomialParams& p [[buffer(2)]],
                                   uint gid [[thread_position_in_grid]],
                                   uint threads [[threads_per_grid]]) {
  const PhiloxKey key = PhiloxKey{p.seed_lo, p.seed_hi};
  for (ulong g = gid; g * 4 < p.count; g += threads) {
    const uint4 words = philox4x32_10(key, p.group0 + g);
    const uint w4[4] = {words.x, words.y, words.z, words.w};
    for (uint j = 0; j < 4 && g * 4 + j < p.count; ++j) {
      const ulong i = g * 4 + j;
      const ulong row = i / p.samples;
      device const float* c = cdf + row * p.n;
      const float total = c[p.n - 1];
      const float target = philox_uniform(w4[j]) * total;
      uint lo = 0, hi = p.n;
      while (lo < hi) {  // first category with c > target
        const uint mid = (lo + hi) / 2;
        if (c[mid] > target) hi = mid;
        else lo = mid + 1;
      }
      if (lo == p.n) {  // target rounded up to the total: the last category with p > 0
        lo = 0;
        hi = p.n - 1;
        while (lo < hi) {
          const uint mid = (lo + hi) / 2;
          if (c[mid] >= total) hi = mid;
          else lo = mid + 1;
        }
      }
      out[i] = long(lo);
    }
  }
}
