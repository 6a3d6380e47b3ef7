// msl2cpp: translates one .metal file to C++ for the simulator (used by the build).
//   metalsim_msl2cpp --entry NAME --source-name NAME
//                    [--cpp COMPILER --prelude DIR [--cpp-flag FLAG]...] -o OUT.cpp IN.metal
//
// With --cpp, the file first goes through the C preprocessor, as Apple's metal compiler
// reads it: quoted #includes of shared headers are resolved next to the file, and
// macros that stamp out kernel instantiations (one line per op and dtype) are expanded,
// so the translator sees every kernel they make. Includes of <metal_...> headers are
// empty in that pass, except for the prelude's target macros (METALSIM_VECTOR_BYTES,
// from DIR/metalsim_prelude/target.h): the prelude provides the rest when the
// translation is compiled, and its macros (kernel, device, thread, ...) must reach the
// translator unexpanded. The --cpp-flags are the kernel build's target flags
// (-march=...), so #if on the target is decided as that build's compile would.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include "translator.h"

namespace {

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("msl2cpp: cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

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
std::string preprocess(const std::string& source, const std::string& path, const std::string& cpp,
                       const std::string& prelude, const std::vector<std::string>& flags,
                       const std::string& scratch) {
  const std::string stubs = scratch + ".metal_headers";
  const std::string input = scratch + ".in.metal";
  const std::string output = scratch + ".i";
  if (std::system(("mkdir -p " + shellQuote(stubs)).c_str()) != 0)
    throw std::runtime_error("msl2cpp: cannot create " + stubs);
  for (const char* h : kMetalHeaders) std::ofstream(stubs + "/" + h);
  std::ofstream(stubs + "/metal_stdlib") << "#include \"" << prelude << "/metalsim_prelude/target.h\"\n";
  {
    std::ofstream o(input);
    o << source;
    if (!o) throw std::runtime_error("msl2cpp: cannot write " + input);
  }
  // -nostdinc: MSL has no C++ standard library; a stray <vector> must fail here, not
  // compile against the host's. No __METAL_VERSION__: kernels test it to tell Apple's
  // compiler from the simulator.
  std::string cmd = shellQuote(cpp) + " -E -x c++ -std=c++17 -nostdinc";
  for (const std::string& f : flags) cmd += " " + shellQuote(f);
  cmd += " -iquote " + shellQuote(directoryOf(path)) + " -isystem " + shellQuote(stubs) + " " + shellQuote(input) +
         " -o " + shellQuote(output);
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("msl2cpp: preprocessing " + path + " failed");
  std::string text = readFile(output);
  std::remove(input.c_str());
  std::remove(output.c_str());
  // Linemarkers name the scratch copy; name the real file instead.
  std::string from = "\"" + input + "\"", to = "\"" + path + "\"";
  for (size_t p = text.find(from); p != std::string::npos; p = text.find(from, p + to.size()))
    text.replace(p, from.size(), to);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  metalsim::TranslateOptions opt;
  std::string in, out, cpp, prelude;
  std::vector<std::string> cpp_flags;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--entry" && i + 1 < argc) opt.entry_name = argv[++i];
    else if (a == "--source-name" && i + 1 < argc) opt.source_name = argv[++i];
    else if (a == "--cpp" && i + 1 < argc) cpp = argv[++i];
    else if (a == "--prelude" && i + 1 < argc) prelude = argv[++i];
    else if (a == "--cpp-flag" && i + 1 < argc) cpp_flags.push_back(argv[++i]);
    else if (a == "-o" && i + 1 < argc) out = argv[++i];
    else in = a;
  }
  if (in.empty() || out.empty() || (!cpp.empty() && prelude.empty())) {
    std::cerr << "usage: msl2cpp --entry NAME --source-name NAME [--cpp COMPILER --prelude DIR [--cpp-flag FLAG]...] "
                 "-o OUT.cpp IN.metal\n";
    return 2;
  }
  try {
    std::string source = readFile(in);
    if (!cpp.empty()) source = preprocess(source, in, cpp, prelude, cpp_flags, out);
    auto result = metalsim::translateMsl(source, opt);
    std::ofstream o(out);
    o << result.cpp;
    if (!o) {
      std::cerr << "msl2cpp: cannot write " << out << "\n";
      return 1;
    }
  } catch (const metalsim::TranslateError& e) {
    std::cerr << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
