// MSL -> C++ translation (see translator.h for what and why).
#include "translator.h"

#include "kernel_macros.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

namespace metalsim {
namespace {

// ---- Lexing ---------------------------------------------------------------------

enum class Tok { Ident, Number, Punct, Attr };

struct Token {
  Tok kind;
  std::string text;  // for Attr: the attribute's inner text, e.g. "buffer(0)"
  size_t begin, end;  // byte range in the source
};

// The source with comments and string/char literals replaced by spaces (newlines kept),
// so structure can be found without being fooled by them.
std::string maskCommentsAndLiterals(const std::string& s) {
  std::string m = s;
  size_t i = 0, n = s.size();
  auto blank = [&](size_t a, size_t b) {
    for (size_t k = a; k < b && k < n; ++k)
      if (m[k] != '\n') m[k] = ' ';
  };
  while (i < n) {
    if (s.compare(i, 2, "//") == 0) {
      size_t e = s.find('\n', i);
      e = e == std::string::npos ? n : e;
      blank(i, e);
      i = e;
    } else if (s.compare(i, 2, "/*") == 0) {
      size_t e = s.find("*/", i + 2);
      e = e == std::string::npos ? n : e + 2;
      blank(i, e);
      i = e;
    } else if (s[i] == '"' || s[i] == '\'') {
      char q = s[i];
      size_t e = i + 1;
      while (e < n && s[e] != q && s[e] != '\n') e += (s[e] == '\\') ? 2 : 1;
      e = std::min(n, e + 1);
      blank(i + 1, e - 1);  // keep the quotes so the token stream still sees a literal
      i = e;
    } else {
      ++i;
    }
  }
  return m;
}

bool identStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool identChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::vector<Token> lex(const std::string& src, const std::string& masked) {
  std::vector<Token> toks;
  size_t i = 0, n = masked.size();
  while (i < n) {
    char c = masked[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '#') {  // preprocessor line: skip it whole (with continuations)
      while (i < n && masked[i] != '\n') {
        if (masked[i] == '\\' && i + 1 < n && masked[i + 1] == '\n') ++i;
        ++i;
      }
    } else if (masked.compare(i, 2, "[[") == 0) {
      size_t e = masked.find("]]", i + 2);
      if (e == std::string::npos) e = n - 2;
      std::string inner = src.substr(i + 2, e - i - 2);
      // trim
      size_t a = inner.find_first_not_of(" \t\n"), b = inner.find_last_not_of(" \t\n");
      inner = a == std::string::npos ? "" : inner.substr(a, b - a + 1);
      toks.push_back({Tok::Attr, inner, i, e + 2});
      i = e + 2;
    } else if (identStart(c)) {
      size_t e = i;
      while (e < n && identChar(masked[e])) ++e;
      toks.push_back({Tok::Ident, masked.substr(i, e - i), i, e});
      i = e;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t e = i;
      while (e < n && (identChar(masked[e]) || masked[e] == '.')) ++e;
      toks.push_back({Tok::Number, masked.substr(i, e - i), i, e});
      i = e;
    } else if (masked.compare(i, 2, "::") == 0 || masked.compare(i, 2, "->") == 0) {
      toks.push_back({Tok::Punct, masked.substr(i, 2), i, i + 2});
      i += 2;
    } else {
      toks.push_back({Tok::Punct, std::string(1, c), i, i + 1});
      ++i;
    }
  }
  return toks;
}

// ---- Source model -----------------------------------------------------------------

struct KernelParam {
  std::string name;
  std::string bind;  // "Buffer", "Threadgroup", or a position attribute's Bind name
  unsigned index = 0;
  bool auto_index = false;       // a buffer/threadgroup pointer without an index attribute
  std::string function_constant;  // [[function_constant(x)]]: present only if x is true
  size_t first_tok = 0;
  std::string type_text;  // the declaration before the name ("" when not plain)
  size_t type_first = 0, type_last = 0;  // its tokens, when type_text is set
};

struct KernelDef {
  std::string name;
  std::string scope;  // enclosing namespaces, "a::b::"
  bool is_template = false;
  std::string host_name;      // from [[host_name("...")]], if any
  unsigned max_threads = 0;
  std::vector<KernelParam> params;
  size_t body_begin = 0, body_end = 0;  // token indices of '{' and '}'
  std::string where;  // "file:line"
};

struct Instantiation {
  bool qualified = false;  // written as ns::name<...>: usable as is from the wrappers
  std::string template_name;
  std::string template_id;  // e.g. "add<float>"
  std::string host_name;
  std::string where;  // "file:line"
};

const std::map<std::string, std::string>& positionAttributes() {
  static const std::map<std::string, std::string> m = {
      {"thread_position_in_grid", "ThreadPositionInGrid"},
      {"thread_position_in_threadgroup", "ThreadPositionInThreadgroup"},
      {"threadgroup_position_in_grid", "ThreadgroupPositionInGrid"},
      {"threads_per_threadgroup", "ThreadsPerThreadgroup"},
      {"dispatch_threads_per_threadgroup", "DispatchThreadsPerThreadgroup"},
      {"threadgroups_per_grid", "ThreadgroupsPerGrid"},
      {"threads_per_grid", "ThreadsPerGrid"},
      {"thread_index_in_threadgroup", "ThreadIndexInThreadgroup"},
      {"thread_index_in_simdgroup", "ThreadIndexInSimdgroup"},
      {"simdgroup_index_in_threadgroup", "SimdgroupIndexInThreadgroup"},
      {"simdgroups_per_threadgroup", "SimdgroupsPerThreadgroup"},
      {"threads_per_simdgroup", "ThreadsPerSimdgroup"},
      {"thread_execution_width", "ThreadExecutionWidth"},
      {"thread_index_in_quadgroup", "ThreadIndexInQuadgroup"},
      {"quadgroup_index_in_threadgroup", "QuadgroupIndexInThreadgroup"},
      {"grid_origin", "GridOrigin"},
      {"grid_size", "GridSize"},
  };
  return m;
}

bool isCFloatMathName(const std::string& id) {
  static const std::set<std::string> names = {
      "acosf", "asinf", "atanf", "atan2f", "cosf", "sinf", "tanf", "acoshf", "asinhf", "atanhf",
      "coshf", "sinhf", "tanhf", "expf", "exp2f", "exp10f", "expm1f", "logf", "log10f", "log1pf",
      "log2f", "logbf", "frexpf", "ldexpf", "modff", "cbrtf", "fabsf", "hypotf", "powf", "sqrtf",
      "erff", "erfcf", "lgammaf", "tgammaf", "ceilf", "floorf", "rintf", "roundf", "truncf",
      "fmodf", "remainderf", "copysignf", "nextafterf", "fdimf", "fmaxf", "fminf", "fmaf"};
  return names.count(id) != 0;
}

bool isSyncIdent(const std::string& id) {
  // simdgroup_* covers the SIMD-group matrix types and functions too: they need the
  // fiber stack's lane header (metalsim_prelude/simdgroup_matrix.h).
  return id == "threadgroup_barrier" || id.rfind("simdgroup_", 0) == 0 || id.rfind("simd_", 0) == 0 ||
         id.rfind("quad_", 0) == 0 || id == "make_filled_simdgroup_matrix" || id == "thread_elements";
}

class Translator {
 public:
  Translator(const std::string& src, const TranslateOptions& opt)
      : src_(src), opt_(opt), masked_(maskCommentsAndLiterals(src)), toks_(lex(src, masked_)) {
    matchBrackets();
  }

  TranslateResult run() {
    findFunctionConstants();
    findKernels();
    findFunctionBodies();
    classifySync();
    if (opt_.checked_pointers) findDevicePointerTypes();
    std::string body = rewriteSource();
    TranslateResult result;
    result.cpp = emit(body, result.kernels);
    for (const FunctionConstant& c : constants_) result.function_constants.push_back(c.decl);
    return result;
  }

 private:
  const std::string& src_;
  TranslateOptions opt_;
  std::string masked_;
  std::vector<Token> toks_;
  std::vector<size_t> match_;  // matching bracket token index for ( [ { ; npos otherwise
  std::vector<KernelDef> kernels_;
  std::vector<Instantiation> insts_;
  std::map<std::string, std::vector<std::pair<size_t, size_t>>> bodies_;  // fn -> token ranges
  std::set<std::string> sync_names_;
  struct FunctionConstant {
    FunctionConstantDecl decl;
    size_t first_tok, last_tok;  // `constant` .. `;`
    const FunctionConstantValue* value = nullptr;
  };
  std::vector<FunctionConstant> constants_;
  // Shader validation: `device T*` spellings to replace by checked pointer types.
  struct PointerType {
    size_t first, last;  // tokens replaced (inclusive)
    std::string replacement;
  };
  std::vector<PointerType> pointer_types_;
  std::vector<std::pair<size_t, std::string>> cast_keywords_;  // cast keywords to respell

  // "file:line" of a byte of the source, following #line directives (the include
  // expander's, so a problem in an included header is reported where it is).
  std::string where(size_t byte) const {
    std::string file = opt_.source_name;
    size_t line = 1;
    size_t end = std::min(byte, src_.size());
    for (size_t i = 0; i < end;) {
      size_t eol = src_.find('\n', i);
      if (eol == std::string::npos || eol >= end) break;
      size_t p = src_.find_first_not_of(" \t", i);
      if (p < eol && src_.compare(p, 5, "#line") == 0) {
        std::istringstream in(src_.substr(p + 5, eol - p - 5));
        size_t n = 0;
        std::string name;
        if (in >> n) {
          line = n;
          if (in >> name && name.size() >= 2 && name.front() == '"') file = name.substr(1, name.size() - 2);
          i = eol + 1;
          continue;
        }
      }
      ++line;
      i = eol + 1;
    }
    return file + ":" + std::to_string(line);
  }

  [[noreturn]] void fail(size_t tok, const std::string& msg) const {
    size_t byte = tok < toks_.size() ? toks_[tok].begin : src_.size();
    throw TranslateError(where(byte) + ": error: " + msg);
  }

  // "kernel, max_total_threads_per_threadgroup(256)" -> its parts: Metal allows
  // several attributes in one [[...]] list.
  static std::vector<std::string> attrParts(const std::string& attr) {
    std::vector<std::string> parts;
    int depth = 0;
    bool quoted = false;
    std::string cur;
    auto flush = [&] {
      size_t a = cur.find_first_not_of(" \t\n"), b = cur.find_last_not_of(" \t\n");
      if (a != std::string::npos) parts.push_back(cur.substr(a, b - a + 1));
      cur.clear();
    };
    for (char c : attr) {
      if (c == '"') quoted = !quoted;
      if (!quoted && c == '(') ++depth;
      if (!quoted && c == ')') --depth;
      if (!quoted && depth == 0 && c == ',') {
        flush();
        continue;
      }
      cur += c;
    }
    flush();
    return parts;
  }
  bool attrHas(size_t tok, const char* name) const {
    if (tok >= toks_.size() || toks_[tok].kind != Tok::Attr) return false;
    for (const std::string& part : attrParts(toks_[tok].text))
      if (attrName(part) == name) return true;
    return false;
  }

  bool is(size_t i, Tok k, const char* text) const {
    return i < toks_.size() && toks_[i].kind == k && toks_[i].text == text;
  }
  bool punct(size_t i, const char* p) const { return is(i, Tok::Punct, p); }

  void matchBrackets() {
    match_.assign(toks_.size(), std::string::npos);
    std::vector<size_t> stack;
    for (size_t i = 0; i < toks_.size(); ++i) {
      if (toks_[i].kind != Tok::Punct) continue;
      const std::string& t = toks_[i].text;
      if (t == "(" || t == "[" || t == "{") {
        stack.push_back(i);
      } else if (t == ")" || t == "]" || t == "}") {
        if (stack.empty()) fail(i, "unbalanced '" + t + "'");
        size_t o = stack.back();
        stack.pop_back();
        char want = t == ")" ? '(' : t == "]" ? '[' : '{';
        if (toks_[o].text[0] != want) fail(i, "mismatched '" + t + "'");
        match_[o] = i;
        match_[i] = o;
      }
    }
    if (!stack.empty()) fail(stack.back(), "unclosed '" + toks_[stack.back()].text + "'");
  }

  // Index of the '>' closing the '<' at i (template argument lists), npos if none.
  size_t matchAngle(size_t i) const {
    int depth = 0;
    for (size_t k = i; k < toks_.size(); ++k) {
      if (toks_[k].kind != Tok::Punct) continue;
      const std::string& t = toks_[k].text;
      if (t == "(" || t == "[" || t == "{") {
        k = match_[k];
      } else if (t == "<") {
        ++depth;
      } else if (t == ">") {
        if (--depth == 0) return k;
      } else if (t == ";" || t == ")" || t == "}") {
        return std::string::npos;
      }
    }
    return std::string::npos;
  }

  std::string text(size_t first_tok, size_t last_tok) const {  // inclusive, from source
    return src_.substr(toks_[first_tok].begin, toks_[last_tok].end - toks_[first_tok].begin);
  }

  static std::string attrName(const std::string& attr) {
    size_t p = attr.find('(');
    std::string name = attr.substr(0, p);
    name.erase(std::remove_if(name.begin(), name.end(), ::isspace), name.end());
    return name;
  }
  static std::string attrArg(const std::string& attr) {
    size_t a = attr.find('('), b = attr.rfind(')');
    if (a == std::string::npos || b == std::string::npos || b < a) return "";
    std::string arg = attr.substr(a + 1, b - a - 1);
    if (arg.find('"') != std::string::npos) {
      // One string or adjacent ones ("add" "_dense_" "float", as macros that stamp out
      // instantiations write them), joined as C++ joins them.
      std::string joined;
      bool in_string = false;
      for (size_t i = 0; i < arg.size(); ++i) {
        if (arg[i] == '"') in_string = !in_string;
        else if (in_string) joined += arg[i];
      }
      return joined;
    }
    size_t s = arg.find_first_not_of(" \t"), e = arg.find_last_not_of(" \t");
    return s == std::string::npos ? "" : arg.substr(s, e - s + 1);
  }

  unsigned attrIndex(size_t tok, const std::string& attr) const {
    std::string arg = attrArg(attr);
    if (arg.empty() || !std::all_of(arg.begin(), arg.end(), ::isdigit))
      fail(tok, "[[" + attr + "]] needs a constant integer index");
    return static_cast<unsigned>(std::stoul(arg));
  }

  // ---- function constants ----

  // `constant T name [[function_constant(i)]];` at namespace scope: recorded, and
  // matched with this compile's values. Other attributed declarations are left alone.
  void findFunctionConstants() {
    for (size_t i = 0; i + 1 < toks_.size(); ++i) {
      if (toks_[i].kind != Tok::Attr || !punct(i + 1, ";")) continue;
      std::string arg;
      for (const std::string& part : attrParts(toks_[i].text))
        if (attrName(part) == "function_constant") arg = attrArg(part);
      if (arg.empty()) continue;
      size_t first = i;
      while (first > 0 && !punct(first - 1, ";") && !punct(first - 1, "}") && !punct(first - 1, "{"))
        --first;
      if (!is(first, Tok::Ident, "constant") || i - first < 3 || toks_[i - 1].kind != Tok::Ident)
        fail(i, "[[function_constant(" + arg + ")]] belongs on a declaration `constant TYPE NAME "
                "[[function_constant(INDEX)]];`");
      FunctionConstant c;
      c.decl.name = toks_[i - 1].text;
      c.decl.type = normalizeScalarType(text(first + 1, i - 2));
      c.decl.index = attrIndex(i, "function_constant(" + arg + ")");
      c.first_tok = first;
      c.last_tok = i + 1;
      for (const FunctionConstant& o : constants_)
        if (o.decl.index == c.decl.index)
          fail(i, "function constants '" + o.decl.name + "' and '" + c.decl.name + "' share index " +
                      std::to_string(c.decl.index));
      constants_.push_back(c);
    }
    for (const FunctionConstantValue& v : opt_.function_constants) {
      FunctionConstant* match = nullptr;
      for (FunctionConstant& c : constants_)
        if (v.index >= 0 ? long(c.decl.index) == v.index : c.decl.name == v.name) match = &c;
      std::string what = v.index >= 0 ? "index " + std::to_string(v.index) : "'" + v.name + "'";
      if (!match) {
        std::string declared;
        for (const FunctionConstant& c : constants_)
          declared += (declared.empty() ? "" : ", ") + c.decl.type + " " + c.decl.name +
                      " [[function_constant(" + std::to_string(c.decl.index) + ")]]";
        throw TranslateError(opt_.source_name + ": error: a value is given for function constant " +
                             what + ", which the source does not declare (it declares " +
                             (declared.empty() ? std::string("none") : declared) + ")");
      }
      if (normalizeScalarType(v.type) != match->decl.type)
        throw TranslateError(opt_.source_name + ": error: function constant '" + match->decl.name +
                             "' is declared " + match->decl.type + " but given a " + v.type + " value");
      if (match->value)
        throw TranslateError(opt_.source_name + ": error: function constant '" + match->decl.name +
                             "' is given two values");
      match->value = &v;
    }
  }

  // Whether a parameter marked [[function_constant(name)]] exists in this compile.
  bool constantEnables(const KernelParam& p) const {
    for (const FunctionConstant& c : constants_)
      if (c.decl.name == p.function_constant) {
        if (c.decl.type != "bool")
          fail(p.first_tok, "[[function_constant(" + p.function_constant + ")]] on parameter '" + p.name +
                                "' needs a bool function constant; '" + c.decl.name + "' is " + c.decl.type);
        return c.value && c.value->literal != "false" && c.value->literal != "0";
      }
    fail(p.first_tok, "[[function_constant(" + p.function_constant + ")]] on parameter '" + p.name +
                          "' does not name a function constant declared with [[function_constant(i)]]");
  }

  // ---- kernels and instantiations ----

  void findKernels() {
    for (size_t i = 0; i < toks_.size(); ++i) {
      bool marker = is(i, Tok::Ident, "kernel") || attrHas(i, "kernel");
      if (marker) parseKernelAt(i);
    }
    for (auto& k : kernels_)
      if (k.is_template && !k.host_name.empty())
        fail(k.body_begin, "[[host_name]] belongs on explicit instantiations of kernel template '" +
                               k.name + "'");
  }

  void parseKernelAt(size_t marker) {
    // Walk back over attributes to see what kind of declaration this is.
    size_t start = marker;
    std::vector<size_t> attrs;
    while (start > 0 && toks_[start - 1].kind == Tok::Attr) attrs.push_back(--start);
    bool explicit_inst = false, is_template = false;
    if (start > 0 && is(start - 1, Tok::Ident, "template")) {
      explicit_inst = true;
    } else if (start > 0 && punct(start - 1, ">")) {
      // template <...> kernel void f(...)
      int depth = 0;
      for (size_t k = start - 1; k + 1 > 0; --k) {
        if (punct(k, ">")) ++depth;
        if (punct(k, "<") && --depth == 0) {
          if (k > 0 && is(k - 1, Tok::Ident, "template")) is_template = true;
          break;
        }
      }
    }
    if (toks_[marker].kind == Tok::Attr) attrs.push_back(marker);  // [[kernel, ...]] itself
    size_t i = marker + 1;
    while (i < toks_.size() && toks_[i].kind == Tok::Attr) attrs.push_back(i++);
    for (size_t a : attrs) (void)a;

    std::string host_name;
    unsigned max_threads = 0;
    auto readFunctionAttrs = [&](size_t a) {
      for (const std::string& t : attrParts(toks_[a].text)) {
        std::string name = attrName(t);
        if (name == "host_name") host_name = attrArg(t);
        if (name == "max_total_threads_per_threadgroup") max_threads = attrIndex(a, t);
      }
    };
    for (size_t a : attrs) readFunctionAttrs(a);

    if (explicit_inst && is(i, Tok::Ident, "decltype")) {
      // template [[host_name("x")]] kernel decltype(f<T>) f<T>;
      size_t close = match_[i + 1];
      size_t id_begin = close + 1, id_end = id_begin;
      while (id_end < toks_.size() && !punct(id_end, ";")) ++id_end;
      if (id_end == id_begin) fail(i, "malformed kernel instantiation");
      size_t name_tok = qualifiedNameEnd(id_begin);
      if (name_tok == std::string::npos) fail(i, "malformed kernel instantiation");
      addInstantiation(id_begin, name_tok, id_end - 1, host_name, i);
      return;
    }
    if (!is(i, Tok::Ident, "void")) fail(i, "a kernel function must return void");
    ++i;
    // The name, possibly qualified (`::c10::metal::unary_dense<...>` in an explicit
    // instantiation of a template defined in a namespace).
    size_t qual_first = i;
    size_t name_tok = qualifiedNameEnd(i);
    if (name_tok == std::string::npos) fail(i, "expected the kernel's name");
    i = name_tok + 1;
    size_t id_end = name_tok;
    if (punct(i, "<")) {  // explicit instantiation names template arguments
      size_t close = matchAngle(i);
      if (close == std::string::npos) fail(i, "unclosed template argument list");
      id_end = close;
      i = close + 1;
    }
    if (!punct(i, "(")) fail(i, "expected '(' after kernel name");
    size_t lparen = i, rparen = match_[i];
    size_t after = rparen + 1;
    while (after < toks_.size() && toks_[after].kind == Tok::Attr) readFunctionAttrs(after++);

    if (explicit_inst) {
      addInstantiation(qual_first, name_tok, id_end, host_name, name_tok);
      return;
    }
    if (!punct(after, "{")) return;  // a prototype: the definition comes elsewhere
    KernelDef def;
    def.name = toks_[name_tok].text;
    def.scope = namespaceScope(name_tok);
    def.is_template = is_template;
    def.host_name = host_name;
    def.max_threads = max_threads;
    def.params = parseParams(lparen, rparen, def.name);
    def.body_begin = after;
    def.body_end = match_[after];
    def.where = where(toks_[name_tok].begin);
    kernels_.push_back(std::move(def));
  }

  // The last identifier of `a::b::name` / `::name` / `name` starting at i (npos if none).
  size_t qualifiedNameEnd(size_t i) const {
    if (punct(i, "::")) ++i;
    while (i + 1 < toks_.size() && toks_[i].kind == Tok::Ident && punct(i + 1, "::")) i += 2;
    return i < toks_.size() && toks_[i].kind == Tok::Ident ? i : std::string::npos;
  }

  // "a::b::" for a token inside `namespace a { namespace b {` (anonymous ones add
  // nothing: they are reachable unqualified from the wrappers).
  std::string namespaceScope(size_t tok) const {
    std::string scope;
    for (size_t k = 0; k < tok; ++k) {
      if (!is(k, Tok::Ident, "namespace")) continue;
      size_t j = k + 1;
      std::string name;
      while (j < toks_.size() && (toks_[j].kind == Tok::Ident || punct(j, "::"))) name += toks_[j++].text;
      if (punct(j, "{") && match_[j] > tok && !name.empty()) scope += name + "::";
    }
    return scope;
  }

  void addInstantiation(size_t id_first, size_t name_tok, size_t id_last, const std::string& host, size_t at) {
    Instantiation inst;
    inst.template_name = toks_[name_tok].text;
    inst.template_id = text(id_first, id_last);
    inst.qualified = id_first != name_tok;
    inst.host_name = host;
    inst.where = where(toks_[at].begin);
    if (host.empty())
      fail(at, "explicit instantiation of kernel '" + inst.template_id +
                   "' needs [[host_name(\"...\")]] to be callable");
    insts_.push_back(inst);
  }

  std::vector<KernelParam> parseParams(size_t lparen, size_t rparen, const std::string& kname) {
    std::vector<KernelParam> params;
    size_t begin = lparen + 1;
    auto finish = [&](size_t b, size_t e) {  // tokens [b, e)
      if (b >= e) return;
      if (e - b == 1 && is(b, Tok::Ident, "void")) return;
      size_t attr = std::string::npos, name = std::string::npos;
      bool indirect = false;      // a pointer or reference
      std::string address_space;  // the first of device / constant / threadgroup
      for (size_t k = b; k < e; ++k) {
        if (toks_[k].kind == Tok::Attr) attr = k;
        if (toks_[k].kind == Tok::Ident && attr == std::string::npos) {
          name = k;
          const std::string& t = toks_[k].text;
          if (address_space.empty() && (t == "device" || t == "constant" || t == "threadgroup"))
            address_space = t;
        }
        if (punct(k, "*") || punct(k, "&")) indirect = true;
        if (toks_[k].kind == Tok::Punct &&
            (toks_[k].text == "(" || toks_[k].text == "[" || toks_[k].text == "{"))
          k = match_[k];
      }
      std::string pname = name == std::string::npos ? "?" : toks_[name].text;
      KernelParam p;
      p.name = pname;
      p.first_tok = b;
      // The type is everything before the name, when nothing but attributes follows it.
      if (name != std::string::npos && name > b) {
        bool plain = true;
        for (size_t k = name + 1; k < e; ++k) plain = plain && toks_[k].kind == Tok::Attr;
        if (plain) {
          p.type_text = text(b, name - 1);
          p.type_first = b;
          p.type_last = name - 1;
        }
      }
      std::string binding;
      size_t at = attr == std::string::npos ? b : attr;
      if (attr != std::string::npos) {
        for (const std::string& part : attrParts(toks_[attr].text)) {
          if (attrName(part) == "function_constant") p.function_constant = attrArg(part);
          else if (binding.empty()) binding = part;
          else fail(attr, "parameter '" + pname + "' of kernel '" + kname + "' has two bindings, [[" +
                              binding + "]] and [[" + part + "]]");
        }
      }
      if (binding.empty()) {
        // Metal numbers unattributed buffers (device/constant pointers and references)
        // and threadgroup pointers itself, in declaration order (see assignIndices).
        if (indirect && (address_space == "device" || address_space == "constant")) {
          p.bind = "Buffer";
          p.auto_index = true;
        } else if (indirect && address_space == "threadgroup") {
          p.bind = "Threadgroup";
          p.auto_index = true;
        } else {
          fail(b, "parameter '" + pname + "' of kernel '" + kname +
                      "' has no [[...]] attribute saying what it is bound to (only device, "
                      "constant and threadgroup pointers and references are numbered by position)");
        }
        params.push_back(p);
        return;
      }
      std::string an = attrName(binding);
      if (an == "buffer") {
        p.bind = "Buffer";
        p.index = attrIndex(at, binding);
        if (p.index >= 31) fail(at, "[[buffer(" + std::to_string(p.index) + ")]]: Metal has 31 buffer slots (0-30)");
      } else if (an == "threadgroup") {
        p.bind = "Threadgroup";
        p.index = attrIndex(at, binding);
        if (p.index >= 31) fail(at, "[[threadgroup(" + std::to_string(p.index) + ")]]: index must be below 31");
      } else if (auto it = positionAttributes().find(an); it != positionAttributes().end()) {
        p.bind = it->second;
      } else {
        fail(at, "[[" + binding + "]] on parameter '" + pname +
                     "' is not supported by the Metal simulator (textures, samplers and "
                     "stage_in are not simulated)");
      }
      params.push_back(p);
    };
    int angle = 0;
    for (size_t k = begin; k < rparen; ++k) {
      if (toks_[k].kind != Tok::Punct) continue;
      const std::string& t = toks_[k].text;
      if (t == "(" || t == "[" || t == "{") k = match_[k];
      else if (t == "<") ++angle;
      else if (t == ">") --angle;
      else if (t == "," && angle == 0) {
        finish(begin, k);
        begin = k + 1;
      }
    }
    finish(begin, rparen);
    assignIndices(params, "Buffer", 31, kname, lparen);
    assignIndices(params, "Threadgroup", 31, kname, lparen);
    return params;
  }

  // Unattributed buffers (or threadgroup pointers) take the lowest indices the kernel
  // does not give explicitly, in declaration order.
  void assignIndices(std::vector<KernelParam>& params, const std::string& bind, unsigned slots,
                     const std::string& kname, size_t at) const {
    std::set<unsigned> used;
    for (const KernelParam& p : params)
      if (p.bind == bind && !p.auto_index) used.insert(p.index);
    unsigned next = 0;
    for (KernelParam& p : params) {
      if (p.bind != bind || !p.auto_index) continue;
      while (used.count(next)) ++next;
      if (next >= slots)
        fail(at, "kernel '" + kname + "' has more than " + std::to_string(slots) + " " +
                     (bind == "Buffer" ? "buffer" : "threadgroup") + " arguments");
      p.index = next;
      used.insert(next);
    }
  }

  // ---- which functions reach a barrier or SIMD function ----

  void findFunctionBodies() {
    static const std::set<std::string> not_functions = {
        "if", "for", "while", "switch", "return", "sizeof", "catch", "decltype", "alignof",
        "static_assert", "alignas"};
    for (size_t i = 0; i + 1 < toks_.size(); ++i) {
      if (toks_[i].kind != Tok::Ident || !punct(i + 1, "(")) continue;
      if (not_functions.count(toks_[i].text)) continue;
      size_t k = match_[i + 1] + 1;
      // skip trailing qualifiers/attributes: const, noexcept, -> type
      while (k < toks_.size() && (toks_[k].kind == Tok::Attr || is(k, Tok::Ident, "const") ||
                                  is(k, Tok::Ident, "noexcept") || is(k, Tok::Ident, "thread") ||
                                  is(k, Tok::Ident, "device") || is(k, Tok::Ident, "constant")))
        ++k;
      if (punct(k, "{")) bodies_[toks_[i].text].push_back({k, match_[k]});
    }
    // Macros count too: a #define that names a barrier makes its name a sync name.
    std::istringstream lines(masked_);
    std::string line;
    while (std::getline(lines, line)) {
      size_t p = line.find_first_not_of(" \t");
      if (p == std::string::npos || line.compare(p, 7, "#define") != 0) continue;
      std::istringstream words(line.substr(p + 7));
      std::string name;
      words >> name;
      name = name.substr(0, name.find('('));
      std::string rest((std::istreambuf_iterator<char>(words)), std::istreambuf_iterator<char>());
      for (size_t s = 0; s < rest.size();) {
        if (!identStart(rest[s])) { ++s; continue; }
        size_t e = s;
        while (e < rest.size() && identChar(rest[e])) ++e;
        if (isSyncIdent(rest.substr(s, e - s))) sync_names_.insert(name);
        s = e;
      }
    }
  }

  bool rangeSyncs(size_t a, size_t b) const {
    for (size_t k = a; k <= b && k < toks_.size(); ++k)
      if (toks_[k].kind == Tok::Ident &&
          (isSyncIdent(toks_[k].text) || sync_names_.count(toks_[k].text)))
        return true;
    return false;
  }

  void classifySync() {
    bool changed = true;
    while (changed) {
      changed = false;
      for (auto& [name, ranges] : bodies_) {
        if (sync_names_.count(name)) continue;
        for (auto& r : ranges)
          if (rangeSyncs(r.first, r.second)) {
            sync_names_.insert(name);
            changed = true;
            break;
          }
      }
    }
  }

  // ---- text edits ----

  struct Edit {
    size_t begin, end;
    std::string replacement;
  };

  std::string rewriteSource() {
    std::vector<Edit> edits;
    auto inConstant = [&](size_t byte) {
      for (const FunctionConstant& c : constants_)
        if (byte >= toks_[c.first_tok].begin && byte < toks_[c.last_tok].end) return true;
      return false;
    };
    for (const Token& t : toks_)
      if (t.kind == Tok::Attr && !inConstant(t.begin)) edits.push_back({t.begin, t.end, ""});
    for (const KernelDef& k : kernels_) rewriteThreadgroupDecls(k, edits);
    for (const PointerType& p : pointer_types_)
      edits.push_back({toks_[p.first].begin, toks_[p.last].end, p.replacement});
    // A checked pointer is a class: casts that cannot take one are respelled.
    for (const auto& [k, spelling] : cast_keywords_) edits.push_back({toks_[k].begin, toks_[k].end, spelling});
    if (opt_.loop_watchdog) addLoopChecks(edits);
    // A function the source defines with the name of one of C's float math functions
    // (PyTorch's c10/metal/expm1f.h defines expm1f): the host's <cmath> declares C's
    // globally, where a GPU has none, which would make calls ambiguous. The source's
    // own is renamed, every mention of it alike.
    for (const Token& t : toks_)
      if (t.kind == Tok::Ident && bodies_.count(t.text) && isCFloatMathName(t.text))
        edits.push_back({t.begin, t.end, "metalsim_msl_" + t.text});
    for (const FunctionConstant& c : constants_) {
      // A constexpr of this compile's value (zero when none is given), and whether one
      // was, for is_function_constant_defined (a macro the wrappers' header defines).
      std::string type = text(c.first_tok + 1, c.last_tok - 3);
      std::string value = c.value ? c.value->literal : "0";
      edits.push_back({toks_[c.first_tok].begin, toks_[c.last_tok].end,
                       "static constexpr " + type + " " + c.decl.name + " = static_cast<" + type + ">(" +
                           value + ")" +
                           "; static constexpr bool metalsim_fc_defined_" + c.decl.name + " = " +
                           (c.value ? "true" : "false") + ";"});
    }
    // Back to front; at one position a replacement goes before an insertion there, so
    // the inserted text lands in front of the replaced text, not inside its range.
    std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) {
      return a.begin != b.begin ? a.begin > b.begin : a.end > b.end;
    });
    std::string out = src_;
    for (const Edit& e : edits) {
      // Keep the line structure: the replacement, then the newlines the range had,
      // and spaces for the rest so columns after a blanked attribute stay put.
      std::string old = out.substr(e.begin, e.end - e.begin);
      std::string rep = e.replacement;
      size_t newlines = std::count(old.begin(), old.end(), '\n');
      if (newlines == 0 && rep.size() < old.size()) rep.append(old.size() - rep.size(), ' ');
      rep.append(newlines, '\n');
      out.replace(e.begin, e.end - e.begin, rep);
    }
    return out;
  }

  // `sizeof(tile)`, `sizeof tile[0]` after `tile` became a checked array (a class):
  // inside sizeof's operand, `var` is spelled as an lvalue of the array type instead,
  // so the sizes stay the array's.
  void keepArraySizeof(const std::string& var, const std::string& as_array, size_t from, size_t to,
                       std::vector<Edit>& edits) const {
    for (size_t j = from; j + 1 < to; ++j) {
      if (!is(j, Tok::Ident, "sizeof")) continue;
      size_t first = j + 1, last = j + 1;
      if (punct(first, "(") && match_[first] != std::string::npos) last = match_[first];
      else if (toks_[first].kind == Tok::Ident) {
        while (last + 1 < to && punct(last + 1, "[") && match_[last + 1] != std::string::npos) last = match_[last + 1];
      }
      for (size_t v = first; v <= last && v < to; ++v)
        if (is(v, Tok::Ident, var.c_str()) && !(v > 0 && (punct(v - 1, ".") || punct(v - 1, "->") || punct(v - 1, "::"))))
          edits.push_back({toks_[v].begin, toks_[v].end, as_array});
      j = last;
    }
  }

  void rewriteThreadgroupDecls(const KernelDef& k, std::vector<Edit>& edits) {
    for (size_t i = k.body_begin + 1; i < k.body_end; ++i) {
      if (!is(i, Tok::Ident, "threadgroup")) continue;
      bool statement_start = punct(i - 1, "{") || punct(i - 1, ";") || punct(i - 1, "}");
      if (!statement_start) continue;
      size_t semi = i + 1;
      bool plain = true;  // no pointer, reference, initializer or call at depth 0
      while (semi < k.body_end && !punct(semi, ";")) {
        const Token& t = toks_[semi];
        if (t.kind == Tok::Punct && (t.text == "*" || t.text == "&" || t.text == "=" || t.text == "("))
          plain = false;
        if (t.kind == Tok::Punct && (t.text == "[" || t.text == "{")) semi = match_[semi];
        ++semi;
      }
      if (!plain || semi >= k.body_end) continue;
      // Split declarators at depth-0 commas (template argument commas are inside <>).
      std::vector<std::pair<size_t, size_t>> parts;
      size_t b = i + 1;
      int angle = 0;
      for (size_t j = i + 1; j < semi; ++j) {
        if (punct(j, "[")) { j = match_[j]; continue; }
        if (punct(j, "<")) ++angle;
        if (punct(j, ">")) --angle;
        if (punct(j, ",") && angle == 0) { parts.push_back({b, j}); b = j + 1; }
      }
      parts.push_back({b, semi});
      auto declarator = [&](size_t pb, size_t pe) {  // name token index in [pb, pe)
        size_t j = pe;
        while (j > pb && punct(j - 1, "]")) j = match_[j - 1];
        if (j == pb || toks_[j - 1].kind != Tok::Ident) fail(pb, "cannot parse threadgroup declaration");
        return j - 1;
      };
      size_t first_name = declarator(parts[0].first, parts[0].second);
      if (first_name == parts[0].first) fail(i, "threadgroup declaration without a type");
      std::string type = text(parts[0].first, first_name - 1);
      std::string rep;
      for (size_t p = 0; p < parts.size(); ++p) {
        size_t name = p == 0 ? first_name : declarator(parts[p].first, parts[p].second);
        std::string dims = name + 1 < parts[p].second ? text(name + 1, parts[p].second - 1) : "";
        const std::string& var = toks_[name].text;
        const std::string alloc = "*metalsim_kernel_ns::tg_alloc<" + type + dims + ">()";
        // With validation an array's indexing is checked (metalsim_checked::tg_array).
        if (opt_.checked_pointers && !dims.empty()) {
          rep += "auto " + var + " = metalsim_checked::tg_array<" + type + dims + ">(" + alloc + ", \"" + var +
                 "\"); ";
          keepArraySizeof(var, "(*static_cast<" + type + "(*)" + dims + ">(nullptr))", semi, k.body_end, edits);
        } else {
          rep += "auto& " + var + " = " + alloc + "; ";
        }
      }
      edits.push_back({toks_[i].begin, toks_[semi].end, rep});
      i = semi;
    }
  }

  // ---- shader validation and the watchdog ----

  // Token ranges of struct/class/union bodies: their pointer members keep their type,
  // since a struct read from a buffer must keep the buffer's layout (member functions
  // are rewritten like any other).
  std::vector<std::pair<size_t, size_t>> classBodies() const {
    std::vector<std::pair<size_t, size_t>> bodies;
    for (size_t i = 0; i < toks_.size(); ++i) {
      if (!punct(i, "{") || i == 0 || punct(i - 1, ")")) continue;
      bool is_class = false;
      for (size_t k = i; k-- > 0;) {
        if (punct(k, ";") || punct(k, "{") || punct(k, "}")) break;
        if (toks_[k].kind == Tok::Punct && (toks_[k].text == ")" || toks_[k].text == "]") &&
            match_[k] != std::string::npos)
          k = match_[k];
        else if (is(k, Tok::Ident, "struct") || is(k, Tok::Ident, "class") || is(k, Tok::Ident, "union"))
          is_class = true;
        else if (is(k, Tok::Ident, "enum"))
          break;
      }
      if (is_class) bodies.push_back({i, match_[i]});
    }
    return bodies;
  }

  static bool isCv(const Token& t) {
    return t.kind == Tok::Ident && (t.text == "const" || t.text == "volatile");
  }

  // Every `[cv] device|constant [cv] TYPE [cv] *` outside struct bodies becomes
  // `msim_d<TYPE>` (`msim_c`, `msim_v`, `msim_cv` with const / volatile; constant adds
  // const). Pointers to pointers and spellings this cannot parse are left alone (they
  // bind, unchecked).
  void findDevicePointerTypes() {
    // A member declaration is a token whose innermost bracket is a class body's brace;
    // member functions' parameters and bodies sit in brackets of their own.
    std::set<size_t> class_braces;
    for (const auto& b : classBodies()) class_braces.insert(b.first);
    std::vector<size_t> innermost(toks_.size(), std::string::npos);
    std::vector<size_t> open;
    for (size_t k = 0; k < toks_.size(); ++k) {
      const bool closes = toks_[k].kind == Tok::Punct &&
                          (toks_[k].text == ")" || toks_[k].text == "]" || toks_[k].text == "}");
      if (closes && !open.empty()) open.pop_back();
      innermost[k] = open.empty() ? std::string::npos : open.back();
      if (toks_[k].kind == Tok::Punct && (toks_[k].text == "(" || toks_[k].text == "[" || toks_[k].text == "{"))
        open.push_back(k);
    }
    auto inClass = [&](size_t tok) { return class_braces.count(innermost[tok]) != 0; };
    for (size_t i = 0; i < toks_.size(); ++i) {
      if (!is(i, Tok::Ident, "device") && !is(i, Tok::Ident, "constant") && !is(i, Tok::Ident, "threadgroup"))
        continue;
      if (inClass(i)) continue;
      bool is_const = toks_[i].text == "constant", is_volatile = false;
      const bool is_threadgroup = toks_[i].text == "threadgroup";
      size_t first = i;
      while (first > 0 && isCv(toks_[first - 1])) --first;
      for (size_t k = first; k < i; ++k) (toks_[k].text == "const" ? is_const : is_volatile) = true;
      size_t j = i + 1;
      auto cv = [&] {
        while (j < toks_.size() && isCv(toks_[j])) (toks_[j++].text == "const" ? is_const : is_volatile) = true;
      };
      cv();
      size_t type_first = j;
      bool ok = j < toks_.size();
      while (ok && j < toks_.size() && !punct(j, "*")) {
        const Token& t = toks_[j];
        if (isCv(t)) {
          cv();
          continue;
        }
        if (t.kind == Tok::Ident || punct(j, "::")) {
          ++j;
        } else if (punct(j, "<")) {
          size_t close = matchAngle(j);
          if (close == std::string::npos) ok = false;
          else j = close + 1;
        } else {
          ok = false;
        }
      }
      if (!ok || j >= toks_.size() || j == type_first) continue;
      size_t star = j;
      if (punct(star + 1, "*") || punct(star + 1, "&")) continue;
      std::string type;
      for (size_t k = type_first; k < star;) {
        if (isCv(toks_[k])) {
          ++k;
          continue;
        }
        size_t e = k;
        while (e + 1 < star && !isCv(toks_[e + 1])) ++e;
        type += (type.empty() ? "" : " ") + text(k, e);
        k = e + 1;
      }
      // Spelled no longer than the source (`device float*` -> `msim_d<float>`), so the
      // columns of what follows on the line stay the user's.
      const char* alias = is_const      ? (is_volatile ? "msim_cv<" : "msim_c<")
                          : is_volatile   ? "msim_v<"
                          : is_threadgroup ? "msim_t<"
                                           : "msim_d<";
      size_t last = star;
      std::string prefix;
      if (is(star + 1, Tok::Ident, "const")) {  // `device float* const p`
        prefix = "const ";
        last = star + 1;
      }
      if (is(last + 1, Tok::Ident, "__restrict") || is(last + 1, Tok::Ident, "__restrict__"))
        ++last;  // no meaning for a class type; the checked pointer does not need it
      pointer_types_.push_back({first, last, prefix + alias + type + ">"});
      // const_cast<device T*>(x): a class type cannot be const_cast.
      if (first >= 2 && punct(first - 1, "<") && is(first - 2, Tok::Ident, "const_cast"))
        cast_keywords_.push_back({first - 2, "msim_cast"});
      i = last;
    }
    // Any reinterpret_cast may take or make a checked pointer (reinterpret_cast<ulong>(p)
    // for an address, as c10/metal/atomic.h does): msim_cast does what the cast means
    // for one and is the cast itself otherwise.
    for (size_t i = 0; i + 1 < toks_.size(); ++i)
      if (is(i, Tok::Ident, "reinterpret_cast") && punct(i + 1, "<")) cast_keywords_.push_back({i, "msim_cast"});
  }

  // The source text of tokens [a, b] with checked pointer types substituted (for
  // parameter types spelled again in the wrappers).
  std::string rewrittenText(size_t a, size_t b) const {
    std::string out;
    size_t k = a;
    while (k <= b) {
      const PointerType* hit = nullptr;
      for (const PointerType& p : pointer_types_)
        if (p.first == k && p.last <= b) hit = &p;
      size_t e = hit ? hit->last : k;
      if (!out.empty()) out += ' ';
      out += hit ? hit->replacement : text(k, e);
      k = e + 1;
    }
    return out;
  }

  // Every loop iteration first calls metalsim_checked::tick() (the watchdog), with
  // the check put where it needs no knowledge of the loop's parts:
  //   for (...) BODY / while (c) BODY  ->  for (...) if (!tick()) {} else BODY
  //   do BODY while (c);               ->  do if (tick()) BODY while (c);
  // (the else binds to the inserted if, so an enclosing if/else keeps its pairing).
  void addLoopChecks(std::vector<Edit>& edits) const {
    for (size_t i = 0; i + 1 < toks_.size(); ++i) {
      if (is(i, Tok::Ident, "do")) {
        insertKeepingColumns(toks_[i].end, " if (metalsim_checked::tick())", edits);
        continue;
      }
      if ((!is(i, Tok::Ident, "while") && !is(i, Tok::Ident, "for")) || !punct(i + 1, "(")) continue;
      size_t rp = match_[i + 1];
      if (rp == std::string::npos || rp + 1 >= toks_.size()) continue;
      if (is(i, Tok::Ident, "while") && isDoWhileTail(i)) continue;
      insertKeepingColumns(toks_[rp].end, " if (!metalsim_checked::tick()) {} else", edits);
    }
  }

  // Whether the `while` at token w ends a do-while statement.
  bool isDoWhileTail(size_t w) const {
    if (w == 0) return false;
    if (punct(w - 1, "}")) {
      size_t open = match_[w - 1];
      return open != std::string::npos && open > 0 && is(open - 1, Tok::Ident, "do");
    }
    // An unbraced body: the statement before the while starts with `do`.
    size_t k = w - 1;
    if (!punct(k, ";")) return false;
    while (k > 0) {
      size_t prev = k - 1;
      if (toks_[prev].kind == Tok::Punct && (toks_[prev].text == ")" || toks_[prev].text == "]") &&
          match_[prev] != std::string::npos) {
        k = match_[prev];
        continue;
      }
      if (punct(prev, ";") || punct(prev, "{") || punct(prev, "}")) break;
      k = prev;
      if (is(k, Tok::Ident, "do")) return true;
    }
    return false;
  }

  // Inserts `text` at byte `at` of the source. When the source line goes on after that
  // point, the rest of it moves to a line of its own, after a #line directive and the
  // line's own leading characters up to `at` (tabs kept, the rest as spaces), so the
  // compiler still reports the user's line and column for everything on it.
  void insertKeepingColumns(size_t at, const std::string& text, std::vector<Edit>& edits) const {
    size_t eol = src_.find('\n', at);
    if (eol == std::string::npos) eol = src_.size();
    std::string rest = masked_.substr(at, eol - at);
    if (rest.find_first_not_of(" \t\r") == std::string::npos) {
      edits.push_back({at, at, text});
      return;
    }
    size_t bol = src_.rfind('\n', at == 0 ? 0 : at - 1);
    bol = bol == std::string::npos ? 0 : bol + 1;
    std::string pad = src_.substr(bol, at - bol);
    for (char& c : pad)
      if (c != '\t') c = ' ';
    const std::string loc = where(at);  // "file:line"
    const size_t colon = loc.rfind(':');
    edits.push_back({at, at, text + "\n#line " + loc.substr(colon + 1) + " \"" + loc.substr(0, colon) + "\"\n" + pad});
  }

  // ---- generated wrappers ----

  // The kernel's function pointer type. Spelled out from its parameters for a plain
  // kernel, so that taking its address picks it even when the source's `using
  // namespace metal;` (or the host's C library) overloads its name (`divide`, `erf`);
  // a template's instantiation is deduced.
  template <class Entry>
  std::string functionPointerType(const Entry& en) const {
    const KernelDef& d = *en.def;
    bool spelled = !d.is_template && d.scope.empty();  // a namespace's types need its scope
    for (const KernelParam& p : d.params) spelled = spelled && !p.type_text.empty();
    if (!spelled) return "decltype(&" + en.callee + ")";
    std::string t = "void (*)(";
    for (size_t p = 0; p < d.params.size(); ++p) {
      const KernelParam& kp = d.params[p];
      t += (p ? ", " : "") +
           (pointer_types_.empty() ? kp.type_text : rewrittenText(kp.type_first, kp.type_last));
    }
    return t + ")";
  }

  std::string emit(const std::string& body, std::vector<TranslatedKernel>& out_kernels) {
    struct Entry {
      std::string host, callee;
      const KernelDef* def;
    };
    std::vector<Entry> entries;
    std::set<std::string> hosts;
    auto addEntry = [&](const std::string& host, const std::string& callee, const KernelDef* def,
                        const std::string& where) {
      if (!hosts.insert(host).second)
        throw TranslateError(where +
                             ": error: two kernels are named '" + host + "'");
      entries.push_back({host, callee, def});
    };
    for (const KernelDef& k : kernels_)
      if (!k.is_template) addEntry(k.host_name.empty() ? k.name : k.host_name, k.scope + k.name, &k, k.where);
    for (const Instantiation& in : insts_) {
      const KernelDef* def = nullptr;
      for (const KernelDef& k : kernels_)
        if (k.is_template && k.name == in.template_name) def = &k;
      if (!def)
        throw TranslateError(in.where +
                             ": error: no kernel template named '" + in.template_name + "'");
      addEntry(in.host_name, in.qualified ? in.template_id : def->scope + in.template_id, def, in.where);
    }

    // Validation and the watchdog need the checked prelude and the simulator's table
    // of their functions (metalsim/checked_abi.h).
    const bool checks = opt_.checked_pointers || opt_.loop_watchdog;
    const bool validate = opt_.checked_pointers;
    std::ostringstream o;
    o << "// Generated by metalsim from " << opt_.source_name << ". Do not edit.\n"
      // glue.h first: it includes standard headers, which must come before the
      // prelude's address-space macros (thread, device, ...).
      << "#include \"metalsim_prelude/glue.h\"\n"
      << (checks ? "#include \"metalsim/checked_abi.h\"\n" : "")
      << "#include \"metal_stdlib\"\n"
      << (checks ? "#include \"metalsim_prelude/checked.h\"\n" : "")
      << "#define is_function_constant_defined(name) metalsim_fc_defined_##name\n"
      << "#line 1 \"" << opt_.source_name << "\"\n"
      << body << "\n"
      << "#line 1 \"" << opt_.source_name << " (metalsim wrappers)\"\n"
      << "namespace {\n"
      << "namespace msk = ::metalsim::kabi;\n"
      // A parameter whose function constant is false is not bound: it gets a null
      // pointer, or a reference to zeros, which the kernel must not use (as on Metal).
      << "template <class F, unsigned I> inline typename metalsim_kernel_ns::FnArgs<F>::template at<I> "
         "msim_absent() {\n"
      << "  using P = typename metalsim_kernel_ns::FnArgs<F>::template at<I>;\n"
      << "  if constexpr (std::is_pointer_v<P>) return nullptr;\n"
      << "  else { alignas(64) static const unsigned char zeros[4096] = {};\n"
      << "    return *reinterpret_cast<std::remove_reference_t<P>*>(const_cast<unsigned char*>(zeros)); }\n"
      << "}\n";
    for (size_t e = 0; e < entries.size(); ++e) {
      const Entry& en = entries[e];
      const KernelDef& d = *en.def;
      std::string n = std::to_string(e);
      // Qualified, so a kernel named like a metal:: function (`divide`, `sum`) is not
      // overloaded with it by the source's `using namespace metal;`.
      o << "using msim_fn_" << n << " = " << functionPointerType(en) << ";\n"
        << "inline void msim_call_" << n
        << "(const msk::Launch& L, const msk::GroupMemory& M, const msk::ThreadIds& t"
        << (validate ? ", const uint64_t* lengths" : "") << ") {\n"
        << "  (void)L; (void)M; (void)t;\n  static_cast<msim_fn_" << n << ">(&" << en.callee << ")(";
      std::vector<const KernelParam*> bound;
      for (size_t p = 0; p < d.params.size(); ++p) {
        const KernelParam& kp = d.params[p];
        o << (p ? ",\n    " : "");
        if (!kp.function_constant.empty() && !constantEnables(kp)) {
          o << "msim_absent<msim_fn_" << n << ", " << p << ">()";
          continue;
        }
        bound.push_back(&kp);
        if (validate && kp.bind == "Buffer")
          o << "metalsim_checked::bindBuffer<msim_fn_" << n << ", " << p << ", " << kp.index << ">(L, t, lengths)";
        else if (validate && kp.bind == "Threadgroup")
          o << "metalsim_checked::bindThreadgroup<msim_fn_" << n << ", " << p << ", " << kp.index
            << ">(L, M, t, lengths)";
        else
          o << "metalsim_kernel_ns::bindArg<msim_fn_" << n << ", " << p << ", msk::Bind::" << kp.bind << ", "
            << kp.index << ">(L, M, t)";
      }
      // With validation the bindings' lengths are fetched once per threadgroup.
      const char* lengths_decl = validate ? "const uint64_t* lengths = metalsim_checked::boundLengths(); " : "";
      const char* lengths_arg = validate ? ", lengths" : "";
      o << ");\n}\n"
        << "void msim_group_" << n << "(const msk::Launch& L, const msk::GroupMemory& M, msk::U3 g) {\n"
        << "  " << lengths_decl << "msk::forEachThread(L, g, [&](const msk::ThreadIds& t) { msim_call_" << n
        << "(L, M, t" << lengths_arg << "); });\n}\n"
        << "void msim_thread_" << n
        << "(const msk::Launch& L, const msk::GroupMemory& M, const msk::ThreadIds& t) { " << lengths_decl
        << "msim_call_" << n << "(L, M, t" << lengths_arg << "); }\n"
        << "const msk::Param msim_params_" << n << "[] = {";
      for (const KernelParam* kp : bound)
        o << "{msk::Bind::" << kp->bind << ", " << kp->index << ", \"" << kp->name << "\"}, ";
      if (bound.empty()) o << "{msk::Bind::Buffer, 0, nullptr}";
      bool syncs = rangeSyncs(d.body_begin, d.body_end);
      bool declares_tg = false;
      for (size_t k = d.body_begin; k < d.body_end; ++k)
        if (is(k, Tok::Ident, "threadgroup")) declares_tg = true;
      o << "};\n"
        << "const msk::KernelInfo msim_info_" << n << " = {\"" << en.host << "\", msim_params_" << n
        << ", " << bound.size() << ", " << (syncs ? "true" : "false") << ", "
        << (declares_tg ? "true" : "false") << ", " << d.max_threads << ", &msim_group_" << n
        << ", &msim_thread_" << n << ", \"" << opt_.source_name << "\"};\n";
      out_kernels.push_back({en.host, syncs});
    }
    o << "}  // namespace\n"
      << "extern \"C\" void " << opt_.entry_name << "(::metalsim::kabi::Registrar* r) {\n"
      << "  metalsim_kernel_ns::host_api = r->api;\n";
    for (size_t e = 0; e < entries.size(); ++e) o << "  r->add(r, &msim_info_" << e << ");\n";
    o << "}\n";
    if (checks)
      o << "extern \"C\" void metalsim_checked_entry(const ::metalsim::checked_abi::Api* api) {\n"
        << "  metalsim_checked::attach(api);\n}\n";
    return o.str();
  }
};

}  // namespace

std::string normalizeScalarType(const std::string& type) {
  std::string t;
  std::istringstream words(type);
  for (std::string w; words >> w;)
    if (w != "const" && w != "constant") t += (t.empty() ? "" : " ") + w;
  if (t.rfind("metal::", 0) == 0) t = t.substr(7);
  static const std::map<std::string, std::string> aliases = {
      {"unsigned int", "uint"},   {"unsigned", "uint"},       {"uint32_t", "uint"},
      {"int32_t", "int"},         {"signed int", "int"},      {"unsigned short", "ushort"},
      {"uint16_t", "ushort"},     {"int16_t", "short"},       {"unsigned char", "uchar"},
      {"uint8_t", "uchar"},       {"int8_t", "char"},         {"signed char", "char"},
      {"int64_t", "long"},        {"uint64_t", "ulong"},      {"unsigned long", "ulong"},
      {"size_t", "ulong"},        {"bfloat16_t", "bfloat"},   {"float32_t", "float"},
      {"half16_t", "half"}};
  auto it = aliases.find(t);
  return it == aliases.end() ? t : it->second;
}

TranslateResult translateMsl(const std::string& source, const TranslateOptions& options) {
  const std::string expanded = expandKernelMacros(source);
  return Translator(expanded, options).run();
}

}  // namespace metalsim
