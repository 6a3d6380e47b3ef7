// Inlining of a shader's own #include files (see include_expander.h).
#include "metalx/runtime/include_expander.h"

#include <sys/stat.h>

#include <fstream>
#include <set>
#include <sstream>

#include "metalx/runtime/error.h"

namespace metalx::rt {
namespace {

constexpr int kMaxDepth = 64;

bool isFile(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The path inside <...> or "..." of an #include line, or "" if the line is not one.
std::string includedPath(const std::string& line, bool* quoted_form) {
  size_t p = line.find_first_not_of(" \t");
  if (p == std::string::npos || line[p] != '#') return "";
  p = line.find_first_not_of(" \t", p + 1);
  if (p == std::string::npos || line.compare(p, 7, "include") != 0) return "";
  p = line.find_first_of("<\"", p + 7);
  if (p == std::string::npos) return "";
  *quoted_form = line[p] == '"';
  size_t e = line.find(line[p] == '<' ? '>' : '"', p + 1);
  return e == std::string::npos ? "" : line.substr(p + 1, e - p - 1);
}

bool isPragmaOnce(const std::string& line) {
  std::istringstream words(line);
  std::string a, b;
  words >> a;
  if (a == "#") words >> a, a = "#" + a;
  words >> b;
  return a == "#pragma" && b == "once";
}

std::string quoted(const std::string& name) {
  std::string q = "\"";
  for (char c : name) q += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return q + "\"";
}

class Expander {
 public:
  explicit Expander(const std::vector<std::string>& dirs) : dirs_(dirs) {}

  std::string expand(const std::string& text, const std::string& name, int depth) {
    std::ostringstream out;
    std::istringstream lines(text);
    std::string line;
    size_t number = 0;
    while (std::getline(lines, line)) {
      ++number;
      bool quoted_form = false;
      std::string path = includedPath(line, &quoted_form);
      std::string file = path.empty() ? "" : resolve(path, quoted_form ? name : "");
      if (file.empty()) {
        out << (isPragmaOnce(line) ? "" : line) << '\n';
        continue;
      }
      if (done_.insert(file).second) {
        if (depth >= kMaxDepth)
          throw Error(ErrorKind::Compile, name + ":" + std::to_string(number) + ": error: #include nested more than " +
                               std::to_string(kMaxDepth) + " deep at '" + path + "'");
        std::ifstream f(file, std::ios::binary);
        std::stringstream ss;
        ss << f.rdbuf();
        if (!f && !f.eof())
          throw Error(ErrorKind::Compile, name + ":" + std::to_string(number) + ": error: cannot read " + file);
        out << "#line 1 " << quoted(file) << '\n' << expand(ss.str(), file, depth + 1);
      }
      out << "#line " << number + 1 << ' ' << quoted(name) << '\n';
    }
    return out.str();
  }

 private:
  // `#include "x"` looks beside the including header first (as C does); then, as
  // `#include <x>` does, in the directories in order.
  std::string resolve(const std::string& path, const std::string& includer) const {
    if (path.empty() || path[0] == '/') return "";
    size_t slash = includer.rfind('/');
    if (slash != std::string::npos && isFile(includer.substr(0, slash) + "/" + path))
      return includer.substr(0, slash) + "/" + path;
    for (const std::string& d : dirs_)
      if (!d.empty() && isFile(d + "/" + path)) return d + "/" + path;
    return "";
  }

  const std::vector<std::string>& dirs_;
  std::set<std::string> done_;
};

}  // namespace

std::string expandIncludes(const std::string& source, const std::string& source_name,
                           const std::vector<std::string>& include_dirs) {
  if (include_dirs.empty()) return source;
  return Expander(include_dirs).expand(source, source_name, 0);
}

}  // namespace metalx::rt
