// searchsorted / bucketize: for each input value, the position in its row of sorted
// boundaries where it would be inserted (the first position whose boundary is not less
// than the value, or with `right` greater than it), optionally through a sorter that
// gives the row's order. The comparisons are written as CPU's (`!(b >= v)` and
// `!(b > v)`), so NaN values and boundaries land where CPU puts them. Host side:
// backend/ops/searchsorted.cpp; every tensor arrives contiguous.
#include <metal_stdlib>
using namespace metal;

struct SearchParams {
  ulong count;     // input values
  ulong inner;     // values per boundary row (the input's last dim)
  ulong bd_len;    // boundaries per row
  uint bd_rows;    // 0: one row for every value (1-d boundaries); else rows follow the input's
  uint right;
  uint has_sorter;
  uint out_int32;
};

// half and bfloat compare as float, as CPU's do.
template <typename T> struct SearchCompare { using type = T; };
template <> struct SearchCompare<half> { using type = float; };
template <> struct SearchCompare<bfloat> { using type = float; };

template <typename T>
kernel void searchsorted(device const T* values [[buffer(0)]],
                         device const T* boundaries [[buffer(1)]],
                         device const long* sorter [[buffer(2)]],
                         device long* out64 [[buffer(3)]],  // out_int32 == 0
                         device int* out32 [[buffer(4)]],   // out_int32 == 1 (the host binds both)
                         constant SearchParams& p [[buffer(5)]],
                         uint tid [[thread_position_in_grid]],
                         uint threads [[threads_per_grid]]) {
  using C = typename SearchCompare<T>::type;
  for (ulong i = tid; i < p.count; i += threads) {
    const ulong row_start = p.bd_rows ? i / p.inner * p.bd_len : 0;
    const C v = C(values[i]);
    ulong lo = 0, hi = p.bd_len;
    while (lo < hi) {
      const ulong mid = lo + ((hi - lo) >> 1);
      const ulong at = p.has_sorter ? ulong(sorter[row_start + mid]) : mid;
      const C b = C(boundaries[row_start + at]);
      const bool before = p.right ? !(b > v) : !(b >= v);
      if (before) lo = mid + 1; else hi = mid;
    }
    if (p.out_int32) {
      out32[i] = int(lo);
    } else {
      out64[i] = long(lo);
    }
  }
}

#define METALX_SEARCHSORTED_KERNEL(T) \
  template [[host_name("searchsorted_" #T)]] kernel decltype(searchsorted<T>) searchsorted<T>;
METALX_SEARCHSORTED_KERNEL(float)
METALX_SEARCHSORTED_KERNEL(half)
METALX_SEARCHSORTED_KERNEL(bfloat)
METALX_SEARCHSORTED_KERNEL(long)
METALX_SEARCHSORTED_KERNEL(int)
METALX_SEARCHSORTED_KERNEL(short)
METALX_SEARCHSORTED_KERNEL(char)
METALX_SEARCHSORTED_KERNEL(uchar)
