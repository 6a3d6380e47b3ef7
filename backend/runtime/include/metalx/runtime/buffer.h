// Device memory in shared (unified) storage, as MTLBuffer with MTLStorageModeShared.
//
// A buffer plus a byte offset is how tensors address device memory. contents() is a
// CPU address of the same bytes the device reads and writes; the CPU may touch them
// only when no command buffer that uses the buffer is still running.
#pragma once

#include <cstddef>
#include <memory>

namespace metalx::rt {

class Device;

class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual void* contents() = 0;
  virtual size_t length() const = 0;
  virtual Device& device() = 0;
  // True for buffers that wrap caller-owned host memory (Device::wrapHostMemory).
  virtual bool wrapsHostMemory() const = 0;
};

using BufferPtr = std::shared_ptr<Buffer>;

}  // namespace metalx::rt
