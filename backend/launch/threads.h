// The launch of a kernel whose arguments are tensors then one parameter struct: the
// binding and dispatch every op family without a launcher of its own (TensorIterator's
// elementwise and reduction launchers are in elementwise.h, reduce.h) goes through.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/ArrayRef.h>

#include <algorithm>
#include <array>
#include <initializer_list>
#include <utility>
#include <vector>

#include "allocator.h"
#include "buffer_ref.h"
#include "core/stream_pool.h"
#include "launch/kernel_table.h"

namespace metalx::launch {

// Grid-stride kernels cap their threads here: enough to fill any device, and a dispatch
// whose size does not grow with the tensor.
constexpr uint64_t kGridStrideThreads = 256 * 1024;

// The shape of one dispatch: exactly `count` threads in threadgroups of up to `group`
// (the last one partial), or count x rows x depth whole threadgroups of `group` threads
// each (for kernels that cooperate within a group: a row per group, threadgroup
// reductions, attention's blocks of query rows per head, GEMM blocks per batch).
struct Grid {
  uint64_t count;
  uint64_t group;
  bool whole_groups;
  uint64_t rows = 1;
  uint64_t depth = 1;
  static Grid threads(uint64_t n, uint64_t group = 256) { return {n, group, false}; }
  static Grid groups(uint64_t n, uint64_t group, uint64_t rows = 1, uint64_t depth = 1) {
    return {n, group, true, rows, depth};
  }
};

// Encodes `pipeline` on `stream`: the tensors bound at 0, 1, ... (buffer + offset), the
// op's parameters inline after them, dispatched as `grid`. Every family's launches
// come here, so binding and dispatch rules live in one place.
template <class Params>
void encodeKernel(Stream& stream, const rt::ComputePipelinePtr& pipeline, c10::ArrayRef<const at::Tensor*> tensors,
                  const Params& params, Grid grid) {
  if (grid.count == 0 || grid.rows == 0 || grid.depth == 0) return;
  constexpr size_t kMaxTensors = 12;
  TORCH_INTERNAL_ASSERT(tensors.size() <= kMaxTensors, "encodeKernel: at most ", kMaxTensors, " tensors");
  // The storages' own buffer references (bufferRefFor): no reference count per launch.
  std::array<const rt::BufferPtr*, kMaxTensors> buffers;
  std::array<size_t, kMaxTensors> offsets;
  std::array<rt::BufferPtr, kMaxTensors> holders;
  size_t n = 0;
  for (const at::Tensor* t : tensors) {
    buffers[n] = &bufferRefFor(*t, &offsets[n], &holders[n]);
    ++n;
  }
  if (!grid.whole_groups) {  // the common case (fills, most small ops): one encoder call
    std::array<rt::ComputeEncoder::Argument, kMaxTensors + 1> args;
    for (size_t i = 0; i < n; ++i) args[i].buffer = buffers[i], args[i].offset = offsets[i];
    args[n].bytes = &params, args[n].length = sizeof params;
    stream.encodeCompute([&](rt::ComputeEncoder& e) {
      e.encodeDispatchThreads(pipeline, args.data(), uint32_t(n + 1), {grid.count, 1, 1},
                              {std::min<uint64_t>(grid.count, grid.group), 1, 1});
    });
    return;
  }
  stream.encodeCompute([&](rt::ComputeEncoder& e) {
    e.setComputePipeline(pipeline);
    for (size_t i = 0; i < n; ++i) e.setBuffer(*buffers[i], offsets[i], uint32_t(i));
    e.setBytes(&params, sizeof params, uint32_t(n));
    e.dispatchThreadgroups({grid.count, grid.rows, grid.depth}, {grid.group, 1, 1});
  });
}

// A thread per element (or a grid-stride loop) of `family`'s kernel for `dtype`, on the
// current stream of the first tensor's device.
template <class Params>
void encodeThreads(KernelFamily& family, Variant variant, kernels::DType dtype,
                   std::initializer_list<const at::Tensor*> tensors, const Params& params, uint64_t threads) {
  if (threads == 0) return;
  Stream& stream = currentStream(tensors.begin()[0]->device().index());
  encodeKernel(stream, family.pipeline(stream, variant, dtype), tensors, params, Grid::threads(threads));
}

}  // namespace metalx::launch
