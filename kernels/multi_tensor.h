// Multi-tensor kernels: one dispatch updates many tensors, as CUDA's multi_tensor_apply
// does for _foreach_* ops and fused optimizers.
//
// Metal has no pointers to pass in a table without argument buffers, so a dispatch
// binds up to METALX_MT_SLOTS distinct buffers ("slots", [[buffer(0..27)]]) and a
// table of tensors ([[buffer(29)]], inline bytes): for each tensor, where each of its
// operands lies (slot and byte offset, packed in one ulong: slot << 56 | offset), its
// element count, its first chunk and its own scalar (ScalarList ops). Tensors that share
// a caching-allocator buffer share a slot. A chunk is the run of elements one
// threadgroup updates; threadgroup g finds its tensor by a binary search of first_chunk.
// Each thread does MultiTensorArgs::per_thread consecutive elements of its chunk.
//
// The host side (backend/launch/multi_tensor.cpp) mirrors these structs and packs the
// dispatches. An op is a functor over the compute type M (float for half and bfloat)
// whose load() reads its scalars; kernel templates per operand shape are below.
#pragma once
#include <metal_stdlib>
#include "opmath.h"
using namespace metal;

#define METALX_MT_SLOTS 28
#define METALX_MT_MAX_LISTS 6


// [[buffer(28)]]: what is the same for every tensor of the dispatch.
struct MultiTensorArgs {
  float f[8];      // the op's scalars
  uint flags;      // the op's switches (bit meanings are the op's)
  uint ntensors;   // entries in the table
  uint per_thread; // consecutive elements per thread
  uint chunk;      // elements per threadgroup (threads per group * per_thread)
  ulong extra[4];  // device scalars the op reads (lr, grad_scale, ...): packed locations
};

// [[buffer(29)]]: one entry per tensor.
struct MultiTensorEntry {
  ulong loc[METALX_MT_MAX_LISTS];  // packed locations of the operands, in the op's order
  ulong numel;
  uint first_chunk;
  float scalar;  // this tensor's scalar (ScalarList ops; the Scalar for Scalar ops)
};

#define METALX_MT_SLOT_PARAMS                                                                                  \
  device uchar *s0 [[buffer(0)]], device uchar *s1 [[buffer(1)]], device uchar *s2 [[buffer(2)]],               \
      device uchar *s3 [[buffer(3)]], device uchar *s4 [[buffer(4)]], device uchar *s5 [[buffer(5)]],           \
      device uchar *s6 [[buffer(6)]], device uchar *s7 [[buffer(7)]], device uchar *s8 [[buffer(8)]],           \
      device uchar *s9 [[buffer(9)]], device uchar *s10 [[buffer(10)]], device uchar *s11 [[buffer(11)]],       \
      device uchar *s12 [[buffer(12)]], device uchar *s13 [[buffer(13)]], device uchar *s14 [[buffer(14)]],     \
      device uchar *s15 [[buffer(15)]], device uchar *s16 [[buffer(16)]], device uchar *s17 [[buffer(17)]],     \
      device uchar *s18 [[buffer(18)]], device uchar *s19 [[buffer(19)]], device uchar *s20 [[buffer(20)]],     \
      device uchar *s21 [[buffer(21)]], device uchar *s22 [[buffer(22)]], device uchar *s23 [[buffer(23)]],     \
      device uchar *s24 [[buffer(24)]], device uchar *s25 [[buffer(25)]], device uchar *s26 [[buffer(26)]],     \
      device uchar *s27 [[buffer(27)]], constant MultiTensorArgs &args [[buffer(28)]],                           \
      constant MultiTensorEntry *table [[buffer(29)]], uint group [[threadgroup_position_in_grid]],             \
      uint lane [[thread_position_in_threadgroup]]

// The slots as an array, the thread's tensor entry `e` and its element range
// [begin, end) (empty for threads past the tensor's end).
#define METALX_MT_PROLOGUE                                                                                     \
  device uchar *const slots[METALX_MT_SLOTS] = {s0,  s1,  s2,  s3,  s4,  s5,  s6,  s7,  s8,  s9,               \
                                                s10, s11, s12, s13, s14, s15, s16, s17, s18, s19,              \
                                                s20, s21, s22, s23, s24, s25, s26, s27};                       \
  const uint tensor_index = mt_find_tensor(table, args.ntensors, group);                                       \
  constant MultiTensorEntry &e = table[tensor_index];                                                          \
  const ulong begin = ulong(group - e.first_chunk) * args.chunk + ulong(lane) * args.per_thread;              \
  const ulong end = min(begin + args.per_thread, e.numel);

// The entry whose chunks include `group`: the last one with first_chunk <= group.
inline uint mt_find_tensor(constant MultiTensorEntry *table, uint n, uint group) {
  uint lo = 0, hi = n - 1;
  while (lo < hi) {
    const uint mid = (lo + hi + 1) / 2;
    if (table[mid].first_chunk <= group) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

template <typename T> inline device T *mt_ptr(device uchar *const *slots, ulong loc) {
  return reinterpret_cast<device T *>(slots[loc >> 56] + (loc & 0x00fffffffffffffful));
}

// ---- kernel templates: out = op(inputs) over each tensor's elements ----
// Operand order in the entry: inputs first, the output last (the output may be an
// input's own location: the in-place forms).

// out = op(a)
template <template <typename> class Op, typename T>
kernel void mt_unary(METALX_MT_SLOT_PARAMS) {
  typedef typename opmath<T>::type M;
  METALX_MT_PROLOGUE
  Op<M> op;
  op.load(args, e.scalar);
  device const T *a = mt_ptr<T>(slots, e.loc[0]);
  device T *out = mt_ptr<T>(slots, e.loc[1]);
  for (ulong i = begin; i < end; ++i) out[i] = T(op(M(a[i])));
}

// out = op(a, b), b a tensor of the second list
template <template <typename> class Op, typename T>
kernel void mt_binary_list(METALX_MT_SLOT_PARAMS) {
  typedef typename opmath<T>::type M;
  METALX_MT_PROLOGUE
  Op<M> op;
  op.load(args, e.scalar);
  device const T *a = mt_ptr<T>(slots, e.loc[0]);
  device const T *b = mt_ptr<T>(slots, e.loc[1]);
  device T *out = mt_ptr<T>(slots, e.loc[2]);
  for (ulong i = begin; i < end; ++i) out[i] = T(op(M(a[i]), M(b[i])));
}

// out = op(a, s), s the tensor's scalar (Scalar and ScalarList forms)
template <template <typename> class Op, typename T>
kernel void mt_binary_scalar(METALX_MT_SLOT_PARAMS) {
  typedef typename opmath<T>::type M;
  METALX_MT_PROLOGUE
  Op<M> op;
  op.load(args, e.scalar);
  const M s = M(e.scalar);
  device const T *a = mt_ptr<T>(slots, e.loc[0]);
  device T *out = mt_ptr<T>(slots, e.loc[1]);
  for (ulong i = begin; i < end; ++i) out[i] = T(op(M(a[i]), s));
}

// out = op(a, s), s one element of a device tensor (extra[0]), of the lists' dtype
template <template <typename> class Op, typename T>
kernel void mt_binary_tensor(METALX_MT_SLOT_PARAMS) {
  typedef typename opmath<T>::type M;
  METALX_MT_PROLOGUE
  Op<M> op;
  op.load(args, e.scalar);
  const M s = M(*mt_ptr<T>(slots, args.extra[0]));
  device const T *a = mt_ptr<T>(slots, e.loc[0]);
  device T *out = mt_ptr<T>(slots, e.loc[1]);
  for (ulong i = begin; i < end; ++i) out[i] = T(op(M(a[i]), s));
}

// out = op(a, b, c), each of its own list
template <template <typename> class Op, typename T>
kernel void mt_ternary(METALX_MT_SLOT_PARAMS) {
  typedef typename opmath<T>::type M;
  METALX_MT_PROLOGUE
  Op<M> op;
  op.load(args, e.scalar);
  device const T *a = mt_ptr<T>(slots, e.loc[0]);
  device const T *b = mt_ptr<T>(slots, e.loc[1]);
  device const T *c = mt_ptr<T>(slots, e.loc[2]);
  device T *out = mt_ptr<T>(slots, e.loc[3]);
  for (ulong i = begin; i < end; ++i) out[i] = T(op(M(a[i]), M(b[i]), M(c[i])));
}

// Kernel names: "<op>_<T>" (the launch layer's Variant::Plain).
#define METALX_MT_KERNEL(TEMPLATE, NAME, OP, T) \
  template [[host_name(#NAME "_" #T)]] kernel decltype(TEMPLATE<OP, T>) TEMPLATE<OP, T>;
#define METALX_MT_FLOATS(TEMPLATE, NAME, OP) \
  METALX_MT_KERNEL(TEMPLATE, NAME, OP, float) METALX_MT_KERNEL(TEMPLATE, NAME, OP, half) \
  METALX_MT_KERNEL(TEMPLATE, NAME, OP, bfloat)
