// Scans along one dim: cumsum, cumprod, cummax, cummin (values and indices) and
// logcumsumexp. An op is a functor: identity, step (fold one element into the running
// state, at its position along the dim), merge (fold a later part's total into an
// earlier state) and project (state -> output). Host: backend/launch/scan.cpp, registrations backend/ops/scan.cpp.
//
// The host views the tensor as `lines` independent lines of `length` elements (the
// line index split into coordinates, dim 0 innermost, with each tensor's strides).
// A thread scans a run of a line serially: scans are serial by nature, and a thread
// per line keeps neighbouring threads on neighbouring lines (coalesced on a GPU when
// the lines' dim is the contiguous one; a vectorisable loop on the simulator). When
// there are too few lines to fill the device, every line is split into `parts`:
//   <op>_rows_<T>      a thread per (part, line) folds its part into a total;
//   <op>_partials_<T>  a thread per line turns its parts' totals into the state each
//                      part starts from (an exclusive scan, in place);
//   <op>_strided_<T>   a thread per (part, line) scans its part from that state and
//                      writes the outputs (with parts == 1, the whole scan).
// Starting each part from the exact state of everything before it (rather than adding a
// correction to outputs already rounded) keeps the results those of a serial scan,
// but for the rounding of the part totals.
#include <metal_stdlib>
#include "complex.h"
using namespace metal;

#define METALX_SCAN_MAX_DIMS 8

struct ScanShape {
  uint ndim;          // line dims after coalescing
  uint parts;         // runs each line is split into
  uint with_indices;  // cummax/cummin: write the positions too
  uint unused;
  ulong lines;
  ulong length;     // elements along the scanned dim
  ulong part_size;  // elements per part (the last one may be shorter)
  ulong in_step;    // strides along the scanned dim
  ulong out_step;
  ulong idx_step;
  ulong sizes[METALX_SCAN_MAX_DIMS];
  ulong in_strides[METALX_SCAN_MAX_DIMS];
  ulong out_strides[METALX_SCAN_MAX_DIMS];
  ulong idx_strides[METALX_SCAN_MAX_DIMS];
};

struct LineOffsets {
  ulong in, out, idx;
};

inline LineOffsets line_offsets(constant ScanShape& s, ulong line) {
  LineOffsets r = {0, 0, 0};
  for (uint d = 0; d < s.ndim; ++d) {
    const ulong size = s.sizes[d];
    const ulong q = line / size, i = line - q * size;
    r.in += i * s.in_strides[d];
    r.out += i * s.out_strides[d];
    r.idx += i * s.idx_strides[d];
    line = q;
  }
  return r;
}

// The running state: a value in the op's accumulate type and, for cummax/cummin, the
// position it came from.
template <typename A> struct ScanState {
  A value;
  long index;
};

// Sums and products accumulate floats in float and integers in long (CPU's acc_type);
// an integer output wraps as CPU's does.
template <typename T> struct scan_acc { typedef long type; };
template <> struct scan_acc<float> { typedef float type; };
template <> struct scan_acc<half> { typedef float type; };
template <> struct scan_acc<bfloat> { typedef float type; };

template <typename T> struct cumsum_scan {
  typedef typename scan_acc<T>::type A;
  A identity() const { return A(0); }
  void step(thread ScanState<A>& s, T x, long) const { s.value += A(x); }
  void merge(thread ScanState<A>& s, ScanState<A> later) const { s.value += later.value; }
  T project(A v) const { return T(v); }
};

template <typename T> struct cumprod_scan {
  typedef typename scan_acc<T>::type A;
  A identity() const { return A(1); }
  void step(thread ScanState<A>& s, T x, long) const { s.value *= A(x); }
  void merge(thread ScanState<A>& s, ScanState<A> later) const { s.value *= later.value; }
  T project(A v) const { return T(v); }
};

// complex64 products multiply as c10::complex's operator* (one product of each part
// fused into the sum). complex64 cumsum needs no kernel: it is the float scan of each part.
template <> struct cumprod_scan<complex64> {
  typedef complex64 A;
  A identity() const { return A(1.0f, 0.0f); }
  void step(thread ScanState<A>& s, complex64 x, long) const { s.value = cmul_fused(s.value, x); }
  void merge(thread ScanState<A>& s, ScanState<A> later) const { s.value = cmul_fused(s.value, later.value); }
  complex64 project(A v) const { return v; }
};

template <typename T> inline bool scan_is_nan(T v) { return v != v; }

// cummax/cummin as CPU: an element replaces the state when it is NaN, or when neither
// is NaN and it is >= (<=) the state, so ties and NaNs take the latest position. A part's
// total replaces an earlier state under the same rule, which makes merging exact.
template <typename T> struct cummax_scan {
  typedef T A;
  A identity() const { return numeric_limits<T>::has_infinity ? -numeric_limits<T>::infinity() : numeric_limits<T>::lowest(); }
  void step(thread ScanState<A>& s, T x, long i) const {
    if (scan_is_nan(x) || (!scan_is_nan(s.value) && x >= s.value)) {
      s.value = x;
      s.index = i;
    }
  }
  void merge(thread ScanState<A>& s, ScanState<A> later) const { step(s, later.value, later.index); }
  T project(A v) const { return v; }
};

template <typename T> struct cummin_scan {
  typedef T A;
  A identity() const { return numeric_limits<T>::has_infinity ? numeric_limits<T>::infinity() : numeric_limits<T>::max(); }
  void step(thread ScanState<A>& s, T x, long i) const {
    if (scan_is_nan(x) || (!scan_is_nan(s.value) && x <= s.value)) {
      s.value = x;
      s.index = i;
    }
  }
  void merge(thread ScanState<A>& s, ScanState<A> later) const { step(s, later.value, later.index); }
  T project(A v) const { return v; }
};

// logcumsumexp keeps the running maximum m (an input value, exact) and the sum s of
// exp(x - m) over the elements so far, and writes m + log(s): one rounding per output,
// where folding log(exp(a) + exp(b)) step by step would round the large running value
// at every element (CPU accumulates that in double). Equal maxima add exp(0) = 1, so
// equal infinities never meet as inf - inf; a NaN makes s NaN from there on, as on CPU.
inline void add_scaled(thread float2& state, float m, float s) {
  if (m > state.x) {
    state.y = state.y * exp(state.x - m) + s;
    state.x = m;
  } else if (m == state.x) {
    state.y += s;
  } else {
    state.y += s * exp(m - state.x);
  }
}

template <typename T> struct logcumsumexp_scan {
  typedef float2 A;  // (m, s)
  A identity() const { return float2(-numeric_limits<float>::infinity(), 0.0f); }
  void step(thread ScanState<A>& s, T x, long) const { add_scaled(s.value, float(x), 1.0f); }
  void merge(thread ScanState<A>& s, ScanState<A> later) const { add_scaled(s.value, later.value.x, later.value.y); }
  T project(A v) const { return T(v.x + log(v.y)); }
};

// Booleans have no numeric_limits in MSL.
template <> inline bool cummax_scan<bool>::identity() const { return false; }
template <> inline bool cummin_scan<bool>::identity() const { return true; }

// ---- kernels ----

struct PartRange {
  ulong line;
  uint part;
  ulong begin, end;
};

// Threads are numbered part-major, so that neighbouring threads take neighbouring lines.
inline bool part_range(constant ScanShape& s, uint tid, thread PartRange& r) {
  if (ulong(tid) >= s.lines * s.parts) return false;
  r.part = uint(ulong(tid) / s.lines);
  r.line = ulong(tid) - ulong(r.part) * s.lines;
  r.begin = ulong(r.part) * s.part_size;
  r.end = min(r.begin + s.part_size, s.length);
  return r.begin < r.end;
}

template <template <typename> class Op, typename T>
kernel void scan_strided(device const T* in [[buffer(0)]],
                         device T* out [[buffer(1)]],
                         device long* indices [[buffer(2)]],
                         device const ScanState<typename Op<T>::A>* starts [[buffer(3)]],
                         constant ScanShape& s [[buffer(4)]],
                         uint tid [[thread_position_in_grid]]) {
  typedef typename Op<T>::A A;
  Op<T> op;
  PartRange r;
  if (!part_range(s, tid, r)) return;
  ScanState<A> state = {op.identity(), 0};
  if (s.parts > 1) state = starts[r.line * s.parts + r.part];
  const LineOffsets o = line_offsets(s, r.line);
  device const T* src = in + o.in;
  device T* dst = out + o.out;
  if (s.with_indices != 0) {
    device long* idx = indices + o.idx;
    for (ulong i = r.begin; i < r.end; ++i) {
      op.step(state, src[i * s.in_step], long(i));
      dst[i * s.out_step] = op.project(state.value);
      idx[i * s.idx_step] = state.index;
    }
  } else if (s.in_step == 1 && s.out_step == 1) {  // lines along contiguous memory
    for (ulong i = r.begin; i < r.end; ++i) {
      op.step(state, src[i], long(i));
      dst[i] = op.project(state.value);
    }
  } else {
    for (ulong i = r.begin; i < r.end; ++i) {
      op.step(state, src[i * s.in_step], long(i));
      dst[i * s.out_step] = op.project(state.value);
    }
  }
}

template <template <typename> class Op, typename T>
kernel void scan_totals(device const T* in [[buffer(0)]],
                        device T* out [[buffer(1)]],
                        device long* indices [[buffer(2)]],
                        device ScanState<typename Op<T>::A>* totals [[buffer(3)]],
                        constant ScanShape& s [[buffer(4)]],
                        uint tid [[thread_position_in_grid]]) {
  typedef typename Op<T>::A A;
  Op<T> op;
  PartRange r;
  if (!part_range(s, tid, r)) return;
  ScanState<A> state = {op.identity(), 0};
  device const T* src = in + line_offsets(s, r.line).in;
  for (ulong i = r.begin; i < r.end; ++i) op.step(state, src[i * s.in_step], long(i));
  totals[r.line * s.parts + r.part] = state;
}

template <template <typename> class Op, typename T>
kernel void scan_starts(device const T* in [[buffer(0)]],
                        device T* out [[buffer(1)]],
                        device long* indices [[buffer(2)]],
                        device ScanState<typename Op<T>::A>* totals [[buffer(3)]],
                        constant ScanShape& s [[buffer(4)]],
                        uint tid [[thread_position_in_grid]]) {
  typedef typename Op<T>::A A;
  Op<T> op;
  const ulong line = tid;
  if (line >= s.lines) return;
  ScanState<A> state = {op.identity(), 0};
  device ScanState<A>* row = totals + line * s.parts;
  for (uint p = 0; p < s.parts; ++p) {
    const ScanState<A> total = row[p];
    row[p] = state;
    op.merge(state, total);
  }
}

// ---- instantiation: <op>_{strided,rows,partials}_<T> ----

#define METALX_SCAN_KERNELS(NAME, OP, T)                                                                        \
  template [[host_name(#NAME "_strided_" #T)]] kernel decltype(scan_strided<OP, T>) scan_strided<OP, T>;        \
  template [[host_name(#NAME "_rows_" #T)]] kernel decltype(scan_totals<OP, T>) scan_totals<OP, T>;             \
  template [[host_name(#NAME "_partials_" #T)]] kernel decltype(scan_starts<OP, T>) scan_starts<OP, T>;

#define METALX_SCAN_FLOATS(NAME, OP) \
  METALX_SCAN_KERNELS(NAME, OP, float) METALX_SCAN_KERNELS(NAME, OP, half) METALX_SCAN_KERNELS(NAME, OP, bfloat)
#define METALX_SCAN_INTS(NAME, OP)                                                                       \
  METALX_SCAN_KERNELS(NAME, OP, long) METALX_SCAN_KERNELS(NAME, OP, int) METALX_SCAN_KERNELS(NAME, OP, short) \
  METALX_SCAN_KERNELS(NAME, OP, char) METALX_SCAN_KERNELS(NAME, OP, uchar)

METALX_SCAN_FLOATS(cumsum, cumsum_scan)
METALX_SCAN_INTS(cumsum, cumsum_scan)
METALX_SCAN_FLOATS(cumprod, cumprod_scan)
METALX_SCAN_INTS(cumprod, cumprod_scan)
METALX_SCAN_KERNELS(cumprod, cumprod_scan, complex64)
METALX_SCAN_FLOATS(cummax, cummax_scan)
METALX_SCAN_INTS(cummax, cummax_scan)
METALX_SCAN_KERNELS(cummax, cummax_scan, bool)
METALX_SCAN_FLOATS(cummin, cummin_scan)
METALX_SCAN_INTS(cummin, cummin_scan)
METALX_SCAN_KERNELS(cummin, cummin_scan, bool)
METALX_SCAN_FLOATS(logcumsumexp, logcumsumexp_scan)
