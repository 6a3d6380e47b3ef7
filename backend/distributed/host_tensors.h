// What a CPU communication backend (Gloo) needs to work on metalx tensors: CPU tensors
// over the same memory.
//
// metalx device memory is shared, CPU-addressable memory (unified memory on Apple
// silicon; Metal's shared storage mode elsewhere), so a contiguous metalx tensor is
// handed to Gloo as a CPU alias and Gloo reads and writes the device memory in place.
// Only a tensor Gloo cannot take as it is (non-contiguous, or of a dtype Gloo reduces
// only in a wider type: gloo_dtypes.h) goes through a CPU temporary, whose result is
// copied back when the collective completes. Nothing is copied back if it fails.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <functional>
#include <optional>
#include <vector>

namespace metalx::distributed {

class HostTensors {
 public:
  // For a collective that moves values (Gloo copies their bytes).
  HostTensors() = default;
  // For a collective that reduces values with `op` (Gloo computes on them).
  explicit HostTensors(const c10d::ReduceOp& op) : reduce_op_(op) {}

  // Waits for the pending work of the current stream of every metalx device that
  // `tensors` live on: Gloo must read values those streams are still computing.
  static void waitForDevices(const std::vector<at::Tensor>& tensors);

  // The tensor Gloo reads: an alias, or a contiguous temporary holding t's values.
  at::Tensor input(const at::Tensor& t);
  // The tensor Gloo writes (and may read): an alias, or a contiguous temporary whose
  // values are copied into `t` by finish().
  at::Tensor output(const at::Tensor& t);
  std::vector<at::Tensor> inputs(const std::vector<at::Tensor>& ts);
  std::vector<at::Tensor> outputs(const std::vector<at::Tensor>& ts);
  std::vector<std::vector<at::Tensor>> outputs(const std::vector<std::vector<at::Tensor>>& lists);

  // Copies staged results into their metalx tensors (on the CPU, in shared memory).
  // Call once the collective has completed.
  void finish();

  // The metalx tensors given to input()/output(): kept alive while Gloo may touch
  // their memory (an alias does not own it).
  const std::vector<at::Tensor>& keepAlive() const { return keep_alive_; }

 private:
  at::Tensor host(const at::Tensor& t, bool copy_back);

  std::optional<c10d::ReduceOp> reduce_op_;
  std::vector<at::Tensor> keep_alive_;
  std::vector<std::function<void()>> copy_backs_;
};

}  // namespace metalx::distributed
