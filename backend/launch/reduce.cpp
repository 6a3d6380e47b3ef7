// The reduction launcher (see reduce.h).
#include "launch/reduce.h"

#include <algorithm>

#include "allocator.h"
#include "core/stream_pool.h"
#include "launch/dims.h"
#include "launch/elementwise.h"

namespace metalx::launch {
namespace {

constexpr int kMaxDims = 8;
constexpr uint32_t kGroup = 256;
constexpr size_t kPartialBytes = 16;  // the largest accumulator of kernels/reduce.metal

// Mirrors kernels/reduce.metal's ReduceShape.
struct ReduceShape {
  uint32_t kept_ndim = 0;
  uint32_t red_ndim = 0;
  uint32_t threads_per_output = 32;
  uint32_t parts = 1;
  uint32_t cols = 1;
  uint64_t outputs = 1;
  uint64_t reduce_size = 1;
  uint64_t part_size = 1;
  uint64_t kept_sizes[kMaxDims] = {};
  uint64_t kept_in[kMaxDims] = {};
  uint64_t kept_out[kMaxDims] = {};
  uint64_t kept_idx[kMaxDims] = {};
  uint64_t red_sizes[kMaxDims] = {};
  uint64_t red_in[kMaxDims] = {};
  float f[4] = {};
};

uint64_t ceilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace

int64_t reducedSize(const at::Tensor& input, at::IntArrayRef dims) {
  if (dims.empty()) return input.numel();
  int64_t r = 1;
  for (int64_t d : dims) r *= input.dim() == 0 ? 1 : input.size(d);
  return r;
}

bool runReduction(KernelFamily& kernels, const ReductionRequest& request) {
  const at::Tensor& input = *request.input;
  const at::Tensor& out = *request.out;
  const int64_t ndim = input.dim();
  std::vector<bool> reduced(ndim, request.dims.empty());
  for (int64_t d : request.dims) {
    TORCH_INTERNAL_ASSERT(d == 0 || d < ndim, "reduction dim ", d, " of a ", ndim, "-d tensor");
    if (d < ndim) reduced[d] = true;  // a 0-dim input reduced over dim 0 is itself
  }

  // Kept and reduced dims, innermost (last) first. The outputs have either every dim
  // (keepdim) or only the kept ones, in order.
  std::vector<Dim> kept, red;
  const bool keepdim = out.dim() == ndim;
  int64_t kept_count = 0;
  for (int64_t d = 0; d < ndim; ++d) kept_count += !reduced[d];
  int64_t k = kept_count;
  for (int64_t d = ndim - 1; d >= 0; --d) {
    if (reduced[d]) {
      red.push_back({input.size(d), input.stride(d), 0, 0});
      continue;
    }
    --k;
    const int64_t od = keepdim ? d : k;
    const int64_t idx_stride = request.indices ? request.indices->stride(od) : 0;
    kept.push_back({input.size(d), input.stride(d), out.stride(od), idx_stride});
  }
  // An arg reduction's index counts in the input's row-major order: its reduced dims
  // must not be merged out of order, which coalescing never does.
  kept = coalesce(kept);
  red = coalesce(red);
  if (kept.size() > kMaxDims || red.size() > kMaxDims) return false;

  ReduceShape s;
  s.kept_ndim = static_cast<uint32_t>(kept.size());
  s.red_ndim = static_cast<uint32_t>(red.size());
  for (size_t i = 0; i < kept.size(); ++i) {
    s.kept_sizes[i] = kept[i].size;
    s.kept_in[i] = kept[i].in;
    s.kept_out[i] = kept[i].out;
    s.kept_idx[i] = kept[i].idx;
    s.outputs *= kept[i].size;
  }
  for (size_t i = 0; i < red.size(); ++i) {
    s.red_sizes[i] = red[i].size;
    s.red_in[i] = red[i].in;
    s.reduce_size *= red[i].size;
  }
  if (red.empty()) {  // reducing size-1 dims: one element per output
    s.red_ndim = 1;
    s.red_sizes[0] = 1;
  }
  for (int i = 0; i < 4; ++i) s.f[i] = request.scalars[i];
  if (s.outputs == 0) return true;

  Stream& stream = currentStream(input.device().index());
  const bool simulated = stream.device().info().is_simulated;

  const uint64_t R = s.reduce_size, O = s.outputs;
  // Column kernels when adjacent outputs are adjacent in memory and the reduced
  // elements are not. On the simulator for every reduction: its threads are loop
  // iterations, and the rows kernel's SIMD groups and barriers make each one a fiber,
  // which a thread per run of outputs avoids (it reduces contiguous rows one by one).
  // A full reduction is then one output along a kept dim of size 1.
  if (simulated && kept.empty()) {
    kept.push_back({1, 0, 0, 0});
    s.kept_ndim = 1;
    s.kept_sizes[0] = 1;
  }
  const bool columns =
      !kept.empty() && (simulated || (kept[0].in == 1 && (red.empty() || red[0].in != 1)));
  // Enough parallel work for the device: many threadgroups on a GPU; on the simulator
  // several per core (each with long contiguous runs), as the simulator runs the first
  // threadgroup of a small dispatch alone (to time it) and gives each core whole
  // threadgroups: with 16 of them on 2 cores one core ran 9.
  const uint64_t want = simulated ? 128 : 1024;
  // Elements of one work item after splitting (a part of a row, or of a strip of cols).
  const uint64_t min_part = simulated ? 65536 : 4096;
  Variant variant;
  uint64_t work_items;  // threadgroups (rows) or threads (cols) before splitting
  uint64_t item_width = 1;  // outputs per work item that share the split of R
  if (columns) {
    // kernels/reduce.metal's METALX_REDUCE_WIDE (adjacent outputs adjacent in memory)
    // or METALX_REDUCE_COLS outputs per simulated thread; one per GPU thread.
    const uint64_t cols = !simulated ? 1 : kept[0].in == 1 ? std::min<uint64_t>(1024, kept[0].size) : 16;
    s.cols = static_cast<uint32_t>(cols);
    variant = Variant::Columns;
    work_items = ceilDiv(kept[0].size, cols) * (O / kept[0].size);
    if (kept[0].in == 1) item_width = cols;
    if (!simulated) work_items = ceilDiv(work_items, kGroup);  // in threadgroups
  } else {
    variant = Variant::Rows;
    s.threads_per_output = R >= 1024 ? kGroup : 32;
    work_items = ceilDiv(O, kGroup / s.threads_per_output);
  }
  uint64_t parts = 1;
  if (work_items < want && R * item_width >= 2 * min_part)
    parts = std::min<uint64_t>({ceilDiv(want, work_items), R * item_width / min_part, R, 1024});
  s.parts = static_cast<uint32_t>(parts);
  s.part_size = ceilDiv(R, parts);

  const std::optional<DType> dtype = kernelDtype(input.scalar_type());
  TORCH_INTERNAL_ASSERT(dtype && kernels.supports(*dtype), "metalx: no ", kernels.op(), " kernel for ",
                        input.scalar_type());
  const rt::ComputePipelinePtr& main = kernels.pipeline(stream, variant, *dtype);
  const rt::ComputePipelinePtr* finish = parts > 1 ? &kernels.pipeline(stream, Variant::Partials, *dtype) : nullptr;
  at::Tensor partials;
  if (parts > 1) partials = at::empty({static_cast<int64_t>(parts * O * kPartialBytes)}, out.options().dtype(at::kByte));

  auto [in_buffer, in_offset] = bufferFor(input);
  auto [out_buffer, out_offset] = bufferFor(out);
  rt::BufferPtr idx_buffer = out_buffer, part_buffer = out_buffer;
  size_t idx_offset = out_offset, part_offset = out_offset;
  if (request.indices) std::tie(idx_buffer, idx_offset) = bufferFor(*request.indices);
  if (parts > 1) std::tie(part_buffer, part_offset) = bufferFor(partials);

  stream.encodeCompute([&](rt::ComputeEncoder& e) {
    e.setComputePipeline(main);
    e.setBuffer(in_buffer, in_offset, 0);
    e.setBuffer(out_buffer, out_offset, 1);
    e.setBuffer(idx_buffer, idx_offset, 2);
    e.setBuffer(part_buffer, part_offset, 3);
    e.setBytes(&s, sizeof s, 4);
    if (variant == Variant::Rows) {
      e.dispatchThreadgroups({parts, ceilDiv(O, kGroup / s.threads_per_output), 1}, {kGroup, 1, 1});
    } else {
      const uint64_t threads = ceilDiv(kept[0].size, s.cols) * (O / kept[0].size) * parts;
      // The simulator spreads threadgroups over its cores: at least `want` of them, since
      // each of its threads loops over a whole share of the input.
      const uint64_t group = simulated ? std::clamp<uint64_t>(threads / want, 1, kGroup) : kGroup;
      e.dispatchThreads({threads, 1, 1}, {std::min<uint64_t>(threads, group), 1, 1});
    }
    if (finish) {
      e.setComputePipeline(*finish);
      e.setBuffer(in_buffer, in_offset, 0);
      e.setBuffer(out_buffer, out_offset, 1);
      e.setBuffer(idx_buffer, idx_offset, 2);
      e.setBuffer(part_buffer, part_offset, 3);
      e.setBytes(&s, sizeof s, 4);
      e.dispatchThreads({O, 1, 1}, {std::min<uint64_t>(O, kGroup), 1, 1});
    }
  });
  return true;
}

}  // namespace metalx::launch
