// Strided copy with dtype conversion on the device: the launcher of kernels/copy.metal.
//
// Torch-free: views are {buffer, byte offset, dtype, sizes, strides}. The caller (the
// torch glue) owns the command buffer and the open compute encoder; these functions
// only encode into it. Contract for callers:
//   - source and destination have the same shape, ignoring size-1 dims (expand the
//     source first to broadcast);
//   - strides are in elements and non-negative; a destination never has stride 0 on a
//     dim of size > 1, and destination and source memory do not partially overlap
//     (torch checks both before copying);
//   - a dense same-dtype copy is better done with a blit: ask denseBitCopyRange().
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "launch/dtype.h"
#include "metalx/runtime/buffer.h"
#include "metalx/runtime/command.h"
#include "metalx/runtime/pipeline_cache.h"

namespace metalx::kernels {

struct StridedView {
  rt::BufferPtr buffer;    // may be null only if the view has no elements
  size_t byte_offset = 0;  // where element [0, ..., 0] is; a multiple of the alignment
  DType dtype = DType::Float32;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // in elements
};

// The tensor bits the copy resolves (applied after the dtype conversion, as CPU
// PyTorch's copy_ does). `conjugate` only affects complex destinations.
struct CopyFlags {
  bool negate = false;
  bool conjugate = false;
};

// A byte range copy equivalent to the whole strided copy.
struct BitCopyRange {
  size_t dst_offset;
  size_t src_offset;
  size_t bytes;
};

// The copy as one contiguous byte copy, when the dtypes are equal, no flag changes a
// value, and both views cover the same dense (gap-free, non-overlapping) layout.
// Returns nullopt otherwise, and for copies of zero elements. Validates like
// encodeStridedCopy. (Blits also need 4-byte multiples: that is the caller's check.)
std::optional<BitCopyRange> denseBitCopyRange(const StridedView& dst, const StridedView& src,
                                              CopyFlags flags = {});
inline bool isDenseBitCopy(const StridedView& dst, const StridedView& src, CopyFlags flags = {}) {
  return denseBitCopyRange(dst, src, flags).has_value();
}

// Encodes dst[i] = flags(convert(src[i])) for every element into `encoder`, with
// pipelines from `pipelines` (the device's built-in library). Handles any layout the
// contract allows, any element count (64-bit indexing) and every dtype pair; encodes
// nothing for zero elements. Throws rt::Error(Validation) for a contract violation.
void encodeStridedCopy(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines,
                       const StridedView& dst, const StridedView& src, CopyFlags flags = {});

// The kernel encodeStridedCopy uses for these dtypes and flags (for tests and profiles).
std::string stridedCopyKernelName(DType dst, DType src, CopyFlags flags = {});

}  // namespace metalx::kernels
