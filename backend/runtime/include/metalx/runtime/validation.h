// The runtime interface's validation rules, stated once for every driver.
//
// Metal's API validation layer aborts the process on misuse (or, without it, the GPU
// does something undefined); the interface instead throws Error(Validation) naming the
// rule, before anything reaches the driver's API, and leaves the object as it was.
// These helpers hold the rules and their messages once, so both drivers enforce the
// same rules with the same words: the simulator (third_party/metalsim/src) and the
// Metal driver (backend/runtime/metal/) call them before acting.
// tests/runtime/test_validation_rules.cpp checks the running driver against them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "metalx/runtime/command.h"
#include "metalx/runtime/error.h"
#include "metalx/runtime/library.h"
#include "metalx/runtime/types.h"

namespace metalx::rt::validation {

inline std::string dims(Size3 s) {
  return "(" + std::to_string(s.width) + ", " + std::to_string(s.height) + ", " +
         std::to_string(s.depth) + ")";
}

inline std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// Where a rule names the object it checks ("compute encoder 'x' of command buffer 'y'"):
// either that text or a callable returning it. Rules checked per command take the
// callable so the text is built only when a rule is broken.
inline const std::string& describe(const std::string& where) { return where; }
template <class WhereFn>
inline std::string describe(const WhereFn& where) {
  return where();
}

// ------------------------------------------------------------------- device

inline void newBufferLength(size_t length, uint64_t max_buffer_length) {
  check(length > 0, ErrorKind::Validation, "newBuffer: length must be greater than 0");
  check(length <= max_buffer_length, ErrorKind::OutOfMemory,
        "newBuffer: " + std::to_string(length) +
            " bytes is more than the device's maximum buffer length (" +
            mib(max_buffer_length) + ")");
}

inline void hostMemory(const void* ptr, size_t length, size_t page) {
  check(ptr && reinterpret_cast<uintptr_t>(ptr) % page == 0, ErrorKind::Validation,
        "wrapHostMemory: pointer must be aligned to the page size (" + std::to_string(page) +
            " bytes)");
  check(length != 0 && length % page == 0, ErrorKind::Validation,
        "wrapHostMemory: length " + std::to_string(length) +
            " must be a nonzero multiple of the page size (" + std::to_string(page) + ")");
}

// Two threads using one command buffer or encoder at once: Metal does not allow it and
// it corrupts state silently. Every public call of those objects holds a Scope.
class ExclusiveUse {
 public:
  class Scope {
   public:
    Scope(ExclusiveUse& use, const char* what) : use_(use) {
      if (use.busy_.exchange(true, std::memory_order_acquire))
        throw Error(ErrorKind::Validation,
                    std::string(what) +
                        " is being used from two threads at once; Metal command buffers "
                        "and encoders must be encoded by one thread at a time");
    }
    ~Scope() { use_.busy_.store(false, std::memory_order_release); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    ExclusiveUse& use_;
  };

 private:
  std::atomic<bool> busy_{false};
};

// ------------------------------------------------------------------- command buffer

// The encoding-side state of a command buffer: committed or not, which encoder is open,
// whether one was abandoned. A driver's command buffer owns one and asks it first.
class CommandBufferRules {
 public:
  // "command buffer" or "command buffer 'label'".
  std::string describe() const {
    return label.empty() ? std::string("command buffer") : "command buffer '" + label + "'";
  }
  void requireEncoding(const char* operation) const {
    checkWith(!committed, ErrorKind::Validation, [&] {
      return std::string(operation) + ": " + describe() + " was already committed; encode into a new one";
    });
  }
  // Before making an encoder of `kind` ("compute"/"blit"); then call opened().
  void beforeEncoder(const char* operation) const {
    requireEncoding(operation);
    checkWith(!open_encoder, ErrorKind::Validation, [&] {
      return std::string(operation) + ": a " + open_kind + " encoder is still open on " + describe() +
             "; call endEncoding() on it first";
    });
  }
  void opened(const void* encoder, const char* kind) {  // `kind`: a string literal
    open_encoder = encoder;
    open_kind = kind;
  }
  void ended(const void* encoder) {
    if (open_encoder == encoder) open_encoder = nullptr;
  }
  void abandoned(const void* encoder, const std::string& what) {
    if (open_encoder != encoder) return;
    open_encoder = nullptr;
    abandoned_what = what + " was destroyed without endEncoding()";
  }
  // encodeWait / encodeSignal ("an event wait" / "an event signal").
  void beforeEventCommand(const char* operation, const char* what) const {
    requireEncoding(operation);
    checkWith(!open_encoder, ErrorKind::Validation, [&] {
      return std::string(operation) + ": end the open " + open_kind + " encoder before encoding " + what;
    });
  }
  void beforeCommit() const {
    requireEncoding("commit");
    checkWith(!open_encoder, ErrorKind::Validation, [&] {
      return "commit: the " + std::string(open_kind) + " encoder of " + describe() +
             " is still open; call endEncoding() first";
    });
    checkWith(abandoned_what.empty(), ErrorKind::Validation,
              [&] { return "commit: in " + describe() + ", " + abandoned_what; });
  }
  // `was_committed`: read from the command buffer's (atomic) status, since waiting
  // may happen on another thread than encoding.
  void beforeWait(bool was_committed) const {
    checkWith(was_committed, ErrorKind::Validation, [&] {
      return "waitUntilCompleted: " + describe() + " was never committed, so it would never complete";
    });
  }
  // "<describe()> failed: <reason>", the error() text of a failed command buffer.
  std::string failure(const std::string& reason) const { return describe() + " failed: " + reason; }

  std::string label;
  bool committed = false;
  const void* open_encoder = nullptr;
  const char* open_kind = "";
  std::string abandoned_what;
};

// ------------------------------------------------------------------- encoders

// "compute encoder 'label' of command buffer 'x'"
inline std::string encoderWhere(const char* kind, const std::string& label,
                                const std::string& command_buffer) {
  std::string s = std::string(kind) + " encoder";
  if (!label.empty()) s += " '" + label + "'";
  return s + " of " + command_buffer;
}

// `where`: the encoder's description, or a callable returning it (see describe()).
template <class Where>
inline void requireOpen(bool ended, const char* operation, const Where& where) {
  checkWith(!ended, ErrorKind::Validation, [&] {
    return std::string(operation) + ": the " + describe(where) + " has already ended (endEncoding)";
  });
}

inline void bindingIndex(uint32_t index, uint32_t limit, const char* operation) {
  checkWith(index < limit, ErrorKind::Validation, [&] {
    return std::string(operation) + ": index " + std::to_string(index) + " is out of range (Metal has slots 0-" +
           std::to_string(limit - 1) + ")";
  });
}

inline void bufferOffset(size_t offset, size_t length, uint32_t index) {
  checkWith(offset <= length, ErrorKind::Validation, [&] {
    return "setBuffer: offset " + std::to_string(offset) + " is past the end of the buffer (" +
           std::to_string(length) + " bytes) at index " + std::to_string(index);
  });
}

inline void inlineBytes(size_t length) {
  checkWith(length > 0 && length <= kMaxInlineBytes, ErrorKind::Validation, [&] {
    return "setBytes: length " + std::to_string(length) + " must be between 1 and 4096 bytes; use a buffer for more";
  });
}

inline void threadgroupMemoryLength(size_t length, size_t device_limit) {
  checkWith(length % 16 == 0, ErrorKind::Validation, [&] {
    return "setThreadgroupMemoryLength: length " + std::to_string(length) + " must be a multiple of 16 bytes";
  });
  checkWith(length <= device_limit, ErrorKind::Validation, [&] {
    return "setThreadgroupMemoryLength: " + std::to_string(length) + " bytes is more than the device's " +
           std::to_string(device_limit);
  });
}

// What a compute encoder has bound, for dispatch validation.
// Buffer indices as bit masks (bit i: [[buffer(i)]]), so a dispatch checks them all
// at once.
struct Bindings {
  static_assert(kMaxBufferBindings <= 32, "buffer binding masks are 32 bits");
  uint32_t bound = 0;
  uint32_t since_pipeline = 0;  // bound after the current pipeline was set
  size_t threadgroup_lengths[kMaxThreadgroupMemoryBindings] = {};

  void pipelineSet() { since_pipeline = 0; }
  void bufferBound(uint32_t index) {
    bound |= 1u << index;
    since_pipeline |= 1u << index;
  }
  bool isBound(uint32_t index) const { return (bound >> index) & 1u; }
};

inline uint64_t groupsFor(uint64_t threads, uint64_t per_group) {
  return per_group ? (threads + per_group - 1) / per_group : 0;
}

// Checks a dispatch of `threads` in groups of `per_group` with `pipeline` (null if none
// is set) against what is bound. Returns false when there is nothing to run (an empty
// grid), true when the dispatch may go to the device. `where`: the encoder's
// description or a callable returning it (see describe()).
template <class Where>
inline bool dispatch(const ComputePipeline* pipeline, Size3 threads, Size3 per_group,
                     const Bindings& bound, uint64_t device_threadgroup_memory,
                     const Where& where) {
  checkWith(pipeline != nullptr, ErrorKind::Validation,
            [&] { return "dispatch: no compute pipeline is set on the " + describe(where); });
  auto kname = [&] { return "kernel '" + pipeline->functionName() + "'"; };
  checkWith(per_group.width && per_group.height && per_group.depth, ErrorKind::Validation, [&] {
    return "dispatch of " + kname() + ": threadgroup size " + dims(per_group) + " has a zero dimension";
  });
  const uint64_t max_threads = pipeline->maxTotalThreadsPerThreadgroup();
  checkWith(per_group.count() <= max_threads, ErrorKind::Validation, [&] {
    return "dispatch of " + kname() + ": " + std::to_string(per_group.count()) + " threads per threadgroup " +
           dims(per_group) + " is more than the pipeline's maximum of " + std::to_string(max_threads);
  });
  const uint64_t u32 = 0xffffffffull;
  checkWith(threads.width <= u32 && threads.height <= u32 && threads.depth <= u32, ErrorKind::Validation, [&] {
    return "dispatch of " + kname() + ": grid " + dims(threads) + " has a dimension of 2^32 threads or more";
  });
  if (threads.count() == 0) return false;

  uint32_t declared = 0;
  uint64_t tg_total = 0;
  for (const KernelArgument& a : pipeline->arguments()) {
    if (a.kind == KernelArgument::Kind::Buffer) {
      if (a.index >= kMaxBufferBindings) continue;
      declared |= 1u << a.index;
      checkWith(bound.isBound(a.index), ErrorKind::Validation, [&] {
        return "dispatch of " + kname() + ": nothing is bound at [[buffer(" + std::to_string(a.index) +
               ")]] (parameter '" + a.name + "')";
      });
    } else if (a.index < kMaxThreadgroupMemoryBindings) {
      checkWith(bound.threadgroup_lengths[a.index] != 0, ErrorKind::Validation, [&] {
        return "dispatch of " + kname() + ": no threadgroup memory length is set for [[threadgroup(" +
               std::to_string(a.index) + ")]] (parameter '" + a.name + "')";
      });
      tg_total += bound.threadgroup_lengths[a.index];
    }
  }
  const uint32_t undeclared = bound.bound & bound.since_pipeline & ~declared;
  checkWith(undeclared == 0, ErrorKind::Validation, [&] {
    uint32_t i = 0;
    while (!((undeclared >> i) & 1u)) ++i;  // the lowest such index
    return "dispatch of " + kname() + ": [[buffer(" + std::to_string(i) +
           ")]] is bound but the kernel declares no such argument";
  });
  const uint64_t tg_static = pipeline->staticThreadgroupMemoryLength();
  checkWith(tg_total + tg_static <= device_threadgroup_memory, ErrorKind::Validation, [&] {
    return "dispatch of " + kname() + ": " + std::to_string(tg_total + tg_static) + " bytes of threadgroup memory (" +
           std::to_string(tg_total) + " bound, " + std::to_string(tg_static) +
           " declared by the kernel) is more than the device's " + std::to_string(device_threadgroup_memory);
  });
  return true;
}

// ------------------------------------------------------------------- blits

inline void blitAligned(size_t value, const char* what, const char* operation) {
  checkWith(value % 4 == 0, ErrorKind::Validation, [&] {
    return std::string(operation) + ": " + what + " (" + std::to_string(value) +
           ") must be a multiple of 4 bytes, as Metal requires on macOS";
  });
}

inline void blitInside(size_t offset, size_t size, size_t length, const char* which,
                       const char* operation) {
  checkWith(offset <= length && size <= length - offset, ErrorKind::Validation, [&] {
    return std::string(operation) + ": bytes [" + std::to_string(offset) + ", " + std::to_string(offset + size) +
           ") are outside the " + which + " buffer (" + std::to_string(length) + " bytes)";
  });
}

// `same_buffer`: source and destination are one buffer. Returns false for an empty
// copy (nothing to encode).
inline bool copy(size_t src_offset, size_t src_length, size_t dst_offset, size_t dst_length,
                 size_t size, bool same_buffer) {
  const char* op = "copyBuffer";
  blitAligned(src_offset, "source offset", op);
  blitAligned(dst_offset, "destination offset", op);
  blitAligned(size, "size", op);
  blitInside(src_offset, size, src_length, "source", op);
  blitInside(dst_offset, size, dst_length, "destination", op);
  checkWith(!(same_buffer && size > 0 && src_offset < dst_offset + size && dst_offset < src_offset + size),
            ErrorKind::Validation,
            [] { return std::string("copyBuffer: source and destination ranges overlap in the same buffer"); });
  return size > 0;
}

inline void fill(size_t offset, size_t length, size_t buffer_length) {
  const char* op = "fillBuffer";
  checkWith(length > 0, ErrorKind::Validation, [] { return std::string("fillBuffer: length must be greater than 0"); });
  blitAligned(offset, "offset", op);
  blitAligned(length, "length", op);
  blitInside(offset, length, buffer_length, "filled", op);
}

// Metal blits of 2 GiB or more have failed silently (pytorch/pytorch MPS history):
// every blit is encoded as chunks of at most this many bytes (a multiple of 4).
constexpr size_t kMaxBlitChunk = size_t(1) << 30;

// ------------------------------------------------------------------- libraries

// "no kernel function 'x' in library L (it has: a, b, ...)"
inline std::string unknownFunction(const std::string& name, const std::string& library,
                                   const std::vector<std::string>& known) {
  std::string list;
  size_t shown = 0;
  for (auto& k : known) {
    if (shown++ == 12) {
      list += ", ...";
      break;
    }
    list += (list.empty() ? "" : ", ") + k;
  }
  return "no kernel function '" + name + "' in library " + library +
         " (it has: " + (list.empty() ? "none" : list) + ")";
}

// Compiler diagnostics name the source "program_source" on Metal; the interface
// promises the caller's name (CompileOptions::source_name) with the same line numbers.
inline std::string renameSource(std::string diagnostics, const std::string& from,
                                const std::string& to) {
  if (from.empty() || from == to) return diagnostics;
  for (size_t at = diagnostics.find(from); at != std::string::npos;
       at = diagnostics.find(from, at + to.size()))
    diagnostics.replace(at, from.size(), to);
  return diagnostics;
}

}  // namespace metalx::rt::validation
