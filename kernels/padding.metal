// Reflection and replication padding over the last one or two dims, forward and
// backward. Host side: backend/ops/padding.cpp.
//
// Every tensor is addressed through its own (n, c, h, w) strides (a 1-d pad is a 2-d one
// with h of size 1 and no padding there), so channels_last and other views are read and
// written in place. Output o along a dim reads input o - pad_before, reflected at the
// edges (reflection: -1 -> 1) or clamped to them (replication); a negative pad crops.
// The forward only moves elements: a kernel per element size serves every dtype. The
// backward takes a thread per input element and gathers the gradients of the outputs
// that read it (float accumulation, no atomics, deterministic): for reflection at most
// three per dim (direct, mirrored left, mirrored right), for replication one run that
// covers the padding next to an edge element.
#include <metal_stdlib>
using namespace metal;

struct PadShape {
  long batch, channels, in_h, in_w, out_h, out_w;
  long pad_top, pad_left;  // padding before each dim (negative: cropping)
  long in_s[4];            // input / grad_input strides (n, c, h, w)
  long out_s[4];           // output / grad_output strides
  uint reflect;            // 1: reflection, 0: replication
};

inline long4 unravel(ulong i, long channels, long h, long w) {
  const long x = long(i % ulong(w));
  i /= ulong(w);
  const long y = long(i % ulong(h));
  i /= ulong(h);
  const long c = long(i % ulong(channels));
  return long4(long(i / ulong(channels)), c, y, x);
}

inline long offset(const long4 p, constant long* s) { return p.x * s[0] + p.y * s[1] + p.z * s[2] + p.w * s[3]; }

// The input index output o reads along a dim.
inline long pad_source(long o, long in, long pad, uint reflect) {
  long i = o - pad;
  if (!reflect) return min(max(i, 0L), in - 1);
  if (i < 0) i = -i;
  if (i >= in) i = 2 * (in - 1) - i;
  return i;
}

// Up to three runs of outputs [lo, hi) along a dim that may read input i; every
// output in them is checked against pad_source, so the runs only need to cover.
struct Runs {
  long lo[3], hi[3];
};

inline Runs runs_reading(long i, long in, long out, long pad, uint reflect) {
  Runs r;
  if (reflect) {
    const long direct = i + pad, left = pad - i, right = pad + 2 * (in - 1) - i;
    r.lo[0] = direct, r.hi[0] = direct + 1;
    r.lo[1] = left, r.hi[1] = i > 0 ? left + 1 : left;             // i == 0 is direct's
    r.lo[2] = right, r.hi[2] = i < in - 1 ? right + 1 : right;     // so is i == in - 1
  } else {
    r.lo[0] = i == 0 ? 0 : i + pad;
    r.hi[0] = i == in - 1 ? out : i + pad + 1;
    r.lo[1] = r.hi[1] = r.lo[2] = r.hi[2] = 0;
  }
  for (int k = 0; k < 3; ++k) r.lo[k] = max(r.lo[k], 0L), r.hi[k] = min(r.hi[k], out);
  return r;
}

template <typename T>
kernel void pad(device const T* in [[buffer(0)]],
                device T* out [[buffer(1)]],
                constant PadShape& s [[buffer(2)]],
                uint tid [[thread_position_in_grid]]) {
  if (ulong(tid) >= ulong(s.batch * s.channels * s.out_h * s.out_w)) return;
  const long4 p = unravel(tid, s.channels, s.out_h, s.out_w);
  const long y = pad_source(p.z, s.in_h, s.pad_top, s.reflect);
  const long x = pad_source(p.w, s.in_w, s.pad_left, s.reflect);
  out[offset(p, s.out_s)] = in[offset(long4(p.x, p.y, y, x), s.in_s)];
}

template <typename T>
kernel void pad_backward(device const T* grad_out [[buffer(0)]],
                         device T* grad_in [[buffer(1)]],
                         constant PadShape& s [[buffer(2)]],
                         uint tid [[thread_position_in_grid]]) {
  if (ulong(tid) >= ulong(s.batch * s.channels * s.in_h * s.in_w)) return;
  const long4 p = unravel(tid, s.channels, s.in_h, s.in_w);
  const Runs ys = runs_reading(p.z, s.in_h, s.out_h, s.pad_top, s.reflect);
  const Runs xs = runs_reading(p.w, s.in_w, s.out_w, s.pad_left, s.reflect);
  device const T* plane = grad_out + p.x * s.out_s[0] + p.y * s.out_s[1];
  float g = 0.0f;
  for (int ry = 0; ry < 3; ++ry)
    for (long y = ys.lo[ry]; y < ys.hi[ry]; ++y) {
      if (pad_source(y, s.in_h, s.pad_top, s.reflect) != p.z) continue;
      for (int rx = 0; rx < 3; ++rx)
        for (long x = xs.lo[rx]; x < xs.hi[rx]; ++x)
          if (pad_source(x, s.in_w, s.pad_left, s.reflect) == p.w) g += float(plane[y * s.out_s[2] + x * s.out_s[3]]);
    }
  grad_in[offset(p, s.in_s)] = T(g);
}

#define METALX_PAD_FORWARD(T) template [[host_name("pad_" #T)]] kernel decltype(pad<T>) pad<T>;
#define METALX_PAD_BACKWARD(T) \
  template [[host_name("pad_backward_" #T)]] kernel decltype(pad_backward<T>) pad_backward<T>;

METALX_PAD_FORWARD(uchar)
METALX_PAD_FORWARD(short)
METALX_PAD_FORWARD(int)
METALX_PAD_FORWARD(long)
METALX_PAD_BACKWARD(float)
METALX_PAD_BACKWARD(half)
METALX_PAD_BACKWARD(bfloat)
