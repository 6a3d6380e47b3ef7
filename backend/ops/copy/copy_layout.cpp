#include "copy_layout.h"

#include <algorithm>

namespace metalx::kernels {

std::vector<CopyDim> coalesceCopyDims(const std::vector<int64_t>& sizes,
                                      const std::vector<int64_t>& dst_strides,
                                      const std::vector<int64_t>& src_strides) {
  std::vector<CopyDim> dims;
  dims.reserve(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] != 1) dims.push_back({uint64_t(sizes[d]), dst_strides[d], src_strides[d]});
  // Innermost = smallest destination stride, like TensorIterator orders by its output.
  // stable_sort keeps the logical order among equal strides, which keeps a source
  // that is contiguous in that order mergeable.
  std::reverse(dims.begin(), dims.end());  // logical innermost first
  std::stable_sort(dims.begin(), dims.end(), [](const CopyDim& a, const CopyDim& b) {
    if (a.dst_stride != b.dst_stride) return a.dst_stride < b.dst_stride;
    return a.src_stride < b.src_stride;
  });
  std::vector<CopyDim> out;
  for (const CopyDim& d : dims) {
    if (!out.empty()) {
      CopyDim& in = out.back();
      bool dst_follows = d.dst_stride == in.dst_stride * int64_t(in.size);
      bool src_follows = d.src_stride == in.src_stride * int64_t(in.size);
      if (dst_follows && src_follows) {
        in.size *= d.size;
        continue;
      }
    }
    out.push_back(d);
  }
  return out;
}

}  // namespace metalx::kernels
