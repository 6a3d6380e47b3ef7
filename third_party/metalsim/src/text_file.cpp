// Whole-file reads (see text_file.h).
#include "text_file.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace metalsim {

std::optional<std::string> readTextFileIfAny(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string readTextFile(const std::string& path) {
  std::optional<std::string> text = readTextFileIfAny(path);
  if (!text) throw std::runtime_error("metalsim: cannot read " + path);
  return *text;
}

}  // namespace metalsim
