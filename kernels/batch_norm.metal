// batch_norm forward and backward over an input [N, C, spatial...] whose spatial dims
// walk memory as one stride: contiguous (stride 1) and channels_last (stride C) inputs
// are read in place. Host side: backend/ops/batch_norm.cpp.
//
//   batch_norm_stats_<T>     a threadgroup per channel (one thread on the simulator):
//                            mean, then the squared deviations (two passes, as CPU);
//                            each thread walks its share of every [n, c] row with
//                            running offsets (no per-element index division);
//                            writes save_mean / save_invstd and updates the running
//                            stats with momentum (unbiased variance).
//   batch_norm_apply_<T>     elementwise: y = (x - mean) * invstd * w + b, with the
//                            batch's stats or the running ones (eval); a thread takes
//                            a run of memory and looks the channel up once per run of
//                            one channel, not per element.
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

// Channel c's elements are batch rows of `spatial` elements `stride_s` apart; a thread
// of `threads` takes positions tid, tid + threads, ... of each row. Rows shorter than
// the threadgroup (a GPU's BatchNorm1d: spatial 1) are walked flat instead, k = n *
// spatial + p over the whole channel, so every thread has work. The row walks keep four
// partial sums (independent adds the compiler can overlap or vectorise).
inline ulong bn_flat_offset(constant BatchNormShape& s, ulong c, ulong k) {
  const ulong n = k / s.spatial;
  return n * s.stride_n + c * s.stride_c + (k - n * s.spatial) * s.stride_s;
}

template <typename T>
inline float bn_sum(constant BatchNormShape& s, device const T* in, ulong c, uint tid) {
  float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
  if (s.spatial < s.threads) {
    for (ulong k = tid; k < s.batch * s.spatial; k += s.threads) a0 += float(in[bn_flat_offset(s, c, k)]);
    return a0;
  }
  const ulong step = s.threads, st = s.stride_s * step;
  for (ulong n = 0; n < s.batch; ++n) {
    device const T* row = in + n * s.stride_n + c * s.stride_c + tid * s.stride_s;
    ulong p = tid;
    for (; p + 3 * step < s.spatial; p += 4 * step, row += 4 * st) {
      a0 += float(row[0]), a1 += float(row[st]), a2 += float(row[2 * st]), a3 += float(row[3 * st]);
    }
    for (; p < s.spatial; p += step, row += st) a0 += float(row[0]);
  }
  return (a0 + a1) + (a2 + a3);
}

template <typename T>
inline float bn_squared_deviations(constant BatchNormShape& s, device const T* in, ulong c, uint tid, float mean) {
  float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
  if (s.spatial < s.threads) {
    for (ulong k = tid; k < s.batch * s.spatial; k += s.threads) {
      const float d = float(in[bn_flat_offset(s, c, k)]) - mean;
      a0 += d * d;
    }
    return a0;
  }
  const ulong step = s.threads, st = s.stride_s * step;
  for (ulong n = 0; n < s.batch; ++n) {
    device const T* row = in + n * s.stride_n + c * s.stride_c + tid * s.stride_s;
    ulong p = tid;
    for (; p + 3 * step < s.spatial; p += 4 * step, row += 4 * st) {
      const float d0 = float(row[0]) - mean, d1 = float(row[st]) - mean;
      const float d2 = float(row[2 * st]) - mean, d3 = float(row[3 * st]) - mean;
      a0 += d0 * d0, a1 += d1 * d1, a2 += d2 * d2, a3 += d3 * d3;
    }
    for (; p < s.spatial; p += step, row += st) {
      const float d = float(row[0]) - mean;
      a0 += d * d;
    }
  }
  return (a0 + a1) + (a2 + a3);
}

// (sum(dy), sum(dy * (x - mean))) over this thread's share of channel c.
template <typename T>
inline float2 bn_grad_sums(constant BatchNormShape& s, device const T* dy, device const T* in, ulong c, uint tid,
                           float mean) {
  float g0 = 0.0f, g1 = 0.0f, d0 = 0.0f, d1 = 0.0f;
  if (s.spatial < s.threads) {
    for (ulong k = tid; k < s.batch * s.spatial; k += s.threads) {
      const ulong o = bn_flat_offset(s, c, k);
      const float g = float(dy[o]);
      g0 += g;
      d0 += g * (float(in[o]) - mean);
    }
    return float2(g0, d0);
  }
  const ulong step = s.threads, st = s.stride_s * step;
  for (ulong n = 0; n < s.batch; ++n) {
    const ulong base = n * s.stride_n + c * s.stride_c + tid * s.stride_s;
    device const T* grow = dy + base;
    device const T* xrow = in + base;
    ulong p = tid, o = 0;
    for (; p + step < s.spatial; p += 2 * step, o += 2 * st) {
      const float ga = float(grow[o]), gb = float(grow[o + st]);
      g0 += ga, g1 += gb;
      d0 += ga * (float(xrow[o]) - mean), d1 += gb * (float(xrow[o + st]) - mean);
    }
    for (; p < s.spatial; p += step, o += st) {
      const float g = float(grow[o]);
      g0 += g;
      d0 += g * (float(xrow[o]) - mean);
    }
  }
  return float2(g0 + g1, d0 + d1);
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
  const float mean = group_sum(bn_sum(s, in, c, tid), shared, tid, s.threads) / float(count);
  float var_sum = group_sum(bn_squared_deviations(s, in, c, tid, mean), shared, tid, s.threads);
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
// A thread's run [begin, end) splits into pieces of one channel each (whole rows of a
// contiguous input, single elements of a channels_last one); the channel is found by
// one division per thread (32-bit when it fits) and then advanced per piece.
struct BnRun {
  ulong begin, end;  // this thread's elements
  ulong piece_end;   // end of the first piece (one channel)
  ulong c;
};

inline BnRun bn_run(constant BatchNormShape& s, uint tid) {
  BnRun r;
  r.begin = ulong(tid) * s.per_thread;
  r.end = min(r.begin + s.per_thread, s.numel);
  const ulong q = s.numel < 0x80000000ul ? ulong(uint(r.begin) / uint(s.stride_c)) : r.begin / s.stride_c;
  r.c = s.channels < 0x80000000ul && q < 0x80000000ul ? ulong(uint(q) % uint(s.channels)) : q % s.channels;
  r.piece_end = (q + 1) * s.stride_c;
  return r;
}

inline void bn_next_piece(constant BatchNormShape& s, thread BnRun& r) {
  r.piece_end += s.stride_c;
  if (++r.c == s.channels) r.c = 0;
}

template <typename T>
kernel void batch_norm_apply(device const T* in [[buffer(0)]],
                             device const float* mean [[buffer(1)]],
                             device const float* stat [[buffer(2)]],
                             device const float* weight [[buffer(3)]],
                             device const float* bias [[buffer(4)]],
                             device T* out [[buffer(5)]],
                             constant BatchNormShape& s [[buffer(6)]],
                             uint tid [[thread_position_in_grid]]) {
  BnRun r = bn_run(s, tid);
  const bool round = s.flags & BN_ROUND_STATS;
  for (ulong i = r.begin; i < r.end; bn_next_piece(s, r)) {
    const ulong c = r.c, stop = min(r.piece_end, r.end);
    float scale = round ? float(T(bn_invstd(s, stat, c))) : bn_invstd(s, stat, c);
    if (s.flags & BN_HAS_WEIGHT) scale *= weight[c];
    const float m = round ? float(T(mean[c])) : mean[c];
    const float b = (s.flags & BN_HAS_BIAS) ? bias[c] : 0.0f;
    if (s.flags & BN_HAS_BIAS) {
      for (; i < stop; ++i) out[i] = T((float(in[i]) - m) * scale + b);
    } else {
      for (; i < stop; ++i) out[i] = T((float(in[i]) - m) * scale);
    }
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
  const float m = mean[c], invstd = bn_invstd(s, stat, c);
  const float2 partial = bn_grad_sums(s, dy, in, c, tid, m);
  const float sum_dy = group_sum(partial.x, shared, tid, s.threads);
  const float sum_dy_xhat = group_sum(partial.y, shared, tid, s.threads);
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
  BnRun r = bn_run(s, tid);
  const float inv_count = 1.0f / float(s.batch * s.spatial);
  for (ulong i = r.begin; i < r.end; bn_next_piece(s, r)) {
    const ulong c = r.c, stop = min(r.piece_end, r.end);
    const float invstd = bn_invstd(s, stat, c);
    const float w = (s.flags & BN_HAS_WEIGHT) ? weight[c] : 1.0f;
    if (s.flags & BN_TRAINING) {
      // Only the per-channel factors are hoisted; xhat * sum_dy_xhat * inv_count stays
      // left to right (the product rounded first), the formula above as written.
      const float m = mean[c], mean_dy = sums[c] * inv_count, sum_dy_xhat = sums[s.channels + c];
      for (; i < stop; ++i) {
        const float xhat = (float(in[i]) - m) * invstd;
        dx[i] = T((float(dy[i]) - mean_dy - xhat * sum_dy_xhat * inv_count) * w * invstd);
      }
    } else {
      for (; i < stop; ++i) dx[i] = T(float(dy[i]) * w * invstd);
    }
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
