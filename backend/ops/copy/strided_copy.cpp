#include "strided_copy.h"

#include <algorithm>
#include <string>

#include "copy_layout.h"
#include "metalx/runtime/device.h"
#include "metalx/runtime/error.h"
#include "strided_copy_params.h"

namespace metalx::kernels {
namespace {

using rt::ErrorKind;

int64_t numelOf(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

std::string shapeString(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Called for both views of every copy: the messages are built only when a rule is
// broken (rt::checkWith), so a valid copy costs comparisons, not string building.
void checkView(const StridedView& v, const char* which) {
  auto who = [which] { return std::string("strided copy: ") + which; };
  rt::checkWith(isValid(v.dtype), ErrorKind::Validation, [&] { return who() + " has an unknown dtype"; });
  rt::checkWith(v.sizes.size() == v.strides.size(), ErrorKind::Validation, [&] {
    return who() + " has " + std::to_string(v.sizes.size()) + " sizes but " + std::to_string(v.strides.size()) +
           " strides";
  });
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    rt::checkWith(v.sizes[d] >= 0, ErrorKind::Validation, [&] { return who() + " has a negative size"; });
    rt::checkWith(v.strides[d] >= 0, ErrorKind::Validation,
                  [&] { return who() + " has a negative stride " + shapeString(v.strides); });
  }
  if (numelOf(v.sizes) == 0) return;
  rt::checkWith(v.buffer != nullptr, ErrorKind::Validation, [&] { return who() + " has elements but no buffer"; });
  rt::checkWith(v.byte_offset % elementAlignment(v.dtype) == 0, ErrorKind::Validation, [&] {
    return who() + " byte offset " + std::to_string(v.byte_offset) + " is not a multiple of " +
           std::to_string(elementAlignment(v.dtype)) + " (" + dtypeName(v.dtype) + ")";
  });
  // The last byte the view reaches must be inside the buffer: a kernel never writes
  // or reads outside the memory it was given. (__int128: no overflow for any view.)
  __int128 last = 0;
  for (size_t d = 0; d < v.sizes.size(); ++d) last += __int128(v.sizes[d] - 1) * v.strides[d];
  __int128 end = __int128(v.byte_offset) + (last + 1) * __int128(elementSize(v.dtype));
  rt::checkWith(end <= __int128(v.buffer->length()), ErrorKind::Validation, [&] {
    return who() + " " + shapeString(v.sizes) + " with strides " + shapeString(v.strides) + " at byte offset " +
           std::to_string(v.byte_offset) + " reaches past the end of its " + std::to_string(v.buffer->length()) +
           "-byte buffer";
  });
}

// The shape without its size-1 dims; strides kept alongside.
void squeeze(const StridedView& v, std::vector<int64_t>& sizes, std::vector<int64_t>& strides) {
  for (size_t d = 0; d < v.sizes.size(); ++d)
    if (v.sizes[d] != 1) {
      sizes.push_back(v.sizes[d]);
      strides.push_back(v.strides[d]);
    }
}

// Validates both views; returns the coalesced iteration space (empty optional for a
// copy of nothing).
std::optional<std::vector<CopyDim>> prepare(const StridedView& dst, const StridedView& src) {
  checkView(dst, "destination");
  checkView(src, "source");
  rt::checkWith(numelOf(dst.sizes) == numelOf(src.sizes), ErrorKind::Validation, [&] {
    return "strided copy: destination " + shapeString(dst.sizes) + " and source " + shapeString(src.sizes) +
           " have different numbers of elements";
  });
  std::vector<int64_t> sizes, dst_strides, src_sizes, src_strides;
  squeeze(dst, sizes, dst_strides);
  squeeze(src, src_sizes, src_strides);
  if (numelOf(dst.sizes) == 0) return std::nullopt;
  rt::checkWith(sizes == src_sizes, ErrorKind::Validation, [&] {
    return "strided copy: destination " + shapeString(dst.sizes) + " and source " + shapeString(src.sizes) +
           " differ in shape (expand or reshape the source first)";
  });
  rt::checkWith(&dst.buffer->device() == &src.buffer->device(), ErrorKind::Validation,
                [] { return "strided copy: destination and source are buffers of different devices"; });
  for (size_t d = 0; d < sizes.size(); ++d)
    rt::checkWith(dst_strides[d] != 0, ErrorKind::Validation, [&] {
      return "strided copy: the destination has stride 0 on a dimension of size " + std::to_string(sizes[d]) +
             " (several elements would be written to one place)";
    });
  return coalesceCopyDims(sizes, dst_strides, src_strides);
}

CopyFlags effectiveFlags(DType dst, CopyFlags flags) {
  flags.conjugate = flags.conjugate && isComplex(dst);  // conj of a real value is itself
  return flags;
}

bool isBitCopy(DType dst, DType src, CopyFlags flags) {
  return dst == src && !flags.negate && !flags.conjugate;
}

// How threads cover the iteration space. A real GPU wants many light threads (a few
// elements each, neighbours on neighbouring elements); the simulator runs threads as
// a loop on a few CPU cores, where each thread's fixed cost (~25 ns) must be spread
// over a few hundred elements, while keeping enough threads for it to use every core
// (it runs dispatches of up to 2048 threads on one): numel / 4096 elements each.
struct LaunchShape {
  uint32_t tile_inner, tile_rows;
  rt::Size3 grid, group;
};

LaunchShape chooseLaunchShape(uint64_t n0, uint64_t n1, uint64_t outer, size_t element_size,
                              bool simulated, uint64_t max_group) {
  uint64_t numel = n0 * n1 * outer;
  uint64_t per_thread, group_threads;
  if (simulated) {
    per_thread = std::clamp<uint64_t>(numel / 4096, 16, 4096);
    group_threads = 32;
  } else {
    per_thread = std::max<uint64_t>(1, 16 / element_size);  // ~16 bytes per thread
    group_threads = 256;
  }
  group_threads = std::min(group_threads, max_group);
  // The grid's width and height must cover dims 0 and 1 in one pass (the kernel loops
  // only over the outer dims): tiles grow for huge dims. Heights stay below 65536,
  // widths below 2^30, well inside what any Metal device dispatches.
  const uint64_t max_width = uint64_t(1) << 30, max_height = 65535;
  uint64_t tk = std::max(std::min(n0, per_thread), (n0 + max_width - 1) / max_width);
  uint64_t tr = std::min(n1, std::max<uint64_t>(1, per_thread / tk));
  tr = std::max(tr, (n1 + max_height - 1) / max_height);
  rt::checkWith(tk <= UINT32_MAX && tr <= UINT32_MAX, ErrorKind::Unsupported,
                [] { return "strided copy: dimensions too large for one dispatch"; });
  LaunchShape s;
  s.tile_inner = uint32_t(tk);
  s.tile_rows = uint32_t(tr);
  s.grid.width = (n0 + tk - 1) / tk;
  s.grid.height = (n1 + tr - 1) / tr;
  // Tiles of few elements (small inner dims) also take several outer indices each;
  // the rest of the outer dims is the kernel's grid-stride loop.
  uint64_t outer_per_thread = simulated ? std::max<uint64_t>(1, per_thread / (tk * tr)) : 1;
  s.grid.depth = std::min<uint64_t>((outer + outer_per_thread - 1) / outer_per_thread, 65535);
  s.group.width = std::min(s.grid.width, group_threads);
  s.group.height = std::min(s.grid.height, group_threads / s.group.width);
  s.group.depth = std::min(s.grid.depth, group_threads / (s.group.width * s.group.height));
  return s;
}

// Encodes one dispatch for at most kMaxCopyDims dims (innermost first).
void encodeDispatch(rt::ComputeEncoder& enc, const rt::ComputePipelinePtr& pipeline,
                    const StridedView& dst, size_t dst_offset, const StridedView& src,
                    size_t src_offset, const std::vector<CopyDim>& dims, uint32_t flag_bits,
                    bool simulated) {
  StridedCopyParams p{};
  p.ndim = std::max<uint32_t>(3, uint32_t(dims.size()));
  p.flags = flag_bits;
  for (int d = 0; d < kMaxCopyDims; ++d) p.sizes[d] = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    p.sizes[d] = dims[d].size;
    p.src_strides[d] = dims[d].src_stride;
    p.dst_strides[d] = dims[d].dst_stride;
  }
  p.outer = 1;
  for (uint32_t d = 2; d < p.ndim; ++d) p.outer *= p.sizes[d];
  size_t element_size = std::max(elementSize(dst.dtype), elementSize(src.dtype));
  LaunchShape shape = chooseLaunchShape(p.sizes[0], p.sizes[1], p.outer, element_size, simulated,
                                        pipeline->maxTotalThreadsPerThreadgroup());
  p.tile_inner = shape.tile_inner;
  p.tile_rows = shape.tile_rows;
  enc.setComputePipeline(pipeline);
  enc.setBuffer(src.buffer, src_offset, 0);
  enc.setBuffer(dst.buffer, dst_offset, 1);
  enc.setBytes(&p, sizeof p, 2);
  enc.dispatchThreads(shape.grid, shape.group);
}

}  // namespace

std::string stridedCopyKernelName(DType dst, DType src, CopyFlags flags) {
  flags = effectiveFlags(dst, flags);
  if (isBitCopy(dst, src, flags)) return "copy_strided_" + std::to_string(elementSize(dst)) + "B";
  return std::string("cast_strided_") + kernelTypeName(src) + "_to_" + kernelTypeName(dst);
}

CopyPlan planCopy(const StridedView& dst, const StridedView& src, CopyFlags flags) {
  CopyPlan plan;
  auto dims = prepare(dst, src);
  if (!dims) return plan;
  plan.dims = std::move(*dims);
  plan.flags = effectiveFlags(dst.dtype, flags);
  plan.bit_copy = isBitCopy(dst.dtype, src.dtype, plan.flags);
  // Dense and identically laid out: everything merged into one unit-stride dim.
  const bool dense = plan.dims.empty() ||
                     (plan.dims.size() == 1 && plan.dims[0].dst_stride == 1 && plan.dims[0].src_stride == 1);
  if (plan.bit_copy && dense)
    plan.bit_range = BitCopyRange{dst.byte_offset, src.byte_offset, elementSize(dst.dtype) * size_t(numelOf(dst.sizes))};
  plan.empty = false;
  return plan;
}

std::optional<BitCopyRange> denseBitCopyRange(const StridedView& dst, const StridedView& src,
                                              CopyFlags flags) {
  return planCopy(dst, src, flags).bit_range;
}

void encodeStridedCopy(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines,
                       const StridedView& dst, const StridedView& src, CopyFlags flags) {
  const CopyPlan plan = planCopy(dst, src, flags);
  if (plan.empty) return;
  encodePlannedCopy(encoder, pipelines.builtin(stridedCopyKernelName(dst.dtype, src.dtype, flags)), plan, dst, src);
}

void encodePlannedCopy(rt::ComputeEncoder& encoder, const rt::ComputePipelinePtr& pipeline, const CopyPlan& plan,
                       const StridedView& dst, const StridedView& src) {
  if (plan.empty) return;
  const std::vector<CopyDim>& dims = plan.dims;
  const uint32_t flag_bits = (plan.flags.negate ? kCopyNegate : 0) | (plan.flags.conjugate ? kCopyConjugate : 0);
  bool simulated = dst.buffer->device().info().is_simulated;

  if (dims.size() <= size_t(kMaxCopyDims)) {
    encodeDispatch(encoder, pipeline, dst, dst.byte_offset, src, src.byte_offset, dims, flag_bits,
                   simulated);
    return;
  }
  // More dims than the kernel takes (rare: 17+ dims that cannot merge, so at least 2^17
  // elements): one dispatch per index of the extra outermost dims, each with its
  // base offset folded into the buffer binding offsets.
  std::vector<CopyDim> inner(dims.begin(), dims.begin() + kMaxCopyDims);
  std::vector<CopyDim> extra(dims.begin() + kMaxCopyDims, dims.end());
  std::vector<uint64_t> index(extra.size(), 0);
  for (;;) {
    int64_t dst_off = 0, src_off = 0;
    for (size_t k = 0; k < extra.size(); ++k) {
      dst_off += int64_t(index[k]) * extra[k].dst_stride;
      src_off += int64_t(index[k]) * extra[k].src_stride;
    }
    encodeDispatch(encoder, pipeline, dst, dst.byte_offset + size_t(dst_off) * elementSize(dst.dtype),
                   src, src.byte_offset + size_t(src_off) * elementSize(src.dtype), inner, flag_bits,
                   simulated);
    size_t k = 0;
    while (k < extra.size() && ++index[k] == extra[k].size) index[k++] = 0;
    if (k == extra.size()) break;
  }
}

}  // namespace metalx::kernels
