// batch_norm forward and backward over an input [N, C, spatial...] whose spatial dims
// walk memory as one stride: contiguous (stride 1) and channels_last (stride C) inputs
// are read in place. Host side: backend/ops/batch_norm.cpp.
//
//   batch_norm_stats_<T>     a threadgroup per channel (one thread on the simulator):
//                            mean, then the squared deviations (two passes, as CPU);
//                            writes save_mean / save_invstd and updates the running
//                            stats with momentum (unbiased variance).
//   batch_norm_apply_<T>     elementwise: y = (x - mean) * invstd * w + b, with the
//                            batch's stats or the running ones (eval).
//   batch_norm_backward_reduce_<T>  per channel: sum(dy) and sum(dy * xhat), which are
//                            the bias and weight gradients.
//   batch_norm_backward_apply_<T>   elementwise grad_input.
// Per-channel tensors (weight, bias, running stats, saved stats) are float: the host
// converts others. The output and grad_input have the input's strides.
#include <metal_stdlib>
using namespace metal;

#define METALX_BN_GROUP 256

struct BatchNormShape {
  ulong batch;
  ulong channels;
  ulong spatial;
  ulong stride_n, stride_c, stride_s;  // the input's, in elements
  ulong numel;
  float eps;
  float momentum;
  uint flags;
  uint threads;        // stats / reduce kernels: threads per channel
  uint per_thread;     // apply kernels: elements per thread
};

#define BN_HAS_WEIGHT 1u
#define BN_HAS_BIAS 2u
#define BN_UPDATE_RUNNING 4u  // stats: update running_mean / running_var
#define BN_STATS_ARE_VAR 8u   // apply / backward: the second stat is a variance, not invstd
#define BN_TRAINING 16u       // backward: grad_input through the batch's stats
#define BN_GRAD_INPUT 32u
#define BN_GRAD_WEIGHT 64u
#define BN_GRAD_BIAS 128u
#define BN_ROUND_STATS 256u  // stats and apply: the batch's stats rounded to T, as CPU does
                             // for half parameters (it stores them in T)

inline ulong bn_offset(constant BatchNormShape& s, ulong c, ulong k) {
  const ulong n = k / s.spatial, p = k - n * s.spatial;
  return n * s.stride_n + c * s.stride_c + p * s.stride_s;
}

// The sum over the threadgroup of each thread's v; every thread gets it.
inline float group_sum(float v, threadgroup float* shared, uint tid, uint threads) {
  if (threads == 1) return v;
  shared[tid] = v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float total = 0.0f;
  for (uint k = 0; k < threads; ++k) total += shared[k];
  threadgroup_barrier(mem_flags::mem_threadgroup);  // shared is reused by the next sum
  return total;
}

template <typename T> inline bool bn_rounds_stats() { return false; }
template <> inline bool bn_rounds_stats<bfloat>() { return true; }

template <typename T>
kernel void batch_norm_stats(device const T* in [[buffer(0)]],
                             device float* save_mean [[buffer(1)]],
                             device float* save_invstd [[buffer(2)]],
                             device float* running_mean [[buffer(3)]],
                             device float* running_var [[buffer(4)]],
                             constant BatchNormShape& s [[buffer(5)]],
                             uint c [[threadgroup_position_in_grid]],
                             uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float shared[METALX_BN_GROUP];
  const ulong count = s.batch * s.spatial;
  float sum = 0.0f;
  for (ulong k = tid; k < count; k += s.threads) sum += float(in[bn_offset(s, c, k)]);
  const float mean = group_sum(sum, shared, tid, s.threads) / float(count);
  float sq = 0.0f;
  for (ulong k = tid; k < count; k += s.threads) {
    const float d = float(in[bn_offset(s, c, k)]) - mean;
    sq += d * d;
  }
  float var_sum = group_sum(sq, shared, tid, s.threads);
  if (tid != 0) return;
  // bfloat16 parameters: CPU stores the mean and the sum of squared deviations in T,
  // and divides that sum by the count in T (BFloat16's division by an integer returns
  // BFloat16) before invstd and the running variance. Half matches CPU unrounded here
  // (its upstream instance_norm comparison fails with these roundings).
  const bool round = (s.flags & BN_ROUND_STATS) && bn_rounds_stats<T>();
  if (round) var_sum = float(T(var_sum));
  const float stored_mean = round ? float(T(mean)) : mean;
  const float var = var_sum / float(count);
  save_mean[c] = mean;
  save_invstd[c] = 1.0f / sqrt((round ? float(T(var)) : var) + s.eps);
  if (s.flags & BN_UPDATE_RUNNING) {
    float unbiased = var_sum / float(count > 1 ? count - 1 : count);
    if (round) unbiased = float(T(unbiased));
    running_mean[c] = s.momentum * stored_mean + (1.0f - s.momentum) * running_mean[c];
    running_var[c] = s.momentum * unbiased + (1.0f - s.momentum) * running_var[c];
  }
}

inline float bn_invstd(constant BatchNormShape& s, device const float* stat, ulong c) {
  return (s.flags & BN_STATS_ARE_VAR) ? 1.0f / sqrt(stat[c] + s.eps) : stat[c];
}

// Dense layouts only: element i of memory belongs to channel (i / stride_c) % channels.
template <typename T>
kernel void batch_norm_apply(device const T* in [[buffer(0)]],
                             device const float* mean [[buffer(1)]],
                             device const float* stat [[buffer(2)]],
                             device const float* weight [[buffer(3)]],
                             device const float* bias [[buffer(4)]],
                             device T* out [[buffer(5)]],
                             constant BatchNormShape& s [[buffer(6)]],
                             uint tid [[thread_position_in_grid]]) {
  const ulong begin = ulong(tid) * s.per_thread, end = min(begin + s.per_thread, s.numel);
  for (ulong i = begin; i < end; ++i) {
    const ulong c = (i / s.stride_c) % s.channels;
    const bool round = s.flags & BN_ROUND_STATS;
    float scale = round ? float(T(bn_invstd(s, stat, c))) : bn_invstd(s, stat, c);
    if (s.flags & BN_HAS_WEIGHT) scale *= weight[c];
    float v = (float(in[i]) - (round ? float(T(mean[c])) : mean[c])) * scale;
    if (s.flags & BN_HAS_BIAS) v += bias[c];
    out[i] = T(v);
  }
}

// sums[c] = sum(dy), sums[channels + c] = sum(dy * xhat).
template <typename T>
kernel void batch_norm_backward_reduce(device const T* dy [[buffer(0)]],
                                       device const T* in [[buffer(1)]],
                                       device const float* mean [[buffer(2)]],
                                       device const float* stat [[buffer(3)]],
                                       device float* sums [[buffer(4)]],
                                       constant BatchNormShape& s [[buffer(5)]],
                                       uint c [[threadgroup_position_in_grid]],
                                       uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float shared[METALX_BN_GROUP];
  const ulong count = s.batch * s.spatial;
  const float m = mean[c], invstd = bn_invstd(s, stat, c);
  float sum_dy = 0.0f, sum_dy_xhat = 0.0f;
  for (ulong k = tid; k < count; k += s.threads) {
    const ulong o = bn_offset(s, c, k);
    const float g = float(dy[o]);
    sum_dy += g;
    sum_dy_xhat += g * (float(in[o]) - m);
  }
  sum_dy = group_sum(sum_dy, shared, tid, s.threads);
  sum_dy_xhat = group_sum(sum_dy_xhat, shared, tid, s.threads);
  if (tid != 0) return;
  sums[c] = sum_dy;
  sums[s.channels + c] = sum_dy_xhat * invstd;
}

// Training: dx = w * invstd * (dy - sum_dy / n - xhat * sum_dy_xhat / n);
// eval (running stats are constants): dx = w * invstd * dy.
template <typename T>
kernel void batch_norm_backward_apply(device const T* dy [[buffer(0)]],
                                      device const T* in [[buffer(1)]],
                                      device const float* mean [[buffer(2)]],
                                      device const float* stat [[buffer(3)]],
                                      device const float* weight [[buffer(4)]],
                                      device const float* sums [[buffer(5)]],
                                      device T* dx [[buffer(6)]],
                                      constant BatchNormShape& s [[buffer(7)]],
                                      uint tid [[thread_position_in_grid]]) {
  const ulong begin = ulong(tid) * s.per_thread, end = min(begin + s.per_thread, s.numel);
  const float inv_count = 1.0f / float(s.batch * s.spatial);
  for (ulong i = begin; i < end; ++i) {
    const ulong c = (i / s.stride_c) % s.channels;
    const float invstd = bn_invstd(s, stat, c);
    const float w = (s.flags & BN_HAS_WEIGHT) ? weight[c] : 1.0f;
    float g = float(dy[i]);
    if (s.flags & BN_TRAINING) {
      const float xhat = (float(in[i]) - mean[c]) * invstd;
      g = g - sums[c] * inv_count - xhat * sums[s.channels + c] * inv_count;
    }
    dx[i] = T(g * w * invstd);
  }
}

#define METALX_BN_INSTANTIATE(T)                                                                              \
  template [[host_name("batch_norm_stats_" #T)]] kernel decltype(batch_norm_stats<T>) batch_norm_stats<T>;    \
  template [[host_name("batch_norm_apply_" #T)]] kernel decltype(batch_norm_apply<T>) batch_norm_apply<T>;    \
  template [[host_name("batch_norm_backward_reduce_" #T)]] kernel decltype(batch_norm_backward_reduce<T>)     \
      batch_norm_backward_reduce<T>;                                                                          \
  template [[host_name("batch_norm_backward_apply_" #T)]] kernel decltype(batch_norm_backward_apply<T>)       \
      batch_norm_backward_apply<T>;

METALX_BN_INSTANTIATE(float)
METALX_BN_INSTANTIATE(half)
METALX_BN_INSTANTIATE(bfloat)
