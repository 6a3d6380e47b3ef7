// The launch of a kernel that is a thread per element, or a grid-stride loop over the
// elements: one dispatch on the current stream of `threads` threads in groups of up to
// 256, the tensors bound at 0, 1, ... (buffer + offset), the op's parameters inline
// after them. The op families without a launcher of their own (range, linspace,
// upsample, padding) use it.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <initializer_list>
#include <utility>
#include <vector>

#include "allocator.h"
#include "core/stream_pool.h"
#include "launch/kernel_table.h"

namespace metalx::launch {

// Grid-stride kernels cap their threads here: enough to fill any device, and a dispatch
// whose size does not grow with the tensor.
constexpr uint64_t kGridStrideThreads = 256 * 1024;

template <class Params>
void encodeThreads(KernelFamily& family, Variant variant, kernels::DType dtype,
                   std::initializer_list<const at::Tensor*> tensors, const Params& params, uint64_t threads) {
  if (threads == 0) return;
  constexpr uint64_t kGroup = 256;
  Stream& stream = currentStream(tensors.begin()[0]->device().index());
  const rt::ComputePipelinePtr& pipeline = family.pipeline(stream, variant, dtype);
  std::vector<std::pair<rt::BufferPtr, size_t>> buffers;
  buffers.reserve(tensors.size());
  for (const at::Tensor* t : tensors) buffers.push_back(bufferFor(*t));
  stream.encodeCompute([&](rt::ComputeEncoder& e) {
    e.setComputePipeline(pipeline);
    for (size_t i = 0; i < buffers.size(); ++i) e.setBuffer(buffers[i].first, buffers[i].second, uint32_t(i));
    e.setBytes(&params, sizeof params, uint32_t(buffers.size()));
    e.dispatchThreads({threads, 1, 1}, {std::min<uint64_t>(threads, kGroup), 1, 1});
  });
}

}  // namespace metalx::launch
