// histc: counts of values in `bins` equal-width bins over [left, right]. A thread per
// value (grid-stride) picks its bin with CPU's arithmetic (histc's linear interpolation,
// each operation rounded to the input type as c10::Half/BFloat16 arithmetic does; a
// value equal to right goes into the last bin; NaN and values outside are skipped) and
// adds one to that bin's 32-bit counter atomically; the host converts the counts to the
// output dtype. Host side: backend/ops/histc.cpp; the input arrives contiguous.
#include <metal_stdlib>
using namespace metal;

struct HistcParams {
  ulong count;
  long bins;
  float left;   // the outer edges, already rounded to T
  float right;
};

template <typename T>
kernel void histc(device const T* in [[buffer(0)]],
                  device atomic_uint* counts [[buffer(1)]],
                  constant HistcParams& p [[buffer(2)]],
                  uint tid [[thread_position_in_grid]],
                  uint threads [[threads_per_grid]]) {
  const float width = float(T(p.right - p.left));
  const float bins = float(T(float(p.bins)));
  for (ulong i = tid; i < p.count; i += threads) {
    const float v = float(in[i]);
    if (!(v >= p.left && v <= p.right)) continue;
    const float scaled = float(T(float(T(v - p.left)) * bins));
    long pos = long(float(T(scaled / width)));
    if (pos >= p.bins) pos = p.bins - 1;  // v == right (CPU's rule); never past the end
    atomic_fetch_add_explicit(&counts[pos], 1u, memory_order_relaxed);
  }
}

#define METALX_HISTC_KERNEL(T) template [[host_name("histc_" #T)]] kernel decltype(histc<T>) histc<T>;
METALX_HISTC_KERNEL(float)
METALX_HISTC_KERNEL(half)
METALX_HISTC_KERNEL(bfloat)
