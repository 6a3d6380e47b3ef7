// nll_loss and nll_loss2d, forward and backward, over a contiguous input seen as
// [batch, classes, spatial] (spatial = 1 for nll_loss, H * W for nll_loss2d) and int64
// targets [batch, spatial]. Host side: backend/ops/nll_loss.cpp.
//
//   nll_loss_none_<T>      reduction 'none': a thread per target writes -w[t] * x[t].
//   nll_loss_reduce_<T>    'mean' / 'sum': one threadgroup sums the losses and the
//                          weights of the targets; thread 0 writes the loss and the
//                          total weight.
//   nll_loss_backward_<T>  a thread per target writes its one non-zero gradient into a
//                          zeroed grad_input.
// Targets outside [0, classes) count as ignored here: the host reports them through the
// device-side index check (kernels/index_check.metal).
//
// float32 sums in parallel. Half and bfloat sum as CPU does (ATen's LossNLL.cpp and
// LossNLL2d.cpp): in the element type, every operation rounded to it, into a cascade of
// eight partial sums. At 8 or 11 mantissa bits the order and the roundings decide the
// result: with cancelling terms a float sum differs from CPU's by more than the
// dtype's tolerance. It is one thread's loop, as on CPU; autocast runs these losses in
// float32, so only explicitly half-precision losses take it.
#include <metal_stdlib>
using namespace metal;

#define METALX_NLL_GROUP 256
#define METALX_NLL_LEVELS 8

struct NllShape {
  ulong batch;
  ulong classes;
  ulong spatial;
  long ignore_index;
  uint has_weight;
  uint mean;        // divide by the total weight
  uint threads;     // reduce kernel: threads in the group (1 on the simulator and for cascade)
  uint cascade;     // reduce kernel: CPU's rounded cascade (half and bfloat)
  uint per_target;  // backward: a grad_output value per target ('none')
};

// The class of target i, or -1 for an ignored or out-of-range one.
inline long nll_class(device const long* target, ulong i, constant NllShape& s) {
  const long t = target[i];
  if (t == s.ignore_index || t < 0 || ulong(t) >= s.classes) return -1;
  return t;
}

inline ulong nll_offset(constant NllShape& s, ulong i, long t) {
  const ulong n = i / s.spatial, p = i - n * s.spatial;
  return (n * s.classes + ulong(t)) * s.spatial + p;
}

// x rounded to T, as a float: one operation of T's arithmetic done in float and
// rounded, which is how CPU's Half and BFloat16 compute.
template <typename T>
inline float rounded(float x) {
  return float(T(x));
}

template <typename T>
kernel void nll_loss_none(device const T* input [[buffer(0)]],
                          device const long* target [[buffer(1)]],
                          device const T* weight [[buffer(2)]],
                          device T* output [[buffer(3)]],
                          constant NllShape& s [[buffer(4)]],
                          uint tid [[thread_position_in_grid]]) {
  const ulong i = tid;
  if (i >= s.batch * s.spatial) return;
  const long t = nll_class(target, i, s);
  float loss = 0.0f;
  if (t >= 0) loss = -float(input[nll_offset(s, i, t)]) * (s.has_weight ? float(weight[t]) : 1.0f);
  output[i] = T(loss);
}

// CPU's reduction in T: element i goes into partial sum 0; whenever i's lowest `power`
// bits (then the next `power`, ...) are all zero, a level carries into the next one.
template <typename T>
void nll_cascade(device const T* input, device const long* target, device const T* weight, device T* output,
                 device T* total_weight, constant NllShape& s) {
  const ulong n = s.batch * s.spatial;
  uint log2n = 1;  // ceil(log2(n)), at least 1
  while (log2n < 63 && (1ul << log2n) < n) ++log2n;
  const uint power = max(4u, log2n / METALX_NLL_LEVELS);
  const ulong level_mask = (1ul << power) - 1;
  float loss[METALX_NLL_LEVELS], wsum[METALX_NLL_LEVELS];
  for (uint j = 0; j < METALX_NLL_LEVELS; ++j) loss[j] = wsum[j] = 0.0f;
  ulong ignored = 0;
  for (ulong i = 0; i < n; ++i) {
    const long t = nll_class(target, i, s);
    if (t < 0) {
      ++ignored;
      continue;
    }
    const float x = float(input[nll_offset(s, i, t)]);
    if (s.has_weight) {
      const float w = float(weight[t]);
      loss[0] = rounded<T>(loss[0] - rounded<T>(x * w));
      wsum[0] = rounded<T>(wsum[0] + w);
    } else {
      loss[0] = rounded<T>(loss[0] - x);
    }
    for (uint j = 0; j + 1 < METALX_NLL_LEVELS; ++j) {
      if ((i & (level_mask << (j * power))) != 0) break;
      wsum[j + 1] = rounded<T>(wsum[j + 1] + wsum[j]);
      loss[j + 1] = rounded<T>(loss[j + 1] + loss[j]);
      wsum[j] = loss[j] = 0.0f;
    }
  }
  float total = 0.0f, weights = 0.0f;
  for (uint j = 0; j < METALX_NLL_LEVELS; ++j) {
    total = rounded<T>(total + loss[j]);
    weights = rounded<T>(weights + wsum[j]);
  }
  if (!s.has_weight) weights = rounded<T>(float(n - ignored));
  output[0] = T(s.mean ? total / weights : total);
  total_weight[0] = T(weights);
}

template <typename T>
kernel void nll_loss_reduce(device const T* input [[buffer(0)]],
                            device const long* target [[buffer(1)]],
                            device const T* weight [[buffer(2)]],
                            device T* output [[buffer(3)]],
                            device T* total_weight [[buffer(4)]],
                            constant NllShape& s [[buffer(5)]],
                            uint tid [[thread_index_in_threadgroup]]) {
  if (s.cascade) {
    if (tid == 0) nll_cascade(input, target, weight, output, total_weight, s);
    return;
  }
  threadgroup float2 shared[METALX_NLL_GROUP];
  const ulong n = s.batch * s.spatial;
  float loss = 0.0f, w_sum = 0.0f;
  for (ulong i = tid; i < n; i += s.threads) {
    const long t = nll_class(target, i, s);
    if (t < 0) continue;
    const float w = s.has_weight ? float(weight[t]) : 1.0f;
    loss -= float(input[nll_offset(s, i, t)]) * w;
    w_sum += w;
  }
  shared[tid] = float2(loss, w_sum);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (tid != 0) return;
  float2 total = float2(0.0f);
  for (uint k = 0; k < s.threads; ++k) total += shared[k];
  // An empty or all-ignored batch gives 0 / 0 = NaN for 'mean', as on CPU.
  output[0] = T(s.mean ? total.x / total.y : total.x);
  total_weight[0] = T(total.y);
}

// grad_output: one value per target ('none') or one for all (then divided by the total
// weight for 'mean'); rounded to T where CPU's arithmetic in T rounds.
template <typename T>
kernel void nll_loss_backward(device const T* grad_output [[buffer(0)]],
                              device const long* target [[buffer(1)]],
                              device const T* weight [[buffer(2)]],
                              device const T* total_weight [[buffer(3)]],
                              device T* grad_input [[buffer(4)]],
                              constant NllShape& s [[buffer(5)]],
                              uint tid [[thread_position_in_grid]]) {
  const ulong i = tid;
  if (i >= s.batch * s.spatial) return;
  const long t = nll_class(target, i, s);
  if (t < 0) return;
  float g = s.per_target ? float(grad_output[i]) : float(grad_output[0]);
  if (!s.per_target && s.mean) g = rounded<T>(g / float(total_weight[0]));
  const float w = s.has_weight ? float(weight[t]) : 1.0f;
  grad_input[nll_offset(s, i, t)] = T(-w * g);
}

#define METALX_NLL_INSTANTIATE(T)                                                                        \
  template [[host_name("nll_loss_none_" #T)]] kernel decltype(nll_loss_none<T>) nll_loss_none<T>;       \
  template [[host_name("nll_loss_reduce_" #T)]] kernel decltype(nll_loss_reduce<T>) nll_loss_reduce<T>; \
  template [[host_name("nll_loss_backward_" #T)]] kernel decltype(nll_loss_backward<T>) nll_loss_backward<T>;

METALX_NLL_INSTANTIATE(float)
METALX_NLL_INSTANTIATE(half)
METALX_NLL_INSTANTIATE(bfloat)
