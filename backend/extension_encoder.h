// The compute encoder an extension gets from metalx::ext::encodeCompute.
//
// It forwards to the stream's open encoder, which metalx shares with its own kernels
// and keeps open across them, and enforces what sharing needs:
// - the extension may not end it (metalx ends and commits it; a stream whose encoder
//   was ended behind its back would fail on its next kernel);
// - a dispatch must follow a pipeline set, and every [[buffer(n)]] / [[threadgroup(n)]]
//   argument the pipeline declares must have been bound, in this same call: bindings
//   persist in the encoder, so a forgotten one would silently read what an earlier
//   kernel bound there.
#pragma once

#include <set>
#include <string>

#include "metalx/runtime/command.h"

namespace metalx {

class ExtensionEncoder final : public rt::ComputeEncoder {
 public:
  explicit ExtensionEncoder(rt::ComputeEncoder& shared) : shared_(shared) {}

  void endEncoding() override;
  bool isEnded() const override { return shared_.isEnded(); }
  void setLabel(const std::string& label) override { shared_.setLabel(label); }

  void setComputePipeline(const rt::ComputePipelinePtr& pipeline) override;
  void setBuffer(const rt::BufferPtr& buffer, size_t offset, uint32_t index) override;
  void setBytes(const void* bytes, size_t length, uint32_t index) override;
  void setThreadgroupMemoryLength(size_t length, uint32_t index) override;
  void dispatchThreads(rt::Size3 threads, rt::Size3 threads_per_threadgroup) override;
  void dispatchThreadgroups(rt::Size3 threadgroups, rt::Size3 threads_per_threadgroup) override;

 private:
  void checkReadyToDispatch() const;

  rt::ComputeEncoder& shared_;
  rt::ComputePipelinePtr pipeline_;
  std::set<uint32_t> buffers_bound_;
  std::set<uint32_t> threadgroup_bound_;
};

}  // namespace metalx
