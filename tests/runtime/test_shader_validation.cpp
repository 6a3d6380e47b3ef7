// Shader validation and the kernel watchdog of run-time compiled kernels: an access
// outside a buffer binding fails the command buffer with a message naming kernel,
// argument, offset, type and thread, touching nothing outside; a kernel that never
// ends is stopped with a GPU timeout error (suite KernelTimeoutEnv, run by ctest with
// METALSIM_KERNEL_TIMEOUT_S=1); the queue keeps working after both.
#include <chrono>
#include <cstring>

#include "api_fixture.h"

namespace metalx::rt::testing {
namespace {

const char* kHeader = "#include <metal_stdlib>\nusing namespace metal;\n";

class ShaderValidation : public ApiTest {
 protected:
  LibraryPtr compile(const std::string& body, const char* name = "user.metal") {
    return dev().compileLibrary(std::string(kHeader) + body, named(name));
  }
  // Runs `kernel` of `lib` over `threads` threads with `buffers` bound at 0, 1, ...
  // (each at its offset); returns the command buffer's error ("" when it completed).
  std::string run(const LibraryPtr& lib, const char* kernel, std::vector<std::pair<BufferPtr, size_t>> buffers,
                  uint32_t threads, uint32_t group = 1) {
    auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
      e.setComputePipeline(lib->newComputePipeline(kernel));
      for (size_t i = 0; i < buffers.size(); ++i) e.setBuffer(buffers[i].first, buffers[i].second, uint32_t(i));
      e.dispatchThreads({threads, 1, 1}, {group, 1, 1});
    });
    return cb->status() == CommandBufferStatus::Error ? cb->error() : "";
  }
};

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_F(ShaderValidation, WriteFarPastTheEndFailsNamingKernelArgumentOffsetTypeAndThread) {
  auto lib = compile(
      "kernel void far_write(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
      "  out[i + 1000000] = 1.0f;\n"
      "}\n");
  auto data = bufferFrom(std::vector<float>(16, 5.0f));
  const std::string err = run(lib, "far_write", {{data, 0}}, 16, 4);
  EXPECT_TRUE(has(err, "kernel 'far_write'")) << err;
  EXPECT_TRUE(has(err, "argument 'out' [[buffer(0)]]")) << err;
  EXPECT_TRUE(has(err, "as float (4 bytes) at byte offset 4000000")) << err;
  EXPECT_TRUE(has(err, "outside the 64 bytes bound")) << err;
  EXPECT_TRUE(has(err, "thread (0, 0, 0) [[thread_position_in_grid]]")) << err;
  EXPECT_TRUE(has(err, "Caused GPU Address Fault Error")) << err;
  for (float v : read<float>(data, 16)) EXPECT_EQ(v, 5.0f);
  expectQueueStillWorks();
}

TEST_F(ShaderValidation, TheReportedThreadIsTheOneThatStrayedInA2dGrid) {
  auto lib = compile(
      "kernel void one_strays(device uint* out [[buffer(0)]], uint2 p [[thread_position_in_grid]]) {\n"
      "  uint i = p.y * 8 + p.x;\n"
      "  out[(p.x == 5 && p.y == 1) ? i + 100 : i] = i;\n"
      "}\n");
  auto data = bufferFrom(std::vector<uint32_t>(16, 0));
  auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
    e.setComputePipeline(lib->newComputePipeline("one_strays"));
    e.setBuffer(data, 0, 0);
    e.dispatchThreads({8, 2, 1}, {4, 2, 1});
  });
  ASSERT_EQ(cb->status(), CommandBufferStatus::Error);
  EXPECT_TRUE(has(cb->error(), "thread (5, 1, 0) [[thread_position_in_grid]] of threadgroup (1, 0, 0)"))
      << cb->error();
  EXPECT_TRUE(has(cb->error(), "as uint (4 bytes) at byte offset 452")) << cb->error();
}

TEST_F(ShaderValidation, RangeStartsAtTheBindingOffsetAndEndsAtTheBuffer) {
  // The buffer holds 32 ints, bound from element 8: index -1 is before the binding,
  // index 23 the last element of the buffer, index 24 past its end.
  auto lib = compile(
      "kernel void poke(device int* p [[buffer(0)]], constant int& at [[buffer(1)]],\n"
      "                 uint i [[thread_position_in_grid]]) {\n"
      "  p[at] = 7;\n"
      "}\n");
  std::vector<int> init(32);
  for (int i = 0; i < 32; ++i) init[i] = i;
  for (int at : {-1, 23, 24}) {
    auto data = bufferFrom(init);
    auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
      e.setComputePipeline(lib->newComputePipeline("poke"));
      e.setBuffer(data, 8 * sizeof(int), 0);
      e.setBytes(&at, sizeof at, 1);
      e.dispatchThreads({1, 1, 1}, {1, 1, 1});
    });
    std::vector<int> expected = init;
    if (at == 23) {
      EXPECT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
      expected[31] = 7;
    } else {
      ASSERT_EQ(cb->status(), CommandBufferStatus::Error);
      EXPECT_TRUE(has(cb->error(), "at byte offset " + std::to_string(at * 4) + ", outside the 96 bytes"))
          << cb->error();
    }
    EXPECT_EQ(read<int>(data, 32), expected) << "at " << at;
  }
}

TEST_F(ShaderValidation, ConstantReferenceLargerThanItsBindingIsReported) {
  auto lib = compile(
      "struct Params { uint n; float scale; float bias; };\n"
      "kernel void scale(device float* out [[buffer(0)]], constant Params& p [[buffer(1)]],\n"
      "                  uint i [[thread_position_in_grid]]) { out[i] = p.scale; }\n");
  auto out = bufferFrom(std::vector<float>(4, 0.0f));
  uint32_t n = 4;  // 4 bytes where the kernel reads 12
  auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
    e.setComputePipeline(lib->newComputePipeline("scale"));
    e.setBuffer(out, 0, 0);
    e.setBytes(&n, sizeof n, 1);
    e.dispatchThreads({4, 1, 1}, {4, 1, 1});
  });
  ASSERT_EQ(cb->status(), CommandBufferStatus::Error);
  EXPECT_TRUE(has(cb->error(), "argument 'p' [[buffer(1)]] as Params (12 bytes) at byte offset 0")) << cb->error();
}

TEST_F(ShaderValidation, RealWorldKernelStylesRunAsBefore) {
  // Loops over p[i], float4 casts, struct pointers, atomics, pointer arithmetic,
  // helpers taking device pointers (plain and template), threadgroup memory, barriers.
  auto lib = compile(
      "struct Pair { float a; float b; };\n"
      "inline void put(device float* p, uint i, float v) { p[i] = v; }\n"
      "template <typename T> inline T get(const device T* p, uint i) { return p[i]; }\n"
      "kernel void styles(device float* out [[buffer(0)]], const device float* x [[buffer(1)]],\n"
      "                   device atomic_uint* count [[buffer(2)]], device Pair* pairs [[buffer(3)]],\n"
      "                   uint i [[thread_position_in_grid]], uint l [[thread_position_in_threadgroup]]) {\n"
      "  threadgroup float shared[8];\n"
      "  shared[l] = x[i];\n"
      "  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
      "  float s = 0;\n"
      "  for (uint k = 0; k < 8; ++k) s += shared[k];\n"
      "  const device float4* x4 = (const device float4*)x;\n"
      "  float4 v = x4[i / 4];\n"
      "  device float* row = out + i;\n"
      "  put(row, 0, s + v[i % 4] + get(x, i));\n"
      "  atomic_fetch_add_explicit(count, 1u, memory_order_relaxed);\n"
      "  device Pair* pr = pairs + i;\n"
      "  pr->a = float(i);\n"
      "  (*pr).b = pr->a * 2;\n"
      "}\n");
  std::vector<float> xs(8);
  for (int i = 0; i < 8; ++i) xs[i] = float(i + 1);
  auto out = bufferFrom(std::vector<float>(8, 0.0f));
  auto x = bufferFrom(xs);
  auto count = bufferFrom(std::vector<uint32_t>(1, 0));
  auto pairs = bufferFrom(std::vector<float>(16, 0.0f));
  EXPECT_EQ(run(lib, "styles", {{out, 0}, {x, 0}, {count, 0}, {pairs, 0}}, 8, 8), "");
  auto o = read<float>(out, 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(o[i], 36.0f + 2 * xs[i]) << i;
  EXPECT_EQ(read<uint32_t>(count, 1)[0], 8u);
  auto p = read<float>(pairs, 16);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(p[2 * i + 1], 2.0f * i);
}

TEST_F(ShaderValidation, CastPointerKeepsTheRangeAndSynchronisingKernelsNameTheThread) {
  // float4 access through a cast, in a kernel that runs on fibers (barrier): the last
  // float4 reaches 4 bytes past the 60-byte binding.
  auto lib = compile(
      "kernel void vec_read(device float* out [[buffer(0)]], const device float* x [[buffer(1)]],\n"
      "                     uint i [[thread_position_in_grid]]) {\n"
      "  threadgroup_barrier(mem_flags::mem_none);\n"
      "  const device float4* x4 = (const device float4*)x;\n"
      "  out[i] = x4[i].x;\n"
      "}\n");
  auto out = bufferFrom(std::vector<float>(4, 0.0f));
  auto x = bufferFrom(std::vector<float>(16, 1.0f));
  const std::string err = run(lib, "vec_read", {{out, 0}, {x, 4}}, 4, 4);
  EXPECT_TRUE(has(err, "argument 'x' [[buffer(1)]] as float4 (16 bytes) at byte offset 48, outside the 60 bytes"))
      << err;
  EXPECT_TRUE(has(err, "thread (3, 0, 0)")) << err;
}

// ---------------------------------------------------------------- threadgroup memory

TEST_F(ShaderValidation, ThreadgroupArrayIndexedPastItsEndIsReportedBeforeItOverwritesItsNeighbour) {
  // Thread 5 writes shared[13]: on a GPU that lands in `after` (declared next), which
  // every thread then copies out.
  auto lib = compile(
      "kernel void tg_over(device float* out [[buffer(0)]], uint l [[thread_position_in_threadgroup]],\n"
      "                    uint i [[thread_position_in_grid]]) {\n"
      "  threadgroup float shared[8];\n"
      "  threadgroup float after[8];\n"
      "  after[l] = 1.0f;\n"
      "  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
      "  shared[l == 5 ? 13 : l] = 2.0f;\n"
      "  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
      "  out[i] = after[l];\n"
      "}\n");
  auto out = bufferFrom(std::vector<float>(16, 0.0f));
  const std::string err = run(lib, "tg_over", {{out, 0}}, 16, 8);
  EXPECT_TRUE(has(err, "invalid threadgroup memory access")) << err;
  EXPECT_TRUE(has(err, "kernel 'tg_over'")) << err;
  EXPECT_TRUE(has(err, "thread (5, 0, 0) [[thread_position_in_grid]] of threadgroup (0, 0, 0)")) << err;
  EXPECT_TRUE(has(err, "threadgroup variable 'shared' as float (4 bytes) at byte offset 52, outside its 32 bytes"))
      << err;
  for (float v : read<float>(out, 16)) EXPECT_EQ(v, 0.0f);  // the dispatch stopped before any copy out
  expectQueueStillWorks();
}

TEST_F(ShaderValidation, TwoDimensionalThreadgroupArrayIsCheckedAgainstTheWholeVariable) {
  // tile[r][5] is tile[r + 1][0] for r < 3 (inside the variable, as C and MSL lay it
  // out); tile[3][5] is one float past its 80 bytes. The kernel runs without
  // barriers, so the simulator loops over the threads instead of running fibers.
  auto lib = compile(
      "kernel void rows(device float* out [[buffer(0)]], constant uint& last [[buffer(1)]],\n"
      "                 uint l [[thread_position_in_threadgroup]], uint i [[thread_position_in_grid]]) {\n"
      "  threadgroup float tile[4][5];\n"
      "  if (l <= last) tile[l][5] = float(l);\n"
      "  out[i] = float(l);\n"
      "}\n");
  for (uint32_t last : {2u, 3u}) {
    auto out = bufferFrom(std::vector<float>(4, -1.0f));
    auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
      e.setComputePipeline(lib->newComputePipeline("rows"));
      e.setBuffer(out, 0, 0);
      e.setBytes(&last, sizeof last, 1);
      e.dispatchThreads({4, 1, 1}, {4, 1, 1});
    });
    if (last == 2) {
      EXPECT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
      EXPECT_EQ(read<float>(out, 4), (std::vector<float>{0, 1, 2, 3}));
    } else {
      ASSERT_EQ(cb->status(), CommandBufferStatus::Error);
      EXPECT_TRUE(has(cb->error(), "threadgroup variable 'tile' as float (4 bytes) at byte offset 80, outside its "
                                   "80 bytes"))
          << cb->error();
      EXPECT_TRUE(has(cb->error(), "thread (3, 0, 0) [[thread_position_in_grid]]")) << cb->error();
    }
  }
}

TEST_F(ShaderValidation, ThreadgroupArgumentIsCheckedAgainstTheLengthTheEncoderSet) {
  // 64 bytes = 16 ints are set for [[threadgroup(0)]]; thread 8 of 16 writes int 16.
  auto lib = compile(
      "kernel void scratch(device int* out [[buffer(0)]], threadgroup int* tmp [[threadgroup(0)]],\n"
      "                    uint l [[thread_position_in_threadgroup]]) {\n"
      "  tmp[2 * l] = int(l);\n"
      "  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
      "  out[l] = tmp[l];\n"
      "}\n");
  auto out = bufferFrom(std::vector<int>(16, 0));
  auto dispatch = [&](size_t tg_bytes, uint32_t threads) {
    return runCompute(*queue, [&](ComputeEncoder& e) {
      e.setComputePipeline(lib->newComputePipeline("scratch"));
      e.setBuffer(out, 0, 0);
      e.setThreadgroupMemoryLength(tg_bytes, 0);
      e.dispatchThreads({threads, 1, 1}, {threads, 1, 1});
    });
  };
  auto ok = dispatch(64, 8);  // threads 0..7 write ints 0..14
  EXPECT_EQ(ok->status(), CommandBufferStatus::Completed) << ok->error();
  EXPECT_EQ(read<int>(out, 4), (std::vector<int>{0, 0, 1, 0}));
  auto bad = dispatch(64, 16);
  ASSERT_EQ(bad->status(), CommandBufferStatus::Error);
  EXPECT_TRUE(has(bad->error(), "argument 'tmp' [[threadgroup(0)]] as int (4 bytes) at byte offset 64, outside its "
                                "64 bytes"))
      << bad->error();
  EXPECT_TRUE(has(bad->error(), "thread (8, 0, 0)")) << bad->error();
}

TEST_F(ShaderValidation, ThreadgroupPointersKeepTheRangeThroughHelpersArithmeticAndCasts) {
  // A template helper deduces T from a threadgroup array; a pointer into the array
  // and a float2 cast of it stay checked; sizeof gives the arrays' sizes as without
  // validation. `reach` says how far the helper reads.
  auto lib = compile(
      "template <typename T> inline T sum_from(threadgroup T* buf, uint from, uint n) {\n"
      "  T s = 0;\n"
      "  for (uint k = from; k < from + n; ++k) s += buf[k];\n"
      "  return s;\n"
      "}\n"
      "kernel void helper(device float* out [[buffer(0)]], constant uint& reach [[buffer(1)]],\n"
      "                   uint l [[thread_position_in_threadgroup]]) {\n"
      "  threadgroup float vals[8];\n"
      "  threadgroup half tile[2][3];\n"
      "  vals[l] = float(l + 1);\n"
      "  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
      "  threadgroup float* upper = vals + 4;\n"
      "  const threadgroup float2* pairs = (const threadgroup float2*)upper;\n"
      "  out[l] = sum_from(vals, 0, reach) + upper[0] + pairs[1].y +\n"
      "           float(sizeof(vals) / sizeof vals[0]) + float(sizeof(tile) + sizeof(tile[1]));\n"
      "}\n");
  for (uint32_t reach : {8u, 9u}) {
    auto out = bufferFrom(std::vector<float>(8, 0.0f));
    auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
      e.setComputePipeline(lib->newComputePipeline("helper"));
      e.setBuffer(out, 0, 0);
      e.setBytes(&reach, sizeof reach, 1);
      e.dispatchThreads({8, 1, 1}, {8, 1, 1});
    });
    if (reach == 8) {
      EXPECT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
      // sizeof keeps the arrays' sizes: 8 elements, 12 + 6 bytes.
      for (float v : read<float>(out, 8)) EXPECT_EQ(v, 36.0f + 5.0f + 8.0f + 8.0f + 18.0f);
    } else {
      ASSERT_EQ(cb->status(), CommandBufferStatus::Error);
      EXPECT_TRUE(has(cb->error(), "as float (4 bytes) at byte offset 32, outside its 32 bytes")) << cb->error();
    }
  }
}

// ---------------------------------------------------------------- the watchdog

class KernelTimeoutEnv : public ShaderValidation {
 protected:
  void SetUp() override {
    if (!envIs("METALSIM_KERNEL_TIMEOUT_S", "1")) GTEST_SKIP() << "needs METALSIM_KERNEL_TIMEOUT_S=1";
    ShaderValidation::SetUp();
  }
};

TEST_F(KernelTimeoutEnv, SpinningKernelsEndWithAGpuTimeoutErrorAndTheQueueKeepsWorking) {
  auto lib = compile(
      "kernel void spin(device atomic_int* flag [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
      "  while (atomic_load_explicit(flag, memory_order_relaxed) == 0) {}\n"
      "}\n"
      "kernel void spin_fibers(device int* flag [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
      "  threadgroup_barrier(mem_flags::mem_none);\n"
      "  for (;;) { if (((volatile device int*)flag)[0] != 0) break; }\n"
      "}\n");
  for (const char* kernel : {"spin", "spin_fibers"}) {
    auto flag = bufferFrom(std::vector<int>(1, 0));
    const auto t0 = std::chrono::steady_clock::now();
    const std::string err = run(lib, kernel, {{flag, 0}}, 256, 32);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_TRUE(has(err, "Caused GPU Timeout Error")) << err;
    EXPECT_TRUE(has(err, "METALSIM_KERNEL_TIMEOUT_S=1")) << err;
    EXPECT_TRUE(has(err, std::string("kernel '") + kernel + "'")) << err;
    EXPECT_GE(s, 0.9);
    EXPECT_LT(s, 20.0);
    expectQueueStillWorks();
  }
}

}  // namespace
}  // namespace metalx::rt::testing
