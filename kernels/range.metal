// arange's values: out[i] = start + i * step over a dense output. The host sends only
// integral start and step (values exact in every dtype's arithmetic), so each element
// is computed exactly and converted once, as CPU's double arithmetic gives. Host side:
// backend/ops/range.cpp.
#include <metal_stdlib>
using namespace metal;

struct RangeParams {
  long start;
  long step;
  ulong count;
};

// Through float for the floating types (the host sends only values exact in T).
template <typename T> inline T range_value(long v) { return T(v); }
template <> inline float range_value<float>(long v) { return float(v); }
template <> inline half range_value<half>(long v) { return half(float(v)); }
template <> inline bfloat range_value<bfloat>(long v) { return bfloat(float(v)); }

template <typename T>
kernel void range_arange(device T* out [[buffer(0)]], constant RangeParams& p [[buffer(1)]],
                         uint gid [[thread_position_in_grid]], uint threads [[threads_per_grid]]) {
  for (ulong i = gid; i < p.count; i += threads) out[i] = range_value<T>(p.start + long(i) * p.step);
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
