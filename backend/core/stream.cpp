// A stream of GPU work (see stream.h).
#include "stream.h"

#include <stdexcept>
#include <vector>

namespace metalx {

Stream::Stream(rt::Device& device, int device_index, int64_t id, rt::PipelineCache* pipelines)
    : device_(device),
      device_index_(device_index),
      id_(id),
      queue_(device.newCommandQueue()),
      own_pipelines_(pipelines ? nullptr : std::make_unique<rt::PipelineCache>(device)),
      pipelines_(pipelines ? pipelines : own_pipelines_.get()) {}

Stream::~Stream() {
  try {
    synchronize();
  } catch (...) {
    // A failure nobody synchronised on: nothing left to report it to.
  }
}

rt::CommandBuffer& Stream::commandBuffer() {
  if (!cb_) {
    cb_ = queue_->commandBuffer();
    uint64_t sequence = next_sequence_++;
    cb_->setLabel("metalx stream " + std::to_string(id_) + " #" + std::to_string(sequence));
    cb_->addCompletedHandler([this, sequence](rt::CommandBuffer& done) {
      completed(sequence, done.status() == rt::CommandBufferStatus::Error ? done.error() : "");
    });
  }
  return *cb_;
}

void Stream::endCompute() {
  if (compute_) {
    compute_->endEncoding();
    compute_.reset();
  }
}

void Stream::countCommand() {
  if (++commands_in_cb_ >= kMaxCommandsPerCommandBuffer) commitLocked();
}

// Only the thread holding encode_mutex_ can get here while exclusive_ is set (the
// mutex is recursive), so this catches re-entry from the exclusive callback itself.
void Stream::checkNotExclusive(const char* what) const {
  rt::check(!exclusive_, rt::ErrorKind::Validation,
            std::string(what) + " on metalx stream " + std::to_string(id_) +
                " from inside a C++ extension's encodeCompute callback: it would change or end "
                "the encoder the callback is using; run metalx ops before or after encodeCompute");
}

void Stream::encodeCompute(const std::function<void(rt::ComputeEncoder&)>& encode) {
  std::lock_guard<std::recursive_mutex> lock(encode_mutex_);
  checkNotExclusive("compute work encoded");
  if (!compute_) compute_ = commandBuffer().computeEncoder();
  encode(*compute_);
  countCommand();
}

void Stream::encodeComputeExclusive(const std::function<void(rt::ComputeEncoder&)>& encode) {
  std::lock_guard<std::recursive_mutex> lock(encode_mutex_);
  checkNotExclusive("compute work encoded");
  if (!compute_) compute_ = commandBuffer().computeEncoder();
  exclusive_ = true;
  try {
    encode(*compute_);
  } catch (...) {
    exclusive_ = false;
    throw;
  }
  exclusive_ = false;
  countCommand();
}

void Stream::encodeBlit(const std::function<void(rt::BlitEncoder&)>& encode) {
  std::lock_guard<std::recursive_mutex> lock(encode_mutex_);
  checkNotExclusive("blit work encoded");
  endCompute();
  auto blit = commandBuffer().blitEncoder();
  try {
    encode(*blit);
  } catch (...) {
    blit->endEncoding();  // leave the command buffer usable for the next command
    throw;
  }
  blit->endEncoding();
  countCommand();
}

void Stream::encodeWait(const rt::EventPtr& event, uint64_t value) {
  std::lock_guard<std::recursive_mutex> lock(encode_mutex_);
  checkNotExclusive("an event wait encoded");
  endCompute();
  commandBuffer().encodeWait(event, value);
  countCommand();
}

void Stream::encodeSignal(const rt::EventPtr& event, uint64_t value) {
  std::lock_guard<std::recursive_mutex> lock(encode_mutex_);
  checkNotExclusive("an event signal encoded");
  endCompute();
  commandBuffer().encodeSignal(event, value);
  countCommand();
}

rt::CommandBufferPtr Stream::recordEvent(const rt::EventPtr& event, uint64_t value) {
  std::lock_guard<std::recursive_mutex> lock(encode_mutex_);
  checkNotExclusive("an event recorded");
  endCompute();
  commandBuffer().encodeSignal(event, value);
  rt::CommandBufferPtr signalling = cb_;
  commitLocked();
  return signalling;
}

uint64_t Stream::currentSequence() const {
  std::lock_guard<std::recursive_mutex> lock(encode_mutex_);
  // With no command buffer open, the next one gets next_sequence_; until then nothing
  // new is in flight, so the last committed one bounds all encoded work.
  return cb_ ? next_sequence_ - 1 : last_committed_;
}

void Stream::commitLocked() {
  if (!cb_) return;
  checkNotExclusive("a commit (flush, synchronize, query)");
  endCompute();
  last_committed_ = next_sequence_ - 1;
  last_committed_cb_ = cb_;
  cb_->commit();
  cb_.reset();
  commands_in_cb_ = 0;
}

void Stream::flush() {
  std::lock_guard<std::recursive_mutex> lock(encode_mutex_);
  commitLocked();
}

void Stream::waitFor(uint64_t sequence) {
  if (completedSequence() >= sequence) return;
  rt::CommandBufferPtr to_wait;
  {
    std::lock_guard<std::recursive_mutex> lock(encode_mutex_);
    if (cb_ && sequence >= next_sequence_ - 1) commitLocked();
    to_wait = last_committed_cb_;
  }
  // Command buffers of a queue complete in order: waiting for the newest committed
  // one covers every earlier sequence.
  if (to_wait && completedSequence() < sequence) to_wait->waitUntilCompleted();
}

void Stream::synchronize() {
  uint64_t target;
  {
    std::lock_guard<std::recursive_mutex> lock(encode_mutex_);
    commitLocked();
    target = last_committed_;
  }
  waitFor(target);
  std::string error;
  {
    std::lock_guard<std::mutex> lock(completion_mutex_);
    error.swap(first_error_);
  }
  if (!error.empty()) throw std::runtime_error("metalx: GPU work failed: " + error);
}

bool Stream::query() {
  uint64_t target;
  {
    std::lock_guard<std::recursive_mutex> lock(encode_mutex_);
    commitLocked();
    target = last_committed_;
  }
  return completedSequence() >= target;
}

void Stream::onCompleted(uint64_t sequence, std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(completion_mutex_);
    if (completed_.load(std::memory_order_acquire) < sequence) {
      waiting_.emplace(sequence, std::move(fn));
      return;
    }
  }
  fn();
}

void Stream::completed(uint64_t sequence, const std::string& error) {
  std::vector<std::function<void()>> ready;
  {
    std::lock_guard<std::mutex> lock(completion_mutex_);
    if (!error.empty() && first_error_.empty()) first_error_ = error;
    completed_.store(sequence, std::memory_order_release);
    auto end = waiting_.upper_bound(sequence);
    for (auto it = waiting_.begin(); it != end; ++it) ready.push_back(std::move(it->second));
    waiting_.erase(waiting_.begin(), end);
  }
  for (auto& fn : ready) fn();
}

}  // namespace metalx
