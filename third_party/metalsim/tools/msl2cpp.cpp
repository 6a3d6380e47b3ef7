// msl2cpp: translates one .metal file to C++ for the simulator (used by the build).
//   metalsim_msl2cpp --entry NAME --source-name NAME -o OUT.cpp IN.metal
#include <fstream>
#include <iostream>
#include <sstream>

#include "translator.h"

int main(int argc, char** argv) {
  metalsim::TranslateOptions opt;
  std::string in, out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--entry" && i + 1 < argc) opt.entry_name = argv[++i];
    else if (a == "--source-name" && i + 1 < argc) opt.source_name = argv[++i];
    else if (a == "-o" && i + 1 < argc) out = argv[++i];
    else in = a;
  }
  if (in.empty() || out.empty()) {
    std::cerr << "usage: msl2cpp --entry NAME --source-name NAME -o OUT.cpp IN.metal\n";
    return 2;
  }
  std::ifstream f(in);
  if (!f) {
    std::cerr << "msl2cpp: cannot read " << in << "\n";
    return 1;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    auto result = metalsim::translateMsl(ss.str(), opt);
    std::ofstream o(out);
    o << result.cpp;
    if (!o) {
      std::cerr << "msl2cpp: cannot write " << out << "\n";
      return 1;
    }
  } catch (const metalsim::TranslateError& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
