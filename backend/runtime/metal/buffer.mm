// MTLBuffer in shared storage as a metalx buffer (see metal_objects.h).
#include "metal_objects.h"

namespace metalx::rt::metal {

MetalBuffer::MetalBuffer(MetalDevice& device, id<MTLBuffer> buffer, size_t length, bool wraps)
    : device_(device), buffer_(buffer), length_(length), wraps_(wraps) {}

// The device counts a buffer until its wrapper goes; Metal itself keeps the MTLBuffer
// (and a wrapped allocation) until the last command buffer using it completes.
MetalBuffer::~MetalBuffer() { device_.released(length_); }

void* MetalBuffer::contents() { return [buffer_ contents]; }

Device& MetalBuffer::device() { return device_; }

MetalBuffer& checkBuffer(const BufferPtr& buffer, MetalDevice& device, const char* operation,
                         const std::string& where) {
  check(buffer != nullptr, ErrorKind::Validation, std::string(operation) + ": buffer is null");
  auto* metal = dynamic_cast<MetalBuffer*>(buffer.get());
  check(metal && &metal->metalDevice() == &device, ErrorKind::Validation,
        std::string(operation) + ": the buffer belongs to another device than the " + where);
  return *metal;
}

}  // namespace metalx::rt::metal
