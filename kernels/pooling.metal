// 2-d pooling, forward and backward: max_pool2d (with indices), avg_pool2d and the
// adaptive variants. Host side: backend/ops/pooling.cpp.
//
// Every tensor is addressed through its own (n, c, h, w) strides, so contiguous and
// channels_last tensors are read and written in place. Forward kernels take a thread
// per output element, max's a run of POOL_RUN outputs along a row. Backward kernels
// (no atomics, deterministic):
//   - max, windows that do not overlap (stride >= the dilated kernel; the common 2x2/2):
//     pool2d_max_backward_windows, a thread per POOL_RUN outputs of a row that writes
//     their windows' input positions: the gradient at the saved index, 0 elsewhere.
//     Each input lies in at most one window, so it gets at most one write; positions
//     in no window are zeroed by the host first (only when the windows do not tile
//     the input);
//   - otherwise a thread per input element, which gathers the gradients of the outputs
//     whose windows hold it.
// Windows: fixed (kernel, stride, padding, dilation) or adaptive (output cell o of
// size O over an input of size I spans [floor(o * I / O), ceil((o + 1) * I / O))).
// Max indices are flat positions in the input plane (h * W + w), as CPU's.
// A thread's (n, c, h, w): when the index space fits in 31 bits (every real model) by
// multiplying with the host's reciprocals of its sizes (a division is tens of cycles on
// a CPU and software on a GPU), else by 64-bit division.
#include <metal_stdlib>
using namespace metal;

// n / d as (mulhi(n, magic) + n) >> shift, exact for n < 2^31 (the host picks
// shift = ceil(log2 d), magic = 2^32 * (2^shift - d) / d + 1).
struct PoolDivider {
  uint magic, shift;
};

struct PoolShape {
  long batch, channels, in_h, in_w, out_h, out_w;
  long kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  long in_s[4];    // self / grad_input strides (n, c, h, w)
  long out_s[4];   // output / grad_output strides
  long idx_s[4];   // indices strides
  long divisor;    // avg: non-zero overrides the window's divisor (negative too, as CPU)
  uint adaptive;
  uint count_include_pad;
  uint fast_index;         // the grid's elements < 2^31: the dividers below are set
  PoolDivider grid_div[3];  // the grid's w, h and channels (output or input, by kernel)
};

inline long adaptive_start(long o, long in, long out) { return (o * in) / out; }
inline long adaptive_end(long o, long in, long out) { return ((o + 1) * in + out - 1) / out; }

inline uint pool_divide(uint n, PoolDivider d) { return (mulhi(n, d.magic) + n) >> d.shift; }

// (n, c, h, w) of element i of the kernel's [batch, channels, H, W] grid, w fastest.
inline long4 unravel(constant PoolShape& s, ulong i, long channels, long h, long w) {
  if (s.fast_index) {
    const uint j = uint(i);
    const uint q0 = pool_divide(j, s.grid_div[0]), q1 = pool_divide(q0, s.grid_div[1]);
    const uint q2 = pool_divide(q1, s.grid_div[2]);
    return long4(long(q2), long(q1 - q2 * uint(channels)), long(q0 - q1 * uint(h)), long(j - q0 * uint(w)));
  }
  const long x = long(i % ulong(w));
  i /= ulong(w);
  const long y = long(i % ulong(h));
  i /= ulong(h);
  const long c = long(i % ulong(channels));
  return long4(long(i / ulong(channels)), c, y, x);
}

inline long offset(const long4 p, constant long* s) { return p.x * s[0] + p.y * s[1] + p.z * s[2] + p.w * s[3]; }

// The outputs along one dim whose windows may hold input position i.
inline long2 candidates(long i, long in, long out, long k, long st, long pad, long dil, uint adaptive) {
  if (adaptive) return long2((i * out) / in, min(((i + 1) * out + in - 1) / in, out));
  const long reach = (k - 1) * dil;  // a window covers [o * st - pad, o * st - pad + reach]
  const long lo = i + pad - reach <= 0 ? 0 : (i + pad - reach + st - 1) / st;
  return long2(lo, min((i + pad) / st + 1, out));
}

// Outputs per thread of pool2d_max and pool2d_max_backward_windows, consecutive along
// a row (kPoolRun on the host, which sizes their grids in runs): one thread's index
// arithmetic and launch serve POOL_RUN small windows.
#define POOL_RUN 8

template <typename T>
kernel void pool2d_max(device const T* in [[buffer(0)]],
                       device T* out [[buffer(1)]],
                       device long* indices [[buffer(2)]],
                       constant PoolShape& s [[buffer(3)]],
                       uint tid [[thread_position_in_grid]]) {
  const long runs = (s.out_w + POOL_RUN - 1) / POOL_RUN;
  if (ulong(tid) >= ulong(s.batch * s.channels * s.out_h * runs)) return;
  const long4 r = unravel(s, tid, s.channels, s.out_h, runs);
  device const T* plane = in + r.x * s.in_s[0] + r.y * s.in_s[1];
  for (long ow = r.w * POOL_RUN; ow < min(r.w * POOL_RUN + POOL_RUN, s.out_w); ++ow) {
    const long4 p = long4(r.x, r.y, r.z, ow);
    long h0, h1, w0, w1, dh = 1, dw = 1;
    if (s.adaptive) {
      h0 = adaptive_start(p.z, s.in_h, s.out_h), h1 = adaptive_end(p.z, s.in_h, s.out_h);
      w0 = adaptive_start(p.w, s.in_w, s.out_w), w1 = adaptive_end(p.w, s.in_w, s.out_w);
    } else {
      dh = s.dilation_h, dw = s.dilation_w;
      h0 = p.z * s.stride_h - s.pad_h, w0 = p.w * s.stride_w - s.pad_w;
      h1 = min(h0 + (s.kernel_h - 1) * dh + 1, s.in_h), w1 = min(w0 + (s.kernel_w - 1) * dw + 1, s.in_w);
      while (h0 < 0) h0 += dh;
      while (w0 < 0) w0 += dw;
    }
    float best = -INFINITY;
    long best_index = h0 * s.in_w + w0;
    for (long y = h0; y < h1; y += dh) {
      for (long x = w0; x < w1; x += dw) {
        const float v = float(plane[y * s.in_s[2] + x * s.in_s[3]]);
        // A NaN wins, the last one, as on CPU. Masks, not a branch: on random data a
        // branch (which GCC makes of a select here) mispredicts every other window.
        const long take = -long(v > best || isnan(v));  // all ones or zero
        best_index = ((y * s.in_w + x) & take) | (best_index & ~take);
        best = as_type<float>((as_type<int>(v) & int(take)) | (as_type<int>(best) & ~int(take)));
      }
    }
    out[offset(p, s.out_s)] = T(best);
    indices[offset(p, s.idx_s)] = best_index;
  }
}

template <typename T>
kernel void pool2d_max_backward(device const T* grad_out [[buffer(0)]],
                                device const long* indices [[buffer(1)]],
                                device T* grad_in [[buffer(2)]],
                                constant PoolShape& s [[buffer(3)]],
                                uint tid [[thread_position_in_grid]]) {
  if (ulong(tid) >= ulong(s.batch * s.channels * s.in_h * s.in_w)) return;
  const long4 p = unravel(s, tid, s.channels, s.in_h, s.in_w);
  const long flat = p.z * s.in_w + p.w;
  const long2 ys = candidates(p.z, s.in_h, s.out_h, s.kernel_h, s.stride_h, s.pad_h, s.dilation_h, s.adaptive);
  const long2 xs = candidates(p.w, s.in_w, s.out_w, s.kernel_w, s.stride_w, s.pad_w, s.dilation_w, s.adaptive);
  float g = 0.0f;
  for (long y = ys.x; y < ys.y; ++y)
    for (long x = xs.x; x < xs.y; ++x) {
      const long4 o = long4(p.x, p.y, y, x);
      // Each add rounded to T, in CPU's order (outputs row by row): CPU's half kernel
      // accumulates in T.
      if (indices[offset(o, s.idx_s)] == flat) g = float(T(g + float(grad_out[offset(o, s.out_s)])));
    }
  grad_in[offset(p, s.in_s)] = T(g);
}

// Non-overlapping windows: a thread per output writes every input position of its
// window (clamped to the input): grad_out at the saved index, 0 at the others. An index
// outside the window contributes nothing, as in the gather. One contribution at most,
// so CPU's half accumulation (each add rounded to T) is the value itself.
template <typename T>
kernel void pool2d_max_backward_windows(device const T* grad_out [[buffer(0)]],
                                        device const long* indices [[buffer(1)]],
                                        device T* grad_in [[buffer(2)]],
                                        constant PoolShape& s [[buffer(3)]],
                                        uint tid [[thread_position_in_grid]]) {
  const long runs = (s.out_w + POOL_RUN - 1) / POOL_RUN;
  if (ulong(tid) >= ulong(s.batch * s.channels * s.out_h * runs)) return;
  const long4 r = unravel(s, tid, s.channels, s.out_h, runs);
  const long dh = s.dilation_h, dw = s.dilation_w;
  device T* plane = grad_in + r.x * s.in_s[0] + r.y * s.in_s[1];
  for (long ow = r.w * POOL_RUN; ow < min(r.w * POOL_RUN + POOL_RUN, s.out_w); ++ow) {
    const long4 p = long4(r.x, r.y, r.z, ow);
    long h0 = p.z * s.stride_h - s.pad_h, w0 = p.w * s.stride_w - s.pad_w;
    const long h1 = min(h0 + (s.kernel_h - 1) * dh + 1, s.in_h), w1 = min(w0 + (s.kernel_w - 1) * dw + 1, s.in_w);
    while (h0 < 0) h0 += dh;
    while (w0 < 0) w0 += dw;
    const long index = indices[offset(p, s.idx_s)];
    const T g = T(0.0f + float(grad_out[offset(p, s.out_s)]));  // -0 becomes +0, as CPU's 0 + g
    for (long y = h0; y < h1; y += dh)
      for (long x = w0; x < w1; x += dw) plane[y * s.in_s[2] + x * s.in_s[3]] = y * s.in_w + x == index ? g : T(0);
  }
}

// The window of output (oy, ox), clamped to the input, and its divisor.
struct AvgWindow {
  long h0, h1, w0, w1;
  float divisor;
};

inline AvgWindow avg_window(constant PoolShape& s, long oy, long ox) {
  AvgWindow r;
  if (s.adaptive) {
    r.h0 = adaptive_start(oy, s.in_h, s.out_h), r.h1 = adaptive_end(oy, s.in_h, s.out_h);
    r.w0 = adaptive_start(ox, s.in_w, s.out_w), r.w1 = adaptive_end(ox, s.in_w, s.out_w);
    r.divisor = float((r.h1 - r.h0) * (r.w1 - r.w0));
    return r;
  }
  long h0 = oy * s.stride_h - s.pad_h, w0 = ox * s.stride_w - s.pad_w;
  long h1 = min(h0 + s.kernel_h, s.in_h + s.pad_h), w1 = min(w0 + s.kernel_w, s.in_w + s.pad_w);
  const long padded = (h1 - h0) * (w1 - w0);
  r.h0 = max(h0, 0L), r.w0 = max(w0, 0L), r.h1 = min(h1, s.in_h), r.w1 = min(w1, s.in_w);
  const long inside = (r.h1 - r.h0) * (r.w1 - r.w0);
  r.divisor = float(s.divisor != 0 ? s.divisor : (s.count_include_pad ? padded : inside));
  return r;
}

template <typename T>
kernel void pool2d_avg(device const T* in [[buffer(0)]],
                       device T* out [[buffer(1)]],
                       constant PoolShape& s [[buffer(2)]],
                       uint tid [[thread_position_in_grid]]) {
  if (ulong(tid) >= ulong(s.batch * s.channels * s.out_h * s.out_w)) return;
  const long4 p = unravel(s, tid, s.channels, s.out_h, s.out_w);
  const AvgWindow win = avg_window(s, p.z, p.w);
  device const T* plane = in + p.x * s.in_s[0] + p.y * s.in_s[1];
  float sum = 0.0f;
  for (long y = win.h0; y < win.h1; ++y)
    for (long x = win.w0; x < win.w1; ++x) sum += float(plane[y * s.in_s[2] + x * s.in_s[3]]);
  // A window entirely in the padding averages nothing: 0, as on CPU.
  out[offset(p, s.out_s)] = T(win.h0 >= win.h1 || win.w0 >= win.w1 ? 0.0f : sum / win.divisor);
}

template <typename T>
kernel void pool2d_avg_backward(device const T* grad_out [[buffer(0)]],
                                device T* grad_in [[buffer(1)]],
                                constant PoolShape& s [[buffer(2)]],
                                uint tid [[thread_position_in_grid]]) {
  if (ulong(tid) >= ulong(s.batch * s.channels * s.in_h * s.in_w)) return;
  const long4 p = unravel(s, tid, s.channels, s.in_h, s.in_w);
  const long2 ys = candidates(p.z, s.in_h, s.out_h, s.kernel_h, s.stride_h, s.pad_h, 1, s.adaptive);
  const long2 xs = candidates(p.w, s.in_w, s.out_w, s.kernel_w, s.stride_w, s.pad_w, 1, s.adaptive);
  float g = 0.0f;
  for (long y = ys.x; y < ys.y; ++y)
    for (long x = xs.x; x < xs.y; ++x) {
      const AvgWindow win = avg_window(s, y, x);
      if (p.z >= win.h0 && p.z < win.h1 && p.w >= win.w0 && p.w < win.w1)
        g = float(T(g + float(T(float(grad_out[offset(long4(p.x, p.y, y, x), s.out_s)]) / win.divisor))));
    }
  grad_in[offset(p, s.in_s)] = T(g);
}

#define METALX_POOL_INSTANTIATE(T)                                                                           \
  template [[host_name("pool2d_max_" #T)]] kernel decltype(pool2d_max<T>) pool2d_max<T>;                    \
  template [[host_name("pool2d_max_backward_" #T)]] kernel decltype(pool2d_max_backward<T>)                 \
      pool2d_max_backward<T>;                                                                                \
  template [[host_name("pool2d_max_backward_windows_" #T)]] kernel decltype(pool2d_max_backward_windows<T>) \
      pool2d_max_backward_windows<T>;                                                                        \
  template [[host_name("pool2d_avg_" #T)]] kernel decltype(pool2d_avg<T>) pool2d_avg<T>;                    \
  template [[host_name("pool2d_avg_backward_" #T)]] kernel decltype(pool2d_avg_backward<T>)                 \
      pool2d_avg_backward<T>;

METALX_POOL_INSTANTIATE(float)
METALX_POOL_INSTANTIATE(half)
METALX_POOL_INSTANTIATE(bfloat)
