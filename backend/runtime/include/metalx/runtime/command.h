// Command queues, command buffers and encoders, as Metal's.
//
// The model every driver implements:
// - A queue executes its committed command buffers asynchronously and in commit order;
//   different queues run independently unless ordered by events.
// - A command buffer is encoded by one thread at a time. It has at most one open encoder;
//   an encoder must be ended before another is made and before commit.
// - Commands inside a compute encoder run in order: a dispatch sees all memory written by
//   the dispatches and blits encoded before it in the same command buffer.
// - Everything bound to a command buffer (buffers, pipelines, events) stays alive until
//   it completes.
// Misuse throws Error(Validation) naming the rule, and leaves the object as it was.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "metalx/runtime/buffer.h"
#include "metalx/runtime/event.h"
#include "metalx/runtime/library.h"
#include "metalx/runtime/types.h"

namespace metalx::rt {

class Device;
class CommandBuffer;

// Metal allows at most 31 buffer arguments per kernel and 4 KiB of inline bytes.
constexpr uint32_t kMaxBufferBindings = 31;
constexpr size_t kMaxInlineBytes = 4096;
constexpr uint32_t kMaxThreadgroupMemoryBindings = 31;

class Encoder {
 public:
  virtual ~Encoder() = default;
  virtual void endEncoding() = 0;
  virtual bool isEnded() const = 0;
  // A label shown in errors and in profiles (as MTLCommandEncoder.label).
  virtual void setLabel(const std::string& label) = 0;
};

class ComputeEncoder : public Encoder {
 public:
  virtual void setComputePipeline(const ComputePipelinePtr& pipeline) = 0;
  // Binds `buffer` at byte `offset` to [[buffer(index)]]. The offset may equal the
  // length (an empty view at the end) but not exceed it.
  virtual void setBuffer(const BufferPtr& buffer, size_t offset, uint32_t index) = 0;
  // Copies up to 4 KiB of small constant data into [[buffer(index)]].
  virtual void setBytes(const void* bytes, size_t length, uint32_t index) = 0;
  // Length of the dynamic threadgroup memory bound to [[threadgroup(index)]]; a
  // multiple of 16 bytes as Metal requires.
  virtual void setThreadgroupMemoryLength(size_t length, uint32_t index) = 0;
  // A grid of `threads` (not necessarily a multiple of the threadgroup size: edge
  // threadgroups are partial), in threadgroups of `threads_per_threadgroup`.
  virtual void dispatchThreads(Size3 threads, Size3 threads_per_threadgroup) = 0;
  // `threadgroups` whole threadgroups of `threads_per_threadgroup` threads each.
  virtual void dispatchThreadgroups(Size3 threadgroups, Size3 threads_per_threadgroup) = 0;

  // One argument of encodeDispatchThreads: a buffer at a byte offset, or (bytes set)
  // inline constant data.
  struct Argument {
    const BufferPtr* buffer = nullptr;
    size_t offset = 0;
    const void* bytes = nullptr;
    size_t length = 0;
  };
  // A whole dispatch in one call: setComputePipeline(pipeline), arguments[i] bound at
  // [[buffer(i)]] (setBuffer or setBytes) for i < count, then dispatchThreads. It means
  // exactly those calls in that order, which is what this default makes (all a Metal
  // encoder needs); a driver may override it to check and record them in one pass.
  // Launchers that bind every argument of every dispatch use it, since each call
  // costs a small op host time (a simulated encoder takes its one-thread guard per call).
  virtual void encodeDispatchThreads(const ComputePipelinePtr& pipeline, const Argument* arguments, uint32_t count,
                                     Size3 threads, Size3 threads_per_threadgroup) {
    setComputePipeline(pipeline);
    for (uint32_t i = 0; i < count; ++i) {
      const Argument& a = arguments[i];
      if (a.bytes) setBytes(a.bytes, a.length, i);
      else setBuffer(*a.buffer, a.offset, i);
    }
    dispatchThreads(threads, threads_per_threadgroup);
  }
};

class BlitEncoder : public Encoder {
 public:
  // Offsets and size must be multiples of 4 (Metal's rule on macOS); regions may not
  // leave either buffer. Overlapping source and destination in one buffer is undefined
  // on Metal and rejected.
  virtual void copyBuffer(const BufferPtr& src, size_t src_offset, const BufferPtr& dst,
                          size_t dst_offset, size_t size) = 0;
  // Sets every byte of [offset, offset + length) to `value`; offset and length must be
  // multiples of 4 and length greater than 0.
  virtual void fillBuffer(const BufferPtr& buffer, size_t offset, size_t length,
                          uint8_t value) = 0;
};

using ComputeEncoderPtr = std::shared_ptr<ComputeEncoder>;
using BlitEncoderPtr = std::shared_ptr<BlitEncoder>;

class CommandBuffer {
 public:
  virtual ~CommandBuffer() = default;

  virtual ComputeEncoderPtr computeEncoder() = 0;
  virtual BlitEncoderPtr blitEncoder() = 0;

  // Between encoders: the device waits until `event` reaches `value` before running
  // anything encoded after this, or signals `event` with `value` once everything
  // encoded before this has finished.
  virtual void encodeWait(const EventPtr& event, uint64_t value) = 0;
  virtual void encodeSignal(const EventPtr& event, uint64_t value) = 0;

  // Runs on a runtime thread after the command buffer completed or failed. Must be
  // added before commit.
  virtual void addCompletedHandler(std::function<void(CommandBuffer&)> handler) = 0;

  virtual void commit() = 0;
  // Blocks until the command buffer has completed or failed. Does not throw for a
  // failed command buffer: check status() and error().
  virtual void waitUntilCompleted() = 0;
  virtual CommandBufferStatus status() const = 0;
  // Why the command buffer failed ("" unless status() is Error).
  virtual std::string error() const = 0;

  // When the device started and finished running it, in seconds on the runtime's
  // clock (as MTLCommandBuffer.GPUStartTime/GPUEndTime); 0 until completed.
  virtual double gpuStartTime() const = 0;
  virtual double gpuEndTime() const = 0;

  virtual void setLabel(const std::string& label) = 0;
  virtual const std::string& label() const = 0;
};

using CommandBufferPtr = std::shared_ptr<CommandBuffer>;

// Creating command buffers and committing them is thread-safe; a failed command buffer
// reports only through its own status()/error() (and completion handlers), so a caller
// that must surface asynchronous failures (torch.metalx.synchronize) watches its
// command buffers with completion handlers.
class CommandQueue {
 public:
  virtual ~CommandQueue() = default;
  virtual Device& device() = 0;
  virtual CommandBufferPtr commandBuffer() = 0;
  // Blocks until every command buffer committed so far has completed or failed.
  virtual void waitUntilIdle() = 0;
};

using CommandQueuePtr = std::shared_ptr<CommandQueue>;

}  // namespace metalx::rt
