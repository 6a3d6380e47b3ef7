// Sorting along one dim: sort, argsort, topk, kthvalue, and what is built on them
// (randperm, multinomial without replacement, unique). Host: backend/ops/sort.cpp.
//
// The host views a tensor as `lines` lines of `n` elements (the line index split into
// coordinates, innermost first, with each tensor's strides). Every element becomes an
// unsigned key whose unsigned order is the order torch sorts in (NaN above +inf, -0 equal
// to +0; descending sorts complement the key), paired with its position along the line.
// Pairs are compared key first, position second: all pairs differ, so every sort is
// stable and its result does not depend on how threads are scheduled.
//
//   sort_block_<T>    a threadgroup sorts `block` pairs in threadgroup memory with a
//                     bitonic network: many short lines at once (each line a segment of
//                     `segment` pairs, padded with pairs that sort last), or one piece of
//                     `segment` pairs of a long line. Writes the sorted pairs, line-major.
//   sort_merge_<K>    one pass of a merge sort over runs of `width` sorted pairs: a thread
//                     per pair finds its place in the partner run by binary search (its
//                     rank there plus its rank in its own run is its place in the merged
//                     run); log2(n / segment) passes sort lines longer than a block.
//   sort_small_k_<T> topk with k <= 16 over many lines: a thread per line, one pass.
//   sort_gather_<E>   writes `k` sorted positions of each line from the `start`th (int64)
//                     and, if asked, the values they point at, through the outputs'
//                     strides. One kernel per element size: values are moved, never
//                     converted.
// Keys are 32-bit (uint) for every dtype up to 4 bytes and 64-bit (ulong) for int64.
#include <metal_stdlib>
using namespace metal;

#define METALX_SORT_MAX_DIMS 8
#define METALX_SORT_BLOCK 2048
#define METALX_SORT_SMALL_K 16

struct SortParams {
  ulong lines;
  uint n;           // elements per line
  uint k;           // gather: positions written per line
  uint segment;     // block: pairs per sorted segment (a power of two)
  uint block;       // block: pairs per threadgroup (a power of two, >= segment)
  uint width;       // merge: sorted run length
  uint descending;
  uint with_values;  // gather: write the values too
  uint ndim;         // line dims
  uint start;        // gather: the first sorted position written (kthvalue: k - 1)
  uint unused;
  long in_step;      // strides along the sorted dim
  long values_step;
  long indices_step;
  ulong sizes[METALX_SORT_MAX_DIMS];
  long in_strides[METALX_SORT_MAX_DIMS];
  long values_strides[METALX_SORT_MAX_DIMS];
  long indices_strides[METALX_SORT_MAX_DIMS];
};

inline long line_offset(constant SortParams& p, constant long* strides, ulong line) {
  long off = 0;
  for (uint d = 0; d < p.ndim; ++d) {
    const ulong q = line / p.sizes[d];
    off += long(line - q * p.sizes[d]) * strides[d];
    line = q;
  }
  return off;
}

// Order-preserving keys. Floats: the sign-magnitude bits made monotonic (negatives
// complemented, positives with the sign bit set); every NaN the largest key, -0 as +0.
inline uint float_key(float x) {
  if (isnan(x)) return 0xFFFFFFFFu;
  if (x == 0.0f) x = 0.0f;
  const uint bits = as_type<uint>(x);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

template <typename T> struct SortKey;
template <> struct SortKey<float> { typedef uint K; static uint of(float v) { return float_key(v); } };
template <> struct SortKey<half> { typedef uint K; static uint of(half v) { return float_key(float(v)); } };
template <> struct SortKey<bfloat> { typedef uint K; static uint of(bfloat v) { return float_key(float(v)); } };
template <> struct SortKey<int> { typedef uint K; static uint of(int v) { return uint(v) ^ 0x80000000u; } };
template <> struct SortKey<short> { typedef uint K; static uint of(short v) { return uint(int(v)) ^ 0x80000000u; } };
template <> struct SortKey<char> { typedef uint K; static uint of(char v) { return uint(int(v)) ^ 0x80000000u; } };
template <> struct SortKey<uchar> { typedef uint K; static uint of(uchar v) { return uint(v); } };
template <> struct SortKey<bool> { typedef uint K; static uint of(bool v) { return v ? 1u : 0u; } };
template <> struct SortKey<long> {
  typedef ulong K;
  static ulong of(long v) { return ulong(v) ^ 0x8000000000000000ul; }
};

template <typename K>
inline bool pair_less(K ka, uint ia, K kb, uint ib) {
  return ka < kb || (ka == kb && ia < ib);
}

// Threadgroup memory holds `block` pairs; pairs past a line's end (position >= n) get
// the largest key and position, so they sort to the end of their segment.
template <typename T>
kernel void sort_block(device const T* in [[buffer(0)]],
                       device typename SortKey<T>::K* keys_out [[buffer(1)]],
                       device uint* pos_out [[buffer(2)]],
                       constant SortParams& p [[buffer(3)]],
                       uint group [[threadgroup_position_in_grid]],
                       uint tid [[thread_index_in_threadgroup]],
                       uint nthreads [[threads_per_threadgroup]]) {
  typedef typename SortKey<T>::K K;
  threadgroup K keys[METALX_SORT_BLOCK];
  threadgroup uint pos[METALX_SORT_BLOCK];
  const uint segment = p.segment, block = p.block;
  const ulong segs_per_line = (ulong(p.n) + segment - 1) / segment;
  const ulong total_segs = p.lines * segs_per_line;
  const ulong first_seg = ulong(group) * (block / segment);
  const K flip = p.descending ? K(~K(0)) : K(0);

  const uint seg_shift = ctz(segment);  // sizes are powers of two: shifts, not divisions
  for (uint s = tid; s < block; s += nthreads) {
    const ulong seg = first_seg + (s >> seg_shift);
    const ulong line = seg / segs_per_line;
    const ulong j = (seg - line * segs_per_line) * segment + (s & (segment - 1));
    if (seg < total_segs && j < p.n) {
      const long off = line_offset(p, p.in_strides, line) + long(j) * p.in_step;
      keys[s] = SortKey<T>::of(in[off]) ^ flip;
      pos[s] = uint(j);
    } else {
      keys[s] = K(~K(0));
      pos[s] = 0xFFFFFFFFu;
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);

  // Bitonic network on every segment of the block at once. At the last merge size
  // (size == segment) every segment is sorted ascending; before that, the direction of a
  // bitonic half is the bit `size` of the pair's place in its segment.
  for (uint size = 2; size <= segment; size <<= 1) {
    for (uint stride = size >> 1; stride > 0; stride >>= 1) {
      for (uint q = tid; q < block / 2; q += nthreads) {
        const uint a = ((q & ~(stride - 1)) << 1) | (q & (stride - 1));  // q / stride * 2 * stride + q % stride
        const uint b = a + stride;
        const bool ascending = size == segment || (a & size) == 0;
        const K ka = keys[a], kb = keys[b];
        const uint ia = pos[a], ib = pos[b];
        if (pair_less(kb, ib, ka, ia) == ascending) {
          keys[a] = kb; keys[b] = ka;
          pos[a] = ib; pos[b] = ia;
        }
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
  }

  for (uint s = tid; s < block; s += nthreads) {
    const ulong seg = first_seg + (s >> seg_shift);
    const ulong line = seg / segs_per_line;
    const ulong j = (seg - line * segs_per_line) * segment + (s & (segment - 1));
    if (seg < total_segs && j < p.n) {
      keys_out[line * p.n + j] = keys[s];
      pos_out[line * p.n + j] = pos[s];
    }
  }
}

template <typename K>
kernel void sort_merge(device const K* keys_in [[buffer(0)]],
                       device const uint* pos_in [[buffer(1)]],
                       device K* keys_out [[buffer(2)]],
                       device uint* pos_out [[buffer(3)]],
                       constant SortParams& p [[buffer(4)]],
                       uint gid [[thread_position_in_grid]],
                       uint threads [[threads_per_grid]]) {
  const ulong total = p.lines * ulong(p.n);
  const ulong w = p.width;
  for (ulong e = gid; e < total; e += threads) {
    const ulong line = e / p.n, i = e - line * p.n, base = line * p.n;
    const uint w_shift = ctz(p.width);  // widths are powers of two
    const ulong run = i >> w_shift, start = (run & ~1ul) << w_shift;
    const K key = keys_in[e];
    const uint id = pos_in[e];
    ulong lo, hi, own;
    if ((run & 1) == 0) {
      lo = min(start + w, ulong(p.n));
      hi = min(start + 2 * w, ulong(p.n));
      own = i - start;
    } else {
      lo = start;
      hi = start + w;
      own = i - start - w;
    }
    const ulong first = lo;
    while (lo < hi) {
      const ulong mid = (lo + hi) / 2;
      if (pair_less(keys_in[base + mid], pos_in[base + mid], key, id)) lo = mid + 1;
      else hi = mid;
    }
    const ulong dst = base + start + own + (lo - first);
    keys_out[dst] = key;
    pos_out[dst] = id;
  }
}

template <typename E>
kernel void sort_gather(device const E* in [[buffer(0)]],
                        device const uint* pos [[buffer(1)]],
                        device E* values [[buffer(2)]],
                        device long* indices [[buffer(3)]],
                        constant SortParams& p [[buffer(4)]],
                        uint gid [[thread_position_in_grid]],
                        uint threads [[threads_per_grid]]) {
  const ulong total = p.lines * ulong(p.k);
  for (ulong e = gid; e < total; e += threads) {
    const ulong line = e / p.k, j = e - line * p.k;
    const uint id = pos[line * p.n + p.start + j];
    indices[line_offset(p, p.indices_strides, line) + long(j) * p.indices_step] = long(id);
    if (p.with_values) {
      values[line_offset(p, p.values_strides, line) + long(j) * p.values_step] =
          in[line_offset(p, p.in_strides, line) + long(id) * p.in_step];
    }
  }
}

// topk with small k (<= METALX_SORT_SMALL_K) over many lines: a thread per line keeps
// its k smallest pairs in registers by insertion, in one pass over the line, and writes
// their positions (k per line) for sort_gather. The same pairs, in the same order, as a
// full sort's first k (a later equal value never displaces an earlier one).
template <typename T>
kernel void sort_small_k(device const T* in [[buffer(0)]],
                         device uint* pos_out [[buffer(1)]],
                         constant SortParams& p [[buffer(2)]],
                         uint gid [[thread_position_in_grid]],
                         uint threads [[threads_per_grid]]) {
  typedef typename SortKey<T>::K K;
  const K flip = p.descending ? K(~K(0)) : K(0);
  for (ulong line = gid; line < p.lines; line += threads) {
    K keys[METALX_SORT_SMALL_K];
    uint ids[METALX_SORT_SMALL_K];
    uint count = 0;
    const long base = line_offset(p, p.in_strides, line);
    for (uint j = 0; j < p.n; ++j) {
      const K key = SortKey<T>::of(in[base + long(j) * p.in_step]) ^ flip;
      if (count == p.k && !pair_less(key, j, keys[count - 1], ids[count - 1])) continue;
      uint at = count < p.k ? count++ : p.k - 1;
      while (at > 0 && pair_less(key, j, keys[at - 1], ids[at - 1])) {
        keys[at] = keys[at - 1];
        ids[at] = ids[at - 1];
        --at;
      }
      keys[at] = key;
      ids[at] = j;
    }
    for (uint j = 0; j < p.k; ++j) pos_out[line * p.k + j] = ids[j];
  }
}

#define METALX_SORT_BLOCK_KERNEL(T) \
  template [[host_name("sort_block_" #T)]] kernel decltype(sort_block<T>) sort_block<T>; \
  template [[host_name("sort_small_k_" #T)]] kernel decltype(sort_small_k<T>) sort_small_k<T>;
METALX_SORT_BLOCK_KERNEL(float)
METALX_SORT_BLOCK_KERNEL(half)
METALX_SORT_BLOCK_KERNEL(bfloat)
METALX_SORT_BLOCK_KERNEL(long)
METALX_SORT_BLOCK_KERNEL(int)
METALX_SORT_BLOCK_KERNEL(short)
METALX_SORT_BLOCK_KERNEL(char)
METALX_SORT_BLOCK_KERNEL(uchar)
METALX_SORT_BLOCK_KERNEL(bool)

// Merge kernels are named by the dtype whose keys they merge: int for 32-bit keys,
// long for 64-bit ones.
template [[host_name("sort_merge_int")]] kernel decltype(sort_merge<uint>) sort_merge<uint>;
template [[host_name("sort_merge_long")]] kernel decltype(sort_merge<ulong>) sort_merge<ulong>;

#define METALX_SORT_GATHER_KERNEL(E) \
  template [[host_name("sort_gather_" #E)]] kernel decltype(sort_gather<E>) sort_gather<E>;
METALX_SORT_GATHER_KERNEL(uchar)
METALX_SORT_GATHER_KERNEL(short)
METALX_SORT_GATHER_KERNEL(int)
METALX_SORT_GATHER_KERNEL(long)
