// The host's copy of StridedCopyParams in kernels/copy.metal. Both sides must agree
// byte for byte: the static_asserts pin the layout Metal gives the struct.
#pragma once

#include <cstddef>
#include <cstdint>

namespace metalx::kernels {

constexpr int kMaxCopyDims = 16;
constexpr uint32_t kCopyNegate = 1u;     // COPY_NEGATE in copy.metal
constexpr uint32_t kCopyConjugate = 2u;  // COPY_CONJUGATE in copy.metal

struct StridedCopyParams {
  uint32_t ndim;        // 3..16: the host pads with size-1 dims
  uint32_t flags;
  uint32_t tile_inner;  // elements of dim 0 per thread tile
  uint32_t tile_rows;   // rows of dim 1 per thread tile
  uint64_t outer;       // product of sizes[2 .. ndim)
  uint64_t sizes[kMaxCopyDims];  // dim 0 innermost
  int64_t src_strides[kMaxCopyDims];
  int64_t dst_strides[kMaxCopyDims];
};

static_assert(offsetof(StridedCopyParams, outer) == 16, "layout must match copy.metal");
static_assert(offsetof(StridedCopyParams, sizes) == 24, "layout must match copy.metal");
static_assert(sizeof(StridedCopyParams) == 24 + 3 * 8 * kMaxCopyDims, "layout must match copy.metal");

}  // namespace metalx::kernels
