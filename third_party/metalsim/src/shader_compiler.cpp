// Run-time compilation of MSL for the simulator (see shader_compiler.h).
#include "shader_compiler.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <vector>

#include "config.h"
#include "device.h"
#include "kernel_registry.h"
#include "library.h"
#include "msl_preprocess.h"
#include "text_file.h"
#include "metalx/runtime/error.h"
#include "metalx/runtime/include_expander.h"
#include "translator.h"

namespace metalsim {
namespace {

using metalx::rt::Error;
using metalx::rt::ErrorKind;

bool isFile(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void makeDirs(const std::string& path) {
  std::string cur;
  std::stringstream ss(path);
  std::string part;
  if (!path.empty() && path[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
    mkdir(cur.c_str(), 0755);
  }
}

// 128 bits of FNV-1a (two seeds). Not cryptographic: a hit is confirmed by comparing
// the stored source with the new one.
std::string hashHex(const std::string& s) {
  auto fnv = [&](uint64_t h) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
    return h;
  };
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", (unsigned long long)fnv(1469598103934665603ull),
                (unsigned long long)fnv(0x9e3779b97f4a7c15ull));
  return buf;
}

std::string runCapture(const std::string& command, int* status) {
  std::string out;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) {
    *status = -1;
    return "could not start the compiler";
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *status = pclose(p);
  return out;
}

std::string shellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string dirOf(const std::string& p) {
  auto i = p.rfind('/');
  return i == std::string::npos ? "." : p.substr(0, i);
}

// Everything a compiled kernel depends on besides its own source.
const std::string& toolchainIdentity() {
  static const std::string id = [] {
    int status = 0;
    std::string version = runCapture(shellQuote(config().cxx) + " --version", &status);
    const PreludePaths& p = preludePaths();
    std::string prelude = readTextFile(p.prelude_dir + "/metal_stdlib") +
                          readTextFile(p.include_dir + "/metalsim/kernel_abi.h") +
                          readTextFile(p.include_dir + "/metalsim/checked_abi.h");
    if (DIR* d = opendir((p.prelude_dir + "/metalsim_prelude").c_str())) {
      std::vector<std::string> names;
      while (dirent* e = readdir(d)) names.push_back(e->d_name);
      closedir(d);
      std::sort(names.begin(), names.end());
      for (auto& n : names)
        if (n.size() > 2 && n.substr(n.size() - 2) == ".h")
          prelude += readTextFile(p.prelude_dir + "/metalsim_prelude/" + n);
    }
    return config().cxx + "\n" + version + "\n" + METALSIM_KERNEL_FLAGS_STR + "\n" +
           std::to_string(kabi::kAbiVersion) + "\n" + hashHex(prelude);
  }();
  return id;
}

}  // namespace

void trimKernelCache(const std::string& dir, uint64_t max_bytes) {
  // An entry: a compiled library (.so with its .cpp), or a memoised preprocessed
  // built-in source (builtin-pp-*.metal); the oldest go first.
  struct Entry {
    std::vector<std::string> paths;
    time_t mtime;
    uint64_t bytes;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  auto endsWith = [](const std::string& n, const std::string& tail) {
    return n.size() > tail.size() && n.compare(n.size() - tail.size(), tail.size(), tail) == 0;
  };
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    const bool library = endsWith(n, ".so"), memo = n.rfind("builtin-pp-", 0) == 0 && endsWith(n, ".metal");
    if (!library && !memo) continue;
    struct stat main, src;
    if (stat((dir + "/" + n).c_str(), &main) != 0) continue;
    Entry entry{{dir + "/" + n}, main.st_mtime, uint64_t(main.st_size)};
    if (library) {
      const std::string cpp = dir + "/" + n.substr(0, n.size() - 3) + ".cpp";
      if (stat(cpp.c_str(), &src) == 0) entry.bytes += uint64_t(src.st_size);
      entry.paths.push_back(cpp);
    }
    total += entry.bytes;
    entries.push_back(std::move(entry));
  }
  closedir(d);
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.mtime < b.mtime; });
  for (const Entry& e : entries) {
    if (total <= max_bytes) break;
    for (const std::string& p : e.paths) unlink(p.c_str());
    total -= e.bytes;
  }
}

namespace {

std::string findPreludeIn(const std::string& root, PreludePaths* out) {
  if (isFile(root + "/prelude/metal_stdlib") && isFile(root + "/include/metalsim/kernel_abi.h")) {
    out->prelude_dir = root + "/prelude";
    out->include_dir = root + "/include";
    return root;
  }
  return "";
}

}  // namespace

const PreludePaths& preludePaths() {
  static const PreludePaths paths = [] {
    PreludePaths p;
    // 1. METALSIM_HOME: a directory with prelude/ and include/ (an installed copy).
    if (const char* home = std::getenv("METALSIM_HOME"); home && *home && !findPreludeIn(home, &p).empty())
      return p;
    // 2. Beside the binary that contains the simulator (the wheel ships them there).
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(&preludePaths), &info) && info.dli_fname) {
      std::string dir = dirOf(info.dli_fname);
      if (!findPreludeIn(dir + "/metalsim", &p).empty()) return p;
    }
    // 3. The source tree this was built from.
    p.prelude_dir = METALSIM_BUILD_PRELUDE_DIR;
    p.include_dir = METALSIM_BUILD_INCLUDE_DIR;
    return p;
  }();
  return paths;
}

namespace {

float halfBitsToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  float v;
  if (exp == 0) v = std::ldexp(float(man), -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = std::ldexp(float(man | 0x400u), int(exp) - 25);
  return sign ? -v : v;
}

// A float as a C++ expression of exactly its value.
std::string floatLiteral(float f) {
  if (std::isnan(f)) return "__builtin_nanf(\"\")";
  if (std::isinf(f)) return f < 0 ? "(-__builtin_inff())" : "__builtin_inff()";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", double(f));
  return std::string("(") + buf + ")";
}

// A function constant's bytes as a C++ literal of its type's value.
FunctionConstantValue translatorValue(const metalx::rt::FunctionConstantValue& c) {
  using T = metalx::rt::FunctionConstantValue::Type;
  FunctionConstantValue v;
  v.index = c.index;
  v.name = c.name;
  v.type = metalx::rt::functionConstantTypeName(c.type);
  auto raw = [&](auto zero) {
    decltype(zero) x;
    std::memcpy(&x, c.bytes.data(), sizeof x);
    return x;
  };
  char buf[64];
  switch (c.type) {
    case T::Bool: v.literal = raw(uint8_t()) ? "true" : "false"; break;
    case T::Char: v.literal = std::to_string(raw(int8_t())); break;
    case T::Short: v.literal = std::to_string(raw(int16_t())); break;
    case T::Int: v.literal = std::to_string(raw(int32_t())); break;
    case T::Long: {
      int64_t x = raw(int64_t());
      v.literal = x == INT64_MIN ? "(-9223372036854775807LL - 1)" : std::to_string(x) + "LL";
      break;
    }
    case T::UChar: v.literal = std::to_string(raw(uint8_t())) + "u"; break;
    case T::UShort: v.literal = std::to_string(raw(uint16_t())) + "u"; break;
    case T::UInt: v.literal = std::to_string(raw(uint32_t())) + "u"; break;
    case T::ULong:
      std::snprintf(buf, sizeof buf, "%lluull", (unsigned long long)raw(uint64_t()));
      v.literal = buf;
      break;
    case T::Float: v.literal = floatLiteral(raw(float())); break;
    case T::Half: v.literal = floatLiteral(halfBitsToFloat(raw(uint16_t()))); break;
    case T::BFloat: {
      uint32_t bits = uint32_t(raw(uint16_t())) << 16;
      float f;
      std::memcpy(&f, &bits, sizeof f);
      v.literal = floatLiteral(f);
      break;
    }
  }
  return v;
}

struct CompiledKernels {
  std::shared_ptr<const KernelSet> kernels;
  std::string key;
  std::vector<FunctionConstantDecl> constants;
};

// Translates and compiles `source` (includes already inlined) with these function
// constant values, through the on-disk cache.
CompiledKernels compileKernels(const std::string& source, const metalx::rt::CompileOptions& options,
                               const metalx::rt::FunctionConstantValues& constants, bool builtin = false) {
  TranslateOptions topt;
  topt.source_name = options.source_name;
  // Run-time compiled kernels are the ones users write: checked by default (as Metal's
  // shader validation would), and stopped by the watchdog when they run too long.
  topt.checked_pointers = config().shader_validation;
  // (Built-in kernels compiled with validation, METALSIM_SHADER_VALIDATION=all, are
  // metalx's own: long ones are legitimate, so no watchdog.)
  topt.loop_watchdog = !builtin && config().kernel_timeout_s > 0;
  for (const auto& c : constants) topt.function_constants.push_back(translatorValue(c));
  TranslateResult translated;
  try {
    translated = translateMsl(source, topt);
  } catch (const TranslateError& e) {
    throw Error(ErrorKind::Compile, std::string("Metal shader compilation failed:\n") + e.what());
  }
  const std::string& cpp = translated.cpp;
  // Fast math would let the compiler reorder float arithmetic; the simulator always
  // compiles with IEEE semantics, the behaviour metalx asks of Metal too.
  std::string key = hashHex(cpp + '\n' + toolchainIdentity());
  const std::string dir = config().cache_dir;
  const std::string so_path = dir + "/" + key + ".so", src_path = dir + "/" + key + ".cpp";

  // One compile at a time per source in this process (others wait for its result);
  // different sources compile in parallel. (One small mutex per source ever compiled.)
  static std::mutex keys_mutex;
  static std::map<std::string, std::shared_ptr<std::mutex>> key_mutexes;
  std::shared_ptr<std::mutex> key_mutex;
  {
    std::lock_guard<std::mutex> lock(keys_mutex);
    std::shared_ptr<std::mutex>& slot = key_mutexes[key];
    if (!slot) slot = std::make_shared<std::mutex>();
    key_mutex = slot;
  }
  std::lock_guard<std::mutex> lock(*key_mutex);
  const bool cached = isFile(so_path) && isFile(src_path) && readTextFileIfAny(src_path) == cpp;
  auto compile = [&] {
    makeDirs(dir);
    static std::atomic<int> counter{0};
    std::string tmp = dir + "/tmp-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
    {
      std::ofstream f(tmp + ".cpp", std::ios::binary);
      f << cpp;
      if (!f)
        throw Error(ErrorKind::Compile, "cannot write the kernel cache at " + dir +
                                            " (set METALSIM_CACHE_DIR to a writable directory)");
    }
    const PreludePaths& p = preludePaths();
    std::string cmd = shellQuote(config().cxx) + " -std=c++17 -shared -fPIC " + METALSIM_KERNEL_FLAGS_STR +
#if METALSIM_SANITIZE
                      " -fsanitize=address" +
#endif
                      " -I" + shellQuote(p.prelude_dir) + " -I" + shellQuote(p.include_dir) + " -o " +
                      shellQuote(tmp + ".so") + " " + shellQuote(tmp + ".cpp");
    int status = 0;
    std::string log = runCapture(cmd, &status);
    if (status != 0) {
      unlink((tmp + ".cpp").c_str());
      unlink((tmp + ".so").c_str());
      throw Error(ErrorKind::Compile, "Metal shader compilation failed:\n" + log);
    }
    // Publish atomically: a concurrent process sees the old state or the complete new one.
    std::rename((tmp + ".cpp").c_str(), src_path.c_str());
    std::rename((tmp + ".so").c_str(), so_path.c_str());
    trimKernelCache(dir, config().cache_bytes);
  };
  // Null with `why` set when the object does not load or has no entry point.
  auto load = [&](std::string* why) -> std::shared_ptr<KernelSet> {
    void* handle = dlopen(so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      *why = std::string("cannot load compiled shader: ") + dlerror();
      return nullptr;
    }
    std::shared_ptr<void> module(handle, [](void* h) { dlclose(h); });
    auto entry = reinterpret_cast<KernelSet::EntryFn>(dlsym(handle, "metalsim_library_entry"));
    if (!entry) {
      *why = "compiled shader has no entry point (" + so_path + ")";
      return nullptr;
    }
    auto kernels = std::make_shared<KernelSet>(entry, module);
    if (auto checked = reinterpret_cast<checked_abi::EntryFn>(dlsym(handle, checked_abi::kEntryName))) {
      checked(&checkedApi());
      kernels->setChecked();
    }
    return kernels;
  };
  if (!cached) compile();
  std::string why;
  std::shared_ptr<KernelSet> kernels = load(&why);
  if (!kernels && cached) {
    // A cache entry that does not load (truncated or garbled by a crash, a full disk or
    // another tool) is compiled again, not an error the user must clean up by hand.
    compile();
    kernels = load(&why);
  }
  if (!kernels) throw Error(ErrorKind::Compile, why);
  return {std::move(kernels), key, std::move(translated.function_constants)};
}

// Function constant values checked against the source's declarations, as Metal does
// when a pipeline is made: a value for a constant the source does not declare, or of
// another type, is the caller's mistake.
void checkConstants(const std::vector<FunctionConstantDecl>& declared,
                    const metalx::rt::FunctionConstantValues& given, const std::string& source_name) {
  std::string list;
  for (const auto& d : declared)
    list += (list.empty() ? "" : ", ") + d.type + " " + d.name + " [[function_constant(" +
            std::to_string(d.index) + ")]]";
  for (size_t i = 0; i < given.size(); ++i) {
    const auto& g = given[i];
    std::string what = g.index >= 0 ? "index " + std::to_string(g.index) : "'" + g.name + "'";
    const FunctionConstantDecl* match = nullptr;
    for (const auto& d : declared)
      if (g.index >= 0 ? long(d.index) == g.index : d.name == g.name) match = &d;
    if (!match)
      throw Error(ErrorKind::Validation, source_name + " declares no function constant " + what +
                                             " (it declares " + (list.empty() ? "none" : list) + ")");
    if (match->type != metalx::rt::functionConstantTypeName(g.type))
      throw Error(ErrorKind::Validation, "function constant '" + match->name + "' is declared " + match->type +
                                             " but given a " + metalx::rt::functionConstantTypeName(g.type) +
                                             " value");
    for (size_t j = 0; j < i; ++j) {
      const auto& o = given[j];
      bool same = o.index >= 0 ? long(match->index) == o.index : match->name == o.name;
      if (same) throw Error(ErrorKind::Validation, "function constant '" + match->name + "' is given two values");
    }
  }
}

// A hash of every file in the built-in sources' folder (the .metal files and the headers
// they include), with the toolchain and prelude: what their preprocessed text depends on.
std::string builtinFolderHash(const std::string& source_dir, const std::vector<std::string>& names) {
  std::string all = toolchainIdentity();
  for (const std::string& n : names) all += "\n" + n + "\n" + readTextFileIfAny(source_dir + "/" + n).value_or("");
  return hashHex(all);
}

// The built-in source `file` through the C preprocessor (as the build's msl2cpp does:
// built-in kernels spell parameter lists and instantiations with macros), memoised in
// the cache folder: `cpp -E` over every source costs seconds at each process start.
std::string preprocessedBuiltin(const std::string& source_dir, const std::string& file,
                                const std::string& folder_hash) {
  const std::string memo = config().cache_dir + "/builtin-pp-" + hashHex(folder_hash + "\n" + file) + ".metal";
  if (std::optional<std::string> text = readTextFileIfAny(memo)) return *text;
  const std::string path = source_dir + "/" + file;
  const std::string scratch = config().cache_dir + "/tmp-pp-" + std::to_string(getpid()) + "-" + file;
  std::string source = preprocessMsl(readTextFile(path), path, config().cxx, preludePaths().prelude_dir, {}, scratch);
  // preprocessMsl names no scratch file in its linemarkers: the translation (the cache
  // key) is the same in every process.
  const std::string tmp = scratch + ".memo";
  {
    std::ofstream o(tmp, std::ios::binary);
    o << source;
  }
  std::rename(tmp.c_str(), memo.c_str());  // whole or not at all, for other processes
  return source;
}

}  // namespace

std::shared_ptr<const KernelSet> compileBuiltinKernelsWithValidation(const std::string& source_dir) {
  std::vector<std::string> files, folder;
  if (DIR* d = opendir(source_dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      folder.push_back(n);
      if (n.size() > 6 && n.substr(n.size() - 6) == ".metal") files.push_back(n);
    }
    closedir(d);
  }
  std::sort(folder.begin(), folder.end());
  if (files.empty())
    throw Error(ErrorKind::NotFound, "METALSIM_SHADER_VALIDATION=all: no built-in kernel sources (*.metal) in " +
                                         source_dir);
  std::sort(files.begin(), files.end());
  makeDirs(config().cache_dir);
  const std::string folder_hash = builtinFolderHash(source_dir, folder);
  // Each file is its own library, as at build time; the largest take a minute to
  // compile, so they compile in parallel (once per machine: the disk cache keeps them).
  std::vector<std::shared_ptr<const KernelSet>> parts(files.size());
  std::vector<std::string> errors(files.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < files.size(); i = next++) {
      try {
        metalx::rt::CompileOptions options;
        options.source_name = files[i];
        options.include_dirs = {source_dir};
        parts[i] = compileKernels(preprocessedBuiltin(source_dir, files[i], folder_hash), options, {},
                                  /*builtin=*/true)
                       .kernels;
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    }
  };
  const size_t workers = std::max<size_t>(1, std::min<size_t>(files.size(), std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t w = 1; w < workers; ++w) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (size_t i = 0; i < files.size(); ++i)
    if (!errors[i].empty())
      throw Error(ErrorKind::Compile, "METALSIM_SHADER_VALIDATION=all: built-in kernels " + files[i] +
                                          " did not compile with validation:\n" + errors[i]);
  return KernelSet::merged(parts);
}

metalx::rt::LibraryPtr compileShaderLibrary(SimDevice& device, const std::string& raw_source,
                                            const metalx::rt::CompileOptions& options) {
  std::string source = metalx::rt::expandIncludes(raw_source, options.source_name, options.include_dirs);
  CompiledKernels base = compileKernels(source, options, {});
  SimLibrary::Specializer specialize;
  if (!base.constants.empty()) {
    // Each value set translates and compiles the source again (a disk cache hit after
    // the first time on this machine), as Metal specialises at pipeline creation.
    auto declared = base.constants;
    specialize = [source, options, declared](const metalx::rt::FunctionConstantValues& values) {
      checkConstants(declared, values, options.source_name);
      return compileKernels(source, options, values).kernels;
    };
  }
  return std::make_shared<SimLibrary>(device, base.kernels, "source:" + base.key, std::move(specialize));
}

}  // namespace metalsim
