// Translation of a Metal Shading Language file into C++ the simulator can run.
//
// MSL is C++14 with address-space qualifiers, [[attributes]] and a kernel keyword. The
// prelude (prelude/metal_stdlib) supplies types, functions and empty macros for the
// qualifiers; what a header cannot do is done here, as text edits that keep every line
// where it was (so compiler diagnostics point at the user's own lines):
//   - [[...]] attributes are blanked; the ones that matter (buffer(n), thread position
//     attributes, host_name, max_total_threads_per_threadgroup) are recorded; a
//     buffer or threadgroup pointer without one is numbered by position, as Metal does;
//   - `threadgroup T x[N];` inside a kernel becomes a reference into the group's shared
//     memory, since a plain local would be private to each simulated thread;
//   - function constants become constexpr values of this compile's specialisation,
//     and parameters conditional on one ([[function_constant(x)]]) are bound only
//     when it is true;
//   - with shader validation, `device T*` / `constant T*` types become checked
//     pointers, and with the watchdog every loop iteration starts with a deadline check
//     (run-time compiles only; see TranslateOptions);
//   - after the source, a wrapper per kernel binds arguments from a dispatch, and a
//     registration function lists the kernels with their bindings.
// Before all this, function-like macros that declare kernels are expanded where they
// are invoked (kernel_macros.h), so macro-instantiated kernels are seen.
// It also classifies each kernel: one that reaches a barrier or SIMD-group function
// (directly or through functions of the file) runs on fibers, others as plain loops.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace metalsim {

// A function constant's value for one compile (Metal: MTLFunctionConstantValues),
// given by index or by name, as the MSL type it is given as and a C++ expression of
// that type's value. Each value set compiles the source again, as Metal specialises a
// function when a pipeline is made from it.
struct FunctionConstantValue {
  long index = -1;      // [[function_constant(index)]], or -1 to match by name
  std::string name;     // the constant's name when index is -1
  std::string type;     // "bool", "int", "uint", "float", "half", ...
  std::string literal;  // e.g. "true", "3", "0x1.8p+0"
};

// A `constant T name [[function_constant(i)]];` declaration of the source.
struct FunctionConstantDecl {
  std::string name;
  std::string type;  // as normalised for comparison: "uint", not "unsigned int"
  unsigned index = 0;
};

struct TranslateOptions {
  std::string source_name = "<source>";  // used in #line and in error messages
  std::string entry_name = "metalsim_library_entry";
  std::vector<FunctionConstantValue> function_constants;  // undefined when absent
  // Shader validation (run-time compiles only): device and constant pointer types become
  // checked pointers (prelude/metalsim_prelude/checked.h) bound to their buffer's range.
  bool checked_pointers = false;
  // The kernel watchdog (run-time compiles only): every loop iteration first checks
  // whether the dispatch has passed its deadline.
  bool loop_watchdog = false;
};

struct TranslatedKernel {
  std::string host_name;
  bool uses_sync = false;
};

struct TranslateResult {
  std::string cpp;
  std::vector<TranslatedKernel> kernels;
  std::vector<FunctionConstantDecl> function_constants;
};

// "unsigned int" -> "uint", "int32_t" -> "int", "metal::half" -> "half": the MSL
// spelling a function constant's type is compared in.
std::string normalizeScalarType(const std::string& type);

// A problem in the source the translator itself found; what() reads
// "<source>:LINE: error: ..." like a compiler diagnostic.
class TranslateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

TranslateResult translateMsl(const std::string& source, const TranslateOptions& options);

}  // namespace metalsim
