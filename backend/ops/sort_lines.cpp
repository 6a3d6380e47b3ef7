// The sort launcher (sort_lines.h): keys and positions sorted in threadgroup memory by
// blocks, merged in passes for lines longer than a block, then gathered into the outputs.
#include "sort_lines.h"

#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>

#include <algorithm>
#include <limits>

#include "allocator.h"
#include "core/stream_pool.h"
#include "launch/elementwise.h"
#include "launch/kernel_table.h"
#include "launch/threads.h"
#include "launch/torch_dtype.h"

namespace metalx {
namespace {

using kernels::DType;
using launch::KernelFamily;
using launch::Variant;

constexpr int kMaxLineDims = 8;
constexpr uint32_t kBlock = 2048;       // pairs a threadgroup sorts (kernels/sort.metal)
constexpr uint32_t kMaxGroupThreads = 256;
// The block sort's threads per group on the simulator, where every threadgroup barrier
// switches each thread's fiber: fewer threads doing more compare-exchanges per stage
// cost less there, the same work.
constexpr uint32_t kSimulatedBlockThreads = 32;
constexpr uint64_t kMaxThreads = uint64_t(1) << 22;  // grid-stride past that
// topk of at most this many per line over at least kSmallKMinLines lines: a thread per
// line (sort_small_k) instead of sorting whole lines.
constexpr int64_t kSmallK = 16;
constexpr uint64_t kSmallKMinLines = 64;

// Mirrors kernels/sort.metal's SortParams.
struct SortParams {
  uint64_t lines = 0;
  uint32_t n = 0, k = 0, segment = 0, block = 0, width = 0, descending = 0, with_values = 0, ndim = 0;
  uint32_t start = 0, unused = 0;
  int64_t in_step = 0, values_step = 0, indices_step = 0;
  uint64_t sizes[kMaxLineDims] = {};
  int64_t in_strides[kMaxLineDims] = {};
  int64_t values_strides[kMaxLineDims] = {};
  int64_t indices_strides[kMaxLineDims] = {};
};
static_assert(sizeof(SortParams) == 8 + 10 * 4 + 3 * 8 + 4 * 8 * kMaxLineDims, "SortParams must match the kernel");

KernelFamily block_kernels("sort_block", launch::kAllTypes);
KernelFamily merge_kernels("sort_merge", {DType::Int32, DType::Int64});
KernelFamily small_k_kernels("sort_small_k", launch::kAllTypes);
KernelFamily gather_kernels("sort_gather", {DType::UInt8, DType::Int16, DType::Int32, DType::Int64});

DType moveType(int64_t element_size) {
  const auto type = launch::bitsDtype(static_cast<size_t>(element_size));
  TORCH_INTERNAL_ASSERT(type, "sort: no gather kernel for ", element_size, "-byte elements");
  return *type;
}

uint32_t nextPow2(uint64_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

uint64_t ceilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Writes `count` (lines x k) sorted positions of `positions` (p.n per line) and the
// values at them to the outputs.
void gather(const SortParams& p, const at::Tensor& self, const at::Tensor& positions,
            const at::Tensor* values, const at::Tensor& indices, uint64_t count) {
  // Without values, indices stand in at their binding (the kernel does not read it).
  launch::encodeThreads(gather_kernels, Variant::Plain, moveType(self.element_size()),
                        {&self, &positions, values ? values : &indices, &indices}, p,
                        std::min<uint64_t>(count, kMaxThreads));
}

}  // namespace

bool canSortLines(const at::Tensor& self) {
  const auto dtype = launch::kernelDtype(self.scalar_type());
  if (!dtype || !block_kernels.supports(*dtype)) return false;
  if (self.dim() > kMaxLineDims + 1) return false;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (self.size(d) >= int64_t(std::numeric_limits<uint32_t>::max())) return false;
  return true;
}

void sortLines(const at::Tensor& self, int64_t dim, bool descending, int64_t k, const at::Tensor* values,
               const at::Tensor& indices, int64_t start) {
  const int64_t n = self.dim() == 0 ? 1 : self.size(dim);
  if (self.numel() == 0 || k == 0) return;
  const uint64_t lines = static_cast<uint64_t>(self.numel() / n);
  const DType dtype = *launch::kernelDtype(self.scalar_type());
  const bool wide_keys = dtype == DType::Int64;

  SortParams p;
  p.lines = lines;
  p.n = static_cast<uint32_t>(n);
  p.k = static_cast<uint32_t>(k);
  p.start = static_cast<uint32_t>(start);
  p.descending = descending ? 1 : 0;
  p.with_values = values ? 1 : 0;
  if (self.dim() > 0) {
    p.in_step = self.stride(dim);
    p.indices_step = indices.stride(dim);
    if (values) p.values_step = values->stride(dim);
  }
  for (int64_t d = self.dim() - 1; d >= 0; --d) {  // line dims, innermost first
    if (d == dim) continue;
    p.sizes[p.ndim] = static_cast<uint64_t>(self.size(d));
    p.in_strides[p.ndim] = self.stride(d);
    p.indices_strides[p.ndim] = indices.stride(d);
    if (values) p.values_strides[p.ndim] = values->stride(d);
    ++p.ndim;
  }

  Stream& stream = currentStream(self.device().index());
  if (k <= kSmallK && start == 0 && k < n && lines >= kSmallKMinLines) {
    const at::Tensor positions = at::empty({static_cast<int64_t>(lines) * k}, self.options().dtype(at::kInt));
    launch::encodeThreads(small_k_kernels, Variant::Plain, dtype, {&self, &positions}, p,
                          std::min<uint64_t>(lines, kMaxThreads));
    p.n = static_cast<uint32_t>(k);  // the gather reads k positions per line
    gather(p, self, positions, values, indices, lines * static_cast<uint64_t>(k));
    return;
  }

  // Scratch: keys and positions, line-major, twice over for the merge passes.
  const int64_t total = static_cast<int64_t>(lines) * n;
  const auto key_options = self.options().dtype(wide_keys ? at::kLong : at::kInt);
  at::Tensor keys[2] = {at::empty({total}, key_options), at::Tensor()};
  at::Tensor pos[2] = {at::empty({total}, self.options().dtype(at::kInt)), at::Tensor()};

  const uint64_t segment = std::min<uint64_t>(nextPow2(n), kBlock);
  const uint64_t segments = lines * ceilDiv(n, segment);
  p.segment = static_cast<uint32_t>(segment);
  p.block = static_cast<uint32_t>(std::min<uint64_t>(kBlock, segment * nextPow2(std::min<uint64_t>(segments, kBlock))));
  {
    const uint64_t groups = ceilDiv(segments, p.block / segment);
    const bool simulated = stream.device().info().is_simulated;
    const uint64_t threads =
        std::clamp<uint64_t>(p.block / 2, 1, simulated ? kSimulatedBlockThreads : kMaxGroupThreads);
    const auto& pipeline = block_kernels.pipeline(stream, Variant::Plain, dtype);
    launch::encodeKernel(stream, pipeline, {&self, &keys[0], &pos[0]}, p, launch::Grid::groups(groups, threads));
  }

  // Lines longer than a block: merge sorted runs of `segment`, 2 * segment, ... pairs.
  int cur = 0;
  if (static_cast<uint64_t>(n) > segment) {
    keys[1] = at::empty({total}, key_options);
    pos[1] = at::empty({total}, self.options().dtype(at::kInt));
    const DType key_type = wide_keys ? DType::Int64 : DType::Int32;
    const uint64_t threads = std::min<uint64_t>(static_cast<uint64_t>(total), kMaxThreads);
    for (uint64_t width = segment; width < static_cast<uint64_t>(n); width *= 2) {
      p.width = static_cast<uint32_t>(width);
      launch::encodeThreads(merge_kernels, Variant::Plain, key_type,
                            {&keys[cur], &pos[cur], &keys[1 - cur], &pos[1 - cur]}, p, threads);
      cur = 1 - cur;
    }
  }

  gather(p, self, pos[cur], values, indices, lines * static_cast<uint64_t>(k));
}

}  // namespace metalx
