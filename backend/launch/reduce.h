// The reduction launcher: runs one op's kernels of kernels/reduce.metal (rows, cols,
// partials) over a tensor, reducing a set of dims.
//
// The input is viewed as O outputs of R elements; kept and reduced dims are coalesced
// separately (innermost first), so any strides, views and channels_last layouts reduce
// in place. The launcher picks per call:
//   - rows (a SIMD group or threadgroup per output) when the reduced elements of an
//     output are contiguous, or outputs are not adjacent in memory;
//   - cols (a thread per run of adjacent outputs) when the kept innermost dim is the
//     contiguous one (reducing outer dims);
//   - a split of every row into parts, with a partials pass, when there are too few
//     outputs to fill the device (full reductions, a few long rows).
// On the simulator always cols (a full reduction as one output), in enough
// threadgroups to spread over its cores; a thread there reduces up to 1024 adjacent
// outputs that are adjacent in memory (page-wide strips of each row), with R split into
// parts when that leaves too few threads.
#pragma once

#include <ATen/ATen.h>

#include <array>

#include "launch/kernel_table.h"

namespace metalx::launch {

struct ReductionRequest {
  const at::Tensor* input;     // a dtype the kernels have
  std::vector<int64_t> dims;   // wrapped, unique; empty = every dim
  const at::Tensor* out;       // the kernels' output dtype; reduced dims removed or size 1
  const at::Tensor* indices = nullptr;  // int64, arg reductions
  std::array<float, 4> scalars = {0.0f, 0.0f, 0.0f, 0.0f};  // the op's (mean: f[1] = elements per output)
};

// Runs the reduction; returns false (encoding nothing) when the layout has more than
// the kernels' 8 kept or reduced dims after coalescing (the caller falls back).
bool runReduction(KernelFamily& kernels, const ReductionRequest& request);

// The number of elements each output reduces.
int64_t reducedSize(const at::Tensor& input, at::IntArrayRef dims);

}  // namespace metalx::launch
