// layer_norm forward and backward over a contiguous input seen as [rows, cols] (cols =
// the normalized elements). Host side: backend/ops/layer_norm.cpp.
//
//   layer_norm_<T>, layer_norm_backward_<T>   a thread per row (the simulator, where a
//                                             thread is a loop iteration);
//   layer_norm_rows_<T>, ..._backward_rows_<T> a SIMD group per row (a GPU, and long rows
//                                             on the simulator), combined by simd_sum.
//   layer_norm_param_grad_<T>                 a thread per column sums the weight and
//                                             bias gradients over the rows.
// Statistics are computed in float in two passes (mean, then the squared deviations), as
// CPU does; mean and rstd are stored in T.
#include <metal_stdlib>
using namespace metal;

struct LayerNormShape {
  ulong rows;
  ulong cols;
  float eps;
  uint has_weight;
  uint has_bias;
  uint flags;  // param_grad: 1 = weight gradient, 2 = bias gradient
};

template <bool SIMD>
inline float row_sum(float v) {
  return SIMD ? simd_sum(v) : v;
}

template <typename T, bool SIMD>
kernel void layer_norm(device const T* in [[buffer(0)]],
                       device const T* weight [[buffer(1)]],
                       device const T* bias [[buffer(2)]],
                       device T* out [[buffer(3)]],
                       device T* mean_out [[buffer(4)]],
                       device T* rstd_out [[buffer(5)]],
                       constant LayerNormShape& s [[buffer(6)]],
                       uint tid [[thread_position_in_grid]],
                       uint simd_lane [[thread_index_in_simdgroup]]) {
  const uint lanes = SIMD ? 32 : 1, lane = SIMD ? simd_lane : 0;
  const ulong row = SIMD ? tid / 32 : tid;
  if (row >= s.rows) return;  // a SIMD group shares its row: it leaves as a whole
  const ulong n = s.cols;
  device const T* x = in + row * n;
  device T* y = out + row * n;
  float sum = 0.0f;
  for (ulong j = lane; j < n; j += lanes) sum += float(x[j]);
  const float mean = row_sum<SIMD>(sum) / float(n);
  float sq = 0.0f;
  for (ulong j = lane; j < n; j += lanes) {
    const float d = float(x[j]) - mean;
    sq += d * d;
  }
  const float rstd = 1.0f / sqrt(max(row_sum<SIMD>(sq) / float(n), 0.0f) + s.eps);
  for (ulong j = lane; j < n; j += lanes) {
    float v = (float(x[j]) - mean) * rstd;
    if (s.has_weight) v *= float(weight[j]);
    if (s.has_bias) v += float(bias[j]);
    y[j] = T(v);
  }
  if (lane == 0) {
    mean_out[row] = T(mean);
    rstd_out[row] = T(rstd);
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * weight.
template <typename T, bool SIMD>
kernel void layer_norm_backward(device const T* dy [[buffer(0)]],
                                device const T* in [[buffer(1)]],
                                device const T* mean_in [[buffer(2)]],
                                device const T* rstd_in [[buffer(3)]],
                                device const T* weight [[buffer(4)]],
                                device T* dx [[buffer(5)]],
                                constant LayerNormShape& s [[buffer(6)]],
                                uint tid [[thread_position_in_grid]],
                                uint simd_lane [[thread_index_in_simdgroup]]) {
  const uint lanes = SIMD ? 32 : 1, lane = SIMD ? simd_lane : 0;
  const ulong row = SIMD ? tid / 32 : tid;
  if (row >= s.rows) return;
  const ulong n = s.cols;
  device const T* x = in + row * n;
  device const T* g = dy + row * n;
  const float mean = float(mean_in[row]), rstd = float(rstd_in[row]);
  float a = 0.0f, b = 0.0f;
  for (ulong j = lane; j < n; j += lanes) {
    const float gw = float(g[j]) * (s.has_weight ? float(weight[j]) : 1.0f);
    a += gw;
    b += gw * (float(x[j]) - mean) * rstd;
  }
  a = row_sum<SIMD>(a) / float(n);
  b = row_sum<SIMD>(b) / float(n);
  device T* d = dx + row * n;
  for (ulong j = lane; j < n; j += lanes) {
    const float gw = float(g[j]) * (s.has_weight ? float(weight[j]) : 1.0f);
    const float xhat = (float(x[j]) - mean) * rstd;
    d[j] = T(rstd * (gw - a - xhat * b));
  }
}

template <typename T>
kernel void layer_norm_param_grad(device const T* dy [[buffer(0)]],
                                  device const T* in [[buffer(1)]],
                                  device const T* mean_in [[buffer(2)]],
                                  device const T* rstd_in [[buffer(3)]],
                                  device T* dweight [[buffer(4)]],
                                  device T* dbias [[buffer(5)]],
                                  constant LayerNormShape& s [[buffer(6)]],
                                  uint tid [[thread_position_in_grid]]) {
  const ulong j = tid, n = s.cols;
  if (j >= n) return;
  float dw = 0.0f, db = 0.0f;
  for (ulong r = 0; r < s.rows; ++r) {
    const float g = float(dy[r * n + j]);
    dw += g * (float(in[r * n + j]) - float(mean_in[r])) * float(rstd_in[r]);
    db += g;
  }
  if (s.flags & 1) dweight[j] = T(dw);
  if (s.flags & 2) dbias[j] = T(db);
}

#define METALX_LAYER_NORM_INSTANTIATE(T)                                                                          \
  template [[host_name("layer_norm_" #T)]] kernel decltype(layer_norm<T, false>) layer_norm<T, false>;           \
  template [[host_name("layer_norm_rows_" #T)]] kernel decltype(layer_norm<T, true>) layer_norm<T, true>;        \
  template [[host_name("layer_norm_backward_" #T)]] kernel decltype(layer_norm_backward<T, false>)               \
      layer_norm_backward<T, false>;                                                                             \
  template [[host_name("layer_norm_backward_rows_" #T)]] kernel decltype(layer_norm_backward<T, true>)           \
      layer_norm_backward<T, true>;                                                                              \
  template [[host_name("layer_norm_param_grad_" #T)]] kernel decltype(layer_norm_param_grad<T>)                 \
      layer_norm_param_grad<T>;

METALX_LAYER_NORM_INSTANTIATE(float)
METALX_LAYER_NORM_INSTANTIATE(half)
METALX_LAYER_NORM_INSTANTIATE(bfloat)
