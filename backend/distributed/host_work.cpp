#include "distributed/host_work.h"

#include <ATen/core/ivalue.h>

namespace metalx::distributed {

HostWork::HostWork(c10::intrusive_ptr<c10d::Work> inner, HostTensors tensors, std::vector<at::Tensor> result,
                   c10d::OpType op_type, int rank)
    : c10d::Work(rank, op_type),
      inner_(std::move(inner)),
      tensors_(std::make_shared<HostTensors>(std::move(tensors))),
      result_(std::move(result)) {}

void HostWork::finishOnce() {
  std::call_once(finished_, [this] { tensors_->finish(); });
}

bool HostWork::isCompleted() { return inner_->isCompleted(); }

bool HostWork::isSuccess() const { return inner_->isSuccess(); }

std::exception_ptr HostWork::exception() const { return inner_->exception(); }

int HostWork::sourceRank() const { return inner_->sourceRank(); }

std::vector<at::Tensor> HostWork::result() { return result_; }

void HostWork::synchronize() {
  inner_->synchronize();
  finishOnce();
}

bool HostWork::wait(std::chrono::milliseconds timeout) {
  const bool done = inner_->wait(timeout);
  finishOnce();
  return done;
}

// A CUDA backend makes the current stream wait for the collective instead of the host.
// Here the collective runs on the host, so the host waits; metalx work queued after
// this call then runs on the finished values.
void HostWork::blockCurrentStream() { wait(kNoTimeout); }

void HostWork::abort() { inner_->abort(); }

c10::intrusive_ptr<c10::ivalue::Future> HostWork::getFuture() {
  std::lock_guard<std::mutex> lock(future_mutex_);
  if (future_) return future_;
  c10::intrusive_ptr<c10::ivalue::Future> inner_future = inner_->getFuture();
  // A CPU future (no devices): it records no device events, which the host-side
  // completion above makes unnecessary, and may hold metalx tensors.
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
  // The callback owns what Gloo works on until it has finished with it, even if this
  // Work is dropped first.
  inner_future->addCallback(
      [self = c10::intrusive_ptr<HostWork>::reclaim_copy(this)](c10::ivalue::Future& done) {
        if (done.hasError()) {
          self->future_->setError(done.exception_ptr());
          return;
        }
        try {
          self->finishOnce();
        } catch (...) {
          self->future_->setError(std::current_exception());
          return;
        }
        self->future_->markCompleted(c10::IValue(self->result_));
      });
  return future_;
}

float HostWork::getDuration() const { return inner_->getDuration(); }

uint64_t HostWork::getSequencenumber() const { return inner_->getSequencenumber(); }

}  // namespace metalx::distributed
