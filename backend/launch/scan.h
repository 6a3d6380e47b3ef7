// The scan launcher: runs one op's kernels of kernels/scan.metal (cumsum, cumprod,
// cummax/cummin, logcumsumexp) along one dim of a tensor.
//
// Every other dim is a line index (coalesced, any strides, so views and channels_last
// scan in place); a thread scans a line, or a part of one when there are too few lines
// to fill the device (then a totals pass and a pass turning totals into each part's
// starting state come first).
#pragma once

#include <ATen/core/Tensor.h>

#include "launch/kernel_table.h"

namespace metalx::launch {

struct ScanRequest {
  const at::Tensor* input;    // the kernel's dtype
  int64_t dim;                // wrapped; 0 for a 0-dim input
  const at::Tensor* out;      // input's sizes and dtype
  const at::Tensor* indices;  // cummax/cummin: int64 positions, input's sizes; else null
};

// Runs the scan; returns false (encoding nothing) when the lines have more than the
// kernels' 8 dims after coalescing (the caller makes the input contiguous).
bool runScan(KernelFamily& kernels, const ScanRequest& request);

}  // namespace metalx::launch
