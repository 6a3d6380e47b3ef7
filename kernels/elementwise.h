// The elementwise kernel templates every unary, binary and ternary op instantiates.
//
// An op is a functor template over its compute type M (float for half and bfloat, the
// storage type otherwise): `M operator()(M a[, M b[, M c]]) const`, returning M or bool
// (predicates say so by deriving from predicate_fn). Scalars the op takes besides its
// tensors (alpha, min, negative_slope, ...) arrive inline in OpScalars; the functor's
// load() picks them up once per thread, in the form of its compute type.
//
// Each op is instantiated per dtype in these access patterns (the host launcher,
// backend/launch/elementwise.cpp, picks one per call):
//   <op>_dense_<T>       every operand contiguous in the same order; each thread does
//                        DenseShape::per_thread consecutive elements
//   <op>_dense_sv_<T>    binary: a is one value (a CPU scalar passed inline, or one
//   <op>_dense_vs_<T>    device element), the rest dense; _vs: b is that value
//   <op>_strided_<T>     any layout: broadcasting, views, mixed orders; sizes and
//   <op>_strided64_<T>   strides inline, 32-bit or 64-bit index arithmetic
// Host-side mirror of the parameter structs: backend/launch/elementwise_params.h.
#pragma once
#include <metal_stdlib>
#include "opmath.h"
using namespace metal;

#define METALX_ELEMENTWISE_MAX_DIMS 8
#define METALX_ELEMENTWISE_MAX_OPERANDS 4

// ---- compute types and inline scalars ----


// The host fills the form of the op's compute type: f for floating kernels, i otherwise.
struct OpScalars {
  float f[4];
  long i[4];
};

template <typename M> struct scalar_of {
  static M get(constant OpScalars& s, int k) { return M(s.i[k]); }
};
template <> struct scalar_of<float> {
  static float get(constant OpScalars& s, int k) { return s.f[k]; }
};
template <> struct scalar_of<bool> {
  static bool get(constant OpScalars& s, int k) { return s.i[k] != 0; }
};
template <typename M> inline M scalar_arg(constant OpScalars& s, int k) { return scalar_of<M>::get(s, k); }

// Functor bases: what an op stores (its input type, or bool) and the default of taking
// no scalars.
struct elementwise_fn {
  template <typename T> using result = T;
  void load(constant OpScalars&) {}
};
struct predicate_fn {
  template <typename T> using result = bool;
  void load(constant OpScalars&) {}
};

template <template <typename> class Op, typename T>
using op_result_t = typename Op<typename opmath<T>::type>::template result<T>;

// ---- shapes ----

struct DenseShape {
  ulong count;      // elements
  uint per_thread;  // consecutive elements per thread
  uint unused;
};

// Dim 0 is the innermost dimension of the (coalesced) iteration space. Work items are
// runs of `chunk` elements along dim 0: a thread splits its item's row index into
// coordinates once, then walks the run with one stride per operand.
struct StridedShape {
  uint ndim;
  uint chunk;
  ulong chunks0;  // ceil(sizes[0] / chunk)
  ulong items;    // chunks0 * (elements / sizes[0])
  ulong sizes[METALX_ELEMENTWISE_MAX_DIMS];
  ulong strides[METALX_ELEMENTWISE_MAX_OPERANDS][METALX_ELEMENTWISE_MAX_DIMS];  // elements; [0] is the output
};

inline ulong dense_end(ulong begin, constant DenseShape& s) {
  const ulong end = begin + s.per_thread;
  return end < s.count ? end : s.count;
}

// Offsets (in elements) of the first element of work item `item` for operands
// 0..N-1, and the number of elements in the run.
template <typename I, int N>
inline uint strided_item(constant StridedShape& s, I item, thread I* off) {
  const I chunks0 = I(s.chunks0);
  I row = item / chunks0;
  const I i0 = (item - row * chunks0) * I(s.chunk);
  for (int n = 0; n < N; ++n) off[n] = i0 * I(s.strides[n][0]);
  for (uint d = 1; d < s.ndim; ++d) {
    const I size = I(s.sizes[d]);
    const I q = row / size;
    const I r = row - q * size;
    for (int n = 0; n < N; ++n) off[n] += r * I(s.strides[n][d]);
    row = q;
  }
  const I left = I(s.sizes[0]) - i0;
  return left < I(s.chunk) ? uint(left) : s.chunk;
}

// ---- unary ----

template <template <typename> class Op, typename T>
kernel void unary_dense(device op_result_t<Op, T>* out [[buffer(0)]],
                        device const T* a [[buffer(1)]],
                        constant OpScalars& k [[buffer(2)]],
                        constant DenseShape& s [[buffer(3)]],
                        uint tid [[thread_position_in_grid]]) {
  typedef typename opmath<T>::type M;
  typedef op_result_t<Op, T> R;
  Op<M> op;
  op.load(k);
  const ulong begin = ulong(tid) * s.per_thread;
  const ulong end = dense_end(begin, s);
  for (ulong i = begin; i < end; ++i) out[i] = R(op(M(a[i])));
}

template <template <typename> class Op, typename T, typename I>
kernel void unary_strided(device op_result_t<Op, T>* out [[buffer(0)]],
                          device const T* a [[buffer(1)]],
                          constant OpScalars& k [[buffer(2)]],
                          constant StridedShape& s [[buffer(3)]],
                          uint tid [[thread_position_in_grid]],
                          uint threads [[threads_per_grid]]) {
  typedef typename opmath<T>::type M;
  typedef op_result_t<Op, T> R;
  Op<M> op;
  op.load(k);
  const I so = I(s.strides[0][0]), sa = I(s.strides[1][0]);
  for (I item = tid; item < I(s.items); item += threads) {
    I off[2];
    const uint n = strided_item<I, 2>(s, item, off);
    for (uint j = 0; j < n; ++j) out[off[0] + j * so] = R(op(M(a[off[1] + j * sa])));
  }
}

// ---- binary ----

template <template <typename> class Op, typename T>
kernel void binary_dense(device op_result_t<Op, T>* out [[buffer(0)]],
                         device const T* a [[buffer(1)]],
                         device const T* b [[buffer(2)]],
                         constant OpScalars& k [[buffer(3)]],
                         constant DenseShape& s [[buffer(4)]],
                         uint tid [[thread_position_in_grid]]) {
  typedef typename opmath<T>::type M;
  typedef op_result_t<Op, T> R;
  Op<M> op;
  op.load(k);
  const ulong begin = ulong(tid) * s.per_thread;
  const ulong end = dense_end(begin, s);
  for (ulong i = begin; i < end; ++i) out[i] = R(op(M(a[i]), M(b[i])));
}

template <template <typename> class Op, typename T>
kernel void binary_dense_sv(device op_result_t<Op, T>* out [[buffer(0)]],
                            device const T* a [[buffer(1)]],
                            device const T* b [[buffer(2)]],
                            constant OpScalars& k [[buffer(3)]],
                            constant DenseShape& s [[buffer(4)]],
                            uint tid [[thread_position_in_grid]]) {
  typedef typename opmath<T>::type M;
  typedef op_result_t<Op, T> R;
  Op<M> op;
  op.load(k);
  const M av = M(a[0]);
  const ulong begin = ulong(tid) * s.per_thread;
  const ulong end = dense_end(begin, s);
  for (ulong i = begin; i < end; ++i) out[i] = R(op(av, M(b[i])));
}

template <template <typename> class Op, typename T>
kernel void binary_dense_vs(device op_result_t<Op, T>* out [[buffer(0)]],
                            device const T* a [[buffer(1)]],
                            device const T* b [[buffer(2)]],
                            constant OpScalars& k [[buffer(3)]],
                            constant DenseShape& s [[buffer(4)]],
                            uint tid [[thread_position_in_grid]]) {
  typedef typename opmath<T>::type M;
  typedef op_result_t<Op, T> R;
  Op<M> op;
  op.load(k);
  const M bv = M(b[0]);
  const ulong begin = ulong(tid) * s.per_thread;
  const ulong end = dense_end(begin, s);
  for (ulong i = begin; i < end; ++i) out[i] = R(op(M(a[i]), bv));
}

template <template <typename> class Op, typename T, typename I>
kernel void binary_strided(device op_result_t<Op, T>* out [[buffer(0)]],
                           device const T* a [[buffer(1)]],
                           device const T* b [[buffer(2)]],
                           constant OpScalars& k [[buffer(3)]],
                           constant StridedShape& s [[buffer(4)]],
                           uint tid [[thread_position_in_grid]],
                           uint threads [[threads_per_grid]]) {
  typedef typename opmath<T>::type M;
  typedef op_result_t<Op, T> R;
  Op<M> op;
  op.load(k);
  const I so = I(s.strides[0][0]), sa = I(s.strides[1][0]), sb = I(s.strides[2][0]);
  for (I item = tid; item < I(s.items); item += threads) {
    I off[3];
    const uint n = strided_item<I, 3>(s, item, off);
    for (uint j = 0; j < n; ++j) out[off[0] + j * so] = R(op(M(a[off[1] + j * sa]), M(b[off[2] + j * sb])));
  }
}

// ---- ternary (the first input may have its own type: where's condition) ----

template <template <typename> class Op, typename T, typename T0>
kernel void ternary_dense(device op_result_t<Op, T>* out [[buffer(0)]],
                          device const T0* a [[buffer(1)]],
                          device const T* b [[buffer(2)]],
                          device const T* c [[buffer(3)]],
                          constant OpScalars& k [[buffer(4)]],
                          constant DenseShape& s [[buffer(5)]],
                          uint tid [[thread_position_in_grid]]) {
  typedef typename opmath<T>::type M;
  typedef typename opmath<T0>::type M0;
  typedef op_result_t<Op, T> R;
  Op<M> op;
  op.load(k);
  const ulong begin = ulong(tid) * s.per_thread;
  const ulong end = dense_end(begin, s);
  for (ulong i = begin; i < end; ++i) out[i] = R(op(M0(a[i]), M(b[i]), M(c[i])));
}

template <template <typename> class Op, typename T, typename T0, typename I>
kernel void ternary_strided(device op_result_t<Op, T>* out [[buffer(0)]],
                            device const T0* a [[buffer(1)]],
                            device const T* b [[buffer(2)]],
                            device const T* c [[buffer(3)]],
                            constant OpScalars& k [[buffer(4)]],
                            constant StridedShape& s [[buffer(5)]],
                            uint tid [[thread_position_in_grid]],
                            uint threads [[threads_per_grid]]) {
  typedef typename opmath<T>::type M;
  typedef typename opmath<T0>::type M0;
  typedef op_result_t<Op, T> R;
  Op<M> op;
  op.load(k);
  const I so = I(s.strides[0][0]), sa = I(s.strides[1][0]), sb = I(s.strides[2][0]), sc = I(s.strides[3][0]);
  for (I item = tid; item < I(s.items); item += threads) {
    I off[4];
    const uint n = strided_item<I, 4>(s, item, off);
    for (uint j = 0; j < n; ++j)
      out[off[0] + j * so] = R(op(M0(a[off[1] + j * sa]), M(b[off[2] + j * sb]), M(c[off[3] + j * sc])));
  }
}

// ---- instantiation: one line per op and dtype ----
// T is the MSL storage type (bool uchar char short int long half bfloat float); it
// also names the kernel, as backend/launch/kernel_table.cpp expects.

#define METALX_UNARY_KERNELS(NAME, OP, T)                                                          \
  template [[host_name(#NAME "_dense_" #T)]] kernel decltype(unary_dense<OP, T>) unary_dense<OP, T>; \
  template [[host_name(#NAME "_strided_" #T)]] kernel decltype(unary_strided<OP, T, uint>)           \
      unary_strided<OP, T, uint>;                                                                    \
  template [[host_name(#NAME "_strided64_" #T)]] kernel decltype(unary_strided<OP, T, ulong>)       \
      unary_strided<OP, T, ulong>;

#define METALX_BINARY_KERNELS(NAME, OP, T)                                                             \
  template [[host_name(#NAME "_dense_" #T)]] kernel decltype(binary_dense<OP, T>) binary_dense<OP, T>;   \
  template [[host_name(#NAME "_dense_sv_" #T)]] kernel decltype(binary_dense_sv<OP, T>)                 \
      binary_dense_sv<OP, T>;                                                                           \
  template [[host_name(#NAME "_dense_vs_" #T)]] kernel decltype(binary_dense_vs<OP, T>)                 \
      binary_dense_vs<OP, T>;                                                                           \
  template [[host_name(#NAME "_strided_" #T)]] kernel decltype(binary_strided<OP, T, uint>)             \
      binary_strided<OP, T, uint>;                                                                      \
  template [[host_name(#NAME "_strided64_" #T)]] kernel decltype(binary_strided<OP, T, ulong>)         \
      binary_strided<OP, T, ulong>;

#define METALX_TERNARY_KERNELS_T0(NAME, OP, T, T0)                                                    \
  template [[host_name(#NAME "_dense_" #T)]] kernel decltype(ternary_dense<OP, T, T0>)                 \
      ternary_dense<OP, T, T0>;                                                                        \
  template [[host_name(#NAME "_strided_" #T)]] kernel decltype(ternary_strided<OP, T, T0, uint>)       \
      ternary_strided<OP, T, T0, uint>;                                                                \
  template [[host_name(#NAME "_strided64_" #T)]] kernel decltype(ternary_strided<OP, T, T0, ulong>)   \
      ternary_strided<OP, T, T0, ulong>;
#define METALX_TERNARY_KERNELS(NAME, OP, T) METALX_TERNARY_KERNELS_T0(NAME, OP, T, T)

// Dtype sets.
#define METALX_FOR_FLOATS(M, NAME, OP) M(NAME, OP, float) M(NAME, OP, half) M(NAME, OP, bfloat)
#define METALX_FOR_INTS(M, NAME, OP) \
  M(NAME, OP, long) M(NAME, OP, int) M(NAME, OP, short) M(NAME, OP, char) M(NAME, OP, uchar)
#define METALX_FOR_NUMBERS(M, NAME, OP) METALX_FOR_FLOATS(M, NAME, OP) METALX_FOR_INTS(M, NAME, OP)
#define METALX_FOR_ALL(M, NAME, OP) METALX_FOR_NUMBERS(M, NAME, OP) M(NAME, OP, bool)
