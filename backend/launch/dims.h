// Dims of an operation over up to three tensors that walk the same index space (an
// input, an output and an index output), and their coalescing: what the reduction and
// scan launchers pass to kernels as sizes and strides.
#pragma once

#include <cstdint>
#include <vector>

namespace metalx::launch {

struct Dim {
  int64_t size;
  int64_t in, out, idx;  // strides in elements
};

// Merges neighbours (innermost first) that walk memory as one dim in every tensor, and
// drops size-1 dims. Merging keeps the row-major order of the index space, which arg
// reductions and scans with indices count in.
inline std::vector<Dim> coalesce(const std::vector<Dim>& dims) {
  std::vector<Dim> merged;
  for (const Dim& d : dims) {
    if (d.size == 1) continue;
    if (!merged.empty()) {
      Dim& inner = merged.back();
      if (d.in == inner.in * inner.size && d.out == inner.out * inner.size && d.idx == inner.idx * inner.size) {
        inner.size *= d.size;
        continue;
      }
    }
    merged.push_back(d);
  }
  return merged;
}

}  // namespace metalx::launch
