// MTLDevice as a metalx device: limits, shared-storage buffers, queues, events and
// libraries (see metal_objects.h).
#include "metal_objects.h"

namespace metalx::rt::metal {

std::string toString(NSString* s) { return s ? std::string([s UTF8String]) : std::string(); }

NSString* toNSString(const std::string& s) { return [NSString stringWithUTF8String:s.c_str()]; }

std::string describeNSError(NSError* error) {
  return error ? toString([error localizedDescription]) : std::string();
}

MetalDevice::MetalDevice(int index, id<MTLDevice> device) : index_(index), device_(device) {
  @autoreleasepool {
    // One listener (and its serial dispatch queue) per device runs every notify():
    // callbacks never run on the thread that signalled, and run one at a time.
    dispatch_queue_t queue = dispatch_queue_create("org.metalx.event-listener", DISPATCH_QUEUE_SERIAL);
    listener_ = [[MTLSharedEventListener alloc] initWithDispatchQueue:queue];

    info_.name = toString([device_ name]);
    info_.is_simulated = false;
    info_.has_unified_memory = [device_ hasUnifiedMemory];
    MTLSize dims = [device_ maxThreadsPerThreadgroup];
    info_.max_threads_per_threadgroup_dims = {dims.width, dims.height, dims.depth};
    // Apple GPUs allow 1024 threads per threadgroup in total over the three dimensions
    // (the per-dimension maximum is also 1024), so the total is the width's bound.
    info_.max_threads_per_threadgroup = dims.width;
    info_.max_threadgroup_memory_length = [device_ maxThreadgroupMemoryLength];
    // The SIMD-group width is a pipeline property on Metal (threadExecutionWidth); it
    // is 32 on every Apple GPU, which kernels/*.metal assume.
    info_.simd_width = 32;
    info_.recommended_max_working_set_size = [device_ recommendedMaxWorkingSetSize];
    info_.max_buffer_length = [device_ maxBufferLength];
  }
}

BufferPtr MetalDevice::newBuffer(size_t length) {
  validation::newBufferLength(length, info_.max_buffer_length);
  @autoreleasepool {
    // Shared storage: the CPU and the GPU see the same bytes (unified memory). Metal
    // clears a new buffer to zeros.
    id<MTLBuffer> buffer = [device_ newBufferWithLength:length
                                                options:MTLResourceStorageModeShared];
    if (!buffer)
      throw Error(ErrorKind::OutOfMemory,
                  "newBuffer: " + std::to_string(length) + " bytes do not fit: " +
                      validation::mib(allocated_.load()) + " are in use on " + info_.name +
                      " (recommended working set " +
                      validation::mib(info_.recommended_max_working_set_size) + ")");
    allocated_ += length;
    return std::make_shared<MetalBuffer>(*this, buffer, length, false);
  }
}

BufferPtr MetalDevice::wrapHostMemory(void* ptr, size_t length, std::function<void()> deallocator) {
  validation::hostMemory(ptr, length, hostPageSize());
  @autoreleasepool {
    // Metal calls the deallocator when it releases the MTLBuffer: after the wrapper is
    // gone and every command buffer that used it has completed.
    auto owned = std::make_shared<std::function<void()>>(std::move(deallocator));
    id<MTLBuffer> buffer =
        [device_ newBufferWithBytesNoCopy:ptr
                                   length:length
                                  options:MTLResourceStorageModeShared
                              deallocator:^(void* pointer, NSUInteger bytes) {
                                (void)pointer;
                                (void)bytes;
                                if (*owned) (*owned)();
                              }];
    if (!buffer)
      throw Error(ErrorKind::OutOfMemory,
                  "wrapHostMemory: Metal could not wrap " + std::to_string(length) +
                      " bytes of host memory");
    allocated_ += length;
    return std::make_shared<MetalBuffer>(*this, buffer, length, true);
  }
}

CommandQueuePtr MetalDevice::newCommandQueue() {
  @autoreleasepool {
    id<MTLCommandQueue> queue = [device_ newCommandQueue];
    if (!queue) throw Error(ErrorKind::OutOfMemory, "newCommandQueue: Metal returned no queue");
    return std::make_shared<MetalQueue>(*this, queue);
  }
}

EventPtr MetalDevice::newEvent() {
  @autoreleasepool {
    id<MTLSharedEvent> event = [device_ newSharedEvent];
    if (!event) throw Error(ErrorKind::OutOfMemory, "newEvent: Metal returned no event");
    return std::make_shared<MetalEvent>(*this, event);
  }
}

}  // namespace metalx::rt::metal
