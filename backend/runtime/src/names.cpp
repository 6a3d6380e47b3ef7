// Human-readable names for the interface's enums, used in error messages.
#include "metalx/runtime/error.h"
#include "metalx/runtime/types.h"

namespace metalx::rt {

const char* errorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Validation: return "validation error";
    case ErrorKind::OutOfMemory: return "out of memory";
    case ErrorKind::Compile: return "compile error";
    case ErrorKind::NotFound: return "not found";
    case ErrorKind::Execution: return "execution error";
    case ErrorKind::Unsupported: return "unsupported";
  }
  return "error";
}

const char* statusName(CommandBufferStatus status) {
  switch (status) {
    case CommandBufferStatus::NotEnqueued: return "not enqueued";
    case CommandBufferStatus::Committed: return "committed";
    case CommandBufferStatus::Scheduled: return "scheduled";
    case CommandBufferStatus::Completed: return "completed";
    case CommandBufferStatus::Error: return "error";
  }
  return "unknown";
}

}  // namespace metalx::rt
