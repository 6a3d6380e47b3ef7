// Simulated device memory: buffers in shared storage (ordinary host memory).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>

#include "metalx/runtime/buffer.h"

namespace metalsim {

class SimDevice;

class SimBuffer final : public metalx::rt::Buffer {
 public:
  // Owns fresh memory of `length` bytes.
  SimBuffer(SimDevice& device, size_t length);
  // Wraps caller memory (newBufferWithBytesNoCopy); `deallocator` runs on destruction.
  SimBuffer(SimDevice& device, void* ptr, size_t length, std::function<void()> deallocator);
  ~SimBuffer() override;

  void* contents() override { return data_; }
  size_t length() const override { return length_; }
  metalx::rt::Device& device() override;
  bool wrapsHostMemory() const override { return static_cast<bool>(deallocator_) || !owned_; }
  SimDevice& simDevice() { return device_; }

 private:
  SimDevice& device_;
  void* data_ = nullptr;
  size_t length_ = 0;
  size_t mapped_ = 0;  // nonzero when data_ came from mmap
  bool owned_ = true;
  std::function<void()> deallocator_;
};

}  // namespace metalsim
