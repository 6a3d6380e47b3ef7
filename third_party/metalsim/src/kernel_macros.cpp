// Expansion of kernel-generating macros (see kernel_macros.h).
#include "kernel_macros.h"

#include <cctype>
#include <map>
#include <set>
#include <vector>

namespace metalsim {
namespace {

struct Macro {
  std::vector<std::string> params;
  bool variadic = false;
  std::string body;
};

bool identStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool identChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// `s` with comments replaced by spaces (newlines kept); string and character
// literals are kept, and `literal` marks their bytes.
std::string stripComments(const std::string& s, std::vector<bool>* literal) {
  std::string m = s;
  literal->assign(s.size(), false);
  size_t i = 0, n = s.size();
  while (i < n) {
    if (s.compare(i, 2, "//") == 0) {
      for (; i < n && s[i] != '\n'; ++i) m[i] = ' ';
    } else if (s.compare(i, 2, "/*") == 0) {
      size_t e = s.find("*/", i + 2);
      e = e == std::string::npos ? n : e + 2;
      for (; i < e; ++i)
        if (m[i] != '\n') m[i] = ' ';
    } else if (s[i] == '"' || s[i] == '\'') {
      char q = s[i];
      size_t e = i + 1;
      while (e < n && s[e] != q && s[e] != '\n') e += (s[e] == '\\') ? 2 : 1;
      e = std::min(n, e + 1);
      for (size_t k = i; k < e; ++k) (*literal)[k] = true;
      i = e;
    } else {
      ++i;
    }
  }
  return m;
}

// Splits "a, (b, c), d" at top-level commas.
std::vector<std::string> splitArgs(const std::string& s) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quote) {
      cur += c;
      if (c == '\\' && i + 1 < s.size()) cur += s[++i];
      else if (c == quote) quote = 0;
      continue;
    }
    if (c == '"' || c == '\'') quote = c;
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(trim(cur));
  return out;
}

class Expander {
 public:
  explicit Expander(const std::string& src) : src_(src), text_(stripComments(src, &literal_)) {
    parseDefines();
    findKernelMacros();
  }

  std::string run() {
    if (kernel_macros_.empty()) return src_;
    std::string out;
    size_t i = 0, n = text_.size(), copied = 0;
    bool line_start = true;
    while (i < n) {
      char c = text_[i];
      if (c == '\n') {
        line_start = true;
        ++i;
        continue;
      }
      if (line_start && c == '#') {  // a directive (with continuations) is not expanded
        while (i < n && text_[i] != '\n') i += (text_[i] == '\\' && i + 1 < n && text_[i + 1] == '\n') ? 2 : 1;
        continue;
      }
      if (!std::isspace(static_cast<unsigned char>(c))) line_start = false;
      if (literal_[i] || !identStart(c) || (i > 0 && identChar(text_[i - 1]))) {
        ++i;
        continue;
      }
      size_t e = i;
      while (e < n && identChar(text_[e])) ++e;
      std::string name = text_.substr(i, e - i);
      size_t open = text_.find_first_not_of(" \t\r\n", e);
      size_t close = kernel_macros_.count(name) && open != std::string::npos && text_[open] == '('
                         ? matchParen(text_, open)
                         : std::string::npos;
      if (close == std::string::npos) {
        i = e;
        continue;
      }
      std::string expansion = expand(name, splitArgs(text_.substr(open + 1, close - open - 1)), 0);
      size_t newlines = 0;
      for (size_t k = i; k <= close; ++k) newlines += text_[k] == '\n';
      out += src_.substr(copied, i - copied) + expansion + std::string(newlines, '\n');
      copied = i = close + 1;
    }
    return out + src_.substr(copied);
  }

 private:
  static size_t matchParen(const std::string& s, size_t open) {
    int depth = 0;
    for (size_t k = open; k < s.size(); ++k) {
      if (s[k] == '(') ++depth;
      if (s[k] == ')' && --depth == 0) return k;
    }
    return std::string::npos;
  }

  void parseDefines() {
    size_t i = 0, n = text_.size();
    while (i < n) {
      size_t eol = i;
      std::string line;  // the logical line, continuations joined
      while (eol < n && text_[eol] != '\n') {
        if (text_[eol] == '\\' && eol + 1 < n && text_[eol + 1] == '\n') {
          line += ' ';
          eol += 2;
          continue;
        }
        line += text_[eol++];
      }
      i = eol + 1;
      std::string t = trim(line);
      if (t.empty() || t[0] != '#') continue;
      t = trim(t.substr(1));
      if (t.compare(0, 6, "define") != 0) continue;
      t = trim(t.substr(6));
      size_t e = 0;
      while (e < t.size() && identChar(t[e])) ++e;
      if (e == 0 || e >= t.size() || t[e] != '(') continue;  // object-like: not ours
      size_t close = matchParen(t, e);
      if (close == std::string::npos) continue;
      Macro m;
      for (const std::string& p : splitArgs(t.substr(e + 1, close - e - 1))) {
        if (p == "...") m.variadic = true;
        else if (!p.empty()) m.params.push_back(p);
      }
      m.body = trim(t.substr(close + 1));
      macros_[t.substr(0, e)] = m;
    }
  }

  static std::vector<std::string> identifiers(const std::string& s) {
    std::vector<std::string> ids;
    for (size_t i = 0; i < s.size();) {
      if (s[i] == '"') {  // skip literals
        size_t e = i + 1;
        while (e < s.size() && s[e] != '"') e += s[e] == '\\' ? 2 : 1;
        i = e + 1;
        continue;
      }
      if (!identStart(s[i])) {
        ++i;
        continue;
      }
      size_t e = i;
      while (e < s.size() && identChar(s[e])) ++e;
      ids.push_back(s.substr(i, e - i));
      i = e;
    }
    return ids;
  }

  void findKernelMacros() {
    for (auto& [name, m] : macros_)
      for (const std::string& id : identifiers(m.body))
        if (id == "kernel" || id == "host_name") kernel_macros_.insert(name);
    for (bool changed = true; changed;) {
      changed = false;
      for (auto& [name, m] : macros_) {
        if (kernel_macros_.count(name)) continue;
        for (const std::string& id : identifiers(m.body))
          if (kernel_macros_.count(id)) {
            kernel_macros_.insert(name);
            changed = true;
            break;
          }
      }
    }
  }

  std::string expand(const std::string& name, const std::vector<std::string>& args, int depth) {
    const Macro& m = macros_.at(name);
    if (depth > 32) return name + "(...)";  // runaway recursion: leave it to the compiler
    auto argOf = [&](const std::string& id, bool* found) -> std::string {
      *found = true;
      for (size_t p = 0; p < m.params.size(); ++p)
        if (m.params[p] == id) return p < args.size() ? args[p] : "";
      if (m.variadic && id == "__VA_ARGS__") {
        std::string v;
        for (size_t p = m.params.size(); p < args.size(); ++p) v += (v.empty() ? "" : ", ") + args[p];
        return v;
      }
      *found = false;
      return id;
    };
    // Substitution, with # and ##.
    std::string out;
    const std::string& b = m.body;
    for (size_t i = 0; i < b.size();) {
      char c = b[i];
      if (c == '"' || c == '\'') {
        size_t e = i + 1;
        while (e < b.size() && b[e] != c) e += b[e] == '\\' ? 2 : 1;
        out += b.substr(i, e + 1 - i);
        i = e + 1;
      } else if (b.compare(i, 2, "##") == 0) {
        while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
        i += 2;
        while (i < b.size() && std::isspace(static_cast<unsigned char>(b[i]))) ++i;
      } else if (c == '#') {
        size_t s = i + 1;
        while (s < b.size() && std::isspace(static_cast<unsigned char>(b[s]))) ++s;
        size_t e = s;
        while (e < b.size() && identChar(b[e])) ++e;
        bool found = false;
        std::string arg = argOf(b.substr(s, e - s), &found);
        if (!found) {
          out += c;
          ++i;
          continue;
        }
        std::string lit = "\"";
        for (char a : arg) lit += (a == '"' || a == '\\') ? std::string("\\") + a : std::string(1, a);
        out += lit + "\"";
        i = e;
      } else if (identStart(c)) {
        size_t e = i;
        while (e < b.size() && identChar(b[e])) ++e;
        bool found = false;
        out += argOf(b.substr(i, e - i), &found);
        i = e;
      } else {
        out += c;
        ++i;
      }
    }
    // Rescan for nested kernel macros.
    std::string result;
    for (size_t i = 0; i < out.size();) {
      if (out[i] == '"') {
        size_t e = i + 1;
        while (e < out.size() && out[e] != '"') e += out[e] == '\\' ? 2 : 1;
        result += out.substr(i, e + 1 - i);
        i = e + 1;
        continue;
      }
      if (!identStart(out[i])) {
        result += out[i++];
        continue;
      }
      size_t e = i;
      while (e < out.size() && identChar(out[e])) ++e;
      std::string id = out.substr(i, e - i);
      size_t open = out.find_first_not_of(" \t", e);
      size_t close = id != name && kernel_macros_.count(id) && open != std::string::npos && out[open] == '('
                         ? matchParen(out, open)
                         : std::string::npos;
      if (close == std::string::npos) {
        result += id;
        i = e;
        continue;
      }
      result += expand(id, splitArgs(out.substr(open + 1, close - open - 1)), depth + 1);
      i = close + 1;
    }
    return result;
  }

  const std::string& src_;
  std::vector<bool> literal_;
  std::string text_;
  std::map<std::string, Macro> macros_;
  std::set<std::string> kernel_macros_;
};

}  // namespace

std::string expandKernelMacros(const std::string& source) { return Expander(source).run(); }

}  // namespace metalsim
