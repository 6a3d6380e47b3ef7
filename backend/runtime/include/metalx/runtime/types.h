// Plain value types shared by every part of the runtime interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace metalx::rt {

// A 3-D extent, as MTLSize: grid sizes, threadgroup sizes, threadgroup counts.
struct Size3 {
  uint64_t width = 1, height = 1, depth = 1;
  uint64_t count() const { return width * height * depth; }
  bool operator==(const Size3& o) const {
    return width == o.width && height == o.height && depth == o.depth;
  }
};

// What a device can do. Read from MTLDevice on Apple, configured in the simulator.
struct DeviceInfo {
  std::string name;
  bool is_simulated = false;
  bool has_unified_memory = true;
  uint64_t max_threads_per_threadgroup = 1024;  // over all three dimensions
  Size3 max_threads_per_threadgroup_dims{1024, 1024, 1024};
  uint64_t max_threadgroup_memory_length = 32768;
  uint32_t simd_width = 32;
  uint64_t recommended_max_working_set_size = 0;  // bytes; basis for allocator limits
  uint64_t max_buffer_length = 0;                 // bytes
};

enum class CommandBufferStatus {
  NotEnqueued,  // being encoded
  Committed,    // handed to the queue, waiting for earlier work
  Scheduled,    // running on the device
  Completed,
  Error,
};

const char* statusName(CommandBufferStatus status);

}  // namespace metalx::rt
