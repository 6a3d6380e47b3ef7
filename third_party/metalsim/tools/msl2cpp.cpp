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

#include "msl_preprocess.h"
#include "text_file.h"
#include "translator.h"

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
    std::string source = metalsim::readTextFile(in);
    if (!cpp.empty()) source = metalsim::preprocessMsl(source, in, cpp, prelude, cpp_flags, out);
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
