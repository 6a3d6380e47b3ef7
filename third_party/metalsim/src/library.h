// Simulated MTLLibrary and MTLComputePipelineState.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "kernel_registry.h"
#include "metalx/runtime/library.h"

namespace metalsim {

class SimDevice;

class SimPipeline final : public metalx::rt::ComputePipeline {
 public:
  SimPipeline(SimDevice& device, std::shared_ptr<const KernelSet> kernels, const kabi::KernelInfo* info);
  const std::string& functionName() const override { return name_; }
  uint64_t maxTotalThreadsPerThreadgroup() const override { return max_threads_; }
  uint32_t threadExecutionWidth() const override { return kabi::kSimdWidth; }
  // Kernels declare threadgroup variables inside their bodies, with types only the
  // compiler can size; the simulator learns the length the first time the kernel runs
  // (that run fails with a clear message if it is too much) and reports it from then on.
  uint64_t staticThreadgroupMemoryLength() const override;
  const std::vector<metalx::rt::KernelArgument>& arguments() const override { return arguments_; }
  const kabi::KernelInfo& kernel() const { return *info_; }
  SimDevice& device() const { return device_; }
  const KernelSet& kernels() const { return *kernels_; }

 private:
  SimDevice& device_;
  std::shared_ptr<const KernelSet> kernels_;  // keeps a run-time compiled module loaded
  const kabi::KernelInfo* info_;
  std::string name_;
  uint64_t max_threads_;
  std::vector<metalx::rt::KernelArgument> arguments_;
};

class SimLibrary final : public metalx::rt::Library {
 public:
  // Compiles the library's source again with function constant values (null for a
  // library without function constants). Throws Error(Validation) for bad values.
  using Specializer =
      std::function<std::shared_ptr<const KernelSet>(const metalx::rt::FunctionConstantValues&)>;

  SimLibrary(SimDevice& device, std::shared_ptr<const KernelSet> kernels, std::string identity,
             Specializer specialize = nullptr);
  static std::shared_ptr<SimLibrary> builtin(SimDevice& device);

  std::vector<std::string> functionNames() const override;
  bool hasFunction(const std::string& name) const override;
  metalx::rt::ComputePipelinePtr newComputePipeline(const std::string& function_name) override;
  metalx::rt::ComputePipelinePtr newComputePipeline(const std::string& function_name,
                                                    const metalx::rt::FunctionConstantValues& constants) override;
  const std::string& identity() const override { return identity_; }

 private:
  SimDevice& device_;
  std::shared_ptr<const KernelSet> kernels_;
  std::string identity_;
  Specializer specialize_;
  std::mutex specialized_mutex_;
  // Kernel sets per value set (functionConstantsKey), shared by their pipelines.
  std::map<std::string, std::shared_ptr<const KernelSet>> specialized_;
};

}  // namespace metalsim
