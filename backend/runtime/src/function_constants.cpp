// Function constant values: type names, sizes and the cache key (see library.h).
#include <algorithm>
#include <cstdio>

#include "metalx/runtime/error.h"
#include "metalx/runtime/library.h"

namespace metalx::rt {

const char* functionConstantTypeName(FunctionConstantValue::Type type) {
  using T = FunctionConstantValue::Type;
  switch (type) {
    case T::Bool: return "bool";
    case T::Char: return "char";
    case T::UChar: return "uchar";
    case T::Short: return "short";
    case T::UShort: return "ushort";
    case T::Int: return "int";
    case T::UInt: return "uint";
    case T::Long: return "long";
    case T::ULong: return "ulong";
    case T::Half: return "half";
    case T::BFloat: return "bfloat";
    case T::Float: return "float";
  }
  return "?";
}

size_t functionConstantTypeSize(FunctionConstantValue::Type type) {
  using T = FunctionConstantValue::Type;
  switch (type) {
    case T::Bool: case T::Char: case T::UChar: return 1;
    case T::Short: case T::UShort: case T::Half: case T::BFloat: return 2;
    case T::Int: case T::UInt: case T::Float: return 4;
    case T::Long: case T::ULong: return 8;
  }
  return 0;
}

std::string functionConstantsKey(const FunctionConstantValues& constants) {
  std::vector<std::string> entries;
  for (const FunctionConstantValue& c : constants) {
    if (c.bytes.size() != functionConstantTypeSize(c.type))
      throw Error(ErrorKind::Validation, "function constant " +
                                             (c.index >= 0 ? std::to_string(c.index) : "'" + c.name + "'") +
                                             ": a " + functionConstantTypeName(c.type) + " value has " +
                                             std::to_string(functionConstantTypeSize(c.type)) + " bytes, got " +
                                             std::to_string(c.bytes.size()));
    std::string e = (c.index >= 0 ? "#" + std::to_string(c.index) : c.name) + ":" +
                    functionConstantTypeName(c.type) + "=";
    for (unsigned char b : c.bytes) {
      char hex[3];
      std::snprintf(hex, sizeof hex, "%02x", b);
      e += hex;
    }
    entries.push_back(e);
  }
  std::sort(entries.begin(), entries.end());
  std::string key;
  for (const std::string& e : entries) key += e + ";";
  return key;
}

ComputePipelinePtr Library::newComputePipeline(const std::string& function_name,
                                               const FunctionConstantValues& constants) {
  if (constants.empty()) return newComputePipeline(function_name);
  throw Error(ErrorKind::Unsupported, "this driver's libraries cannot specialise function constants");
}

}  // namespace metalx::rt
