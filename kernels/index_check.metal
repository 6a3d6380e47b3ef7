// Device-side index checks: the index values of an op are validated on the device, and
// the first violation is written into the stream's error record (a few words of shared
// memory) that the host reads whenever it waits for the device anyway. Host side:
// backend/ops/index_check.cpp (launch) and backend/device_index_errors.cpp (the record).
//
// Two kernels per check, encoded back to back:
//   index_check_find:   a grid-stride walk over the (contiguous) index; each bad value
//                       lowers record.pending to its position (atomic min), so the
//                       violation CPU would name, the first in index order, wins
//                       whatever the thread order.
//   index_check_record: one thread; if a position is pending and the record holds no
//                       earlier error, it copies the value at that position and the
//                       op's description into the record, op id last (the host reads
//                       the op id to know the record is complete). It always re-arms
//                       pending, so the next check starts clean.
// The ops' own kernels skip bad elements, so nothing is read or written out of bounds.
#include <metal_stdlib>
using namespace metal;

// Mirrors backend/device_index_errors.h's IndexErrorRecord (32-bit words: Metal's
// atomics are 32-bit).
struct IndexErrorRecord {
  atomic_uint pending;  // position of the first bad value of the current check, or ~0u
  atomic_uint op;       // 0: no error; else the failing op's id
  uint message;         // how the host words the error (an IndexMessage)
  uint unused;
  long value;           // the bad index value
  long size;            // the size it was checked against
  long dim;             // the dimension named in the message
};

// Mirrors backend/ops/index_check.cpp's IndexCheckParams.
struct IndexCheckParams {
  long low;         // valid values are in [low, high)
  long high;
  long size;        // for the message
  long dim;
  long ignore;      // a value always accepted (nll_loss's ignore_index) when has_ignore
  ulong numel;
  uint has_ignore;
  uint op;
  uint message;
  uint unused;
};

template <typename I>
kernel void index_check_find(device const I* index [[buffer(0)]], device IndexErrorRecord* record [[buffer(1)]],
                             constant IndexCheckParams& p [[buffer(2)]],
                             uint gid [[thread_position_in_grid]], uint threads [[threads_per_grid]]) {
  for (ulong i = gid; i < p.numel; i += threads) {
    const long v = long(index[i]);
    if (v >= p.low && v < p.high) continue;
    if (p.has_ignore && v == p.ignore) continue;
    // Positions past 32 bits saturate: such an index still reports, naming a later value.
    const uint position = i < 0xFFFFFFFEul ? uint(i) : 0xFFFFFFFEu;
    atomic_fetch_min_explicit(&record->pending, position, memory_order_relaxed);
    return;  // later positions of this thread cannot be first
  }
}

template <typename I>
kernel void index_check_record(device const I* index [[buffer(0)]], device IndexErrorRecord* record [[buffer(1)]],
                               constant IndexCheckParams& p [[buffer(2)]],
                               uint gid [[thread_position_in_grid]]) {
  if (gid != 0) return;
  const uint position = atomic_load_explicit(&record->pending, memory_order_relaxed);
  if (position == 0xFFFFFFFFu) return;
  atomic_store_explicit(&record->pending, 0xFFFFFFFFu, memory_order_relaxed);
  if (atomic_load_explicit(&record->op, memory_order_relaxed) != 0) return;  // the first error stays
  record->message = p.message;
  record->value = long(index[position]);
  record->size = p.size;
  record->dim = p.dim;
  atomic_store_explicit(&record->op, p.op, memory_order_relaxed);
}

#define METALX_INDEX_CHECK_KERNELS(I)                                                                       \
  template [[host_name("index_check_find_" #I)]] kernel decltype(index_check_find<I>) index_check_find<I>; \
  template [[host_name("index_check_record_" #I)]] kernel decltype(index_check_record<I>) index_check_record<I>;

METALX_INDEX_CHECK_KERNELS(long)
METALX_INDEX_CHECK_KERNELS(int)
