// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"), the
// counter-based generator CUDA's and metalx's random ops draw from.
//
// A call maps (key, counter) to four independent 32-bit words with nothing but 32-bit
// multiplies (mulhi for the high half) and xors, which Apple GPUs do natively: no 64-bit
// multiply, no state in memory. The key is the generator's seed; the counter is the
// generator's offset (in groups of four words) plus the index of the group an element
// belongs to, so every number depends only on (seed, offset, element index) and never
// on how threads are scheduled or on which stream runs the kernel.
#pragma once
#include <metal_stdlib>
using namespace metal;

struct PhiloxKey {
  uint k0, k1;
};

inline uint4 philox_round(uint4 c, PhiloxKey k) {
  const uint m0 = 0xD2511F53u, m1 = 0xCD9E8D57u;
  const uint hi0 = mulhi(m0, c.x), lo0 = m0 * c.x;
  const uint hi1 = mulhi(m1, c.z), lo1 = m1 * c.z;
  return uint4(hi1 ^ c.y ^ k.k0, lo1, hi0 ^ c.w ^ k.k1, lo0);
}

// Four random words for counter (group, 0) under `key` (the 64-bit group index in the
// first two counter words).
inline uint4 philox4x32_10(PhiloxKey key, ulong group) {
  uint4 c = uint4(uint(group), uint(group >> 32), 0u, 0u);
  PhiloxKey k = key;
  for (int round = 0; round < 9; ++round) {
    c = philox_round(c, k);
    k.k0 += 0x9E3779B9u;
    k.k1 += 0xBB67AE85u;
  }
  return philox_round(c, k);
}

// A float uniform in [0, 1): the top 24 bits, exactly representable.
inline float philox_uniform(uint word) { return float(word >> 8) * (1.0f / 16777216.0f); }

// A float uniform in (0, 1): never 0 (logarithms), never 1.
inline float philox_uniform_open(uint word) { return (float(word >> 9) + 0.5f) * (1.0f / 8388608.0f); }
