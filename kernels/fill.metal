// Fill: sets every element of a dense range to one value (zero_, fill_, factories).
#include <metal_stdlib>
using namespace metal;

// A grid-stride loop, so one dispatch of at most a few thousand threadgroups covers any
// element count, including more than 2^32 elements (indices are 64-bit).
template <typename T>
kernel void fill_dense(device T* out [[buffer(0)]],
                       constant T& value [[buffer(1)]],
                       constant ulong& count [[buffer(2)]],
                       uint gid [[thread_position_in_grid]],
                       uint threads [[threads_per_grid]]) {
  for (ulong i = gid; i < count; i += threads) out[i] = value;
}

template [[host_name("fill_dense_float")]] kernel decltype(fill_dense<float>) fill_dense<float>;
template [[host_name("fill_dense_half")]] kernel decltype(fill_dense<half>) fill_dense<half>;
template [[host_name("fill_dense_bfloat")]] kernel decltype(fill_dense<bfloat>) fill_dense<bfloat>;
template [[host_name("fill_dense_long")]] kernel decltype(fill_dense<long>) fill_dense<long>;
template [[host_name("fill_dense_int")]] kernel decltype(fill_dense<int>) fill_dense<int>;
template [[host_name("fill_dense_short")]] kernel decltype(fill_dense<short>) fill_dense<short>;
template [[host_name("fill_dense_char")]] kernel decltype(fill_dense<char>) fill_dense<char>;
template [[host_name("fill_dense_uchar")]] kernel decltype(fill_dense<uchar>) fill_dense<uchar>;
template [[host_name("fill_dense_bool")]] kernel decltype(fill_dense<bool>) fill_dense<bool>;
