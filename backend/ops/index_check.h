// Device-side index checks for the indexing ops: the index values are checked by a
// kernel (kernels/index_check.metal) that records the first bad one in the device's
// error record, raised at the next host wait (backend/device_index_errors.h); the
// ops' kernels skip bad elements. No host wait per op, unless METALX_SYNC_INDEX_CHECKS=1.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

#include "device_index_errors.h"

namespace metalx {

struct IndexCheck {
  int64_t low = 0;   // valid values are in [low, high)
  int64_t high = 0;
  int64_t size = 0;  // the size the message names
  int64_t dim = 0;   // the dim the message names
  IndexMessage message = IndexMessage::Bounds;
  std::optional<int64_t> ignore;  // a value always accepted (nll_loss's ignore_index)
};

// Values in [0, size) (or [-size, size) with negative_ok), named as dim `dim` of `op`.
IndexCheck boundsCheck(int64_t size, int64_t dim, IndexMessage message, bool negative_ok = false);

// Encodes the check of `index` (any integer dtype, any device, any strides) for `op`, a
// string literal. A CPU index is checked on the host at once (nothing to wait for).
void checkIndicesOnDevice(const at::Tensor& index, const IndexCheck& check, const char* op);

}  // namespace metalx
