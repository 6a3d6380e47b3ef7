// arange's values: out[i] = (start + i * step) * scale over a dense output. The host
// sends start and step as integers in units of scale (a power of two, 1 for integer
// dtypes) and only ranges whose values are exact in T, so each element is computed
// exactly and converted once, as CPU's double arithmetic gives. Host side:
// backend/ops/range.cpp.
#include <metal_stdlib>
using namespace metal;

struct RangeParams {
  long start;
  long step;
  ulong count;
  float scale;
};

// Through float for the floating types (exact: |v| < 2^24 and scale a power of two).
template <typename T> inline T range_value(long v, float) { return T(v); }
template <> inline float range_value<float>(long v, float scale) { return float(v) * scale; }
template <> inline half range_value<half>(long v, float scale) { return half(float(v) * scale); }
template <> inline bfloat range_value<bfloat>(long v, float scale) { return bfloat(float(v) * scale); }

template <typename T>
kernel void range_arange(device T* out [[buffer(0)]], constant RangeParams& p [[buffer(1)]],
                         uint gid [[thread_position_in_grid]], uint threads [[threads_per_grid]]) {
  for (ulong i = gid; i < p.count; i += threads) out[i] = range_value<T>(p.start + long(i) * p.step, p.scale);
}

#define METALX_RANGE_KERNEL(T) template [[host_name("range_arange_" #T)]] kernel decltype(range_arange<T>) range_arange<T>;
METALX_RANGE_KERNEL(float)
METALX_RANGE_KERNEL(half)
METALX_RANGE_KERNEL(bfloat)
METALX_RANGE_KERNEL(long)
METALX_RANGE_KERNEL(int)
METALX_RANGE_KERNEL(short)
METALX_RANGE_KERNEL(char)
METALX_RANGE_KERNEL(uchar)
