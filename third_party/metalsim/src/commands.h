// What a simulated command buffer records: the commands its encoders encoded, in order.
#pragma once

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "metalsim/kernel_abi.h"
#include "metalx/runtime/buffer.h"
#include "metalx/runtime/event.h"

namespace metalsim {

class SimPipeline;

struct DispatchCommand {
  std::shared_ptr<SimPipeline> pipeline;
  kabi::Launch launch{};                  // buffer pointers resolved at execution
  kabi::U3 groups{};                      // threadgroups in the grid
  struct Binding {
    uint32_t index;
    metalx::rt::BufferPtr buffer;         // null for inline bytes
    size_t offset;                        // into buffer, or into inline_bytes
  };
  std::vector<Binding> bindings;          // only the indices the kernel declares
  std::vector<unsigned char> inline_bytes;
  size_t threadgroup_lengths[kabi::kMaxBindings] = {};
  std::string encoder_label;
};

struct CopyCommand {
  metalx::rt::BufferPtr src, dst;
  size_t src_offset, dst_offset, size;
};

struct FillCommand {
  metalx::rt::BufferPtr buffer;
  size_t offset, length;
  uint8_t value;
};

struct WaitCommand {
  metalx::rt::EventPtr event;
  uint64_t value;
};

struct SignalCommand {
  metalx::rt::EventPtr event;
  uint64_t value;
};

using Command = std::variant<DispatchCommand, CopyCommand, FillCommand, WaitCommand, SignalCommand>;

}  // namespace metalsim
