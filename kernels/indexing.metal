// Index-driven data movement along one dim: gather (and through it index_select and
// embedding) and scatter with its reductions (and through them index_add, index_copy,
// index_fill and embedding's backward). Host side: backend/ops/indexing.cpp.
//
// Both walk the index tensor's shape, last dim first (so that neighbouring threads
// touch neighbouring elements of contiguous tensors), with arbitrary strides (an index expanded with
// stride 0, as index_select's, costs nothing). Index values are checked on the device
// (kernels/index_check.metal) before these run; an element whose index is outside
// [0, bound) is skipped here, so a bad index never reads or writes out of bounds.
//   gather:  one thread per index element: out[e] = self[e with dim -> index[e]].
//   scatter: one thread per line along `dim` of the index, walking the line in order:
//            lines write disjoint parts of self (their other coordinates differ), so
//            there are no atomics and the result is deterministic, reduced in CPU's
//            order.
#include <metal_stdlib>
#include "opmath.h"
using namespace metal;

#define METALX_INDEX_MAX_DIMS 8

struct IndexParams {
  uint ndim;
  uint dim;
  uint mode;  // scatter: a ScatterMode
  uint has_src;  // scatter: 0 writes the scalar value instead of src
  uint include_self;
  uint integral;  // the element type is an integer (mean divides with floor)
  ulong lines;  // gather: index elements; scatter: lines along dim
  ulong len;  // index size along dim
  float value_f;  // the scalar value, in the form of the compute type
  uint unused;
  long value_i;
  long bound;  // self's size along dim: indices outside [0, bound) are skipped
  ulong sizes[METALX_INDEX_MAX_DIMS];  // the index's shape
  long self_strides[METALX_INDEX_MAX_DIMS];
  long index_strides[METALX_INDEX_MAX_DIMS];
  long other_strides[METALX_INDEX_MAX_DIMS];  // gather: out; scatter: src
};

enum ScatterMode : uint { kAssign = 0, kSum = 1, kProd = 2, kMean = 3, kMax = 4, kMin = 5 };

template <typename M> inline M scalar_value(constant IndexParams& p) { return M(p.value_i); }
template <> inline float scalar_value<float>(constant IndexParams& p) { return p.value_f; }

// Offsets of coordinate `e`, a linear index over the index's shape (dim excluded when
// skip_dim): into self (without dim's part), the index and the other tensor. With
// `coords`, also the coordinates themselves (those of skipped dims are left as they are).
struct Offsets {
  long self, index, other;
};
inline Offsets offsets_of(constant IndexParams& p, ulong e, bool skip_dim, thread ulong* coords = nullptr) {
  Offsets o = {0, 0, 0};
  for (uint d = 0; d < p.ndim; ++d) {
    if (skip_dim && d == p.dim) continue;
    const ulong c = e % p.sizes[d];
    e /= p.sizes[d];
    if (coords) coords[d] = c;
    if (d != p.dim) o.self += long(c) * p.self_strides[d];
    o.index += long(c) * p.index_strides[d];
    o.other += long(c) * p.other_strides[d];
  }
  return o;
}

template <typename T>
kernel void index_gather(device T* out [[buffer(0)]], device const T* self [[buffer(1)]],
                         device const long* index [[buffer(2)]], constant IndexParams& p [[buffer(3)]],
                         uint gid [[thread_position_in_grid]], uint threads [[threads_per_grid]]) {
  const long dim_stride = p.self_strides[p.dim];
#if defined(METALSIM_VECTOR_BYTES)
  // The simulator: a thread takes a block of consecutive elements (the host dispatches
  // fewer threads) and steps its coordinates from one element to the next. Finding
  // them per element, as a GPU thread does, costs a 64-bit division per dimension,
  // which was most of an embedding's time on a CPU core.
  const ulong per = (p.lines + threads - 1) / threads;
  ulong e = ulong(gid) * per;
  const ulong end = min(p.lines, e + per);
  if (e >= end) return;
  ulong c[METALX_INDEX_MAX_DIMS];
  Offsets o = offsets_of(p, e, false, c);
  for (;;) {
    const long i = index[o.index];
    if (i >= 0 && i < p.bound) out[o.other] = self[o.self + i * dim_stride];
    if (++e == end) break;
    for (uint d = 0; d < p.ndim; ++d) {  // the next element's coordinates, carrying
      const long self_stride = d != p.dim ? p.self_strides[d] : 0;
      if (++c[d] < p.sizes[d]) {
        o.self += self_stride;
        o.index += p.index_strides[d];
        o.other += p.other_strides[d];
        break;
      }
      const long back = long(p.sizes[d] - 1);
      c[d] = 0;
      o.self -= back * self_stride;
      o.index -= back * p.index_strides[d];
      o.other -= back * p.other_strides[d];
    }
  }
#else
  for (ulong e = gid; e < p.lines; e += threads) {
    const Offsets o = offsets_of(p, e, false);
    const long i = index[o.index];
    if (i < 0 || i >= p.bound) continue;
    out[o.other] = self[o.self + i * dim_stride];
  }
#endif
}

template <typename M> inline bool is_nan_value(M v) { return false; }
template <> inline bool is_nan_value<float>(float v) { return isnan(v); }

template <typename M> inline M identity_of(uint mode) {
  switch (mode) {
    case kProd: return M(1);
    case kMax: return numeric_limits<M>::lowest();
    case kMin: return numeric_limits<M>::max();
    default: return M(0);
  }
}
template <> inline float identity_of<float>(uint mode) {
  switch (mode) {
    case kProd: return 1.0f;
    case kMax: return -INFINITY;
    case kMin: return INFINITY;
    default: return 0.0f;
  }
}
template <> inline bool identity_of<bool>(uint mode) { return mode == kProd || mode == kMin; }

template <typename M> inline M combine(uint mode, M a, M b) {
  switch (mode) {
    case kSum:
    case kMean: return a + b;
    case kProd: return a * b;
    case kMax: return is_nan_value(b) ? b : (is_nan_value(a) ? a : (b > a ? b : a));
    case kMin: return is_nan_value(b) ? b : (is_nan_value(a) ? a : (b < a ? b : a));
    default: return b;
  }
}
template <> inline bool combine<bool>(uint mode, bool a, bool b) {
  switch (mode) {
    case kSum:
    case kMean:
    case kMax: return a || b;
    case kProd:
    case kMin: return a && b;
    default: return b;
  }
}

template <typename M> inline M mean_of(M sum, long count, bool integral) {
  if (integral) {
    const long s = long(sum);
    long q = s / count;
    if ((s % count != 0) && ((s < 0) != (count < 0))) q -= 1;  // floor, as CPU's div_(floor)
    return M(q);
  }
  return sum / M(count);
}
template <> inline bool mean_of<bool>(bool sum, long count, bool) { return sum; }

// counts: scatter_reduce's mean only, one int per element of self (zeroed by the host).
template <typename T>
kernel void index_scatter(device T* self [[buffer(0)]], device const T* src [[buffer(1)]],
                          device const long* index [[buffer(2)]], device int* counts [[buffer(3)]],
                          constant IndexParams& p [[buffer(4)]],
                          uint gid [[thread_position_in_grid]], uint threads [[threads_per_grid]]) {
  typedef typename opmath<T>::type M;
  const long dim_stride = p.self_strides[p.dim];
  const long index_step = p.index_strides[p.dim];
  const long src_step = p.other_strides[p.dim];
  const M value = scalar_value<M>(p);
  for (ulong line = gid; line < p.lines; line += threads) {
    const Offsets o = offsets_of(p, line, true);
    if (p.mode != kAssign && !p.include_self) {
      for (ulong j = 0; j < p.len; ++j) {
        const long i = index[o.index + long(j) * index_step];
        if (i >= 0 && i < p.bound) self[o.self + i * dim_stride] = T(identity_of<M>(p.mode));
      }
    }
    for (ulong j = 0; j < p.len; ++j) {
      const long i = index[o.index + long(j) * index_step];
      if (i < 0 || i >= p.bound) continue;
      const long target = o.self + i * dim_stride;
      const M v = p.has_src ? M(src[o.other + long(j) * src_step]) : value;
      if (p.mode == kAssign) {
        self[target] = T(v);
      } else {
        self[target] = T(combine<M>(p.mode, M(self[target]), v));
        if (p.mode == kMean) counts[target] += 1;
      }
    }
    if (p.mode == kMean) {
      for (ulong j = 0; j < p.len; ++j) {
        const long i = index[o.index + long(j) * index_step];
        if (i < 0 || i >= p.bound) continue;
        const long target = o.self + i * dim_stride;
        const int n = counts[target] + (p.include_self ? 1 : 0);
        if (counts[target] > 0) self[target] = T(mean_of<M>(M(self[target]), long(n), p.integral != 0));
        counts[target] = 0;  // divided once, whatever repeats of target follow
      }
    }
  }
}

#define METALX_INDEX_KERNEL(NAME, T) template [[host_name(#NAME "_" #T)]] kernel decltype(NAME<T>) NAME<T>;
#define METALX_INDEX_ALL(NAME)                                                                          \
  METALX_INDEX_KERNEL(NAME, float) METALX_INDEX_KERNEL(NAME, half) METALX_INDEX_KERNEL(NAME, bfloat)    \
  METALX_INDEX_KERNEL(NAME, long) METALX_INDEX_KERNEL(NAME, int) METALX_INDEX_KERNEL(NAME, short)       \
  METALX_INDEX_KERNEL(NAME, char) METALX_INDEX_KERNEL(NAME, uchar) METALX_INDEX_KERNEL(NAME, bool)

METALX_INDEX_ALL(index_gather)
METALX_INDEX_ALL(index_scatter)
