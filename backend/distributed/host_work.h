// The Work handle of a metalx collective run by a CPU backend (Gloo) on CPU views of
// metalx memory (host_tensors.h).
//
// It waits on the CPU backend's work, then copies staged results back into their metalx
// tensors, and reports the metalx tensors (not the CPU views) as its result and as
// its future's value: DDP's reducer and comm hooks read the future's value and must
// get tensors of the parameters' device. Completion is on the host: once wait()
// returns (or the future completes) the values are in device memory, and metalx work
// queued afterwards sees them.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <memory>
#include <mutex>
#include <vector>

#include "distributed/host_tensors.h"

namespace metalx::distributed {

class HostWork : public c10d::Work {
 public:
  HostWork(c10::intrusive_ptr<c10d::Work> inner, HostTensors tensors, std::vector<at::Tensor> result,
           c10d::OpType op_type, int rank);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout) override;
  void blockCurrentStream() override;
  void abort() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  float getDuration() const override;
  uint64_t getSequencenumber() const override;

 private:
  // Runs the copy-backs once, from whichever of wait() and the future's completion
  // comes first.
  void finishOnce();

  c10::intrusive_ptr<c10d::Work> inner_;
  std::shared_ptr<HostTensors> tensors_;
  std::vector<at::Tensor> result_;
  std::once_flag finished_;
  std::mutex future_mutex_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace metalx::distributed
