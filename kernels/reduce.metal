// Reductions: one kernel family for every reduction op (sum, mean, prod, amax, amin,
// argmax, argmin, max/min with indices, any, all, norms, var/std, logsumexp). An op is
// a functor: identity, map (element -> accumulator), combine, shuffle_down (for the
// SIMD-group tree), project (accumulator -> output). Host: backend/launch/reduce.cpp,
// registrations backend/ops/reduce.cpp.
//
// The host views a reduction as O outputs of R elements each; both index spaces are
// split into coordinates (dim 0 innermost) with the input's strides. Kernels:
//   <op>_rows_<T>      a SIMD group (32 threads) or a threadgroup (256) per output:
//                      threads accumulate a share of the row, then simd_shuffle_down and
//                      threadgroup memory combine them. For rows along contiguous memory,
//                      and for few long rows, whose R the host splits into parts
//                      (several threadgroups per output, then <op>_partials_<T>). GPUs only.
//   <op>_cols_<T>      a thread per s.cols adjacent outputs, looping over R: for
//                      reductions over outer dims (bias gradients, sum(dim=0)), where
//                      adjacent outputs are adjacent in memory. Also splits R into parts.
//                      The simulator runs every reduction through it (a thread is a loop
//                      iteration there, and the rows kernel's shuffles and barriers would
//                      make each a fiber); rows along contiguous memory are then reduced
//                      one after another, each by reduce_run's independent lanes.
//   <op>_partials_<T>  a thread per output combines its parts' accumulators.
#include <metal_stdlib>
#include "complex.h"
using namespace metal;

#define METALX_REDUCE_MAX_DIMS 8
#define METALX_REDUCE_GROUP 256
// A long run is reduced in blocks of this many elements, each combined into the total,
// so that a float sum over a long run keeps the accuracy of short ones.
#define METALX_REDUCE_BLOCK 512

// A GPU thread reads elements a SIMD width apart (coalesced): one output per column
// thread. A simulated column thread takes up to METALX_REDUCE_COLS outputs whose rows it
// reduces one after another, or up to METALX_REDUCE_WIDE adjacent outputs (the host
// picks, s.cols) when they are adjacent in memory: it then reads a page-wide strip of
// each input row, which the CPU's prefetchers stream, where a 64-byte strip at a row
// stride missed the cache and the TLB at every row. A simulated thread reducing a
// contiguous run keeps METALX_REDUCE_LANES accumulators (see reduce_run).
#ifdef METALSIM_VECTOR_BYTES
#define METALX_REDUCE_COLS 16
#define METALX_REDUCE_WIDE 1024
#define METALX_REDUCE_LANES 16
#else
#define METALX_REDUCE_COLS 1
#define METALX_REDUCE_WIDE 1
#define METALX_REDUCE_LANES 1
#endif

struct ReduceShape {
  uint kept_ndim;
  uint red_ndim;
  uint threads_per_output;  // rows kernel: 32 or 256
  uint parts;               // partitions of each row
  uint cols;                // cols kernel: adjacent outputs per thread (<= REDUCE_WIDE if
                            // they are adjacent in memory, else <= REDUCE_COLS)
  ulong outputs;
  ulong reduce_size;
  ulong part_size;  // elements of a row per part
  ulong kept_sizes[METALX_REDUCE_MAX_DIMS];
  ulong kept_in[METALX_REDUCE_MAX_DIMS];   // input strides of the kept dims
  ulong kept_out[METALX_REDUCE_MAX_DIMS];  // output strides
  ulong kept_idx[METALX_REDUCE_MAX_DIMS];  // index output strides (arg reductions)
  ulong red_sizes[METALX_REDUCE_MAX_DIMS];
  ulong red_in[METALX_REDUCE_MAX_DIMS];
  float f[4];  // the op's scalars (norm order, correction, ...)
};

struct Offsets {
  ulong in, out, idx;
};

inline Offsets kept_offsets(constant ReduceShape& s, ulong o) {
  Offsets r = {0, 0, 0};
  for (uint d = 0; d < s.kept_ndim; ++d) {
    const ulong size = s.kept_sizes[d];
    const ulong q = o / size, i = o - q * size;
    r.in += i * s.kept_in[d];
    r.out += i * s.kept_out[d];
    r.idx += i * s.kept_idx[d];
    o = q;
  }
  return r;
}

inline ulong reduced_offset(constant ReduceShape& s, ulong r) {
  if (s.red_ndim == 1) return r * s.red_in[0];
  ulong off = 0;
  for (uint d = 0; d < s.red_ndim; ++d) {
    const ulong size = s.red_sizes[d];
    const ulong q = r / size;
    off += (r - q * size) * s.red_in[d];
    r = q;
  }
  return off;
}

// ---- accumulators and SIMD shuffles ----

inline float shuffle_down(float v, ushort d) { return simd_shuffle_down(v, d); }
inline long shuffle_down(long v, ushort d) {
  uint2 p = as_type<uint2>(v);
  p.x = simd_shuffle_down(p.x, d);
  p.y = simd_shuffle_down(p.y, d);
  return as_type<long>(p);
}

// Sums and products accumulate floats in float and integers (and bool) in long.
template <typename T> struct acc_of { typedef long type; };
template <> struct acc_of<float> { typedef float type; };
template <> struct acc_of<half> { typedef float type; };
template <> struct acc_of<bfloat> { typedef float type; };

template <typename T> inline bool is_nan_value(T v) { return v != v; }

// ---- ops ----

struct reduce_fn {
  void load(constant ReduceShape&) {}
};

inline ulong umin(ulong a, ulong b) { return a < b ? a : b; }

template <typename T> struct sum_red : reduce_fn {
  typedef typename acc_of<T>::type A;
  float count;  // mean: the elements per output (f[1]; 0 for sum)
  void load(constant ReduceShape& s) { count = s.f[1]; }
  A identity() const { return A(0); }
  A map(T x, ulong) const { return A(x); }
  A combine(A a, A b) const { return a + b; }
  A shuffle(A a, ushort d) const { return shuffle_down(a, d); }
  // mean divides the accumulated sum, then rounds once to the output type: CPU's
  // mean_out sums half and bfloat in float and divides before it casts.
  template <typename O> O project(A a) const { return count == 0.0f ? O(a) : O(float(a) / count); }
  long index(A) const { return 0; }
};
// CPU multiplies half and bfloat16 in the dtype itself (its accumulator is scalar_t), so
// each partial product is rounded to T: a product rounded once from float can be an
// ulp off CPU's.
template <typename T, typename A> inline A round_product(A p) { return p; }
template <> inline float round_product<half, float>(float p) { return float(half(p)); }
template <> inline float round_product<bfloat, float>(float p) { return float(bfloat(p)); }
template <typename T> struct prod_red : reduce_fn {
  typedef typename acc_of<T>::type A;
  A identity() const { return A(1); }
  A map(T x, ulong) const { return A(x); }
  A combine(A a, A b) const { return round_product<T, A>(a * b); }
  A shuffle(A a, ushort d) const { return shuffle_down(a, d); }
  template <typename O> O project(A a) const { return O(a); }
  long index(A) const { return 0; }
};

// amax/amin propagate NaN. Integers compare in long, floats in float.
// complex64 products: the float2 itself accumulates, multiplied as c10::complex's
// operator* (one product of each part fused into the sum).
inline complex64 shuffle_down(complex64 v, ushort d) { return complex64(shuffle_down(v.x, d), shuffle_down(v.y, d)); }
template <> struct prod_red<complex64> : reduce_fn {
  typedef complex64 A;
  A identity() const { return A(1.0f, 0.0f); }
  A map(complex64 x, ulong) const { return x; }
  A combine(A a, A b) const { return cmul_fused(a, b); }
  A shuffle(A a, ushort d) const { return shuffle_down(a, d); }
  template <typename O> O project(A a) const { return O(a); }
  long index(A) const { return 0; }
};

template <typename T> struct max_red : reduce_fn {
  typedef typename acc_of<T>::type A;
  A identity() const { return lowest(); }
  static A lowest() { return numeric_limits<A>::has_infinity ? -numeric_limits<A>::infinity() : numeric_limits<A>::lowest(); }
  A map(T x, ulong) const { return A(x); }
  A combine(A a, A b) const { return (is_nan_value(a) || a > b) ? a : b; }
  A shuffle(A a, ushort d) const { return shuffle_down(a, d); }
  template <typename O> O project(A a) const { return O(a); }
  long index(A) const { return 0; }
};
template <typename T> struct min_red : reduce_fn {
  typedef typename acc_of<T>::type A;
  A identity() const { return numeric_limits<A>::has_infinity ? numeric_limits<A>::infinity() : numeric_limits<A>::max(); }
  A map(T x, ulong) const { return A(x); }
  A combine(A a, A b) const { return (is_nan_value(a) || a < b) ? a : b; }
  A shuffle(A a, ushort d) const { return shuffle_down(a, d); }
  template <typename O> O project(A a) const { return O(a); }
  long index(A) const { return 0; }
};

// Value and index: the first index of the extreme value; NaN counts as the extreme.
template <typename V> struct value_index {
  V v;
  long i;
};

// Whether an accumulator carries an index (arg reductions write it too).
template <typename A> inline bool accumulates_index() { return false; }
template <> inline bool accumulates_index<value_index<float> >() { return true; }
template <> inline bool accumulates_index<value_index<long> >() { return true; }
template <typename T, bool IsMax> struct arg_red {
  typedef typename acc_of<T>::type V;
  typedef value_index<V> A;
  void load(constant ReduceShape&) {}
  A identity() const {
    A a;
    a.v = IsMax ? max_red<T>::lowest() : min_red<T>().identity();
    a.i = -1;
    return a;
  }
  A map(T x, ulong r) const {
    A a;
    a.v = V(x);
    a.i = long(r);
    return a;
  }
  A combine(A a, A b) const {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    const bool an = is_nan_value(a.v), bn = is_nan_value(b.v);
    if (an || bn) return (an && (!bn || a.i < b.i)) ? a : b;
    if (a.v == b.v) return a.i < b.i ? a : b;
    return (IsMax ? a.v > b.v : a.v < b.v) ? a : b;
  }
  A shuffle(A a, ushort d) const {
    A r;
    r.v = shuffle_down(a.v, d);
    r.i = shuffle_down(a.i, d);
    return r;
  }
  template <typename O> O project(A a) const { return O(a.v); }
  long index(A a) const { return a.i; }
};
template <typename T> struct argmax_red : arg_red<T, true> {};
template <typename T> struct argmin_red : arg_red<T, false> {};

// any / all over any dtype, as 0/1 in long.
template <typename T> struct any_red : reduce_fn {
  typedef long A;
  A identity() const { return 0; }
  A map(T x, ulong) const { return x != T(0) ? 1 : 0; }
  A combine(A a, A b) const { return a | b; }
  A shuffle(A a, ushort d) const { return shuffle_down(a, d); }
  template <typename O> O project(A a) const { return O(a != 0); }
  long index(A) const { return 0; }
};
template <typename T> struct all_red : reduce_fn {
  typedef long A;
  A identity() const { return 1; }
  A map(T x, ulong) const { return x != T(0) ? 1 : 0; }
  A combine(A a, A b) const { return a & b; }
  A shuffle(A a, ushort d) const { return shuffle_down(a, d); }
  template <typename O> O project(A a) const { return O(a != 0); }
  long index(A) const { return 0; }
};
template <typename T> struct count_nonzero_red : any_red<T> {
  long combine(long a, long b) const { return a + b; }
  template <typename O> O project(long a) const { return O(a); }
};

// Vector norms: f[0] = the order p for the general one.
template <typename T> struct norm2_red : sum_red<T> {
  float map(T x, ulong) const { return float(x) * float(x); }
  template <typename O> O project(float a) const { return O(sqrt(a)); }
};
template <typename T> struct norm1_red : sum_red<T> {
  float map(T x, ulong) const { return fabs(float(x)); }
  template <typename O> O project(float a) const { return O(a); }
};
template <typename T> struct norm0_red : sum_red<T> {
  float map(T x, ulong) const { return float(x) != 0.0f ? 1.0f : 0.0f; }
  template <typename O> O project(float a) const { return O(a); }
};
template <typename T> struct normp_red : sum_red<T> {
  float p;
  void load(constant ReduceShape& s) { p = s.f[0]; }
  float map(T x, ulong) const { return pow(fabs(float(x)), p); }
  template <typename O> O project(float a) const { return O(pow(a, 1.0f / p)); }
};
template <typename T> struct norminf_red : max_red<T> {
  float map(T x, ulong) const { return fabs(float(x)); }
};
template <typename T> struct normninf_red : min_red<T> {
  float map(T x, ulong) const { return fabs(float(x)); }
};

// var/std by Welford's method, combined pairwise (Chan et al.). f[0] = correction,
// f[1] = 1 for std.
struct welford {
  float mean, m2, n;
};
template <typename T> struct var_red : reduce_fn {
  typedef welford A;
  float correction;
  bool take_sqrt;
  void load(constant ReduceShape& s) {
    correction = s.f[0];
    take_sqrt = s.f[1] != 0.0f;
  }
  A identity() const { return A{0.0f, 0.0f, 0.0f}; }
  A map(T x, ulong) const { return A{float(x), 0.0f, 1.0f}; }
  A combine(A a, A b) const {
    if (a.n == 0.0f) return b;
    if (b.n == 0.0f) return a;
    const float n = a.n + b.n, delta = b.mean - a.mean, w = b.n / n;
    return A{a.mean + delta * w, a.m2 + b.m2 + delta * delta * a.n * w, n};
  }
  A shuffle(A a, ushort d) const {
    return A{shuffle_down(a.mean, d), shuffle_down(a.m2, d), shuffle_down(a.n, d)};
  }
  template <typename O> O project(A a) const {
    const float var = a.m2 / max(a.n - correction, 0.0f);
    return O(take_sqrt ? sqrt(var) : var);
  }
  long index(A) const { return 0; }
};
// The mean of the same accumulator (var_mean / std_mean's second output).
template <typename T> struct var_mean_red : var_red<T> {
  template <typename O> O project(welford a) const { return O(a.mean); }
};

// logsumexp as a running (max, sum of exp(x - max)) pair.
struct max_sum {
  float m, s;
};
template <typename T> struct logsumexp_red : reduce_fn {
  typedef max_sum A;
  A identity() const { return A{-INFINITY, 0.0f}; }
  A map(T x, ulong) const { return A{float(x), 1.0f}; }
  A combine(A a, A b) const {
    const float m = max(a.m, b.m);
    if (m == -INFINITY || isnan(m)) return A{isnan(a.m) || isnan(b.m) ? NAN : m, a.s + b.s};
    if (isinf(m)) return A{m, 1.0f};
    return A{m, a.s * exp(a.m - m) + b.s * exp(b.m - m)};
  }
  A shuffle(A a, ushort d) const { return A{shuffle_down(a.m, d), shuffle_down(a.s, d)}; }
  template <typename O> O project(A a) const { return O(isinf(a.m) ? a.m : a.m + log(a.s)); }
  long index(A) const { return 0; }
};

// ---- kernels ----

// Reduces elements r0..r1 of a row that lies contiguously from `row` (map sees the
// element's index r). Element r0 + k + LANES*i goes to accumulator k; the accumulators
// are independent, so the host compiler keeps them in vector registers on the simulator,
// instead of waiting for each add before the next. A tree then combines them. Ops whose
// combine is not associative in floating point (sums) give results within rounding of
// the sequential order, as CPU torch's vectorised reductions do. Short runs (under four
// rounds of lanes) keep the sequential order, which is CPU torch's for short rows: a
// half or bfloat sum rounded from a differently ordered float sum can differ by an ulp.
template <template <typename> class Op, typename T>
inline typename Op<T>::A reduce_run(thread const Op<T>& op, device const T* row, ulong r0, ulong r1) {
  typedef typename Op<T>::A A;
  if (r1 - r0 < 4 * METALX_REDUCE_LANES) {
    A acc = op.identity();
    for (ulong r = r0; r < r1; ++r) acc = op.combine(acc, op.map(row[r], r));
    return acc;
  }
  A lane[METALX_REDUCE_LANES];
  for (uint k = 0; k < METALX_REDUCE_LANES; ++k) lane[k] = op.identity();
  ulong r = r0;
  for (; r + METALX_REDUCE_LANES <= r1; r += METALX_REDUCE_LANES)
    for (uint k = 0; k < METALX_REDUCE_LANES; ++k) lane[k] = op.combine(lane[k], op.map(row[r + k], r + k));
  for (uint k = 0; r + k < r1; ++k) lane[k] = op.combine(lane[k], op.map(row[r + k], r + k));
  for (uint w = METALX_REDUCE_LANES / 2; w > 0; w >>= 1)
    for (uint k = 0; k < w; ++k) lane[k] = op.combine(lane[k], lane[k + w]);
  return lane[0];
}

// The output's storage type: what the host allocated for this op and input dtype.
template <template <typename> class Op, typename T, typename O>
inline void write_result(thread const Op<T>& op, typename Op<T>::A acc, constant ReduceShape& s, ulong o,
                         device O* out, device long* indices, device typename Op<T>::A* partials, uint part) {
  if (s.parts > 1) {
    partials[ulong(part) * s.outputs + o] = acc;
    return;
  }
  const Offsets off = kept_offsets(s, o);
  out[off.out] = op.template project<O>(acc);
  if (accumulates_index<typename Op<T>::A>()) indices[off.idx] = op.index(acc);
}

template <template <typename> class Op, typename T, typename O>
kernel void reduce_rows(device const T* in [[buffer(0)]],
                        device O* out [[buffer(1)]],
                        device long* indices [[buffer(2)]],
                        device typename Op<T>::A* partials [[buffer(3)]],
                        constant ReduceShape& s [[buffer(4)]],
                        uint2 group [[threadgroup_position_in_grid]],
                        uint tid [[thread_index_in_threadgroup]],
                        uint lane [[thread_index_in_simdgroup]],
                        uint simd_group [[simdgroup_index_in_threadgroup]]) {
  typedef typename Op<T>::A A;
  threadgroup A shared[METALX_REDUCE_GROUP / 32];
  Op<T> op;
  op.load(s);
  const uint tpo = s.threads_per_output;
  const ulong o = ulong(group.y) * (METALX_REDUCE_GROUP / tpo) + tid / tpo;
  const uint t = tid % tpo;
  const uint part = group.x;
  A acc = op.identity();
  if (o < s.outputs) {
    const ulong base = kept_offsets(s, o).in;
    const ulong begin = ulong(part) * s.part_size;
    const ulong end = umin(begin + s.part_size, s.reduce_size);
    for (ulong r = begin + t; r < end; r += tpo) acc = op.combine(acc, op.map(in[base + reduced_offset(s, r)], r));
  }
  for (ushort d = 16; d > 0; d >>= 1) acc = op.combine(acc, op.shuffle(acc, d));
  if (tpo == METALX_REDUCE_GROUP) {
    if (lane == 0) shared[simd_group] = acc;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (simd_group == 0) {
      acc = lane < METALX_REDUCE_GROUP / 32 ? shared[lane] : op.identity();
      for (ushort d = METALX_REDUCE_GROUP / 64; d > 0; d >>= 1) acc = op.combine(acc, op.shuffle(acc, d));
    }
  }
  if (t == 0 && o < s.outputs) write_result<Op, T, O>(op, acc, s, o, out, indices, partials, part);
}

template <template <typename> class Op, typename T, typename O>
kernel void reduce_cols(device const T* in [[buffer(0)]],
                        device O* out [[buffer(1)]],
                        device long* indices [[buffer(2)]],
                        device typename Op<T>::A* partials [[buffer(3)]],
                        constant ReduceShape& s [[buffer(4)]],
                        uint tid [[thread_position_in_grid]]) {
  typedef typename Op<T>::A A;
  Op<T> op;
  op.load(s);
  // Threads: parts x rows of kept dim 0 x blocks of s.cols outputs along it.
  const ulong size0 = s.kept_sizes[0];
  const ulong blocks0 = (size0 + s.cols - 1) / s.cols;
  const ulong rows = s.outputs / size0;
  const ulong item = tid;
  if (item >= blocks0 * rows * s.parts) return;
  const uint part = uint(item / (blocks0 * rows));
  const ulong rest = item - ulong(part) * blocks0 * rows;
  const ulong row = rest / blocks0;
  const ulong o0 = row * size0 + (rest - row * blocks0) * s.cols;
  const uint count = uint(umin(ulong(s.cols), row * size0 + size0 - o0));
  const ulong base = kept_offsets(s, o0).in, step = s.kept_in[0];
  const ulong begin = ulong(part) * s.part_size;
  const ulong end = umin(begin + s.part_size, s.reduce_size);
  A acc[METALX_REDUCE_WIDE];
  for (uint j = 0; j < count; ++j) acc[j] = op.identity();
  if (step == 1) {
    // Adjacent outputs: a strip of `count` elements of each reduced row, summed in
    // blocks of rows.
    A block[METALX_REDUCE_WIDE];
    for (ulong r0 = begin; r0 < end; r0 += METALX_REDUCE_BLOCK) {
      const ulong r1 = umin(r0 + METALX_REDUCE_BLOCK, end);
      for (uint j = 0; j < count; ++j) block[j] = op.identity();
      for (ulong r = r0; r < r1; ++r) {
        device const T* p = in + base + reduced_offset(s, r);
        for (uint j = 0; j < count; ++j) block[j] = op.combine(block[j], op.map(p[j], r));
      }
      for (uint j = 0; j < count; ++j) acc[j] = op.combine(acc[j], block[j]);
    }
  } else if (s.red_ndim == 1 && s.red_in[0] == 1) {
    // Each output's elements are contiguous: its rows one after another.
    for (uint j = 0; j < count; ++j) {
      device const T* row = in + base + j * step;
      for (ulong r0 = begin; r0 < end; r0 += METALX_REDUCE_BLOCK)
        acc[j] = op.combine(acc[j], reduce_run<Op, T>(op, row, r0, umin(r0 + METALX_REDUCE_BLOCK, end)));
    }
  } else {
    A block[METALX_REDUCE_COLS];
    for (ulong r0 = begin; r0 < end; r0 += METALX_REDUCE_BLOCK) {
      const ulong r1 = umin(r0 + METALX_REDUCE_BLOCK, end);
      for (uint j = 0; j < count; ++j) block[j] = op.identity();
      for (ulong r = r0; r < r1; ++r) {
        device const T* p = in + base + reduced_offset(s, r);
        for (uint j = 0; j < count; ++j) block[j] = op.combine(block[j], op.map(p[j * step], r));
      }
      for (uint j = 0; j < count; ++j) acc[j] = op.combine(acc[j], block[j]);
    }
  }
  for (uint j = 0; j < count; ++j) write_result<Op, T, O>(op, acc[j], s, o0 + j, out, indices, partials, part);
}

template <template <typename> class Op, typename T, typename O>
kernel void reduce_partials(device const T* in [[buffer(0)]],
                            device O* out [[buffer(1)]],
                            device long* indices [[buffer(2)]],
                            device typename Op<T>::A* partials [[buffer(3)]],
                            constant ReduceShape& s [[buffer(4)]],
                            uint tid [[thread_position_in_grid]]) {
  typedef typename Op<T>::A A;
  Op<T> op;
  op.load(s);
  const ulong o = tid;
  if (o >= s.outputs) return;
  A acc = op.identity();
  for (uint p = 0; p < s.parts; ++p) acc = op.combine(acc, partials[ulong(p) * s.outputs + o]);
  const Offsets off = kept_offsets(s, o);
  out[off.out] = op.template project<O>(acc);
  if (accumulates_index<typename Op<T>::A>()) indices[off.idx] = op.index(acc);
}

// ---- instantiation: <op>_{rows,cols,partials}_<T>, output type O ----

#define METALX_REDUCE_KERNELS(NAME, OP, T, O)                                                                 \
  template [[host_name(#NAME "_rows_" #T)]] kernel decltype(reduce_rows<OP, T, O>) reduce_rows<OP, T, O>;      \
  template [[host_name(#NAME "_cols_" #T)]] kernel decltype(reduce_cols<OP, T, O>) reduce_cols<OP, T, O>;      \
  template [[host_name(#NAME "_partials_" #T)]] kernel decltype(reduce_partials<OP, T, O>)                     \
      reduce_partials<OP, T, O>;

// Output the input's type; integer sums and products write long (torch's default).
#define METALX_REDUCE_SAME(NAME, OP, T) METALX_REDUCE_KERNELS(NAME, OP, T, T)
#define METALX_REDUCE_LONG(NAME, OP, T) METALX_REDUCE_KERNELS(NAME, OP, T, long)
#define METALX_REDUCE_BOOL(NAME, OP, T) METALX_REDUCE_KERNELS(NAME, OP, T, bool)
#define METALX_REDUCE_FLOATS(M, NAME, OP) M(NAME, OP, float) M(NAME, OP, half) M(NAME, OP, bfloat)
#define METALX_REDUCE_INTS(M, NAME, OP) \
  M(NAME, OP, long) M(NAME, OP, int) M(NAME, OP, short) M(NAME, OP, char) M(NAME, OP, uchar) M(NAME, OP, bool)

METALX_REDUCE_FLOATS(METALX_REDUCE_SAME, sum, sum_red)
METALX_REDUCE_INTS(METALX_REDUCE_LONG, sum, sum_red)
METALX_REDUCE_FLOATS(METALX_REDUCE_SAME, prod, prod_red)
METALX_REDUCE_INTS(METALX_REDUCE_LONG, prod, prod_red)
METALX_REDUCE_SAME(prod, prod_red, complex64)
METALX_REDUCE_FLOATS(METALX_REDUCE_SAME, amax, max_red)
METALX_REDUCE_INTS(METALX_REDUCE_SAME, amax, max_red)
METALX_REDUCE_FLOATS(METALX_REDUCE_SAME, amin, min_red)
METALX_REDUCE_INTS(METALX_REDUCE_SAME, amin, min_red)
METALX_REDUCE_FLOATS(METALX_REDUCE_SAME, argmax, argmax_red)
METALX_REDUCE_INTS(METALX_REDUCE_SAME, argmax, argmax_red)
METALX_REDUCE_FLOATS(METALX_REDUCE_SAME, argmin, argmin_red)
METALX_REDUCE_INTS(METALX_REDUCE_SAME, argmin, argmin_red)
METALX_REDUCE_FLOATS(METALX_REDUCE_BOOL, any, any_red)
METALX_REDUCE_INTS(METALX_REDUCE_BOOL, any, any_red)
METALX_REDUCE_FLOATS(METALX_REDUCE_BOOL, all, all_red)
METALX_REDUCE_INTS(METALX_REDUCE_BOOL, all, all_red)
METALX_REDUCE_FLOATS(METALX_REDUCE_LONG, count_nonzero, count_nonzero_red)
METALX_REDUCE_INTS(METALX_REDUCE_LONG, count_nonzero, count_nonzero_red)
METALX_REDUCE_FLOATS(METALX_REDUCE_SAME, norm2, norm2_red)
METALX_REDUCE_FLOATS(METALX_REDUCE_SAME, norm1, norm1_red)
METALX_REDUCE_FLOATS(METALX_REDUCE_SAME, norm0, norm0_red)
METALX_REDUCE_FLOATS(METALX_REDUCE_SAME, normp, normp_red)
METALX_REDUCE_FLOATS(METALX_REDUCE_SAME, norminf, norminf_red)
METALX_REDUCE_FLOATS(METALX_REDUCE_SAME, normninf, normninf_red)
METALX_REDUCE_FLOATS(METALX_REDUCE_SAME, var, var_red)
METALX_REDUCE_FLOATS(METALX_REDUCE_SAME, var_mean, var_mean_red)
METALX_REDUCE_FLOATS(METALX_REDUCE_SAME, logsumexp, logsumexp_red)
