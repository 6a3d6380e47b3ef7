// The _vm variants of binary kernels, for half and bfloat: b is one value given in the
// compute type (float), not rounded to the tensor's type first; a and the output are
// dense or strided (the templates and parameter blocks of kernels/elementwise.h).
//   <op>_dense_vm_<T>      a and the output contiguous
//   <op>_strided_vm_<T>    any layout, 32-bit or 64-bit index arithmetic
//   <op>_strided64_vm_<T>
// CPU's mul and its three divisions by one value read it this way
// (TensorIteratorBase::original_scalar_value<opmath_t>) and round once, at the end:
// bfloat16 x * 0.1 is x times 0.1f, not times bfloat16(0.1). The host picks these in
// backend/launch/elementwise.cpp (runWithOpmathScalarB).
#pragma once
#include <metal_stdlib>
#include "elementwise.h"
using namespace metal;

template <typename T> using opmath_t = typename opmath<T>::type;

template <template <typename> class Op, typename T>
kernel void binary_dense_vm(device op_result_t<Op, T>* out [[buffer(0)]],
                            device const T* a [[buffer(1)]],
                            device const opmath_t<T>* b [[buffer(2)]],
                            constant OpScalars& k [[buffer(3)]],
                            constant DenseShape& s [[buffer(4)]],
                            uint tid [[thread_position_in_grid]]) {
  typedef opmath_t<T> M;
  typedef op_result_t<Op, T> R;
  Op<M> op;
  op.load(k);
  const M bv = b[0];
  const ulong begin = ulong(tid) * s.per_thread;
  const ulong end = dense_end(begin, s);
  for (ulong i = begin; i < end; ++i) out[i] = R(op(M(a[i]), bv));
}

// Operand 0 is the output, 1 is a; b has no strides.
template <template <typename> class Op, typename T, typename I>
kernel void binary_strided_vm(device op_result_t<Op, T>* out [[buffer(0)]],
                              device const T* a [[buffer(1)]],
                              device const opmath_t<T>* b [[buffer(2)]],
                              constant OpScalars& k [[buffer(3)]],
                              constant StridedShape& s [[buffer(4)]],
                              uint tid [[thread_position_in_grid]],
                              uint threads [[threads_per_grid]]) {
  typedef opmath_t<T> M;
  typedef op_result_t<Op, T> R;
  Op<M> op;
  op.load(k);
  const M bv = b[0];
  const I so = I(s.strides[0][0]), sa = I(s.strides[1][0]);
  for (I item = tid; item < I(s.items); item += threads) {
    I off[2];
    const uint n = strided_item<I, 2>(s, item, off);
    for (uint j = 0; j < n; ++j) out[off[0] + j * so] = R(op(M(a[off[1] + j * sa]), bv));
  }
}

// OP: the functor the variants compute with, in float (it may differ from the one of
// the op's tensor-tensor kernels, which can round steps to T).
#define METALX_BINARY_VM_KERNELS(NAME, OP, T)                                                        \
  template [[host_name(#NAME "_dense_vm_" #T)]] kernel decltype(binary_dense_vm<OP, T>)               \
      binary_dense_vm<OP, T>;                                                                         \
  template [[host_name(#NAME "_strided_vm_" #T)]] kernel decltype(binary_strided_vm<OP, T, uint>)     \
      binary_strided_vm<OP, T, uint>;                                                                 \
  template [[host_name(#NAME "_strided64_vm_" #T)]] kernel decltype(binary_strided_vm<OP, T, ulong>) \
      binary_strided_vm<OP, T, ulong>;
#define METALX_FOR_REDUCED_FLOATS(M, NAME, OP) M(NAME, OP, half) M(NAME, OP, bfloat)
