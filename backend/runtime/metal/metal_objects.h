// The Metal driver's objects: thin wrappers of Metal's, one per interface class.
// Objective-C++ (ARC): include only from the .mm files beside it.
//
// Each public call validates with the shared rules (metalx/runtime/validation.h)
// before Metal sees it, so misuse throws Error(Validation) with the same message the
// simulator gives instead of tripping Metal's validation layer.
#pragma once

#import <Foundation/Foundation.h>
#import <Metal/Metal.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "metalx/runtime/device.h"
#include "metalx/runtime/validation.h"

namespace metalx::rt::metal {

class MetalDevice;
class MetalCommandBuffer;

std::string describeNSError(NSError* error);  // "" for nil

class MetalBuffer final : public Buffer {
 public:
  MetalBuffer(MetalDevice& device, id<MTLBuffer> buffer, size_t length, bool wraps);
  ~MetalBuffer() override;
  void* contents() override;
  size_t length() const override { return length_; }
  Device& device() override;
  bool wrapsHostMemory() const override { return wraps_; }
  id<MTLBuffer> handle() const { return buffer_; }
  MetalDevice& metalDevice() { return device_; }

 private:
  MetalDevice& device_;
  id<MTLBuffer> buffer_;
  size_t length_;
  bool wraps_;
};

class MetalPipeline final : public ComputePipeline {
 public:
  MetalPipeline(MetalDevice& device, id<MTLComputePipelineState> state, std::string name,
                std::vector<KernelArgument> arguments);
  const std::string& functionName() const override { return name_; }
  uint64_t maxTotalThreadsPerThreadgroup() const override;
  uint32_t threadExecutionWidth() const override;
  uint64_t staticThreadgroupMemoryLength() const override;
  const std::vector<KernelArgument>& arguments() const override { return arguments_; }
  id<MTLComputePipelineState> handle() const { return state_; }
  MetalDevice& metalDevice() const { return device_; }

 private:
  MetalDevice& device_;
  id<MTLComputePipelineState> state_;
  std::string name_;
  std::vector<KernelArgument> arguments_;
};

class MetalLibrary final : public Library {
 public:
  MetalLibrary(MetalDevice& device, id<MTLLibrary> library, std::string identity);
  std::vector<std::string> functionNames() const override;
  bool hasFunction(const std::string& name) const override;
  ComputePipelinePtr newComputePipeline(const std::string& function_name) override;
  ComputePipelinePtr newComputePipeline(const std::string& function_name,
                                        const FunctionConstantValues& constants) override;
  const std::string& identity() const override { return identity_; }

 private:
  // The pipeline of a function already looked up (plain or specialised).
  ComputePipelinePtr pipelineFor(id<MTLFunction> fn, const std::string& function_name);

  MetalDevice& device_;
  id<MTLLibrary> library_;
  std::string identity_;
};

class MetalEvent final : public Event {
 public:
  MetalEvent(MetalDevice& device, id<MTLSharedEvent> event);
  Device& device() override;
  uint64_t signaledValue() const override;
  void signal(uint64_t value) override;
  bool waitUntilSignaled(uint64_t value, std::chrono::milliseconds timeout) override;
  void notify(uint64_t value, std::function<void()> fn) override;
  id<MTLSharedEvent> handle() const { return event_; }
  MetalDevice& metalDevice() { return device_; }

 private:
  MetalDevice& device_;
  id<MTLSharedEvent> event_;
  std::mutex signal_mutex_;  // host signals: check-then-set as one step
};

class MetalQueue final : public CommandQueue, public std::enable_shared_from_this<MetalQueue> {
 public:
  MetalQueue(MetalDevice& device, id<MTLCommandQueue> queue);
  Device& device() override;
  CommandBufferPtr commandBuffer() override;
  void waitUntilIdle() override;
  MetalDevice& metalDevice() { return device_; }

  // Committed-but-unfinished command buffers, for waitUntilIdle.
  void committed();
  void finished();

 private:
  MetalDevice& device_;
  id<MTLCommandQueue> queue_;
  std::mutex mutex_;
  std::condition_variable idle_cv_;
  size_t in_flight_ = 0;
};

class MetalCommandBuffer final : public CommandBuffer,
                                 public std::enable_shared_from_this<MetalCommandBuffer> {
 public:
  MetalCommandBuffer(std::shared_ptr<MetalQueue> queue, id<MTLCommandBuffer> cb);
  ComputeEncoderPtr computeEncoder() override;
  BlitEncoderPtr blitEncoder() override;
  void encodeWait(const EventPtr& event, uint64_t value) override;
  void encodeSignal(const EventPtr& event, uint64_t value) override;
  void addCompletedHandler(std::function<void(CommandBuffer&)> handler) override;
  void commit() override;
  void waitUntilCompleted() override;
  CommandBufferStatus status() const override { return status_.load(); }
  std::string error() const override;
  double gpuStartTime() const override { return gpu_start_.load(std::memory_order_acquire); }
  double gpuEndTime() const override { return gpu_end_.load(std::memory_order_acquire); }
  void setLabel(const std::string& label) override;
  const std::string& label() const override { return rules_.label; }

  // For encoders.
  MetalDevice& metalDevice() { return queue_->metalDevice(); }
  id<MTLCommandBuffer> handle() const { return cb_; }
  validation::CommandBufferRules& rules() { return rules_; }
  // Keeps `object` alive until the command buffer has completed (command.h).
  void retain(std::shared_ptr<void> object) { retained_.push_back(std::move(object)); }

 private:
  void completed(id<MTLCommandBuffer> cb);  // from Metal's completion handler
  MetalEvent& checkEvent(const EventPtr& event, const char* operation);

  std::shared_ptr<MetalQueue> queue_;
  id<MTLCommandBuffer> cb_;
  validation::CommandBufferRules rules_;
  validation::ExclusiveUse use_;
  std::vector<std::function<void(CommandBuffer&)>> handlers_;
  std::vector<std::shared_ptr<void>> retained_;

  std::atomic<CommandBufferStatus> status_{CommandBufferStatus::NotEnqueued};
  std::atomic<double> gpu_start_{0}, gpu_end_{0};
  mutable std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::string error_;
};

class MetalComputeEncoder final : public ComputeEncoder {
 public:
  MetalComputeEncoder(std::shared_ptr<MetalCommandBuffer> cb, id<MTLComputeCommandEncoder> enc);
  ~MetalComputeEncoder() override;
  void endEncoding() override;
  bool isEnded() const override { return ended_; }
  void setLabel(const std::string& label) override;
  void setComputePipeline(const ComputePipelinePtr& pipeline) override;
  void setBuffer(const BufferPtr& buffer, size_t offset, uint32_t index) override;
  void setBytes(const void* bytes, size_t length, uint32_t index) override;
  void setThreadgroupMemoryLength(size_t length, uint32_t index) override;
  void dispatchThreads(Size3 threads, Size3 threads_per_threadgroup) override;
  void dispatchThreadgroups(Size3 threadgroups, Size3 threads_per_threadgroup) override;

 private:
  std::string where() const;
  bool validateDispatch(Size3 threads, Size3 per_group);

  std::shared_ptr<MetalCommandBuffer> cb_;
  id<MTLComputeCommandEncoder> enc_;
  std::string label_;
  bool ended_ = false;
  validation::ExclusiveUse use_;
  std::shared_ptr<MetalPipeline> pipeline_;
  validation::Bindings bindings_;
};

class MetalBlitEncoder final : public BlitEncoder {
 public:
  MetalBlitEncoder(std::shared_ptr<MetalCommandBuffer> cb, id<MTLBlitCommandEncoder> enc);
  ~MetalBlitEncoder() override;
  void endEncoding() override;
  bool isEnded() const override { return ended_; }
  void setLabel(const std::string& label) override;
  void copyBuffer(const BufferPtr& src, size_t src_offset, const BufferPtr& dst,
                  size_t dst_offset, size_t size) override;
  void fillBuffer(const BufferPtr& buffer, size_t offset, size_t length, uint8_t value) override;

 private:
  std::string where() const;

  std::shared_ptr<MetalCommandBuffer> cb_;
  id<MTLBlitCommandEncoder> enc_;
  std::string label_;
  bool ended_ = false;
  validation::ExclusiveUse use_;
};

// The MetalBuffer behind `buffer`, or Error(Validation) if it is null or belongs to a
// device other than `device` ("<operation>: ... than the <where>").
MetalBuffer& checkBuffer(const BufferPtr& buffer, MetalDevice& device, const char* operation,
                         const std::string& where);

class MetalDevice final : public Device {
 public:
  MetalDevice(int index, id<MTLDevice> device);
  int index() const override { return index_; }
  const DeviceInfo& info() const override { return info_; }
  BufferPtr newBuffer(size_t length) override;
  BufferPtr wrapHostMemory(void* ptr, size_t length, std::function<void()> deallocator) override;
  size_t currentAllocatedSize() const override { return allocated_.load(); }
  CommandQueuePtr newCommandQueue() override;
  EventPtr newEvent() override;
  LibraryPtr builtinLibrary() override;
  LibraryPtr compileLibrary(const std::string& source, const CompileOptions& options) override;

  id<MTLDevice> handle() const { return device_; }
  MTLSharedEventListener* listener() const { return listener_; }
  void released(size_t length) { allocated_ -= length; }

 private:
  int index_;
  id<MTLDevice> device_;
  MTLSharedEventListener* listener_;
  DeviceInfo info_;
  std::atomic<size_t> allocated_{0};
  std::once_flag builtin_once_;
  LibraryPtr builtin_;
};

// Converts an NSString to std::string (UTF-8); "" for nil.
std::string toString(NSString* s);
NSString* toNSString(const std::string& s);

}  // namespace metalx::rt::metal
