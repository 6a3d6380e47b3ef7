// The example extension's kernel: out = x + alpha * y on contiguous tensors, one
// thread per element. Compiled at run time by metalx (metalx::ext::compileLibrary).
#include <metal_stdlib>
using namespace metal;

template <typename T>
kernel void scaled_add(device T* out [[buffer(0)]],
                       const device T* x [[buffer(1)]],
                       const device T* y [[buffer(2)]],
                       constant float& alpha [[buffer(3)]],
                       uint i [[thread_position_in_grid]]) {
  // In float for half inputs too, as CPU PyTorch computes half arithmetic.
  out[i] = T(float(x[i]) + alpha * float(y[i]));
}

template [[host_name("scaled_add_float")]] kernel decltype(scaled_add<float>) scaled_add<float>;
template [[host_name("scaled_add_half")]] kernel decltype(scaled_add<half>) scaled_add<half>;
