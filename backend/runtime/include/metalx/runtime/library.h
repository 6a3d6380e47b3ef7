// Kernel libraries and compute pipelines, as MTLLibrary / MTLComputePipelineState.
//
// The built-in library holds every kernel of kernels/*.metal, compiled when metalx is
// built (a metallib on Apple, C++ through the simulator's prelude elsewhere), so no
// kernel is compiled on first use. A library compiled at run time from Metal Shading
// Language source is how user shaders (torch.metalx.compile_shader) get in.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace metalx::rt {

// A [[buffer(n)]] or [[threadgroup(n)]] argument a kernel declares (Metal: pipeline
// reflection). Lets callers check a call's arguments before dispatching: bindings
// persist across dispatches in an encoder, so a forgotten argument would otherwise
// silently read whatever an earlier kernel bound there.
struct KernelArgument {
  enum class Kind { Buffer, Threadgroup };
  Kind kind;
  uint32_t index;
  std::string name;
};

// A function constant's value for one pipeline (Metal: an entry of
// MTLFunctionConstantValues), for `constant T name [[function_constant(i)]];` in the
// source. Each distinct set of values is its own pipeline (Metal specialises the
// function when the pipeline is made), so PipelineCache keys pipelines by them too.
struct FunctionConstantValue {
  // MTLDataType's scalar types a function constant can have.
  enum class Type { Bool, Char, UChar, Short, UShort, Int, UInt, Long, ULong, Half, BFloat, Float };
  int64_t index = -1;  // [[function_constant(index)]], or -1 to match by name
  std::string name;    // the constant's name in the source when index is -1
  Type type = Type::Bool;
  std::string bytes;   // the value's bytes (little-endian, the type's size)
};
using FunctionConstantValues = std::vector<FunctionConstantValue>;

// "bool", "int", "half", ... (MSL spelling) and the byte size of a constant's type.
const char* functionConstantTypeName(FunctionConstantValue::Type type);
size_t functionConstantTypeSize(FunctionConstantValue::Type type);
// A canonical text of a value set: equal sets (in any order) give equal keys. Throws
// Error(Validation) for a value whose byte count does not match its type.
std::string functionConstantsKey(const FunctionConstantValues& constants);

class ComputePipeline {
 public:
  virtual ~ComputePipeline() = default;
  virtual const std::string& functionName() const = 0;
  // Upper bound for threads in one threadgroup with this pipeline (may be below the
  // device's limit for kernels that need many registers or declare a smaller bound).
  virtual uint64_t maxTotalThreadsPerThreadgroup() const = 0;
  virtual uint32_t threadExecutionWidth() const = 0;  // the SIMD-group width
  virtual uint64_t staticThreadgroupMemoryLength() const = 0;
  // The kernel's buffer and threadgroup arguments, by index.
  virtual const std::vector<KernelArgument>& arguments() const = 0;
};

using ComputePipelinePtr = std::shared_ptr<ComputePipeline>;

class Library {
 public:
  virtual ~Library() = default;
  virtual std::vector<std::string> functionNames() const = 0;
  virtual bool hasFunction(const std::string& name) const = 0;
  // Creates the pipeline for a kernel function; throws Error(NotFound) for an unknown
  // name. Creating pipelines is not free on real Metal: callers go through
  // PipelineCache (pipeline_cache.h) rather than calling this per dispatch.
  virtual ComputePipelinePtr newComputePipeline(const std::string& function_name) = 0;
  // The pipeline of a function specialised with function constant values (Metal:
  // newFunctionWithName:constantValues:error:). With no values it is the plain
  // pipeline; drivers that cannot specialise throw Error(Unsupported). Values for a
  // constant the source does not declare, or of another type, are Error(Validation).
  virtual ComputePipelinePtr newComputePipeline(const std::string& function_name,
                                                const FunctionConstantValues& constants);
  // A stable identity for cache keys (the library's source hash, or "builtin").
  virtual const std::string& identity() const = 0;
};

using LibraryPtr = std::shared_ptr<Library>;

struct CompileOptions {
  // Metal Shading Language version the source is written for, e.g. "3.1".
  std::string language_version = "3.1";
  // Metal's fast math (the default on Apple) reorders float arithmetic; metalx asks for
  // safe math so results match CPU PyTorch as closely as the hardware allows.
  bool fast_math = false;
  // Name used for the source in compile diagnostics ("<source>:12:5: error ...").
  std::string source_name = "<source>";
  // Directories whose headers `#include <...>` / `#include "..."` reach (e.g. the
  // installed torch's include/ for <c10/metal/utils.h>). Their files are inlined into
  // the source before compiling (include_expander.h); other includes are the MSL
  // standard library's.
  std::vector<std::string> include_dirs;
};

}  // namespace metalx::rt
