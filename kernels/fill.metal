// Fill: sets every element of a dense range to one value (zero_, fill_, factories).
#include <metal_stdlib>
using namespace metal;

// The value's bit pattern and the element count, bound as one block
// (backend/ops/fill.cpp's FillParams: keep the two in step). An element's value is the
// low bytes of `bits`, so one kernel per element size serves every dtype of that size.
struct FillParams {
  ulong bits;
  ulong count;
};

// A grid-stride loop, so one dispatch of at most a few thousand threadgroups covers any
// element count, including more than 2^32 elements (indices are 64-bit). T is the
// unsigned integer of the element's size: converting `bits` to it keeps the low bytes.
template <typename T>
kernel void fill_dense(device T* out [[buffer(0)]],
                       constant FillParams& params [[buffer(1)]],
                       uint gid [[thread_position_in_grid]],
                       uint threads [[threads_per_grid]]) {
  const T value = T(params.bits);
  for (ulong i = gid; i < params.count; i += threads) out[i] = value;
}

// Named after the launch layer's dtype of each size (launch::KernelFamily).
template [[host_name("fill_dense_uchar")]] kernel decltype(fill_dense<uchar>) fill_dense<uchar>;
template [[host_name("fill_dense_short")]] kernel decltype(fill_dense<ushort>) fill_dense<ushort>;
template [[host_name("fill_dense_int")]] kernel decltype(fill_dense<uint>) fill_dense<uint>;
template [[host_name("fill_dense_long")]] kernel decltype(fill_dense<ulong>) fill_dense<ulong>;
