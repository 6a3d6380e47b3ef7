// The scan launcher (see scan.h).
#include "launch/scan.h"

#include <ATen/ops/empty.h>

#include <algorithm>

#include "allocator.h"
#include "core/stream_pool.h"
#include "launch/dims.h"
#include "launch/elementwise.h"

namespace metalx::launch {
namespace {

constexpr int kMaxDims = 8;
constexpr uint32_t kGroup = 256;
constexpr size_t kStateBytes = 16;  // kernels/scan.metal's ScanState: a value and a long

// Mirrors kernels/scan.metal's ScanShape.
struct ScanShape {
  uint32_t ndim = 0;
  uint32_t parts = 1;
  uint32_t with_indices = 0;
  uint32_t unused = 0;
  uint64_t lines = 1;
  uint64_t length = 1;
  uint64_t part_size = 1;
  uint64_t in_step = 0;
  uint64_t out_step = 0;
  uint64_t idx_step = 0;
  uint64_t sizes[kMaxDims] = {};
  uint64_t in_strides[kMaxDims] = {};
  uint64_t out_strides[kMaxDims] = {};
  uint64_t idx_strides[kMaxDims] = {};
};

uint64_t ceilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace

bool runScan(KernelFamily& kernels, const ScanRequest& request) {
  const at::Tensor& input = *request.input;
  const at::Tensor& out = *request.out;
  const at::Tensor* indices = request.indices;
  const int64_t ndim = input.dim();

  ScanShape s;
  s.with_indices = indices != nullptr;
  std::vector<Dim> lines;  // innermost first
  for (int64_t d = ndim - 1; d >= 0; --d) {
    const int64_t idx_stride = indices ? indices->stride(d) : 0;
    if (d == request.dim) {
      s.length = input.size(d);
      s.in_step = input.stride(d);
      s.out_step = out.stride(d);
      s.idx_step = idx_stride;
      continue;
    }
    lines.push_back({input.size(d), input.stride(d), out.stride(d), idx_stride});
  }
  lines = coalesce(lines);
  if (lines.size() > kMaxDims) return false;
  s.ndim = static_cast<uint32_t>(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    s.sizes[i] = lines[i].size;
    s.in_strides[i] = lines[i].in;
    s.out_strides[i] = lines[i].out;
    s.idx_strides[i] = lines[i].idx;
    s.lines *= lines[i].size;
  }
  if (input.numel() == 0) return true;

  Stream& stream = currentStream(input.device().index());
  const bool simulated = stream.device().info().is_simulated;
  // Split lines into parts when there are too few to fill the device: thousands of
  // threads on a GPU, a few runs per core on the simulator (whose threads are loop
  // iterations; splitting costs a second read of the input).
  const uint64_t want = simulated ? 8 : 16384;
  const uint64_t min_part = simulated ? 65536 : 512;
  uint64_t parts = 1;
  if (s.lines < want && s.length >= 2 * min_part)
    parts = std::min<uint64_t>({ceilDiv(want, s.lines), s.length / min_part, 1024});
  s.parts = static_cast<uint32_t>(parts);
  s.part_size = ceilDiv(s.length, parts);

  const std::optional<DType> dtype = kernelDtype(input.scalar_type());
  TORCH_INTERNAL_ASSERT(dtype && kernels.supports(*dtype), "metalx: no ", kernels.op(), " kernel for ",
                        input.scalar_type());
  const rt::ComputePipelinePtr& scan = kernels.pipeline(stream, Variant::Strided, *dtype);
  const rt::ComputePipelinePtr* totals = parts > 1 ? &kernels.pipeline(stream, Variant::Rows, *dtype) : nullptr;
  const rt::ComputePipelinePtr* starts = parts > 1 ? &kernels.pipeline(stream, Variant::Partials, *dtype) : nullptr;
  at::Tensor states;
  if (parts > 1)
    states = at::empty({static_cast<int64_t>(parts * s.lines * kStateBytes)}, out.options().dtype(at::kByte));

  auto [in_buffer, in_offset] = bufferFor(input);
  auto [out_buffer, out_offset] = bufferFor(out);
  rt::BufferPtr idx_buffer = out_buffer, state_buffer = out_buffer;
  size_t idx_offset = out_offset, state_offset = out_offset;
  if (indices) std::tie(idx_buffer, idx_offset) = bufferFor(*indices);
  if (parts > 1) std::tie(state_buffer, state_offset) = bufferFor(states);

  const uint64_t threads = s.lines * parts;
  stream.encodeCompute([&](rt::ComputeEncoder& e) {
    auto bind = [&](const rt::ComputePipelinePtr& pipeline) {
      e.setComputePipeline(pipeline);
      e.setBuffer(in_buffer, in_offset, 0);
      e.setBuffer(out_buffer, out_offset, 1);
      e.setBuffer(idx_buffer, idx_offset, 2);
      e.setBuffer(state_buffer, state_offset, 3);
      e.setBytes(&s, sizeof s, 4);
    };
    if (parts > 1) {
      bind(*totals);
      e.dispatchThreads({threads, 1, 1}, {std::min<uint64_t>(threads, kGroup), 1, 1});
      bind(*starts);
      e.dispatchThreads({s.lines, 1, 1}, {std::min<uint64_t>(s.lines, kGroup), 1, 1});
    }
    bind(scan);
    e.dispatchThreads({threads, 1, 1}, {std::min<uint64_t>(threads, kGroup), 1, 1});
  });
  return true;
}

}  // namespace metalx::launch
