// Run-time compilation of Metal Shading Language: diagnostics with the user's line
// numbers, the on-disk cache and its bound.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "shader_compiler.h"
#include "test_support.h"

namespace metalx::rt::testing {
namespace {

TEST(ShaderCompile, UnboundParameterIsReportedWithItsLine) {
  const char* src =
      "#include <metal_stdlib>\n"
      "kernel void k(device float* out [[buffer(0)]],\n"
      "              uint gid) {}\n";
  EXPECT_RT_ERROR(dev().compileLibrary(src, named("user_shader.metal")), ErrorKind::Compile,
                  "user_shader.metal:3: error: parameter 'gid' of kernel 'k' has no [[...]] attribute");
}

TEST(ShaderCompile, UnsupportedFeatureIsNamed) {
  const char* src =
      "#include <metal_stdlib>\n"
      "using namespace metal;\n"
      "kernel void k(texture2d<float> t [[texture(0)]], uint gid [[thread_position_in_grid]]) {}\n";
  EXPECT_RT_ERROR(dev().compileLibrary(src, named("tex.metal")), ErrorKind::Compile,
                  "textures, samplers and stage_in are not simulated");
}

TEST(ShaderCompile, UnattributedBuffersTakeTheFreeIndicesInOrder) {
  const char* src =
      "#include <metal_stdlib>\n"
      "kernel void k(device float* a, const device float* b [[buffer(0)]], constant uint& n,\n"
      "              threadgroup float* scratch, uint i [[thread_position_in_grid]]) {}\n";
  auto lib = dev().compileLibrary(src, named("auto.metal"));
  auto pipeline = lib->newComputePipeline("k");
  const auto& args = pipeline->arguments();
  ASSERT_EQ(args.size(), 4u);
  EXPECT_EQ(args[0].name, "b");  // explicit 0
  EXPECT_EQ(args[1].name, "a");  // then a and n take 1 and 2
  EXPECT_EQ(args[1].index, 1u);
  EXPECT_EQ(args[2].name, "n");
  EXPECT_EQ(args[2].index, 2u);
  EXPECT_EQ(args[3].kind, KernelArgument::Kind::Threadgroup);
  EXPECT_EQ(args[3].index, 0u);
}

TEST(ShaderCompile, MacroInstantiatedKernelsAreRegistered) {
  const char* src =
      "#include <metal_stdlib>\n"
      "template <typename T> [[kernel]] void fill(device T* d [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
      "  d[i] = T(1);\n"
      "}\n"
      "#define INST(T) template [[host_name(\"fill_\" #T)]] [[kernel]] void fill<T>(device T*, uint);\n"
      "INST(float)\n"
      "INST(int)\n";
  auto lib = dev().compileLibrary(src, named("macros.metal"));
  EXPECT_TRUE(lib->hasFunction("fill_float"));
  EXPECT_TRUE(lib->hasFunction("fill_int"));
}

TEST(ShaderCompile, TemplateWithoutHostNameIsRejected) {
  const char* src =
      "template <typename T> kernel void k(device T* p [[buffer(0)]]) {}\n"
      "template kernel void k<float>(device float* p [[buffer(0)]]);\n";
  EXPECT_RT_ERROR(dev().compileLibrary(src, named("t.metal")), ErrorKind::Compile, "needs [[host_name");
}

TEST(ShaderCompile, CompiledKernelRunsAndTheDiskCacheIsReused) {
  // A source no earlier run compiled, so the first compile really compiles.
  std::string tag = std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  std::string src =
      "#include <metal_stdlib>\n"
      "using namespace metal;\n"
      "// " + tag + "\n"
      "kernel void triple(device int* d [[buffer(0)]], uint i [[thread_position_in_grid]]) { d[i] *= 3; }\n";
  auto lib = dev().compileLibrary(src, named("cache_test.metal"));
  auto q = dev().newCommandQueue();
  auto data = bufferFrom(std::vector<int>{1, 2, 3});
  auto cb = runCompute(*q, [&](ComputeEncoder& e) {
    e.setComputePipeline(lib->newComputePipeline("triple"));
    e.setBuffer(data, 0, 0);
    e.dispatchThreads({3, 1, 1}, {3, 1, 1});
  });
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  EXPECT_EQ(read<int>(data, 3), (std::vector<int>{3, 6, 9}));

  // The compiled object is on disk, and compiling the same source again loads it
  // instead of writing it anew.
  const char* dir = std::getenv("METALSIM_CACHE_DIR");
  ASSERT_NE(dir, nullptr) << "ctest sets METALSIM_CACHE_DIR for the tests";
  auto newest = [&] {
    std::string best;
    time_t best_time = 0;
    DIR* d = opendir(dir);
    while (dirent* e = d ? readdir(d) : nullptr) {
      std::string n = e->d_name;
      struct stat st;
      if (n.size() > 3 && n.substr(n.size() - 3) == ".so" && stat((std::string(dir) + "/" + n).c_str(), &st) == 0 &&
          st.st_mtime >= best_time) {
        best_time = st.st_mtime;
        best = n;
      }
    }
    if (d) closedir(d);
    return std::make_pair(best, best_time);
  };
  auto first = newest();
  ASSERT_FALSE(first.first.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // mtime has 1 s resolution
  auto again = dev().compileLibrary(src, named("cache_test.metal"));
  EXPECT_TRUE(again->hasFunction("triple"));
  struct stat st;
  ASSERT_EQ(stat((std::string(dir) + "/" + first.first).c_str(), &st), 0);
  EXPECT_EQ(st.st_mtime, first.second) << "the cached object was rebuilt";
}

TEST(ShaderCompile, DiskCacheIsTrimmedOldestFirst) {
  char tmpl[] = "/tmp/metalsim-trim-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  auto put = [&](const std::string& stem, size_t bytes, time_t mtime) {
    for (const char* ext : {".so", ".cpp"}) {
      std::string path = dir + "/" + stem + ext;
      std::ofstream(path) << std::string(bytes, 'x');
      struct timespec times[2] = {{mtime, 0}, {mtime, 0}};
      utimensat(AT_FDCWD, path.c_str(), times, 0);
    }
  };
  put("old", 1000, 1000);
  put("mid", 1000, 2000);
  put("new", 1000, 3000);
  metalsim::trimKernelCache(dir, 4500);  // 6000 bytes held: the oldest pair must go
  auto exists = [&](const std::string& f) { return access((dir + "/" + f).c_str(), F_OK) == 0; };
  EXPECT_FALSE(exists("old.so"));
  EXPECT_FALSE(exists("old.cpp"));
  EXPECT_TRUE(exists("mid.so"));
  EXPECT_TRUE(exists("new.so"));
  metalsim::trimKernelCache(dir, 0);
  EXPECT_FALSE(exists("mid.so"));
  EXPECT_FALSE(exists("new.so"));
  rmdir(dir.c_str());
}

TEST(ShaderCompile, MemoisedBuiltinSourcesCountTowardsTheCacheBoundAndOtherFilesAreLeftAlone) {
  char tmpl[] = "/tmp/metalsim-trim-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  auto put = [&](const std::string& name, size_t bytes, time_t mtime) {
    std::string path = dir + "/" + name;
    std::ofstream(path) << std::string(bytes, 'x');
    struct timespec times[2] = {{mtime, 0}, {mtime, 0}};
    utimensat(AT_FDCWD, path.c_str(), times, 0);
  };
  put("builtin-pp-old.metal", 3000, 1000);  // a preprocessed source of an older wheel
  put("lib.so", 1000, 2000);
  put("lib.cpp", 1000, 2000);
  put("notes.txt", 5000, 500);  // not the cache's: never counted or removed
  auto exists = [&](const std::string& f) { return access((dir + "/" + f).c_str(), F_OK) == 0; };
  metalsim::trimKernelCache(dir, 4500);  // 5000 bytes held: the memo is the oldest
  EXPECT_FALSE(exists("builtin-pp-old.metal"));
  EXPECT_TRUE(exists("lib.so"));
  EXPECT_TRUE(exists("notes.txt"));
  metalsim::trimKernelCache(dir, 0);
  EXPECT_FALSE(exists("lib.so"));
  EXPECT_FALSE(exists("lib.cpp"));
  EXPECT_TRUE(exists("notes.txt"));
  unlink((dir + "/notes.txt").c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace metalx::rt::testing
