// Translation of a Metal Shading Language file into C++ the simulator can run.
//
// MSL is C++14 with address-space qualifiers, [[attributes]] and a kernel keyword. The
// prelude (prelude/metal_stdlib) supplies types, functions and empty macros for the
// qualifiers; what a header cannot do is done here, as text edits that keep every line
// where it was (so compiler diagnostics point at the user's own lines):
//   - [[...]] attributes are blanked; the ones that matter (buffer(n), thread position
//     attributes, host_name, max_total_threads_per_threadgroup) are recorded;
//   - `threadgroup T x[N];` inside a kernel becomes a reference into the group's shared
//     memory, since a plain local would be private to each simulated thread;
//   - after the source, a wrapper per kernel binds arguments from a dispatch, and a
//     registration function lists the kernels with their bindings.
// It also classifies each kernel: one that reaches a barrier or SIMD-group function
// (directly or through functions of the file) runs on fibers, others as plain loops.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace metalsim {

struct TranslateOptions {
  std::string source_name = "<source>";  // used in #line and in error messages
  std::string entry_name = "metalsim_library_entry";
};

struct TranslatedKernel {
  std::string host_name;
  bool uses_sync = false;
};

struct TranslateResult {
  std::string cpp;
  std::vector<TranslatedKernel> kernels;
};

// A problem in the source the translator itself found; what() reads
// "<source>:LINE: error: ..." like a compiler diagnostic.
class TranslateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

TranslateResult translateMsl(const std::string& source, const TranslateOptions& options);

}  // namespace metalsim
