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
// A target outside [0, classes) that is not ignore_index makes the forward kernels set
// status[0] = 1 and status[1] = the target (unread: the host reports bad targets
// through the device-side index check, kernels/index_check.metal); its loss counts as
// 0. Half and bfloat accumulate in float.
#include <metal_stdlib>
using namespace metal;

#define METALX_NLL_GROUP 256

struct NllShape {
  ulong batch;
  ulong classes;
  ulong spatial;
  long ignore_index;
  uint has_weight;
  uint mean;     // reduce kernel: divide by the total weight
  uint threads;  // reduce kernel: threads in the group (1 on the simulator)
};

// The class of target i, or -1 for an ignored or invalid one (reported in status).
// Racing writes of status are benign: any invalid target is worth reporting.
inline long nll_class(device const long* target, ulong i, constant NllShape& s, device long* status) {
  const long t = target[i];
  if (t == s.ignore_index) return -1;
  if (t < 0 || ulong(t) >= s.classes) {
    status[0] = 1;
    status[1] = t;
    return -1;
  }
  return t;
}

inline ulong nll_offset(constant NllShape& s, ulong i, long t) {
  const ulong n = i / s.spatial, p = i - n * s.spatial;
  return (n * s.classes + ulong(t)) * s.spatial + p;
}

template <typename T>
kernel void nll_loss_none(device const T* input [[buffer(0)]],
                          device const long* target [[buffer(1)]],
                          device const T* weight [[buffer(2)]],
                          device T* output [[buffer(3)]],
                          device long* status [[buffer(4)]],
                          constant NllShape& s [[buffer(5)]],
                          uint tid [[thread_position_in_grid]]) {
  const ulong i = tid;
  if (i >= s.batch * s.spatial) return;
  const long t = nll_class(target, i, s, status);
  float loss = 0.0f;
  if (t >= 0) loss = -float(input[nll_offset(s, i, t)]) * (s.has_weight ? float(weight[t]) : 1.0f);
  output[i] = T(loss);
}

template <typename T>
kernel void nll_loss_reduce(device const T* input [[buffer(0)]],
                            device const long* target [[buffer(1)]],
                            device const T* weight [[buffer(2)]],
                            device T* output [[buffer(3)]],
                            device T* total_weight [[buffer(4)]],
                            device long* status [[buffer(5)]],
                            constant NllShape& s [[buffer(6)]],
                            uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float2 shared[METALX_NLL_GROUP];
  const ulong n = s.batch * s.spatial;
  float loss = 0.0f, w_sum = 0.0f;
  for (ulong i = tid; i < n; i += s.threads) {
    const long t = nll_class(target, i, s, status);
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

// grad_output: one value per target ('none') or one for all (then scaled by 1 / total
// weight for 'mean').
template <typename T>
kernel void nll_loss_backward(device const T* grad_output [[buffer(0)]],
                              device const long* target [[buffer(1)]],
                              device const T* weight [[buffer(2)]],
                              device const T* total_weight [[buffer(3)]],
                              device T* grad_input [[buffer(4)]],
                              constant NllShape& s [[buffer(5)]],
                              constant uint& per_target [[buffer(6)]],
                              uint tid [[thread_position_in_grid]]) {
  const ulong i = tid;
  if (i >= s.batch * s.spatial) return;
  const long t = target[i];
  if (t == s.ignore_index || t < 0 || ulong(t) >= s.classes) return;
  float g = per_target ? float(grad_output[i]) : float(grad_output[0]);
  if (!per_target && s.mean) g /= float(total_weight[0]);
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
