// A stream of GPU work (see stream.h).
#include "stream.h"
#include "host_waits.h"

#include <chrono>
#include <stdexcept>
#include <vector>

#include "core/command_trace.h"

namespace metalx {
namespace {

// While tracing: encoders that pass every call through and remember what the command
// was, to name it in the trace.
class NamingComputeEncoder final : public rt::ComputeEncoder {
 public:
  explicit NamingComputeEncoder(rt::ComputeEncoder& inner) : inner_(inner) {}
  std::string name;

  void endEncoding() override { inner_.endEncoding(); }
  bool isEnded() const override { return inner_.isEnded(); }
  void setLabel(const std::string& label) override { inner_.setLabel(label); }
  void setComputePipeline(const rt::ComputePipelinePtr& pipeline) override {
    inner_.setComputePipeline(pipeline);
    if (pipeline && name.find(pipeline->functionName()) == std::string::npos)
      name += (name.empty() ? "" : " + ") + pipeline->functionName();
  }
  void setBuffer(const rt::BufferPtr& buffer, size_t offset, uint32_t index) override {
    inner_.setBuffer(buffer, offset, index);
  }
  void setBytes(const void* bytes, size_t length, uint32_t index) override { inner_.setBytes(bytes, length, index); }
  void setThreadgroupMemoryLength(size_t length, uint32_t index) override {
    inner_.setThreadgroupMemoryLength(length, index);
  }
  void dispatchThreads(rt::Size3 threads, rt::Size3 per_group) override { inner_.dispatchThreads(threads, per_group); }
  void dispatchThreadgroups(rt::Size3 groups, rt::Size3 per_group) override {
    inner_.dispatchThreadgroups(groups, per_group);
  }

 private:
  rt::ComputeEncoder& inner_;
};

class NamingBlitEncoder final : public rt::BlitEncoder {
 public:
  explicit NamingBlitEncoder(rt::BlitEncoder& inner) : inner_(inner) {}
  CommandKind kind = CommandKind::Copy;
  uint64_t bytes = 0;

  void endEncoding() override { inner_.endEncoding(); }
  bool isEnded() const override { return inner_.isEnded(); }
  void setLabel(const std::string& label) override { inner_.setLabel(label); }
  void copyBuffer(const rt::BufferPtr& src, size_t src_offset, const rt::BufferPtr& dst, size_t dst_offset,
                  size_t size) override {
    inner_.copyBuffer(src, src_offset, dst, dst_offset, size);
    bytes += size;
  }
  void fillBuffer(const rt::BufferPtr& buffer, size_t offset, size_t length, uint8_t value) override {
    inner_.fillBuffer(buffer, offset, length, value);
    kind = CommandKind::Fill;
    bytes += length;
  }

 private:
  rt::BlitEncoder& inner_;
};

double systemSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

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
  rt::checkWith(!exclusive_, rt::ErrorKind::Validation, [&] {
    return std::string(what) + " on metalx stream " + std::to_string(id_) +
           " from inside a C++ extension's encodeCompute callback: it would change or end "
           "the encoder the callback is using; run metalx ops before or after encodeCompute";
  });
}

void Stream::encodeCompute(ComputeEncodeRef encode) { encodeComputeWith(encode, false); }

void Stream::encodeComputeExclusive(ComputeEncodeRef encode) { encodeComputeWith(encode, true); }

void Stream::encodeComputeWith(ComputeEncodeRef encode, bool exclusive) {
  std::lock_guard<std::recursive_mutex> lock(encode_mutex_);
  checkNotExclusive("compute work encoded");
  if (command_trace::enabled() && tracing_depth_ == 0) {
    encodeComputeTraced(encode, exclusive);
    return;
  }
  if (!compute_) compute_ = commandBuffer().computeEncoder();
  exclusive_ = exclusive;
  try {
    encode(*compute_);
  } catch (...) {
    exclusive_ = false;
    throw;
  }
  exclusive_ = false;
  countCommand();
}

// The traced form of encodeComputeWith (encode_mutex_ held): the command gets a command
// buffer of its own, named after the kernels it dispatched.
void Stream::encodeComputeTraced(ComputeEncodeRef encode, bool exclusive) {
  beginTracedCommand();
  if (!compute_) compute_ = commandBuffer().computeEncoder();
  NamingComputeEncoder naming(*compute_);
  exclusive_ = exclusive;
  try {
    encode(naming);
  } catch (...) {
    exclusive_ = false;
    --tracing_depth_;
    throw;
  }
  exclusive_ = false;
  endTracedCommand(naming.name.empty() ? "kernel" : naming.name, CommandKind::Kernel, 0);
}

void Stream::beginTracedCommand() {
  commitLocked();  // the command gets a command buffer of its own
  ++tracing_depth_;
}

void Stream::endTracedCommand(const std::string& name, CommandKind kind, uint64_t bytes) {
  --tracing_depth_;
  endCompute();
  command_trace::expect();
  commandBuffer().addCompletedHandler([name, kind, bytes, device = device_index_, stream = id_,
                                       correlation = command_trace::currentCorrelation()](rt::CommandBuffer& done) {
    if (done.status() != rt::CommandBufferStatus::Completed) return command_trace::discard();
    command_trace::record(TracedCommand{name, kind, device, stream, done.gpuStartTime(), done.gpuEndTime(),
                                        systemSeconds(), correlation, bytes});
  });
  commitLocked();
}

void Stream::encodeBlit(BlitEncodeRef encode) {
  std::lock_guard<std::recursive_mutex> lock(encode_mutex_);
  checkNotExclusive("blit work encoded");
  const bool traced = command_trace::enabled() && tracing_depth_ == 0;
  if (traced) beginTracedCommand();
  endCompute();
  auto blit = commandBuffer().blitEncoder();
  NamingBlitEncoder naming(*blit);
  try {
    encode(naming);
  } catch (...) {
    blit->endEncoding();  // leave the command buffer usable for the next command
    if (traced) --tracing_depth_;
    throw;
  }
  blit->endEncoding();
  if (traced) {
    endTracedCommand(naming.kind == CommandKind::Fill ? "fill" : "copy", naming.kind, naming.bytes);
    return;
  }
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

namespace {
std::atomic<uint64_t> host_waits{0};
}  // namespace

uint64_t hostWaitCount() { return host_waits.load(std::memory_order_relaxed); }
void countHostWait() { host_waits.fetch_add(1, std::memory_order_relaxed); }

void Stream::synchronize() {
  countHostWait();
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

bool Stream::waitAllPolling(const std::function<bool()>& keep_waiting) {
  uint64_t target;
  {
    std::lock_guard<std::recursive_mutex> lock(encode_mutex_);
    commitLocked();
    target = last_committed_;
  }
  const auto done = [&] { return completed_->load(std::memory_order_acquire) >= target; };
  while (true) {
    {
      std::unique_lock<std::mutex> lock(completion_mutex_);
      if (completed_cv_.wait_for(lock, std::chrono::milliseconds(50), done)) return true;
    }
    if (!keep_waiting()) return false;  // without the lock: it may take the GIL
  }
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
    if (completed_->load(std::memory_order_acquire) < sequence) {
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
    completed_->store(sequence, std::memory_order_release);
    auto end = waiting_.upper_bound(sequence);
    for (auto it = waiting_.begin(); it != end; ++it) ready.push_back(std::move(it->second));
    waiting_.erase(waiting_.begin(), end);
  }
  completed_cv_.notify_all();
  for (auto& fn : ready) fn();
}

}  // namespace metalx
