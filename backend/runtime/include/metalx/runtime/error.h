// Errors raised by the runtime interface.
//
// Every driver reports misuse the way Metal's API validation layer would, but as a
// C++ exception instead of an abort, so the caller (and ultimately the Python user)
// gets a message naming the problem and the process stays usable.
#pragma once

#include <stdexcept>
#include <string>

namespace metalx::rt {

enum class ErrorKind {
  Validation,    // API misuse: encoding after commit, misaligned blit, bad binding, ...
  OutOfMemory,   // a buffer could not be created
  Compile,       // Metal Shading Language source failed to compile
  NotFound,      // no such device, kernel function or driver
  Execution,     // a command buffer failed while running on the device
  Unsupported,   // the driver cannot do this at all
};

const char* errorKindName(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message)
      : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// Throws Error(kind, message) when `condition` is false. Used for validation rules so
// that each rule reads as one line stating what must hold.
inline void check(bool condition, ErrorKind kind, const std::string& message) {
  if (!condition) throw Error(kind, message);
}

// As check(), for rules checked on every command encoded: `message` is a callable
// returning the text, called only when the rule is broken, so a rule that holds costs a
// comparison instead of building strings.
template <class MessageFn>
inline void checkWith(bool condition, ErrorKind kind, MessageFn&& message) {
  if (!condition) throw Error(kind, message());
}

}  // namespace metalx::rt
