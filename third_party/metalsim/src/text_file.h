// Reading a whole file as text: the translator tool, the preprocessor pass and the
// run-time compiler all need it.
#pragma once

#include <optional>
#include <string>

namespace metalsim {

// The file's bytes; throws std::runtime_error naming `path` when it cannot be read.
std::string readTextFile(const std::string& path);

// The file's bytes, or nullopt when it cannot be read (a cache entry another process
// just replaced or removed is not an error).
std::optional<std::string> readTextFileIfAny(const std::string& path);

}  // namespace metalsim
