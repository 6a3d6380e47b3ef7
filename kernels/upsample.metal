// Upsampling (interpolate), forward and backward: nearest, nearest-exact and (bi)linear
// over the last one or two dims. Host side: backend/ops/upsample.cpp.
//
// Every tensor is addressed through its own (n, c, h, w) strides (a 1-d op is a 2-d one
// with h of size 1), so contiguous and channels_last tensors are read and written in
// place. The forward takes a thread per output element. The backward takes a thread per
// input element and gathers the gradients of the outputs that sampled it: the source
// index of an output never decreases along a dim, so the outputs reaching input i are
// one run per dim, found by binary search. No atomics; deterministic.
// Source indices follow CPU's formulas in float (UpSample.h): nearest floor(o * scale),
// nearest-exact floor((o + 0.5) * scale), linear scale * (o + 0.5) - 0.5 clamped at 0
// (or scale * o with align_corners); a dim whose size does not change is an identity.
#include <metal_stdlib>
using namespace metal;

struct UpsampleShape {
  long batch, channels, in_h, in_w, out_h, out_w;
  long in_s[4];   // input / grad_input strides (n, c, h, w)
  long out_s[4];  // output / grad_output strides
  float scale_h, scale_w;  // source step per output index, computed on the host as CPU does
  uint mode;               // 0 nearest, 1 nearest-exact, 2 linear
  uint align_corners;
  uint round_weights;      // linear forward in half/bfloat: weights rounded to T first,
                           // as CPU's generic kernel stores them (the host decides when)
};

constant uint kNearest = 0;
constant uint kNearestExact = 1;

inline long4 unravel(ulong i, long channels, long h, long w) {
  const long x = long(i % ulong(w));
  i /= ulong(w);
  const long y = long(i % ulong(h));
  i /= ulong(h);
  const long c = long(i % ulong(channels));
  return long4(long(i / ulong(channels)), c, y, x);
}

inline long offset(const long4 p, constant long* s) { return p.x * s[0] + p.y * s[1] + p.z * s[2] + p.w * s[3]; }

// The input index output o reads (nearest modes).
inline long nearest_source(long o, long in, long out, float scale, uint mode) {
  if (out == in) return o;
  if (mode == kNearest) {
    if (out == 2 * in) return o >> 1;  // CPU's shortcut, whatever the scale
    return min(long(floor(float(o) * scale)), in - 1);
  }
  return min(long(floor((float(o) + 0.5f) * scale)), in - 1);
}

// The two input indices output o blends (linear) and their weights.
struct LinearTap {
  long i0, i1;
  float w0, w1;
};

inline LinearTap linear_source(long o, long in, long out, float scale, uint align_corners) {
  LinearTap t;
  if (out == in) {
    t.i0 = t.i1 = o;
    t.w0 = 1.0f, t.w1 = 0.0f;
    return t;
  }
  float real = align_corners ? scale * float(o) : scale * (float(o) + 0.5f) - 0.5f;
  if (!align_corners && real < 0.0f) real = 0.0f;
  t.i0 = min(long(floor(real)), in - 1);
  t.i1 = t.i0 + (t.i0 < in - 1 ? 1 : 0);
  t.w1 = min(max(real - float(t.i0), 0.0f), 1.0f);
  t.w0 = 1.0f - t.w1;
  return t;
}

// The lowest index of an input a dim's output o touches first (its first tap).
inline long first_tap(long o, long in, long out, float scale, uint mode, uint align_corners) {
  return mode == 2 ? linear_source(o, in, out, scale, align_corners).i0 : nearest_source(o, in, out, scale, mode);
}

// The first output whose first tap is >= i (out if none): first_tap never decreases in o.
inline long first_output_at(long i, long in, long out, float scale, uint mode, uint align_corners) {
  long lo = 0, hi = out;
  while (lo < hi) {
    const long mid = (lo + hi) / 2;
    if (first_tap(mid, in, out, scale, mode, align_corners) < i) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// The run of outputs along one dim that may read input i: first taps in [i - 1, i] for
// linear (a tap's second index is the first plus one at most), exactly i for nearest.
inline long2 outputs_reading(long i, long in, long out, float scale, uint mode, uint align_corners) {
  const long from = mode == 2 ? i - 1 : i;
  return long2(first_output_at(from, in, out, scale, mode, align_corners),
               first_output_at(i + 1, in, out, scale, mode, align_corners));
}

// The taps of output o along one dim that read input i, with their weights: nearest
// has one tap, linear two (both on i at the last input, or when the dim keeps its size,
// where the second weighs 0). Gradients are added tap by tap, as CPU's scatter adds them
// (so a 0-weight tap of an infinite gradient gives NaN there too).
struct Taps {
  float w[2];
  bool hit[2];
};

inline Taps taps_of(long i, long o, long in, long out, float scale, uint mode, uint align_corners) {
  Taps r;
  if (mode != 2) {
    r.w[0] = 1.0f, r.hit[0] = nearest_source(o, in, out, scale, mode) == i;
    r.w[1] = 0.0f, r.hit[1] = false;
    return r;
  }
  const LinearTap t = linear_source(o, in, out, scale, align_corners);
  r.w[0] = t.w0, r.hit[0] = t.i0 == i;
  r.w[1] = t.w1, r.hit[1] = t.i1 == i;
  return r;
}

// CPU's generic linear kernel keeps its weights in the tensor's dtype: w1 rounded,
// w0 = 1 - w1 rounded again; the arithmetic stays in float.
template <typename T>
inline LinearTap rounded_weights(LinearTap t) {
  t.w1 = float(T(t.w1));
  t.w0 = float(T(1.0f - t.w1));
  return t;
}

template <typename T>
kernel void upsample(device const T* in [[buffer(0)]],
                     device T* out [[buffer(1)]],
                     constant UpsampleShape& s [[buffer(2)]],
                     uint tid [[thread_position_in_grid]]) {
  if (ulong(tid) >= ulong(s.batch * s.channels * s.out_h * s.out_w)) return;
  const long4 p = unravel(tid, s.channels, s.out_h, s.out_w);
  device const T* plane = in + p.x * s.in_s[0] + p.y * s.in_s[1];
  T result;
  if (s.mode != 2) {
    const long y = nearest_source(p.z, s.in_h, s.out_h, s.scale_h, s.mode);
    const long x = nearest_source(p.w, s.in_w, s.out_w, s.scale_w, s.mode);
    result = plane[y * s.in_s[2] + x * s.in_s[3]];
  } else {
    LinearTap ty = linear_source(p.z, s.in_h, s.out_h, s.scale_h, s.align_corners);
    LinearTap tx = linear_source(p.w, s.in_w, s.out_w, s.scale_w, s.align_corners);
    if (s.round_weights) ty = rounded_weights<T>(ty), tx = rounded_weights<T>(tx);
    device const T* r0 = plane + ty.i0 * s.in_s[2];
    device const T* r1 = plane + ty.i1 * s.in_s[2];
    const float top = tx.w0 * float(r0[tx.i0 * s.in_s[3]]) + tx.w1 * float(r0[tx.i1 * s.in_s[3]]);
    const float bottom = tx.w0 * float(r1[tx.i0 * s.in_s[3]]) + tx.w1 * float(r1[tx.i1 * s.in_s[3]]);
    result = T(ty.w0 * top + ty.w1 * bottom);
  }
  out[offset(p, s.out_s)] = result;
}

template <typename T>
kernel void upsample_backward(device const T* grad_out [[buffer(0)]],
                              device T* grad_in [[buffer(1)]],
                              constant UpsampleShape& s [[buffer(2)]],
                              uint tid [[thread_position_in_grid]]) {
  if (ulong(tid) >= ulong(s.batch * s.channels * s.in_h * s.in_w)) return;
  const long4 p = unravel(tid, s.channels, s.in_h, s.in_w);
  const long2 ys = outputs_reading(p.z, s.in_h, s.out_h, s.scale_h, s.mode, s.align_corners);
  const long2 xs = outputs_reading(p.w, s.in_w, s.out_w, s.scale_w, s.mode, s.align_corners);
  device const T* plane = grad_out + p.x * s.out_s[0] + p.y * s.out_s[1];
  float g = 0.0f;
  for (long y = ys.x; y < ys.y; ++y) {
    const Taps ty = taps_of(p.z, y, s.in_h, s.out_h, s.scale_h, s.mode, s.align_corners);
    if (!ty.hit[0] && !ty.hit[1]) continue;
    for (long x = xs.x; x < xs.y; ++x) {
      const Taps tx = taps_of(p.w, x, s.in_w, s.out_w, s.scale_w, s.mode, s.align_corners);
      const float go = float(plane[y * s.out_s[2] + x * s.out_s[3]]);
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b)
          if (ty.hit[a] && tx.hit[b]) g += ty.w[a] * tx.w[b] * go;
    }
  }
  grad_in[offset(p, s.in_s)] = T(g);
}

#define METALX_UPSAMPLE_INSTANTIATE(T)                                                          \
  template [[host_name("upsample_" #T)]] kernel decltype(upsample<T>) upsample<T>;              \
  template [[host_name("upsample_backward_" #T)]] kernel decltype(upsample_backward<T>)         \
      upsample_backward<T>;

METALX_UPSAMPLE_INSTANTIATE(float)
METALX_UPSAMPLE_INSTANTIATE(half)
METALX_UPSAMPLE_INSTANTIATE(bfloat)
