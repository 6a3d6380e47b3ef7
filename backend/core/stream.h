// A stream: one ordered sequence of GPU work on one device, and the only place metalx
// encodes commands for it.
//
// Everything for a stream is encoded here, under one lock, in call order: a command
// buffer is created on demand, one compute encoder is kept open across kernels (kernel
// coalescing) and ended before any blit, event or commit, as Metal requires. Work is
// committed in batches (flush), so the device runs while the host encodes more.
//
// Command buffers are numbered: work encoded now belongs to currentSequence(), and is
// finished once completedSequence() reaches that number. That lets the allocator reuse
// freed memory only after the last command buffer that could touch it has completed.
// A command buffer that fails records its error; synchronize() throws it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/command_trace.h"
#include "core/function_ref.h"
#include "metalx/runtime/runtime.h"

namespace metalx {

// What encodeCompute / encodeBlit run: a callable taking the encoder, called before they
// return (so a lambda written at the call site; nothing is copied or allocated).
using ComputeEncodeRef = FunctionRef<void(rt::ComputeEncoder&)>;
using BlitEncodeRef = FunctionRef<void(rt::BlitEncoder&)>;

class Stream {
 public:
  // `pipelines`: the device's shared pipeline cache; a stream made on its own (tests)
  // passes none and owns one.
  Stream(rt::Device& device, int device_index, int64_t id,
         rt::PipelineCache* pipelines = nullptr);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int deviceIndex() const { return device_index_; }
  int64_t id() const { return id_; }
  rt::Device& device() { return device_; }
  rt::PipelineCache& pipelines() { return *pipelines_; }

  // Runs `encode` with the stream's open compute encoder (opened if needed).
  void encodeCompute(ComputeEncodeRef encode);
  // Like encodeCompute, for code outside metalx (C++ extensions): while `encode` runs,
  // anything else that would encode on or commit this stream from inside it (a metalx
  // op the callback calls) throws Error(Validation) instead, because it would change
  // the pipeline and bindings of the encoder the callback is using, or end it.
  void encodeComputeExclusive(ComputeEncodeRef encode);
  // Runs `encode` with a blit encoder (ending the compute encoder first).
  void encodeBlit(BlitEncodeRef encode);
  // The device waits for / signals `event` at this point of the stream.
  void encodeWait(const rt::EventPtr& event, uint64_t value);
  void encodeSignal(const rt::EventPtr& event, uint64_t value);
  // Signals `event` with `value` after everything encoded so far and commits at once,
  // so that another stream waiting for it, or the host, is never left waiting for a
  // command buffer nobody commits. Returns the command buffer that signals: its
  // completion (and GPU end time) is the event's.
  rt::CommandBufferPtr recordEvent(const rt::EventPtr& event, uint64_t value);

  // The number of the command buffer work encoded now goes into.
  uint64_t currentSequence() const;
  // Every command buffer numbered up to this has completed (or failed).
  uint64_t completedSequence() const { return completed_->load(std::memory_order_acquire); }
  // The counter completedSequence() reads, shared: it stays readable after the stream is
  // gone (when it reads as everything completed, since destroying a stream waits for
  // its work), so a caller may keep it to poll without holding the stream.
  std::shared_ptr<const std::atomic<uint64_t>> completedCounter() const { return completed_; }

  // Commits what has been encoded, without waiting.
  void flush();
  // Commits and waits until everything encoded so far has completed. Throws
  // std::runtime_error with the first failure since the last synchronize().
  void synchronize();
  // Commits, then waits for everything encoded so far to complete in slices of 50 ms,
  // asking `keep_waiting` after each unfinished one: waits the host must be able to
  // interrupt (Ctrl-C). True when everything completed (then call synchronize() for
  // failures); false at once when `keep_waiting` said no (the work keeps running).
  bool waitAllPolling(const std::function<bool()>& keep_waiting);
  // True when everything encoded so far has completed (commits pending work first, so
  // polling makes progress, as cudaStreamQuery does).
  bool query();
  // Blocks until command buffer `sequence` has completed (committing it if needed).
  void waitFor(uint64_t sequence);
  // Runs `fn` on a runtime thread once command buffer `sequence` has completed, at once
  // (on this thread) if it already has.
  void onCompleted(uint64_t sequence, std::function<void()> fn);

  // Commit policy: a command buffer is committed once it holds this many commands.
  static constexpr int kMaxCommandsPerCommandBuffer = 16;

 private:
  rt::CommandBuffer& commandBuffer();  // the one being encoded, created if needed
  void endCompute();
  void commitLocked();
  void completed(uint64_t sequence, const std::string& error);
  void countCommand();
  void beginTracedCommand();
  void endTracedCommand(const std::string& name, CommandKind kind, uint64_t bytes);
  void checkNotExclusive(const char* what) const;  // needs encode_mutex_
  void encodeComputeWith(ComputeEncodeRef encode, bool exclusive);
  void encodeComputeTraced(ComputeEncodeRef encode, bool exclusive);

  rt::Device& device_;
  const int device_index_;
  const int64_t id_;
  rt::CommandQueuePtr queue_;
  std::unique_ptr<rt::PipelineCache> own_pipelines_;
  rt::PipelineCache* pipelines_;

  mutable std::recursive_mutex encode_mutex_;  // recursive: an encode callback may encode
  rt::CommandBufferPtr cb_;
  rt::ComputeEncoderPtr compute_;
  int commands_in_cb_ = 0;
  int tracing_depth_ = 0;  // > 0 while a traced command is being encoded
  bool exclusive_ = false;  // inside encodeComputeExclusive's callback
  uint64_t next_sequence_ = 1;       // number of the next command buffer to create
  uint64_t last_committed_ = 0;
  rt::CommandBufferPtr last_committed_cb_;

  std::shared_ptr<std::atomic<uint64_t>> completed_ = std::make_shared<std::atomic<uint64_t>>(0);
  std::mutex completion_mutex_;
  std::condition_variable completed_cv_;  // notified as command buffers complete
  std::multimap<uint64_t, std::function<void()>> waiting_;  // sequence -> callbacks
  std::string first_error_;
};

}  // namespace metalx
