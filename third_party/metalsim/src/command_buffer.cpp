// A simulated MTLCommandBuffer (see command_buffer.h).
#include "command_buffer.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "config.h"
#include "device.h"
#include "encoders.h"
#include "event.h"
#include "executor.h"
#include "metalx/runtime/error.h"
#include "queue.h"

namespace metalsim {

using metalx::rt::CommandBufferStatus;
using metalx::rt::Error;
using metalx::rt::ErrorKind;

double simClockSeconds() {
  static const auto origin = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count();
}

SimCommandBuffer::SimCommandBuffer(std::shared_ptr<SimQueue> queue) : queue_(std::move(queue)) {
  commands_.reserve(kReservedCommands);
}

SimDevice& SimCommandBuffer::device() { return queue_->simDevice(); }

metalx::rt::ComputeEncoderPtr SimCommandBuffer::computeEncoder() {
  ExclusiveUse::Scope scope(use_, "a command buffer");
  rules_.beforeEncoder("computeEncoder");
  auto enc = std::make_shared<SimComputeEncoder>(shared_from_this());
  rules_.opened(static_cast<SimEncoderBase*>(enc.get()), "compute");
  return enc;
}

metalx::rt::BlitEncoderPtr SimCommandBuffer::blitEncoder() {
  ExclusiveUse::Scope scope(use_, "a command buffer");
  rules_.beforeEncoder("blitEncoder");
  auto enc = std::make_shared<SimBlitEncoder>(shared_from_this());
  rules_.opened(static_cast<SimEncoderBase*>(enc.get()), "blit");
  return enc;
}

void SimCommandBuffer::encoderEnded(SimEncoderBase* encoder) { rules_.ended(encoder); }

void SimCommandBuffer::encoderAbandoned(SimEncoderBase* encoder, const std::string& what) {
  rules_.abandoned(encoder, what);
}

static void checkEventDevice(SimCommandBuffer& cb, const metalx::rt::EventPtr& event,
                             const char* op) {
  if (!event) throw Error(ErrorKind::Validation, std::string(op) + ": event is null");
  auto* sim = dynamic_cast<SimEvent*>(event.get());
  if (!sim || &sim->simDevice() != &cb.device())
    throw Error(ErrorKind::Validation,
                std::string(op) + ": the event belongs to another device than " + cb.describe());
}

void SimCommandBuffer::encodeWait(const metalx::rt::EventPtr& event, uint64_t value) {
  ExclusiveUse::Scope scope(use_, "a command buffer");
  rules_.beforeEventCommand("encodeWait", "an event wait");
  checkEventDevice(*this, event, "encodeWait");
  commands_.push_back(WaitCommand{event, value});
}

void SimCommandBuffer::encodeSignal(const metalx::rt::EventPtr& event, uint64_t value) {
  ExclusiveUse::Scope scope(use_, "a command buffer");
  rules_.beforeEventCommand("encodeSignal", "an event signal");
  checkEventDevice(*this, event, "encodeSignal");
  commands_.push_back(SignalCommand{event, value});
}

void SimCommandBuffer::addCompletedHandler(std::function<void(metalx::rt::CommandBuffer&)> handler) {
  ExclusiveUse::Scope scope(use_, "a command buffer");
  rules_.requireEncoding("addCompletedHandler");
  handlers_.push_back(std::move(handler));
}

void SimCommandBuffer::commit() {
  ExclusiveUse::Scope scope(use_, "a command buffer");
  rules_.beforeCommit();
  rules_.committed = true;
  status_.store(CommandBufferStatus::Committed);
  queue_->submit(shared_from_this());
}

void SimCommandBuffer::waitUntilCompleted() {
  rules_.beforeWait(status_.load() != CommandBufferStatus::NotEnqueued);
  // Short spin first: most waits are for work that finishes within microseconds, and
  // a sleeping wait costs a futex wake-up on each side.
  auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  while (std::chrono::steady_clock::now() < spin_until)
    if (done_.load(std::memory_order_acquire)) return;
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return done_.load(); });
}

std::string SimCommandBuffer::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

namespace {

void runCopy(const CopyCommand& c) {
  auto* src = static_cast<unsigned char*>(c.src->contents()) + c.src_offset;
  auto* dst = static_cast<unsigned char*>(c.dst->contents()) + c.dst_offset;
  std::memcpy(dst, src, c.size);
}

void runFill(const FillCommand& f) {
  std::memset(static_cast<unsigned char*>(f.buffer->contents()) + f.offset, f.value, f.length);
}

void runWait(const WaitCommand& w) {
  auto timeout = std::chrono::milliseconds(static_cast<long long>(config().event_timeout_s * 1000));
  if (!w.event->waitUntilSignaled(w.value, timeout))
    throw std::runtime_error("timed out after " + std::to_string(static_cast<long long>(config().event_timeout_s)) +
                             " s waiting for an event to reach " + std::to_string(w.value) +
                             " (it is at " + std::to_string(w.event->signaledValue()) +
                             "); nothing signalled it");
}

}  // namespace

void SimCommandBuffer::execute() {
  status_.store(CommandBufferStatus::Scheduled);
  if (config().strict && config().strict_delay_us)
    std::this_thread::sleep_for(std::chrono::microseconds(config().strict_delay_us));
  const double start = simClockSeconds();
  std::string failure;
  for (auto& command : commands_) {
    try {
      if (auto* d = std::get_if<DispatchCommand>(&command)) runDispatch(*d);
      else if (auto* c = std::get_if<CopyCommand>(&command)) runCopy(*c);
      else if (auto* f = std::get_if<FillCommand>(&command)) runFill(*f);
      else if (auto* w = std::get_if<WaitCommand>(&command)) runWait(*w);
      else if (auto* s = std::get_if<SignalCommand>(&command)) s->event->signal(s->value);
    } catch (const std::exception& e) {
      failure = rules_.failure(e.what());
      break;  // as on Metal, the rest of a failed command buffer does not run
    }
  }
  gpu_start_.store(start, std::memory_order_release);
  gpu_end_.store(simClockSeconds(), std::memory_order_release);
  finish(failure.empty() ? CommandBufferStatus::Completed : CommandBufferStatus::Error, failure);
}

void SimCommandBuffer::finish(CommandBufferStatus final_status, const std::string& error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = error;
  }
  // Release what the commands kept alive before anyone is told we are done, so a
  // caller that frees memory after waiting sees the buffers' references dropped. The
  // commands' own storage stays until the command buffer is destroyed, usually on the
  // thread that encoded it: freeing it here, on the queue's thread, would hand the
  // encoding thread's memory across threads and make both contend in malloc.
  for (auto& command : commands_) std::visit([](auto& c) { c.releaseReferences(); }, command);
  retained_buffers_.clear();
  retained_pipelines_.clear();
  // Handlers see the final status, and run before waiters wake: callers rely on their
  // effects once waitUntilCompleted() returns (e.g. the allocator reusing blocks).
  status_.store(final_status, std::memory_order_release);
  for (auto& h : handlers_) {
    try {
      h(*this);
    } catch (...) {
      // A handler's exception has nowhere to go on a runtime thread; Metal would
      // terminate. Keep the simulator alive and ignore it.
    }
  }
  handlers_.clear();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_.store(true, std::memory_order_release);
  }
  done_cv_.notify_all();
}

}  // namespace metalsim
