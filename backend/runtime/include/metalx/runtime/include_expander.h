// Inlining of a shader's own #include files before it is compiled
// (CompileOptions::include_dirs).
//
// Metal compiles source at run time with no include path, and the simulator's
// translator works on one text: a kernel, or a function that reaches a barrier or
// SIMD-group function, defined in a header the shader includes (PyTorch's
// <c10/metal/reduction_utils.h>, say) must be part of that text for the translator to
// register or classify it. So `#include <x>` / `#include "x"` whose file is found in
// one of the given directories is replaced by that file's text (once per file, as
// `#pragma once` and include guards would have it), framed by #line directives so
// diagnostics still name the header and its lines. `#include "x"` in a header also
// finds x beside that header. Includes not found there
// (<metal_stdlib>, the split MSL headers, anything conditional on not being Metal)
// stay for the host compiler, which sees the prelude's directory.
#pragma once

#include <string>
#include <vector>

namespace metalx::rt {

// Throws Error(Compile) for an include cycle deeper than the nesting limit or an
// unreadable file.
std::string expandIncludes(const std::string& source, const std::string& source_name,
                           const std::vector<std::string>& include_dirs);

}  // namespace metalx::rt
