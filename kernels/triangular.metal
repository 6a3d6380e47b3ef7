// tril / triu: keep the elements on one side of a diagonal of the last two dims, zero
// the rest. Host side: backend/ops/triangular.cpp.
//
// The op only moves elements, and zero is all-bits-zero in every dtype (float, half,
// bfloat, integers, bool), so kernels exist per element size (uchar, short, int, long)
// and serve every dtype of that size. A thread takes element e of the output's shape
// (grid-stride, so any count), finds its coordinates and reads and writes through each
// tensor's own strides: views and in-place calls need no copies.
#include <metal_stdlib>
using namespace metal;

#define METALX_TRIANGULAR_MAX_DIMS 8

struct TriangularParams {
  uint ndim;
  uint upper;     // 1: triu (keep col - row >= diagonal); 0: tril (keep col - row <= diagonal)
  long diagonal;
  ulong count;    // elements
  ulong sizes[METALX_TRIANGULAR_MAX_DIMS];
  long in_strides[METALX_TRIANGULAR_MAX_DIMS];
  long out_strides[METALX_TRIANGULAR_MAX_DIMS];
};

template <typename T>
kernel void triangular(device const T* in [[buffer(0)]],
                       device T* out [[buffer(1)]],
                       constant TriangularParams& p [[buffer(2)]],
                       uint tid [[thread_position_in_grid]],
                       uint threads [[threads_per_grid]]) {
  const uint last = p.ndim - 1;
  for (ulong e = tid; e < p.count; e += threads) {
    ulong rest = e;
    long in_off = 0, out_off = 0, row = 0, col = 0;
    for (uint k = 0; k < p.ndim; ++k) {  // innermost dim first
      const uint d = last - k;
      const ulong c = rest % p.sizes[d];
      rest /= p.sizes[d];
      if (k == 0) col = long(c);
      if (k == 1) row = long(c);
      in_off += long(c) * p.in_strides[d];
      out_off += long(c) * p.out_strides[d];
    }
    const long k = col - row;
    const bool keep = p.upper ? k >= p.diagonal : k <= p.diagonal;
    out[out_off] = keep ? in[in_off] : T(0);
  }
}

#define METALX_TRIANGULAR_KERNEL(T) \
  template [[host_name("triangular_" #T)]] kernel decltype(triangular<T>) triangular<T>;
METALX_TRIANGULAR_KERNEL(uchar)
METALX_TRIANGULAR_KERNEL(short)
METALX_TRIANGULAR_KERNEL(int)
METALX_TRIANGULAR_KERNEL(long)
