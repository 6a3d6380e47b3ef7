// embedding_bag on the device. Host side: backend/ops/embedding_bag.cpp.
//
//   embedding_bag_forward: one thread per (bag, column) walks its bag's indices in
//     order, reducing in float: sum (times the per-sample weight, if any), mean (the
//     sum over the bag's non-padding count) or max (the first largest value, with the
//     index it came from, as CPU keeps it). padding_idx entries are skipped, and so are
//     out-of-range indices (the device-side index check reports them). Column 0's
//     thread also writes the bag's non-padding count and, for each of its positions,
//     offset2bag (the bag a position belongs to), which the backward uses.
//   embedding_bag_psw_backward: one thread per sample: the gradient of its per-sample
//     weight, the dot product of its bag's output gradient with its weight row.
// The weight backward needs no kernel of its own: it is index_select, a scale and
// embedding_dense_backward's deterministic scatter (or scatter_add for max).
#include <metal_stdlib>
using namespace metal;

enum BagMode : uint { kSum = 0, kMean = 1, kMax = 2 };

// Mirrors backend/ops/embedding_bag.cpp's BagParams.
struct BagParams {
  ulong bags;
  ulong width;         // the embedding size (columns)
  ulong num_indices;
  ulong num_offsets;   // bags end at the next offset; the last at num_indices
  long num_weights;    // valid indices are in [0, num_weights)
  long padding_idx;    // -1: none
  long weight_stride0;
  long weight_stride1;
  uint mode;
  uint has_weights;    // per-sample weights (mode sum)
  uint round_to_even;  // round the float sum to T to nearest even (CPU's generic path)
  uint unused;
};

// A bag's positions: [offsets[bag], the next offset or num_indices), clamped into the
// indices (bad offsets are reported by the host's device-side checks).
inline ulong clamp_position(long v, constant BagParams& p) {
  return v < 0 ? 0ul : (ulong(v) > p.num_indices ? p.num_indices : ulong(v));
}
template <typename I> inline ulong bag_start(device const I* offsets, ulong bag, constant BagParams& p) {
  return clamp_position(long(offsets[bag]), p);
}
template <typename I> inline ulong bag_end(device const I* offsets, ulong bag, constant BagParams& p, ulong start) {
  const ulong end = clamp_position(bag + 1 < p.num_offsets ? long(offsets[bag + 1]) : long(p.num_indices), p);
  return end < start ? start : end;
}

// A bag's sum as T. CPU's fast path (no padding_idx, unit column stride) sums in
// float and its bfloat16 rounds halfway cases away from zero (adding half a unit and
// truncating), not to even: so does this. Its generic path (padding_idx, strided
// columns) rounds the float sum to nearest even (`round_to_even`).
template <typename T> inline T round_sum(float v) { return T(v); }
template <> inline bfloat round_sum<bfloat>(float v) {
  if (isnan(v)) return bfloat(v);
  return bfloat(as_type<float>((as_type<uint>(v) + 0x8000u) & 0xFFFF0000u));
}

template <typename T, typename I>
kernel void embedding_bag_forward(device const T* weight [[buffer(0)]], device const I* indices [[buffer(1)]],
                                  device const I* offsets [[buffer(2)]], device const T* sample_weights [[buffer(3)]],
                                  device T* out [[buffer(4)]], device I* max_indices [[buffer(5)]],
                                  device I* bag_size [[buffer(6)]], device I* offset2bag [[buffer(7)]],
                                  constant BagParams& p [[buffer(8)]],
                                  uint gid [[thread_position_in_grid]], uint threads [[threads_per_grid]]) {
  for (ulong e = gid; e < p.bags * p.width; e += threads) {
    const ulong bag = e / p.width;
    const ulong col = e % p.width;
    const ulong start = bag_start(offsets, bag, p);
    const ulong end = bag_end(offsets, bag, p, start);
    float acc = 0.0f;
    long count = 0;
    long arg = 0;
    for (ulong i = start; i < end; ++i) {
      const long idx = long(indices[i]);
      if (idx == p.padding_idx || idx < 0 || idx >= p.num_weights) continue;
      float v = float(weight[idx * p.weight_stride0 + long(col) * p.weight_stride1]);
      if (p.mode == kMax) {
        if (count == 0 || v > acc) {
          acc = v;
          arg = idx;
        }
      } else {
        if (p.has_weights) v *= float(sample_weights[i]);
        acc += v;
      }
      ++count;
    }
    if (p.mode == kMax) {
      out[e] = T(acc);
    } else {
      // mean: CPU divides the sum, already in T, by the count
      const T sum = p.round_to_even ? T(acc) : round_sum<T>(acc);
      out[e] = p.mode == kMean && count > 0 ? T(float(sum) / float(count)) : sum;
    }
    if (p.mode == kMax) max_indices[e] = I(arg);
    if (col == 0) {
      bag_size[bag] = I(p.mode == kSum ? 0 : count);
      for (ulong i = start; i < end; ++i) offset2bag[i] = I(bag);
    }
  }
}

template <typename T, typename I>
kernel void embedding_bag_psw_backward(device const T* grad [[buffer(0)]], device const T* weight [[buffer(1)]],
                                       device const I* indices [[buffer(2)]], device const I* offset2bag [[buffer(3)]],
                                       device T* out [[buffer(4)]], constant BagParams& p [[buffer(5)]],
                                       uint gid [[thread_position_in_grid]], uint threads [[threads_per_grid]]) {
  for (ulong i = gid; i < p.num_indices; i += threads) {
    const long idx = long(indices[i]);
    float dot = 0.0f;
    if (idx != p.padding_idx && idx >= 0 && idx < p.num_weights) {
      const long g = long(offset2bag[i]) * long(p.width);  // grad is contiguous [bags, width]
      for (ulong c = 0; c < p.width; ++c)
        dot += float(grad[g + long(c)]) * float(weight[idx * p.weight_stride0 + long(c) * p.weight_stride1]);
    }
    out[i] = T(dot);
  }
}

#define METALX_BAG_KERNELS(T, I)                                                                                  \
  template [[host_name("embedding_bag_forward_" #I "_" #T)]] kernel decltype(embedding_bag_forward<T, I>)        \
      embedding_bag_forward<T, I>;                                                                                \
  template [[host_name("embedding_bag_psw_backward_" #I "_" #T)]] kernel decltype(embedding_bag_psw_backward<T, I>) \
      embedding_bag_psw_backward<T, I>;

METALX_BAG_KERNELS(float, long)
METALX_BAG_KERNELS(float, int)
METALX_BAG_KERNELS(half, long)
METALX_BAG_KERNELS(half, int)
METALX_BAG_KERNELS(bfloat, long)
METALX_BAG_KERNELS(bfloat, int)
