// Run-time compilation of Metal Shading Language source for the simulator.
//
// The source is translated to C++, compiled by the host C++ compiler into a shared
// object and loaded. Results are cached on disk (METALSIM_CACHE_DIR, bounded by
// METALSIM_CACHE_MB), keyed by the translated source, the compiler and its flags and
// the prelude, so a shader is compiled once per machine, not once per process.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "metalx/runtime/library.h"

namespace metalsim {

class SimDevice;
class KernelSet;

metalx::rt::LibraryPtr compileShaderLibrary(SimDevice& device, const std::string& source,
                                            const metalx::rt::CompileOptions& options);

// The built-in kernels compiled again from their sources (every *.metal in
// `source_dir`) with shader validation, for METALSIM_SHADER_VALIDATION=all. Throws
// Error(Compile) naming the file that failed.
std::shared_ptr<const KernelSet> compileBuiltinKernelsWithValidation(const std::string& source_dir);

// Deletes the least recently written compiled kernels in `dir` until the cache holds
// at most `max_bytes`.
void trimKernelCache(const std::string& dir, uint64_t max_bytes);

// Where the prelude and the kernel ABI header are found at run time.
struct PreludePaths {
  std::string prelude_dir;  // holds metal_stdlib
  std::string include_dir;  // holds metalsim/kernel_abi.h
};
const PreludePaths& preludePaths();

}  // namespace metalsim
