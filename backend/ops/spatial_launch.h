// Shared launch helpers of the spatial op families that address tensors as
// (n, c, h, w) planes through their own strides (upsample.cpp, padding.cpp): which
// float kernel a dtype runs and a tensor's sizes and strides in that layout (their
// launch: launch/threads.h).
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <optional>

#include "launch/kernel_table.h"

namespace metalx::spatial {

inline std::optional<kernels::DType> floatKernelType(c10::ScalarType t) {
  switch (t) {
    case at::kFloat: return kernels::DType::Float32;
    case at::kHalf: return kernels::DType::Float16;
    case at::kBFloat16: return kernels::DType::BFloat16;
    default: return std::nullopt;
  }
}

// A tensor with `spatial` (1 or 2) trailing spatial dims, optionally a batch dim and a
// channel dim before them, seen as (n, c, h, w): absent dims have size 1, stride 0.
struct Planes {
  int64_t size[4] = {1, 1, 1, 1};
  int64_t stride[4] = {0, 0, 0, 0};
  int64_t numel() const { return size[0] * size[1] * size[2] * size[3]; }
};

inline Planes planesOf(const at::Tensor& t, int spatial) {
  Planes p;
  int64_t dim = t.dim() - 1;
  auto take = [&](int slot) {
    p.size[slot] = t.size(dim);
    p.stride[slot] = t.stride(dim);
    --dim;
  };
  take(3);
  if (spatial == 2) take(2);
  if (dim >= 0) take(1);
  if (dim >= 0) take(0);
  return p;
}

inline c10::OperatorHandle findOp(const char* name, const char* overload) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
}

}  // namespace metalx::spatial
