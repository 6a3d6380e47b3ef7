// softmax and log_softmax, forward and backward, along one dim of a contiguous tensor
// seen as [outer, dim, inner]. Host side: backend/ops/softmax.cpp.
//
//   softmax_rows_<T>  (inner == 1) a SIMD group (32 threads) or a threadgroup (256) per
//                     row: one read of the row keeps a running max and a sum of exp()
//                     relative to it (the "online" softmax), the groups combine their
//                     (max, sum) pairs, then a second pass writes the row.
//   softmax_cols_<T>  a thread per (outer, inner) column, walking dim with a stride of
//                     inner: dims other than the last are read in place, and adjacent
//                     threads read adjacent memory. On the simulator also for the last
//                     dim (a thread is a loop iteration there; its row is one stream).
// The backward kernels have the same two shapes and reduce sum(grad * out) (softmax) or
// sum(grad) (log_softmax) per row before writing the gradient.
//
// Half and bfloat compute in float. The "_half_to_float" forward reads half and writes
// float (softmax(x, dtype=float) on a half x); its backward, "_backward_to_half", reads
// float gradients and writes the half input's gradient.
#include <metal_stdlib>
using namespace metal;

#define METALX_SOFTMAX_GROUP 256

struct SoftmaxShape {
  ulong outer;
  ulong dim;
  ulong inner;
  uint log;                // log_softmax
  uint threads_per_row;    // rows kernels: 32 or 256
};

// A running (max, sum of exp(x - max)) pair; max == -inf means "nothing yet".
struct MaxSum {
  float m;
  float s;
};

inline MaxSum maxsum_add(MaxSum a, float x) {
  if (x > a.m) {
    a.s = (a.m == -INFINITY ? 0.0f : a.s * exp(a.m - x)) + 1.0f;
    a.m = x;
  } else if (x != -INFINITY) {  // -inf adds exp(-inf) = 0 (and -inf - -inf would be NaN)
    a.s += exp(x - a.m);          // a NaN x makes the sum NaN, as on CPU
  }
  return a;
}

inline MaxSum maxsum_combine(MaxSum a, MaxSum b) {
  const float m = max(a.m, b.m);
  if (m == -INFINITY) return MaxSum{m, a.s + b.s};
  const float sa = a.m == -INFINITY ? 0.0f : a.s * exp(a.m - m);
  const float sb = b.m == -INFINITY ? 0.0f : b.s * exp(b.m - m);
  return MaxSum{m, sa + sb};
}

// Every lane ends with the SIMD group's combined pair; with 256 threads per row, the
// threadgroup's.
inline MaxSum maxsum_reduce(MaxSum a, uint tpr, uint simd_group, threadgroup MaxSum* shared) {
  for (ushort d = 16; d > 0; d >>= 1) {
    const MaxSum b = {simd_shuffle_xor(a.m, d), simd_shuffle_xor(a.s, d)};
    a = maxsum_combine(a, b);
  }
  if (tpr == METALX_SOFTMAX_GROUP) {
    shared[simd_group] = a;  // every lane holds the same pair: any may write it
    threadgroup_barrier(mem_flags::mem_threadgroup);
    a = shared[0];
    for (uint g = 1; g < METALX_SOFTMAX_GROUP / 32; ++g) a = maxsum_combine(a, shared[g]);
  }
  return a;
}

inline float sum_reduce(float a, uint tpr, uint simd_group, threadgroup float* shared) {
  for (ushort d = 16; d > 0; d >>= 1) a += simd_shuffle_xor(a, d);
  if (tpr == METALX_SOFTMAX_GROUP) {
    shared[simd_group] = a;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    a = 0.0f;
    for (uint g = 0; g < METALX_SOFTMAX_GROUP / 32; ++g) a += shared[g];
  }
  return a;
}

template <typename T, typename O>
kernel void softmax_rows(device const T* in [[buffer(0)]],
                         device O* out [[buffer(1)]],
                         constant SoftmaxShape& s [[buffer(2)]],
                         uint group [[threadgroup_position_in_grid]],
                         uint tid [[thread_index_in_threadgroup]],
                         uint simd_group [[simdgroup_index_in_threadgroup]]) {
  threadgroup MaxSum shared[METALX_SOFTMAX_GROUP / 32];
  const uint tpr = s.threads_per_row;
  const ulong row = ulong(group) * (METALX_SOFTMAX_GROUP / tpr) + tid / tpr;
  const uint t = tid % tpr;
  const bool active = row < s.outer;
  device const T* x = in + (active ? row : 0) * s.dim;
  MaxSum acc = {-INFINITY, 0.0f};
  if (active)
    for (ulong j = t; j < s.dim; j += tpr) acc = maxsum_add(acc, float(x[j]));
  acc = maxsum_reduce(acc, tpr, simd_group, shared);
  if (!active) return;
  device O* y = out + row * s.dim;
  if (s.log) {
    // (x - max) - log(sum), in this order: max + log(sum) would lose log(sum) next to a
    // large max. The sum and its log rounded to the output type, as CPU's last-dim kernel.
    const float log_sum = float(O(log(float(O(acc.s)))));
    for (ulong j = t; j < s.dim; j += tpr) y[j] = O((float(x[j]) - acc.m) - log_sum);
  } else {
    const float inv = 1.0f / acc.s;
    for (ulong j = t; j < s.dim; j += tpr) y[j] = O(exp(float(x[j]) - acc.m) * inv);
  }
}

template <typename T, typename O>
kernel void softmax_cols(device const T* in [[buffer(0)]],
                         device O* out [[buffer(1)]],
                         constant SoftmaxShape& s [[buffer(2)]],
                         uint tid [[thread_position_in_grid]]) {
  if (ulong(tid) >= s.outer * s.inner) return;
  const ulong o = tid / s.inner, i = tid - o * s.inner, step = s.inner, n = s.dim;
  device const T* x = in + o * n * step + i;
  device O* y = out + o * n * step + i;
  // Two passes over the input (max, then the sum relative to it): CPU's order, and
  // loops the simulator's compiler vectorises.
  float m = -INFINITY;
  for (ulong j = 0; j < n; ++j) m = max(m, float(x[j * step]));
  float sum = 0.0f;
  for (ulong j = 0; j < n; ++j) sum += exp(float(x[j * step]) - m);
  if (s.log) {
    // CPU rounds the sum and its log to the output type along the last dim only.
    const float log_sum = step == 1 ? float(O(log(float(O(sum))))) : log(sum);
    for (ulong j = 0; j < n; ++j) y[j * step] = O((float(x[j * step]) - m) - log_sum);
  } else if (step == 1) {
    const float inv = 1.0f / sum;
    for (ulong j = 0; j < n; ++j) y[j * step] = O(exp(float(x[j * step]) - m) * inv);
  } else {
    // Other dims: CPU rounds each exp() to the output type before dividing.
    for (ulong j = 0; j < n; ++j) y[j * step] = O(float(O(exp(float(x[j * step]) - m))) / sum);
  }
}

// grad_input = out * (grad - sum(grad * out))     softmax
//            = grad - exp(out) * sum(grad)         log_softmax
template <typename T, typename O>
kernel void softmax_backward_rows(device const T* grad [[buffer(0)]],
                                  device const T* outp [[buffer(1)]],
                                  device O* gin [[buffer(2)]],
                                  constant SoftmaxShape& s [[buffer(3)]],
                                  uint group [[threadgroup_position_in_grid]],
                                  uint tid [[thread_index_in_threadgroup]],
                                  uint simd_group [[simdgroup_index_in_threadgroup]]) {
  threadgroup float shared[METALX_SOFTMAX_GROUP / 32];
  const uint tpr = s.threads_per_row;
  const ulong row = ulong(group) * (METALX_SOFTMAX_GROUP / tpr) + tid / tpr;
  const uint t = tid % tpr;
  const bool active = row < s.outer;
  const ulong base = (active ? row : 0) * s.dim;
  device const T* g = grad + base;
  device const T* y = outp + base;
  float acc = 0.0f;
  if (active) {
    if (s.log)
      for (ulong j = t; j < s.dim; j += tpr) acc += float(g[j]);
    else
      for (ulong j = t; j < s.dim; j += tpr) acc += float(g[j]) * float(y[j]);
  }
  acc = sum_reduce(acc, tpr, simd_group, shared);
  if (!active) return;
  device O* gi = gin + base;
  if (s.log)
    for (ulong j = t; j < s.dim; j += tpr) gi[j] = O(float(g[j]) - exp(float(y[j])) * acc);
  else
    for (ulong j = t; j < s.dim; j += tpr) gi[j] = O(float(y[j]) * (float(g[j]) - acc));
}

template <typename T, typename O>
kernel void softmax_backward_cols(device const T* grad [[buffer(0)]],
                                  device const T* outp [[buffer(1)]],
                                  device O* gin [[buffer(2)]],
                                  constant SoftmaxShape& s [[buffer(3)]],
                                  uint tid [[thread_position_in_grid]]) {
  if (ulong(tid) >= s.outer * s.inner) return;
  const ulong o = tid / s.inner, i = tid - o * s.inner, step = s.inner, n = s.dim;
  const ulong base = o * n * step + i;
  device const T* g = grad + base;
  device const T* y = outp + base;
  device O* gi = gin + base;
  float acc = 0.0f;
  if (s.log) {
    for (ulong j = 0; j < n; ++j) acc += float(g[j * step]);
    for (ulong j = 0; j < n; ++j) gi[j * step] = O(float(g[j * step]) - exp(float(y[j * step])) * acc);
  } else {
    for (ulong j = 0; j < n; ++j) acc += float(g[j * step]) * float(y[j * step]);
    for (ulong j = 0; j < n; ++j) gi[j * step] = O(float(y[j * step]) * (float(g[j * step]) - acc));
  }
}

#define METALX_SOFTMAX_INSTANTIATE(NAME, IN, OUT)                                                        \
  template [[host_name(#NAME "_rows_" #IN)]] kernel decltype(softmax_rows<IN, OUT>) softmax_rows<IN, OUT>; \
  template [[host_name(#NAME "_cols_" #IN)]] kernel decltype(softmax_cols<IN, OUT>) softmax_cols<IN, OUT>;
#define METALX_SOFTMAX_BACKWARD_INSTANTIATE(NAME, IN, OUT)                           \
  template [[host_name(#NAME "_rows_" #IN)]] kernel decltype(softmax_backward_rows<IN, OUT>) \
      softmax_backward_rows<IN, OUT>;                                                 \
  template [[host_name(#NAME "_cols_" #IN)]] kernel decltype(softmax_backward_cols<IN, OUT>) \
      softmax_backward_cols<IN, OUT>;

METALX_SOFTMAX_INSTANTIATE(softmax, float, float)
METALX_SOFTMAX_INSTANTIATE(softmax, half, half)
METALX_SOFTMAX_INSTANTIATE(softmax, bfloat, bfloat)
METALX_SOFTMAX_INSTANTIATE(softmax_half_to_float, half, float)
METALX_SOFTMAX_BACKWARD_INSTANTIATE(softmax_backward, float, float)
METALX_SOFTMAX_BACKWARD_INSTANTIATE(softmax_backward, half, half)
METALX_SOFTMAX_BACKWARD_INSTANTIATE(softmax_backward, bfloat, bfloat)
METALX_SOFTMAX_BACKWARD_INSTANTIATE(softmax_backward_to_half, float, half)
