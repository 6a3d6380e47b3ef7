// A simulated GPU.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>

#include "metalx/runtime/device.h"

namespace metalsim {

class KernelRegistry;

class SimDevice final : public metalx::rt::Device,
                        public std::enable_shared_from_this<SimDevice> {
 public:
  explicit SimDevice(int index);

  int index() const override { return index_; }
  const metalx::rt::DeviceInfo& info() const override { return info_; }

  metalx::rt::BufferPtr newBuffer(size_t length) override;
  metalx::rt::BufferPtr wrapHostMemory(void* ptr, size_t length,
                                       std::function<void()> deallocator) override;
  size_t currentAllocatedSize() const override { return allocated_.load(); }

  metalx::rt::CommandQueuePtr newCommandQueue() override;
  metalx::rt::EventPtr newEvent() override;

  metalx::rt::LibraryPtr builtinLibrary() override;
  metalx::rt::LibraryPtr compileLibrary(const std::string& source,
                                        const metalx::rt::CompileOptions& options) override;

  // Called by SimBuffer when it is destroyed.
  void released(size_t length) { allocated_ -= length; }

 private:
  int index_;
  metalx::rt::DeviceInfo info_;
  std::atomic<size_t> allocated_{0};
  std::once_flag builtin_once_;
  metalx::rt::LibraryPtr builtin_;
};

}  // namespace metalsim
