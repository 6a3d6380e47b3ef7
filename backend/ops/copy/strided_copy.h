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

#include "copy_layout.h"
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

// A copy validated and reduced to its iteration space, once: what both questions above
// need (whether it is a byte copy, and how to encode it), so a caller asking both pays
// for one pass over the views. Validates like encodeStridedCopy.
struct CopyPlan {
  bool empty = true;                       // zero elements: nothing to encode
  std::vector<CopyDim> dims;               // coalesceCopyDims of the views
  CopyFlags flags;                         // the flags that change a value (conj of a real is dropped)
  bool bit_copy = false;                   // same dtype, no flag: the bytes are copied as they are
  std::optional<BitCopyRange> bit_range;   // set when it is also one dense byte range
};
CopyPlan planCopy(const StridedView& dst, const StridedView& src, CopyFlags flags = {});

// Encodes a planned copy with `pipeline`, the kernel stridedCopyKernelName(dst.dtype,
// src.dtype, flags) names (callers that copy often keep it instead of looking the name
// up per copy).
void encodePlannedCopy(rt::ComputeEncoder& encoder, const rt::ComputePipelinePtr& pipeline, const CopyPlan& plan,
                       const StridedView& dst, const StridedView& src);

// Encodes dst[i] = flags(convert(src[i])) for every element into `encoder`, with
// pipelines from `pipelines` (the device's built-in library). Handles any layout the
// contract allows, any element count (64-bit indexing) and every dtype pair; encodes
// nothing for zero elements. Throws rt::Error(Validation) for a contract violation.
void encodeStridedCopy(rt::ComputeEncoder& encoder, rt::PipelineCache& pipelines,
                       const StridedView& dst, const StridedView& src, CopyFlags flags = {});

// The kernel encodeStridedCopy uses for these dtypes and flags (for tests and profiles).
std::string stridedCopyKernelName(DType dst, DType src, CopyFlags flags = {});

}  // namespace metalx::kernels
