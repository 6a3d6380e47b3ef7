// The C preprocessor pass over MSL (see msl_preprocess.h).
#include "msl_preprocess.h"

#include "text_file.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace metalsim {
namespace {

std::string directoryOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string shellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The headers of Metal's standard library a kernel file may include; the preprocessor
// pass sees empty ones (see the top of this file).
const char* const kMetalHeaders[] = {
    "metal_stdlib", "metal_math", "metal_common", "metal_integer", "metal_relational",
    "metal_geometric", "metal_compute", "metal_atomic", "metal_simdgroup",
    "metal_simdgroup_matrix", "metal_types", "metal_type_traits", "metal_limits",
    "metal_numeric", "metal_matrix", "metal_pack", "metal_utility", "metal_array"};

// `source` (read from `path`) through `cpp`'s preprocessor; linemarkers name the
// original file, so the compiler's diagnostics point into it and its headers.
}  // namespace

std::string preprocessMsl(const std::string& source, const std::string& path, const std::string& cpp,
                          const std::string& prelude, const std::vector<std::string>& flags,
                          const std::string& scratch) {
  const std::string stubs = scratch + ".metal_headers";
  const std::string input = scratch + ".in.metal";
  const std::string output = scratch + ".i";
  if (std::system(("mkdir -p " + shellQuote(stubs)).c_str()) != 0)
    throw std::runtime_error("metalsim: cannot create " + stubs);
  for (const char* h : kMetalHeaders) std::ofstream(stubs + "/" + h);
  std::ofstream(stubs + "/metal_stdlib") << "#include \"" << prelude << "/metalsim_prelude/target.h\"\n";
  {
    std::ofstream o(input);
    o << source;
    if (!o) throw std::runtime_error("metalsim: cannot write " + input);
  }
  // -nostdinc: MSL has no C++ standard library; a stray <vector> must fail here, not
  // compile against the host's. No __METAL_VERSION__: kernels test it to tell Apple's
  // compiler from the simulator.
  std::string cmd = shellQuote(cpp) + " -E -x c++ -std=c++17 -nostdinc";
  for (const std::string& f : flags) cmd += " " + shellQuote(f);
  cmd += " -iquote " + shellQuote(directoryOf(path)) + " -isystem " + shellQuote(stubs) + " " + shellQuote(input) +
         " -o " + shellQuote(output);
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("metalsim: preprocessing " + path + " failed");
  std::string text = readTextFile(output);
  std::remove(input.c_str());
  std::remove(output.c_str());
  // Linemarkers name the scratch copy; name the real file instead. The empty stand-ins
  // for Metal's headers are named by their header name alone: a path under `scratch`
  // would make the output differ between build folders and processes, and so miss
  // every compiler cache (ccache) and kernel cache keyed on it.
  auto rename = [&text](const std::string& from, const std::string& to) {
    for (size_t p = text.find(from); p != std::string::npos; p = text.find(from, p + to.size()))
      text.replace(p, from.size(), to);
  };
  rename("\"" + input + "\"", "\"" + path + "\"");
  rename("\"" + stubs + "/", "\"");
  return text;
}


}  // namespace metalsim
