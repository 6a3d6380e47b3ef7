// Inlining of a shader's own headers (CompileOptions::include_dirs): found headers
// are inlined once each with #line framing; others (the MSL library's) are left.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "metalx/runtime/include_expander.h"
#include "test_support.h"

namespace metalx::rt::testing {
namespace {

std::string tempDir() {
  char tmpl[] = "/tmp/metalx-includes-XXXXXX";
  EXPECT_NE(mkdtemp(tmpl), nullptr);
  return tmpl;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(IncludeExpander, InlinesFoundHeadersOnceWithLineMarkers) {
  std::string dir = tempDir();
  mkdir((dir + "/lib").c_str(), 0755);
  write(dir + "/lib/a.h", "#pragma once\n#include <lib/b.h>\nint a_fn();\n");
  write(dir + "/lib/b.h", "#pragma once\nint b_fn();\n");
  std::string out = expandIncludes(
      "#include <metal_stdlib>\n#include <lib/a.h>\n#include \"lib/b.h\"\nkernel void k() {}\n", "s.metal", {dir});
  EXPECT_NE(out.find("#include <metal_stdlib>"), std::string::npos) << out;  // not ours: left
  EXPECT_EQ(count(out, "int a_fn();"), 1u) << out;
  EXPECT_EQ(count(out, "int b_fn();"), 1u) << out;  // included twice, inlined once
  EXPECT_EQ(count(out, "#pragma once"), 0u) << out;
  EXPECT_NE(out.find("#line 1 \"" + dir + "/lib/a.h\""), std::string::npos) << out;
  EXPECT_NE(out.find("#line 3 \"s.metal\""), std::string::npos) << out;  // back after line 2
  EXPECT_NE(out.find("kernel void k() {}"), std::string::npos);
}

TEST(IncludeExpander, QuotedIncludesFindHeadersBesideTheIncluder) {
  std::string dir = tempDir();
  mkdir((dir + "/lib").c_str(), 0755);
  write(dir + "/lib/outer.h", "#include \"inner.h\"\nint outer_fn();\n");
  write(dir + "/lib/inner.h", "int inner_fn();\n");
  std::string out = expandIncludes("#include <lib/outer.h>\n", "s.metal", {dir});
  EXPECT_EQ(count(out, "int inner_fn();"), 1u) << out;
  EXPECT_EQ(count(out, "#include"), 0u) << out;
}

TEST(IncludeExpander, WithoutDirectoriesTheSourceIsUnchanged) {
  const std::string src = "#include <c10/metal/utils.h>\nkernel void k() {}\n";
  EXPECT_EQ(expandIncludes(src, "s.metal", {}), src);
}

TEST(IncludeExpander, CompilesAKernelFromAnIncludedHeader) {
  std::string dir = tempDir();
  write(dir + "/ops.h",
        "#pragma once\n"
        "inline int doubled(int x) { return 2 * x; }\n");
  CompileOptions o;
  o.source_name = "inc.metal";
  o.include_dirs = {dir};
  auto lib = dev().compileLibrary(
      "#include <ops.h>\n"
      "kernel void k(device int* d, uint i [[thread_position_in_grid]]) { d[i] = doubled(d[i]); }\n",
      o);
  auto q = dev().newCommandQueue();
  auto data = bufferFrom(std::vector<int>{1, 2, 3});
  auto cb = runCompute(*q, [&](ComputeEncoder& e) {
    e.setComputePipeline(lib->newComputePipeline("k"));
    e.setBuffer(data, 0, 0);
    e.dispatchThreads({3, 1, 1}, {3, 1, 1});
  });
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  EXPECT_EQ(read<int>(data, 3), (std::vector<int>{2, 4, 6}));
}

}  // namespace
}  // namespace metalx::rt::testing
