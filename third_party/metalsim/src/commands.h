// What a simulated command buffer records: the commands its encoders encoded, in order.
#pragma once

#include <atomic>
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
  // User-provided, so that making one in place (value-initialisation) does not zero the
  // whole command first: only the members with initialisers below are set.
  DispatchCommand() {}  // NOLINT(modernize-use-equals-default)
  // The pipeline and buffers are kept alive by the command buffer, which retains each
  // distinct one once (SimCommandBuffer::retain): no reference count per command.
  SimPipeline* pipeline = nullptr;
  // Not zeroed here: the encoder sets the grid, and the buffer pointers are resolved
  // (the rest zeroed) at execution, on the queue's thread (runDispatch).
  kabi::Launch launch;
  kabi::U3 groups{};                      // threadgroups in the grid
  struct Binding {
    uint32_t index;
    metalx::rt::Buffer* buffer;           // null for inline bytes
    size_t offset;                        // into buffer, or into inline_bytes
    size_t length;                        // bytes of inline data (0 for a buffer)
  };
  // The bindings of the indices the kernel declares: the first kInlineBindings in the
  // command itself (every elementwise and most other kernels take fewer), so recording
  // a dispatch allocates nothing for them; the rest, if any, in more_bindings.
  static constexpr uint32_t kInlineBindings = 8;
  Binding inline_bindings[kInlineBindings];
  std::vector<Binding> more_bindings;
  uint32_t binding_count = 0;
  // Field by field into its place: a Binding built elsewhere and copied in is read back
  // with wider loads than it was written with, which stalls store forwarding.
  void addBinding(uint32_t index, metalx::rt::Buffer* buffer, size_t offset, size_t length) {
    Binding& b = binding_count < kInlineBindings ? inline_bindings[binding_count] : more_bindings.emplace_back();
    b.index = index;
    b.buffer = buffer;
    b.offset = offset;
    b.length = length;
    ++binding_count;
  }
  Binding& binding(uint32_t i) { return i < kInlineBindings ? inline_bindings[i] : more_bindings[i - kInlineBindings]; }
  const Binding& binding(uint32_t i) const {
    return i < kInlineBindings ? inline_bindings[i] : more_bindings[i - kInlineBindings];
  }
  // setBytes data, each at a 16-byte aligned offset: in small_bytes when it fits (most
  // kernels take a few scalars), so recording a dispatch allocates nothing for them.
  static constexpr size_t kSmallBytes = 128;
  alignas(16) unsigned char small_bytes[kSmallBytes];
  std::vector<unsigned char> large_bytes;
  size_t inline_size = 0;
  unsigned char* inlineBytes() { return inline_size <= kSmallBytes ? small_bytes : large_bytes.data(); }
  // [[threadgroup(n)]] lengths, read through threadgroupLength(): only a kernel that
  // declares such arguments pays for writing the table.
  bool has_threadgroup_lengths = false;
  size_t threadgroup_lengths[kabi::kMaxBindings];
  size_t threadgroupLength(uint32_t i) const { return has_threadgroup_lengths ? threadgroup_lengths[i] : 0; }
  // For checked (run-time compiled) kernels with the watchdog on, while the dispatch
  // runs: whether it has passed its deadline.
  const std::atomic<bool>* expired = nullptr;
  std::string encoder_label;
  void releaseReferences() {}  // the command buffer holds them
};

struct CopyCommand {
  metalx::rt::BufferPtr src, dst;
  size_t src_offset, dst_offset, size;
  void releaseReferences() { src.reset(), dst.reset(); }
};

struct FillCommand {
  metalx::rt::BufferPtr buffer;
  size_t offset, length;
  uint8_t value;
  void releaseReferences() { buffer.reset(); }
};

struct WaitCommand {
  metalx::rt::EventPtr event;
  uint64_t value;
  void releaseReferences() { event.reset(); }
};

struct SignalCommand {
  metalx::rt::EventPtr event;
  uint64_t value;
  void releaseReferences() { event.reset(); }
};

using Command = std::variant<DispatchCommand, CopyCommand, FillCommand, WaitCommand, SignalCommand>;

}  // namespace metalsim
