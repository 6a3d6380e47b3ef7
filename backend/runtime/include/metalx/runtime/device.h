// A GPU, as MTLDevice, and the entry point to everything else in the interface.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "metalx/runtime/buffer.h"
#include "metalx/runtime/command.h"
#include "metalx/runtime/event.h"
#include "metalx/runtime/library.h"
#include "metalx/runtime/types.h"

namespace metalx::rt {

// Every Device method may be called from any thread at any time (autograd, DataLoader
// workers and user threads all allocate); drivers make them thread-safe. Zero-length
// buffers do not exist on Metal (newBuffer rejects them), so callers represent empty
// storage without a buffer.
class Device {
 public:
  virtual ~Device() = default;

  virtual int index() const = 0;
  virtual const DeviceInfo& info() const = 0;

  // A zero-length request is rejected; a request above info().max_buffer_length or
  // one the system cannot satisfy throws Error(OutOfMemory).
  virtual BufferPtr newBuffer(size_t length) = 0;
  // Wraps caller-owned host memory without copying (newBufferWithBytesNoCopy). `ptr`
  // must be page-aligned and `length` a multiple of the page size. `deallocator` runs
  // when the buffer is destroyed.
  virtual BufferPtr wrapHostMemory(void* ptr, size_t length,
                                   std::function<void()> deallocator) = 0;
  // Bytes currently held by buffers this device created (MTLDevice.currentAllocatedSize).
  virtual size_t currentAllocatedSize() const = 0;

  virtual CommandQueuePtr newCommandQueue() = 0;
  virtual EventPtr newEvent() = 0;

  virtual LibraryPtr builtinLibrary() = 0;
  // Compiles Metal Shading Language source. Throws Error(Compile) whose message holds
  // the compiler's diagnostics with line numbers of `source` itself.
  virtual LibraryPtr compileLibrary(const std::string& source,
                                    const CompileOptions& options = {}) = 0;
};

using DevicePtr = std::shared_ptr<Device>;

// The page size host memory must be aligned to for Device::wrapHostMemory.
size_t hostPageSize();

}  // namespace metalx::rt
