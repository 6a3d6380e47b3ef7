// Simulated compute and blit encoders. They validate each call as Metal's API
// validation layer does and append commands to their command buffer.
#pragma once

#include <memory>
#include <string>

#include "command_buffer.h"
#include "metalx/runtime/command.h"
#include "metalx/runtime/validation.h"

namespace metalsim {

class SimEncoderBase {
 public:
  SimEncoderBase(std::shared_ptr<SimCommandBuffer> cb, const char* kind) : cb_(std::move(cb)), kind_(kind) {}
  virtual ~SimEncoderBase();
  const char* kind() const { return kind_; }

 protected:
  // Throws unless the encoder may still encode. Every public call starts with it.
  void requireOpen(const char* operation) const;
  void doEnd();
  std::string where() const;  // "compute encoder 'label' of command buffer 'x'"
  void checkBufferDevice(const metalx::rt::BufferPtr& buffer, const char* operation) const;

  std::shared_ptr<SimCommandBuffer> cb_;
  const char* kind_;
  std::string label_;
  bool ended_ = false;
  ExclusiveUse use_;
};

class SimComputeEncoder final : public metalx::rt::ComputeEncoder, public SimEncoderBase {
 public:
  explicit SimComputeEncoder(std::shared_ptr<SimCommandBuffer> cb) : SimEncoderBase(std::move(cb), "compute") {}
  void endEncoding() override;
  bool isEnded() const override { return ended_; }
  void setLabel(const std::string& label) override { label_ = label; }
  void setComputePipeline(const metalx::rt::ComputePipelinePtr& pipeline) override;
  void setBuffer(const metalx::rt::BufferPtr& buffer, size_t offset, uint32_t index) override;
  void setBytes(const void* bytes, size_t length, uint32_t index) override;
  void setThreadgroupMemoryLength(size_t length, uint32_t index) override;
  void dispatchThreads(metalx::rt::Size3 threads, metalx::rt::Size3 per_group) override;
  void dispatchThreadgroups(metalx::rt::Size3 groups, metalx::rt::Size3 per_group) override;
  // The calls it stands for under one guard and one open check (see command.h).
  void encodeDispatchThreads(const metalx::rt::ComputePipelinePtr& pipeline, const Argument* arguments,
                             uint32_t count, metalx::rt::Size3 threads, metalx::rt::Size3 per_group) override;

 private:
  // The public calls' work, once the guard is taken and the encoder checked open.
  void bindPipeline(const metalx::rt::ComputePipelinePtr& pipeline);
  void bindBuffer(const metalx::rt::BufferPtr& buffer, size_t offset, uint32_t index);
  void bindBytes(const void* bytes, size_t length, uint32_t index);
  void dispatchThreadsChecked(metalx::rt::Size3 threads, metalx::rt::Size3 per_group);
  void dispatch(metalx::rt::Size3 threads, metalx::rt::Size3 per_group, metalx::rt::Size3 groups);
  struct Slot {  // what is bound; whether it is, is in bound_
    metalx::rt::BufferPtr buffer;
    size_t offset = 0;
    std::vector<unsigned char> bytes;  // setBytes data when buffer is null
  };
  std::shared_ptr<SimPipeline> pipeline_;
  Slot slots_[kabi::kMaxBindings];
  metalx::rt::validation::Bindings bound_;
};

class SimBlitEncoder final : public metalx::rt::BlitEncoder, public SimEncoderBase {
 public:
  explicit SimBlitEncoder(std::shared_ptr<SimCommandBuffer> cb) : SimEncoderBase(std::move(cb), "blit") {}
  void endEncoding() override;
  bool isEnded() const override { return ended_; }
  void setLabel(const std::string& label) override { label_ = label; }
  void copyBuffer(const metalx::rt::BufferPtr& src, size_t src_offset,
                  const metalx::rt::BufferPtr& dst, size_t dst_offset, size_t size) override;
  void fillBuffer(const metalx::rt::BufferPtr& buffer, size_t offset, size_t length,
                  uint8_t value) override;
};

}  // namespace metalsim
