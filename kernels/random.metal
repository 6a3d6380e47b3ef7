// Random distributions on the device from Philox4x32-10 (philox.h).
//
// Element i of a dense output draws from group i / 4 (i / 2 for 64-bit draws) of the
// counter range the host reserved from the generator; each thread walks groups with a
// grid stride. Results depend only on (seed, offset, i): the same on every run, stream
// and dispatch size. Host side: backend/ops/random.cpp.
#include <metal_stdlib>
#include "philox.h"
using namespace metal;

struct RandomParams {
  ulong count;   // elements
  ulong group0;  // the generator offset, in groups of four words
  ulong range;   // random_: values in [base, base + range); 0: all 2^64 values
  long base;
  uint seed_lo, seed_hi;
  float a, b;  // the distribution's parameters (from/to, mean/std, lambda, p)
  uint wide;   // random_: 64 random bits per element
  uint unused;
};

inline PhiloxKey key_of(constant RandomParams& p) { return PhiloxKey{p.seed_lo, p.seed_hi}; }

// Calls f(i, w) for each element i of this thread with its random word w.
#define METALX_FOR_EACH_WORD(p, BODY)                                     \
  for (ulong g = gid; g * 4 < p.count; g += threads) {                   \
    const uint4 words = philox4x32_10(key_of(p), p.group0 + g);          \
    const uint w4[4] = {words.x, words.y, words.z, words.w};             \
    const ulong first = g * 4;                                           \
    const uint n = p.count - first < 4 ? uint(p.count - first) : 4u;     \
    for (uint j = 0; j < n; ++j) {                                       \
      const ulong i = first + j;                                         \
      const uint w = w4[j];                                              \
      BODY;                                                              \
    }                                                                    \
  }

// A random_ or bernoulli_ value as T: through float for the floating types (their ranges fit in it).
template <typename T> inline T from_long(long v) { return T(v); }
template <> inline float from_long<float>(long v) { return float(v); }
template <> inline half from_long<half>(long v) { return half(float(v)); }
template <> inline bfloat from_long<bfloat>(long v) { return bfloat(float(v)); }

// uniform_(from=a, to=b): [a, b). A value that rounds up to b in a narrow type becomes a.
template <typename T>
kernel void random_uniform(device T* out [[buffer(0)]], constant RandomParams& p [[buffer(1)]],
                           uint gid [[thread_position_in_grid]], uint threads [[threads_per_grid]]) {
  const float span = p.b - p.a;
  METALX_FOR_EACH_WORD(p, {
    T v = T(p.a + span * philox_uniform(w));
    if (float(v) >= p.b && p.b > p.a) v = T(p.a);
    out[i] = v;
  })
}

// normal_(mean=a, std=b): Box-Muller on the pairs (w0, w1) and (w2, w3) of a group.
template <typename T>
kernel void random_normal(device T* out [[buffer(0)]], constant RandomParams& p [[buffer(1)]],
                          uint gid [[thread_position_in_grid]], uint threads [[threads_per_grid]]) {
  for (ulong g = gid; g * 4 < p.count; g += threads) {
    const uint4 w = philox4x32_10(key_of(p), p.group0 + g);
    const float r0 = sqrt(-2.0f * log(philox_uniform_open(w.x)));
    const float t0 = 6.2831853071795864f * philox_uniform(w.y);
    const float r1 = sqrt(-2.0f * log(philox_uniform_open(w.z)));
    const float t1 = 6.2831853071795864f * philox_uniform(w.w);
    const float z[4] = {r0 * cos(t0), r0 * sin(t0), r1 * cos(t1), r1 * sin(t1)};
    const ulong first = g * 4;
    const uint n = p.count - first < 4 ? uint(p.count - first) : 4u;
    for (uint j = 0; j < n; ++j) out[first + j] = T(p.a + p.b * z[j]);
  }
}

// exponential_(lambda=a): -log(u) / lambda with u in (0, 1), so never 0 and finite.
template <typename T>
kernel void random_exponential(device T* out [[buffer(0)]], constant RandomParams& p [[buffer(1)]],
                               uint gid [[thread_position_in_grid]], uint threads [[threads_per_grid]]) {
  METALX_FOR_EACH_WORD(p, {
    T v = T(-log(philox_uniform_open(w)) / p.a);
    out[i] = v;
  })
}

// bernoulli_(p=a): 1 where u < p (p = 0: never, p = 1: always).
template <typename T>
kernel void random_bernoulli(device T* out [[buffer(0)]], constant RandomParams& p [[buffer(1)]],
                             uint gid [[thread_position_in_grid]], uint threads [[threads_per_grid]]) {
  METALX_FOR_EACH_WORD(p, { out[i] = from_long<T>(philox_uniform(w) < p.a ? 1 : 0); })
}

// bernoulli_(p tensor): probs holds one float per element of out.
template <typename T>
kernel void random_bernoulli_tensor(device T* out [[buffer(0)]], device const float* probs [[buffer(1)]],
                                    constant RandomParams& p [[buffer(2)]],
                                    uint gid [[thread_position_in_grid]], uint threads [[threads_per_grid]]) {
  METALX_FOR_EACH_WORD(p, { out[i] = from_long<T>(philox_uniform(w) < probs[i] ? 1 : 0); })
}

// random_(from, to): base + (bits mod range), with 32 random bits per element when the
// range fits in 32 bits, else 64 (two words, so a group covers two elements).
template <typename T>
kernel void random_range(device T* out [[buffer(0)]], constant RandomParams& p [[buffer(1)]],
                         uint gid [[thread_position_in_grid]], uint threads [[threads_per_grid]]) {
  if (p.wide == 0) {
    const uint range = uint(p.range);
    METALX_FOR_EACH_WORD(p, { out[i] = from_long<T>(p.base + long(w % range)); })
    return;
  }
  for (ulong g = gid; g * 2 < p.count; g += threads) {
    const uint4 w = philox4x32_10(key_of(p), p.group0 + g);
    const ulong bits[2] = {ulong(w.x) | (ulong(w.y) << 32), ulong(w.z) | (ulong(w.w) << 32)};
    const ulong first = g * 2;
    const uint n = p.count - first < 2 ? uint(p.count - first) : 2u;
    for (uint j = 0; j < n; ++j) {
      const ulong r = p.range == 0 ? bits[j] : bits[j] % p.range;
      out[first + j] = from_long<T>(long(ulong(p.base) + r));
    }
  }
}

// native_dropout: keeps an element with probability 1 - p (u >= p, p = a) scaled by
// b = 1 / (1 - p); mask records which were kept.
template <typename T>
kernel void random_dropout(device T* out [[buffer(0)]], device const T* x [[buffer(1)]],
                           device bool* mask [[buffer(2)]], constant RandomParams& p [[buffer(3)]],
                           uint gid [[thread_position_in_grid]], uint threads [[threads_per_grid]]) {
  METALX_FOR_EACH_WORD(p, {
    const bool keep = philox_uniform(w) >= p.a;
    mask[i] = keep;
    out[i] = T(float(x[i]) * (keep ? p.b : 0.0f));  // x * mask * scale, as CPU: -0 and NaN kept
  })
}

#define METALX_RANDOM_FLOAT(NAME, T) \
  template [[host_name(#NAME "_" #T)]] kernel decltype(NAME<T>) NAME<T>;
#define METALX_RANDOM_FLOATS(NAME) \
  METALX_RANDOM_FLOAT(NAME, float) METALX_RANDOM_FLOAT(NAME, half) METALX_RANDOM_FLOAT(NAME, bfloat)
#define METALX_RANDOM_ALL(NAME)                                                                 \
  METALX_RANDOM_FLOATS(NAME) METALX_RANDOM_FLOAT(NAME, long) METALX_RANDOM_FLOAT(NAME, int)     \
  METALX_RANDOM_FLOAT(NAME, short) METALX_RANDOM_FLOAT(NAME, char) METALX_RANDOM_FLOAT(NAME, uchar) \
  METALX_RANDOM_FLOAT(NAME, bool)

METALX_RANDOM_FLOATS(random_uniform)
METALX_RANDOM_FLOATS(random_normal)
METALX_RANDOM_FLOATS(random_exponential)
METALX_RANDOM_FLOATS(random_dropout)
METALX_RANDOM_ALL(random_bernoulli)
METALX_RANDOM_ALL(random_bernoulli_tensor)
METALX_RANDOM_ALL(random_range)
