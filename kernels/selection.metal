// Selection ops whose output size depends on the data (nonzero, masked_select) or that
// move elements to mirrored/shifted places (masked_scatter_, flip, roll). Host side:
// backend/ops/selection.cpp.
//
// Data-dependent sizes are done as CUDA and MPS do: the walked shape is cut into blocks
// of consecutive elements in row-major order; a count pass gives each block its number
// of selected elements, one thread turns those counts into each block's first output
// row (an exclusive prefix sum, the total after the last block), the host waits once to
// size the output, and a fill pass lets each block write its elements from its first
// row on. Rows therefore come out in CPU's row-major order.
//
// Every kernel only tests or moves bits, so instantiations exist per element size
// (uchar, short, int, long) and serve every dtype of that size. "Nonzero" is
// `(bits & value_bits) != 0` on the sign-extended bits: the host clears the sign bit(s)
// from value_bits for floating types so -0.0 counts as zero and NaN as nonzero.
#include <metal_stdlib>
using namespace metal;

#define METALX_SELECTION_MAX_DIMS 8

struct SelectionParams {
  uint ndim;         // dims of the walked shape (0: one element)
  uint out_cols;     // nonzero: coordinates written per row
  ulong count;       // elements walked
  ulong block;       // elements per block
  ulong blocks;
  ulong value_bits;  // bits of a tested element that make it nonzero
  ulong limit;       // rows written at most (nonzero_static's size), else all
  long out_row_stride;
  long out_col_stride;  // nonzero's output; masked_select's out and masked_scatter's
                        // source use out_row_stride only
  ulong sizes[METALX_SELECTION_MAX_DIMS];
  long test_strides[METALX_SELECTION_MAX_DIMS];  // the tested tensor (self or mask)
  long data_strides[METALX_SELECTION_MAX_DIMS];  // the moved tensor (masked_*'s self)
};

// Coordinates of element `e` of the walked shape and its offsets in two tensors,
// advanced one element at a time in row-major order (an odometer: no divisions per step).
struct Walker {
  ulong coord[METALX_SELECTION_MAX_DIMS];
  long test_off = 0;
  long data_off = 0;

  Walker(constant SelectionParams& p, ulong e) {
    for (uint k = 0; k < p.ndim; ++k) {
      const uint d = p.ndim - 1 - k;
      coord[d] = e % p.sizes[d];
      e /= p.sizes[d];
      test_off += long(coord[d]) * p.test_strides[d];
      data_off += long(coord[d]) * p.data_strides[d];
    }
  }

  void next(constant SelectionParams& p) {
    for (uint k = 0; k < p.ndim; ++k) {
      const uint d = p.ndim - 1 - k;
      if (++coord[d] < p.sizes[d]) {
        test_off += p.test_strides[d];
        data_off += p.data_strides[d];
        return;
      }
      coord[d] = 0;
      test_off -= long(p.sizes[d] - 1) * p.test_strides[d];
      data_off -= long(p.sizes[d] - 1) * p.data_strides[d];
    }
  }
};

template <typename T>
inline bool selected(device const T* test, long off, constant SelectionParams& p) {
  return (ulong(test[off]) & p.value_bits) != 0;
}

// counts[b] = selected elements of block b.
template <typename T>
kernel void selection_count(device const T* test [[buffer(0)]],
                            device ulong* counts [[buffer(1)]],
                            constant SelectionParams& p [[buffer(2)]],
                            uint tid [[thread_position_in_grid]],
                            uint threads [[threads_per_grid]]) {
  for (ulong b = tid; b < p.blocks; b += threads) {
    const ulong first = b * p.block, end = min(first + p.block, p.count);
    Walker w(p, first);
    ulong n = 0;
    for (ulong e = first; e < end; ++e, w.next(p)) n += selected(test, w.test_off, p) ? 1 : 0;
    counts[b] = n;
  }
}

// counts[0..blocks) -> each block's first row; counts[blocks] = the total. One thread:
// the blocks are few (the host bounds them). Named by its element type, as the launch
// layer's tables find kernels.
kernel void selection_scan_long(device ulong* counts [[buffer(0)]],
                           constant SelectionParams& p [[buffer(1)]],
                           uint tid [[thread_position_in_grid]]) {
  if (tid != 0) return;
  ulong total = 0;
  for (ulong b = 0; b < p.blocks; ++b) {
    const ulong n = counts[b];
    counts[b] = total;
    total += n;
  }
  counts[p.blocks] = total;
}

// nonzero: row r of `out` holds the coordinates of the r-th nonzero element.
template <typename T>
kernel void selection_nonzero(device const T* test [[buffer(0)]],
                              device long* out [[buffer(1)]],
                              device const ulong* firsts [[buffer(2)]],
                              constant SelectionParams& p [[buffer(3)]],
                              uint tid [[thread_position_in_grid]],
                              uint threads [[threads_per_grid]]) {
  for (ulong b = tid; b < p.blocks; b += threads) {
    ulong row = firsts[b];
    if (row >= p.limit) continue;
    const ulong first = b * p.block, end = min(first + p.block, p.count);
    Walker w(p, first);
    for (ulong e = first; e < end && row < p.limit; ++e, w.next(p)) {
      if (!selected(test, w.test_off, p)) continue;
      device long* dst = out + long(row) * p.out_row_stride;
      for (uint c = 0; c < p.out_cols; ++c) dst[long(c) * p.out_col_stride] = long(w.coord[c]);
      ++row;
    }
  }
}

// masked_select: out[r] = data at the r-th true element of the mask (`test`).
template <typename T>
kernel void selection_masked_select(device const uchar* mask [[buffer(0)]],
                                    device const T* data [[buffer(1)]],
                                    device T* out [[buffer(2)]],
                                    device const ulong* firsts [[buffer(3)]],
                                    constant SelectionParams& p [[buffer(4)]],
                                    uint tid [[thread_position_in_grid]],
                                    uint threads [[threads_per_grid]]) {
  for (ulong b = tid; b < p.blocks; b += threads) {
    ulong row = firsts[b];
    const ulong first = b * p.block, end = min(first + p.block, p.count);
    Walker w(p, first);
    for (ulong e = first; e < end; ++e, w.next(p)) {
      if (!selected(mask, w.test_off, p)) continue;
      out[long(row) * p.out_row_stride] = data[w.data_off];
      ++row;
    }
  }
}

// masked_scatter_: data at the r-th true element of the mask = source[r] (the
// source's elements in row-major order, `out_row_stride` apart).
template <typename T>
kernel void selection_masked_scatter(device const uchar* mask [[buffer(0)]],
                                     device T* data [[buffer(1)]],
                                     device const T* source [[buffer(2)]],
                                     device const ulong* firsts [[buffer(3)]],
                                     constant SelectionParams& p [[buffer(4)]],
                                     uint tid [[thread_position_in_grid]],
                                     uint threads [[threads_per_grid]]) {
  for (ulong b = tid; b < p.blocks; b += threads) {
    ulong row = firsts[b];
    const ulong first = b * p.block, end = min(first + p.block, p.count);
    Walker w(p, first);
    for (ulong e = first; e < end; ++e, w.next(p)) {
      if (!selected(mask, w.test_off, p)) continue;
      data[w.data_off] = source[long(row) * p.out_row_stride];
      ++row;
    }
  }
}

struct MirrorParams {
  uint ndim;
  uint flip_dims;  // bit d: dim d is reversed
  ulong count;
  ulong sizes[METALX_SELECTION_MAX_DIMS];
  ulong shifts[METALX_SELECTION_MAX_DIMS];  // roll: in [0, size)
  long in_strides[METALX_SELECTION_MAX_DIMS];
  long out_strides[METALX_SELECTION_MAX_DIMS];
};

// flip and roll: out[c] = in[c'] with c'_d = size_d - 1 - c_d on flipped dims and
// (c_d - shift_d) mod size_d on rolled ones. A thread per output element (grid-stride).
template <typename T>
kernel void selection_mirror(device const T* in [[buffer(0)]],
                             device T* out [[buffer(1)]],
                             constant MirrorParams& p [[buffer(2)]],
                             uint tid [[thread_position_in_grid]],
                             uint threads [[threads_per_grid]]) {
  for (ulong e = tid; e < p.count; e += threads) {
    ulong rest = e;
    long in_off = 0, out_off = 0;
    for (uint k = 0; k < p.ndim; ++k) {
      const uint d = p.ndim - 1 - k;
      const ulong c = rest % p.sizes[d];
      rest /= p.sizes[d];
      ulong s = (p.flip_dims >> d) & 1 ? p.sizes[d] - 1 - c : c;
      s = s >= p.shifts[d] ? s - p.shifts[d] : s + p.sizes[d] - p.shifts[d];
      in_off += long(s) * p.in_strides[d];
      out_off += long(c) * p.out_strides[d];
    }
    out[out_off] = in[in_off];
  }
}

#define METALX_SELECTION_KERNELS(T)                                                                          \
  template [[host_name("selection_count_" #T)]] kernel decltype(selection_count<T>) selection_count<T>;     \
  template [[host_name("selection_nonzero_" #T)]] kernel decltype(selection_nonzero<T>) selection_nonzero<T>; \
  template [[host_name("selection_masked_select_" #T)]] kernel decltype(selection_masked_select<T>)          \
      selection_masked_select<T>;                                                                            \
  template [[host_name("selection_masked_scatter_" #T)]] kernel decltype(selection_masked_scatter<T>)        \
      selection_masked_scatter<T>;                                                                           \
  template [[host_name("selection_mirror_" #T)]] kernel decltype(selection_mirror<T>) selection_mirror<T>;
METALX_SELECTION_KERNELS(uchar)
METALX_SELECTION_KERNELS(short)
METALX_SELECTION_KERNELS(int)
METALX_SELECTION_KERNELS(long)
