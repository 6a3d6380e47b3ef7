// Simulated MTLLibrary and MTLComputePipelineState.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "kernel_registry.h"
#include "metalx/runtime/library.h"

namespace metalsim {

class SimDevice;

class SimPipeline final : public metalx::rt::ComputePipeline {
 public:
  SimPipeline(std::shared_ptr<const KernelSet> kernels, const kabi::KernelInfo* info);
  const std::string& functionName() const override { return name_; }
  uint64_t maxTotalThreadsPerThreadgroup() const override { return max_threads_; }
  uint32_t threadExecutionWidth() const override { return kabi::kSimdWidth; }
  uint64_t staticThreadgroupMemoryLength() const override { return 0; }
  const kabi::KernelInfo& kernel() const { return *info_; }

 private:
  std::shared_ptr<const KernelSet> kernels_;  // keeps a run-time compiled module loaded
  const kabi::KernelInfo* info_;
  std::string name_;
  uint64_t max_threads_;
};

class SimLibrary final : public metalx::rt::Library {
 public:
  SimLibrary(SimDevice& device, std::shared_ptr<const KernelSet> kernels, std::string identity);
  static std::shared_ptr<SimLibrary> builtin(SimDevice& device);

  std::vector<std::string> functionNames() const override;
  bool hasFunction(const std::string& name) const override;
  metalx::rt::ComputePipelinePtr newComputePipeline(const std::string& function_name) override;
  const std::string& identity() const override { return identity_; }

 private:
  SimDevice& device_;
  std::shared_ptr<const KernelSet> kernels_;
  std::string identity_;
};

}  // namespace metalsim
