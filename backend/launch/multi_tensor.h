// The multi-tensor launcher: runs a kernel of kernels/multi_tensor.h over lists of
// tensors, many tensors per dispatch (the _foreach_* ops and fused optimizers).
//
// The caller has checked the fast-path rules (every tensor dense, on one device, the
// kernel's dtype, matching sizes and strides across lists). Each dispatch binds up to
// kMultiTensorSlots distinct buffers and a table of up to kMultiTensorMaxEntries
// tensors; tensors are packed greedily in list order and a new dispatch starts when
// either is full. Tensors that share a caching-allocator buffer share its slot.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/ArrayRef.h>

#include <vector>

#include "launch/kernel_table.h"

namespace metalx::launch {

constexpr int kMultiTensorSlots = 28;
constexpr int kMultiTensorMaxLists = 6;
constexpr int kMultiTensorMaxEntries = 60;  // 60 x 64 bytes: under the 4 KiB of inline bytes
constexpr int kMultiTensorExtras = 4;

// Mirrors of kernels/multi_tensor.h.
struct MultiTensorArgs {
  float f[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  uint32_t flags = 0;
  uint32_t ntensors = 0;
  uint32_t per_thread = 0;
  uint32_t chunk = 0;
  uint64_t extra[kMultiTensorExtras] = {0, 0, 0, 0};
};
struct MultiTensorEntry {
  uint64_t loc[kMultiTensorMaxLists] = {};
  uint64_t numel = 0;
  uint32_t first_chunk = 0;
  float scalar = 0;
};
static_assert(sizeof(MultiTensorArgs) == 80, "MultiTensorArgs must match kernels/multi_tensor.h");
static_assert(sizeof(MultiTensorEntry) == 64, "MultiTensorEntry must match kernels/multi_tensor.h");

struct MultiTensorCall {
  // The operands in the kernel's order; lists[k][i] is operand k of tensor i. Every
  // list has one tensor per entry; operand 0 gives the element count (a kernel may read
  // a list of one-element tensors, as the fused optimizers' steps).
  std::vector<at::TensorList> lists;
  // Each tensor's scalar: one per tensor, one for all, or none.
  at::ArrayRef<double> scalars = {};
  // Device scalars the kernel reads through MultiTensorArgs::extra (undefined: none).
  std::vector<at::Tensor> extras;
  // Elements per thread, as a multiple of the launcher's choice: kernels with a costly
  // per-thread start (the fused optimizers' bias corrections) take longer runs.
  uint32_t per_thread_factor = 1;
  MultiTensorArgs args;
};

// Elements each thread takes on device `device_index` (the kernels' per_thread): what a
// kernel writing one value per thread (the norm's partials) needs to size its output.
uint32_t multiTensorElementsPerThread(int device_index);

// Runs `kernels`' kernel for `dtype` (Variant::Plain) over `call` on the current stream
// of the tensors' device.
void runMultiTensor(KernelFamily& kernels, c10::ScalarType dtype, MultiTensorCall& call);

}  // namespace metalx::launch
