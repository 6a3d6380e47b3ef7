// Calling C++ from the Python bindings: runtime errors (metalx::rt::Error) and c10
// errors become Python exceptions with their message and without a C++ backtrace.
#pragma once

#include <torch/csrc/Exceptions.h>
#include <torch/csrc/utils/pybind.h>

namespace metalx {

template <class F>
auto translated(F&& f) {
  HANDLE_TH_ERRORS
  return f();
  END_HANDLE_TH_ERRORS_PYBIND
}

}  // namespace metalx
