// The parameter blocks of the elementwise kernels, as kernels/elementwise.h declares
// them (same layout: keep the two in step).
#pragma once

#include <cstdint>

namespace metalx::launch {

constexpr int kElementwiseMaxDims = 8;
constexpr int kElementwiseMaxOperands = 4;

// Scalars an op takes besides its tensors, in float and integer form (the kernel reads
// the form of its compute type).
struct OpScalars {
  float f[4] = {0, 0, 0, 0};
  int64_t i[4] = {0, 0, 0, 0};
};

struct DenseShape {
  uint64_t count;
  uint32_t per_thread;
  uint32_t unused = 0;
};

struct StridedShape {
  uint32_t ndim;
  uint32_t chunk;
  uint64_t chunks0;
  uint64_t items;
  uint64_t sizes[kElementwiseMaxDims];
  uint64_t strides[kElementwiseMaxOperands][kElementwiseMaxDims];  // elements; [0] is the output
};

static_assert(sizeof(OpScalars) == 48, "OpScalars must match kernels/elementwise.h");
static_assert(sizeof(DenseShape) == 16, "DenseShape must match kernels/elementwise.h");
static_assert(sizeof(StridedShape) == 24 + 8 * kElementwiseMaxDims * (1 + kElementwiseMaxOperands),
              "StridedShape must match kernels/elementwise.h");

}  // namespace metalx::launch
