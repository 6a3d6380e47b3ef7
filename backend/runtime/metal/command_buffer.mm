// MTLCommandQueue and MTLCommandBuffer as metalx's (see metal_objects.h).
//
// Status, completion and waiting are tracked here rather than read from Metal: the
// interface promises that completion handlers have run before waitUntilCompleted()
// returns, and that error() reads "<command buffer> failed: <reason>" as the simulator
// words it.
#include "metal_objects.h"

namespace metalx::rt::metal {

// ------------------------------------------------------------------- queue

MetalQueue::MetalQueue(MetalDevice& device, id<MTLCommandQueue> queue)
    : device_(device), queue_(queue) {}

Device& MetalQueue::device() { return device_; }

CommandBufferPtr MetalQueue::commandBuffer() {
  @autoreleasepool {
    id<MTLCommandBuffer> cb = [queue_ commandBuffer];
    if (!cb) throw Error(ErrorKind::OutOfMemory, "commandBuffer: Metal returned no command buffer");
    return std::make_shared<MetalCommandBuffer>(shared_from_this(), cb);
  }
}

void MetalQueue::committed() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++in_flight_;
}

void MetalQueue::finished() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --in_flight_;
  }
  idle_cv_.notify_all();
}

void MetalQueue::waitUntilIdle() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_cv_.wait(lock, [&] { return in_flight_ == 0; });
}

// ------------------------------------------------------------------- command buffer

MetalCommandBuffer::MetalCommandBuffer(std::shared_ptr<MetalQueue> queue, id<MTLCommandBuffer> cb)
    : queue_(std::move(queue)), cb_(cb) {}

void MetalCommandBuffer::setLabel(const std::string& label) {
  rules_.label = label;
  @autoreleasepool {
    [cb_ setLabel:toNSString(label)];
  }
}

ComputeEncoderPtr MetalCommandBuffer::computeEncoder() {
  validation::ExclusiveUse::Scope scope(use_, "a command buffer");
  rules_.beforeEncoder("computeEncoder");
  @autoreleasepool {
    // A serial encoder: each dispatch sees the memory written by those before it.
    id<MTLComputeCommandEncoder> enc = [cb_ computeCommandEncoderWithDispatchType:MTLDispatchTypeSerial];
    if (!enc) throw Error(ErrorKind::OutOfMemory, "computeEncoder: Metal returned no encoder");
    auto wrapper = std::make_shared<MetalComputeEncoder>(shared_from_this(), enc);
    rules_.opened(wrapper.get(), "compute");
    return wrapper;
  }
}

BlitEncoderPtr MetalCommandBuffer::blitEncoder() {
  validation::ExclusiveUse::Scope scope(use_, "a command buffer");
  rules_.beforeEncoder("blitEncoder");
  @autoreleasepool {
    id<MTLBlitCommandEncoder> enc = [cb_ blitCommandEncoder];
    if (!enc) throw Error(ErrorKind::OutOfMemory, "blitEncoder: Metal returned no encoder");
    auto wrapper = std::make_shared<MetalBlitEncoder>(shared_from_this(), enc);
    rules_.opened(wrapper.get(), "blit");
    return wrapper;
  }
}

MetalEvent& MetalCommandBuffer::checkEvent(const EventPtr& event, const char* operation) {
  check(event != nullptr, ErrorKind::Validation, std::string(operation) + ": event is null");
  auto* metal = dynamic_cast<MetalEvent*>(event.get());
  check(metal && &metal->metalDevice() == &metalDevice(), ErrorKind::Validation,
        std::string(operation) + ": the event belongs to another device than " + rules_.describe());
  return *metal;
}

void MetalCommandBuffer::encodeWait(const EventPtr& event, uint64_t value) {
  validation::ExclusiveUse::Scope scope(use_, "a command buffer");
  rules_.beforeEventCommand("encodeWait", "an event wait");
  MetalEvent& e = checkEvent(event, "encodeWait");
  [cb_ encodeWaitForEvent:e.handle() value:value];
  retain(event);
}

void MetalCommandBuffer::encodeSignal(const EventPtr& event, uint64_t value) {
  validation::ExclusiveUse::Scope scope(use_, "a command buffer");
  rules_.beforeEventCommand("encodeSignal", "an event signal");
  MetalEvent& e = checkEvent(event, "encodeSignal");
  [cb_ encodeSignalEvent:e.handle() value:value];
  retain(event);
}

void MetalCommandBuffer::addCompletedHandler(std::function<void(CommandBuffer&)> handler) {
  validation::ExclusiveUse::Scope scope(use_, "a command buffer");
  rules_.requireEncoding("addCompletedHandler");
  handlers_.push_back(std::move(handler));
}

void MetalCommandBuffer::commit() {
  validation::ExclusiveUse::Scope scope(use_, "a command buffer");
  rules_.beforeCommit();
  rules_.committed = true;
  // The blocks hold this wrapper (and so its queue, encoders' objects and handlers)
  // until Metal has run them: a caller may drop every reference after commit().
  std::shared_ptr<MetalCommandBuffer> self = shared_from_this();
  [cb_ addScheduledHandler:^(id<MTLCommandBuffer> cb) {
    (void)cb;
    CommandBufferStatus expected = CommandBufferStatus::Committed;
    self->status_.compare_exchange_strong(expected, CommandBufferStatus::Scheduled);
  }];
  [cb_ addCompletedHandler:^(id<MTLCommandBuffer> cb) {
    self->completed(cb);
  }];
  status_.store(CommandBufferStatus::Committed);
  queue_->committed();
  @autoreleasepool {
    [cb_ commit];
  }
}

void MetalCommandBuffer::completed(id<MTLCommandBuffer> cb) {
  @autoreleasepool {
    const bool failed = [cb status] == MTLCommandBufferStatusError;
    std::string reason;
    if (failed) {
      reason = describeNSError([cb error]);
      if (reason.empty()) reason = "Metal reported an error without a description";
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = failed ? rules_.failure(reason) : std::string();
    }
    gpu_start_.store([cb GPUStartTime], std::memory_order_release);
    gpu_end_.store([cb GPUEndTime], std::memory_order_release);
    // Release what the commands kept alive before anyone learns we are done.
    retained_.clear();
    status_.store(failed ? CommandBufferStatus::Error : CommandBufferStatus::Completed,
                  std::memory_order_release);
    for (auto& h : handlers_) {
      try {
        h(*this);
      } catch (...) {
        // Nowhere to report it on Metal's thread; keep the other handlers running.
      }
    }
    handlers_.clear();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_all();
    queue_->finished();
  }
}

void MetalCommandBuffer::waitUntilCompleted() {
  rules_.beforeWait(status_.load() != CommandBufferStatus::NotEnqueued);
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return done_; });
}

std::string MetalCommandBuffer::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

}  // namespace metalx::rt::metal
