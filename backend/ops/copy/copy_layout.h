// The iteration space of a strided copy, reduced to as few dimensions as possible.
//
// A copy visits every element once in any order, so its dimensions may be reordered
// and merged freely as long as each element still pairs the same source and
// destination offsets. Fewer dimensions mean less index arithmetic per element in the
// kernel, and most real copies (transposes, slices, channels_last) end up with 1-3.
#pragma once

#include <cstdint>
#include <vector>

namespace metalx::kernels {

struct CopyDim {
  uint64_t size;
  int64_t dst_stride;  // in destination elements
  int64_t src_stride;  // in source elements
};

// The copy's dimensions, innermost first: size-1 dims dropped; ordered by destination
// stride (then source stride), so a thread walking dim 0 writes memory in order;
// neighbours merged where they are contiguous in BOTH views. `sizes` is the common
// logical shape; the three vectors have equal length. Returns no dims for one element
// and is undefined for an empty shape (callers handle numel == 0 first).
std::vector<CopyDim> coalesceCopyDims(const std::vector<int64_t>& sizes,
                                      const std::vector<int64_t>& dst_strides,
                                      const std::vector<int64_t>& src_strides);

}  // namespace metalx::kernels
