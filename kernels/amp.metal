// The two kernels torch.amp.GradScaler runs every step. Host side: backend/ops/amp.cpp.
//
// amp_unscale: grads *= inv_scale in place, many tensors per dispatch (the multi-tensor
//   launcher, kernels/multi_tensor.h), and found_inf = 1 when any grad is inf or NaN.
//   Device scalars: extra[0] inv_scale (float), extra[1] found_inf (float). Threads that
//   find a non-finite value all store the same 1.0f; nothing else writes found_inf.
// amp_update_scale: one thread updates the scale and the growth tracker from found_inf
//   (no host synchronisation), with CPU's rules and roundings.
#include <metal_stdlib>
#include "multi_tensor.h"
using namespace metal;

template <typename T>
kernel void amp_unscale(METALX_MT_SLOT_PARAMS) {
  typedef typename opmath<T>::type M;
  METALX_MT_PROLOGUE
  const float inv_scale = *mt_ptr<float>(slots, args.extra[0]);
  device T *grad = mt_ptr<T>(slots, e.loc[0]);
  bool non_finite = false;
  for (ulong i = begin; i < end; ++i) {
    const M v = M(grad[i]);
    non_finite = non_finite || !isfinite(v);
    // inv_scale 1 leaves values untouched (CPU's shortcut: no rounding through M).
    if (inv_scale != 1.0f) grad[i] = T(v * M(inv_scale));
  }
  if (non_finite) *mt_ptr<float>(slots, args.extra[1]) = 1.0f;
}
#define METALX_AMP_UNSCALE(T) \
  template [[host_name("amp_unscale_" #T)]] kernel decltype(amp_unscale<T>) amp_unscale<T>;
METALX_AMP_UNSCALE(float)
METALX_AMP_UNSCALE(half)
METALX_AMP_UNSCALE(bfloat)

// A double factor f is passed as hi = float(f) and lo = float(f - hi); the product
// scale * f is then formed exactly enough (fma for the error of scale * hi) that its
// rounding to float is CPU's, which multiplies in double and rounds once.
struct AmpScaleParams {
  float growth_hi, growth_lo;
  float backoff_hi, backoff_lo;
  long growth_interval;
};

inline float times_double(float s, float hi, float lo) {
  const float p = s * hi;
  if (!isfinite(p)) return p;
  const float err = fma(s, hi, -p);
  return p + (err + s * lo);
}

kernel void amp_update_scale_float(device float *scale [[buffer(0)]],
                                   device int *growth_tracker [[buffer(1)]],
                                   device const float *found_inf [[buffer(2)]],
                                   constant AmpScaleParams &p [[buffer(3)]],
                                   uint tid [[thread_position_in_grid]]) {
  if (tid != 0) return;
  if (*found_inf != 0.0f) {
    *scale = times_double(*scale, p.backoff_hi, p.backoff_lo);
    *growth_tracker = 0;
    return;
  }
  const long successful = long(*growth_tracker) + 1;
  if (successful == p.growth_interval) {
    const float grown = times_double(*scale, p.growth_hi, p.growth_lo);
    if (isfinite(grown)) *scale = grown;  // never grow past float's range
    *growth_tracker = 0;
  } else {
    *growth_tracker = int(successful);
  }
}
