// group_norm forward and backward over a contiguous input [N, C, HxW] in G groups of
// D = C / G channels. Host side: backend/ops/group_norm.cpp.
//
//   group_norm_<T>                a thread per (n, group): mean and rstd over its
//                                 D * HxW elements (two passes, in float), then y.
//   group_norm_channel_sums_<T>   a thread per (n, c): sum(dy * x) and sum(dy) over HxW.
//   group_norm_backward_<T>       a thread per (n, group): combines its channels' sums
//                                 with the weight and writes dx.
// The weight and bias gradients are sums over n of the channel sums (host, native ops).
#include <metal_stdlib>
using namespace metal;

struct GroupNormShape {
  ulong batch;
  ulong channels;
  ulong hw;
  ulong groups;
  float eps;
  uint has_weight;
  uint has_bias;
};

#define GN_LANES 8u
inline float gn_tree_sum(thread float* acc) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

template <typename T>
kernel void group_norm(device const T* in [[buffer(0)]],
                       device const T* weight [[buffer(1)]],
                       device const T* bias [[buffer(2)]],
                       device T* out [[buffer(3)]],
                       device T* mean_out [[buffer(4)]],
                       device T* rstd_out [[buffer(5)]],
                       constant GroupNormShape& s [[buffer(6)]],
                       uint tid [[thread_position_in_grid]]) {
  const ulong row = tid;  // n * groups + g
  if (row >= s.batch * s.groups) return;
  const ulong d = s.channels / s.groups, n = d * s.hw, g = row % s.groups;
  device const T* x = in + row * n;
  device T* y = out + row * n;
  // Both sums over GN_LANES interleaved accumulators combined as a tree: closer to the
  // exact statistics than one running sum, as CPU's vectorised moments are (bfloat16
  // outputs near a tie follow the statistics' last bits).
  float acc[GN_LANES];
  for (uint l = 0; l < GN_LANES; ++l) acc[l] = 0.0f;
  for (ulong j = 0; j < n; ++j) acc[j % GN_LANES] += float(x[j]);
  const float mean = gn_tree_sum(acc) / float(n);
  for (uint l = 0; l < GN_LANES; ++l) acc[l] = 0.0f;
  for (ulong j = 0; j < n; ++j) {
    const float v = float(x[j]) - mean;
    acc[j % GN_LANES] += v * v;
  }
  const float sq = gn_tree_sum(acc);
  const float rstd = 1.0f / sqrt(max(sq / float(n), 0.0f) + s.eps);
  for (ulong k = 0; k < d; ++k) {
    const ulong c = g * d + k;
    const float scale = rstd * (s.has_weight ? float(weight[c]) : 1.0f);
    const float shift = (s.has_bias ? float(bias[c]) : 0.0f) - mean * scale;
    // One rounding for x * scale + shift, as CPU's vectorised loop (compiled to a fused
    // multiply-add) does: rounded twice, bfloat16 outputs near a tie land an ulp off.
    for (ulong j = k * s.hw; j < (k + 1) * s.hw; ++j) y[j] = T(fma(float(x[j]), scale, shift));
  }
  mean_out[row] = T(mean);
  rstd_out[row] = T(rstd);
}

// sums[(n * C + c) * 2] = sum(dy * x), [.. + 1] = sum(dy).
template <typename T>
kernel void group_norm_channel_sums(device const T* dy [[buffer(0)]],
                                    device const T* in [[buffer(1)]],
                                    device float* sums [[buffer(2)]],
                                    constant GroupNormShape& s [[buffer(3)]],
                                    uint tid [[thread_position_in_grid]]) {
  const ulong nc = tid;
  if (nc >= s.batch * s.channels) return;
  device const T* g = dy + nc * s.hw;
  device const T* x = in + nc * s.hw;
  float ds = 0.0f, db = 0.0f;
  for (ulong j = 0; j < s.hw; ++j) {
    ds += float(g[j]) * float(x[j]);
    db += float(g[j]);
  }
  sums[nc * 2] = ds;
  sums[nc * 2 + 1] = db;
}

// dx = w * rstd * dy + c2 * x + c3, with (per group, over its channels c)
//   a = sum(w_c * ds_c), b = sum(w_c * db_c), m = D * HxW,
//   c2 = (b * mean - a) * rstd^3 / m,  c3 = -c2 * mean - b * rstd / m.
template <typename T>
kernel void group_norm_backward(device const T* dy [[buffer(0)]],
                                device const T* in [[buffer(1)]],
                                device const T* mean_in [[buffer(2)]],
                                device const T* rstd_in [[buffer(3)]],
                                device const T* weight [[buffer(4)]],
                                device const float* sums [[buffer(5)]],
                                device T* dx [[buffer(6)]],
                                constant GroupNormShape& s [[buffer(7)]],
                                uint tid [[thread_position_in_grid]]) {
  const ulong row = tid;
  if (row >= s.batch * s.groups) return;
  const ulong d = s.channels / s.groups, g = row % s.groups, n = row / s.groups;
  const float mean = float(mean_in[row]), rstd = float(rstd_in[row]);
  float a = 0.0f, b = 0.0f;
  for (ulong k = 0; k < d; ++k) {
    const ulong c = g * d + k;
    const float w = s.has_weight ? float(weight[c]) : 1.0f;
    a += w * sums[(n * s.channels + c) * 2];
    b += w * sums[(n * s.channels + c) * 2 + 1];
  }
  const float m = float(d * s.hw);
  const float c2 = (b * mean - a) * rstd * rstd * rstd / m;
  const float c3 = -c2 * mean - b * rstd / m;
  const ulong base = row * d * s.hw;
  for (ulong k = 0; k < d; ++k) {
    const ulong c = g * d + k;
    const float c1 = rstd * (s.has_weight ? float(weight[c]) : 1.0f);
    for (ulong j = base + k * s.hw; j < base + (k + 1) * s.hw; ++j)
      dx[j] = T(c1 * float(dy[j]) + c2 * float(in[j]) + c3);
  }
}

#define METALX_GROUP_NORM_INSTANTIATE(T)                                                                     \
  template [[host_name("group_norm_" #T)]] kernel decltype(group_norm<T>) group_norm<T>;                    \
  template [[host_name("group_norm_channel_sums_" #T)]] kernel decltype(group_norm_channel_sums<T>)         \
      group_norm_channel_sums<T>;                                                                            \
  template [[host_name("group_norm_backward_" #T)]] kernel decltype(group_norm_backward<T>)                 \
      group_norm_backward<T>;

METALX_GROUP_NORM_INSTANTIATE(float)
METALX_GROUP_NORM_INSTANTIATE(half)
METALX_GROUP_NORM_INSTANTIATE(bfloat)
