// Behaviour metalx relies on where a driver could legitimately differ: the simulator
// and Apple's Metal must both pass these (metalx_conformance_tests runs on any driver).
//
// - floating point: safe (IEEE) math, so results match CPU torch; Metal's default is
//   fast math, which metalx turns off (CompileOptions::fast_math = false);
// - buffer offsets: tensors are bound at their storage offset, which needs only the
//   element's alignment (1 byte for uint8, 2 for half), not 4 or 16;
// - threadgroup sizes: built-in launchers use up to 256 threads per group without
//   asking the pipeline, and assume SIMD groups of 32;
// - compile diagnostics name the caller's source with its own line numbers;
// - an empty view at the very end of a buffer can be bound.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "test_support.h"

namespace metalx::rt::testing {
namespace {

const char* kPinKernels = R"(#include <metal_stdlib>
using namespace metal;

kernel void divide(device const float* a [[buffer(0)]],
                   device const float* b [[buffer(1)]],
                   device float* q [[buffer(2)]],
                   device uint* flags [[buffer(3)]],
                   uint i [[thread_position_in_grid]]) {
  q[i] = a[i] / b[i];
  flags[i] = (isnan(a[i]) ? 1u : 0u) | (isinf(a[i]) ? 2u : 0u) | (isnan(q[i]) ? 4u : 0u);
}

kernel void copy_u8(device const uchar* in [[buffer(0)]], device uchar* out [[buffer(1)]],
                    uint i [[thread_position_in_grid]]) {
  out[i] = in[i];
}

kernel void copy_half(device const half* in [[buffer(0)]], device half* out [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) {
  out[i] = in[i];
}

kernel void add_n(device int* data [[buffer(0)]], constant uint& n [[buffer(1)]],
                  uint i [[thread_position_in_grid]]) {
  if (i < n) data[i] += 1;
}
)";

LibraryPtr pins() {
  static LibraryPtr lib = [] {
    CompileOptions o;
    o.source_name = "conformance_pins.metal";
    return dev().compileLibrary(kPinKernels, o);
  }();
  return lib;
}

class Conformance : public ::testing::Test {
 protected:
  void SetUp() override { queue = dev().newCommandQueue(); }
  CommandQueuePtr queue;
};

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST_F(Conformance, SafeMathDivisionIsCorrectlyRoundedAndKeepsSpecialValues) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-60, 60);
  std::vector<float> a, b;
  for (int i = 0; i < 4096; ++i) {
    a.push_back(std::ldexp(mantissa(rng), exponent(rng)) * (i % 3 ? 1.0f : -1.0f));
    b.push_back(std::ldexp(mantissa(rng), exponent(rng)));
  }
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::pair<float, float>> special = {
      {nan, 1.0f}, {inf, 2.0f}, {-inf, 2.0f}, {1.0f, 0.0f}, {-1.0f, 0.0f}, {0.0f, 0.0f},
      {inf, inf},  {1.0f, 3.0f}, {2.0f, 3.0f}, {-0.0f, 5.0f}};
  for (auto [x, y] : special) {
    a.push_back(x);
    b.push_back(y);
  }
  const uint32_t n = static_cast<uint32_t>(a.size());
  auto ba = bufferFrom(a), bb = bufferFrom(b);
  auto q = dev().newBuffer(n * sizeof(float)), flags = dev().newBuffer(n * sizeof(uint32_t));
  auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
    e.setComputePipeline(pins()->newComputePipeline("divide"));
    e.setBuffer(ba, 0, 0);
    e.setBuffer(bb, 0, 1);
    e.setBuffer(q, 0, 2);
    e.setBuffer(flags, 0, 3);
    e.dispatchThreads({n, 1, 1}, {64, 1, 1});
  });
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  auto got = read<float>(q, n);
  auto got_flags = read<uint32_t>(flags, n);
  for (uint32_t i = 0; i < n; ++i) {
    const float want = a[i] / b[i];
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got[i])) << a[i] << " / " << b[i] << " gave " << got[i];
    } else {
      EXPECT_EQ(bits(got[i]), bits(want)) << a[i] << " / " << b[i] << ": got " << got[i]
                                          << ", the host (IEEE) gives " << want;
    }
    const uint32_t want_flags = (std::isnan(a[i]) ? 1u : 0u) | (std::isinf(a[i]) ? 2u : 0u) |
                                (std::isnan(want) ? 4u : 0u);
    EXPECT_EQ(got_flags[i], want_flags) << "isnan/isinf of " << a[i] << " / " << b[i];
  }
}

TEST_F(Conformance, BuffersBindAtAnyOffsetAlignedToTheElement) {
  std::vector<uint8_t> bytes(256);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 1);
  auto src = bufferFrom(bytes);
  for (size_t offset : {size_t(1), size_t(2), size_t(3), size_t(6), size_t(10)}) {
    const bool half = offset % 2 == 0;
    auto dst = dev().newBuffer(256);
    const uint32_t count = half ? 64 : 128;
    auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
      e.setComputePipeline(pins()->newComputePipeline(half ? "copy_half" : "copy_u8"));
      e.setBuffer(src, offset, 0);
      e.setBuffer(dst, offset, 1);
      e.dispatchThreads({count, 1, 1}, {32, 1, 1});
    });
    ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
    auto out = read<uint8_t>(dst, 256);
    const size_t copied = count * (half ? 2 : 1);
    for (size_t i = 0; i < 256; ++i) {
      const bool inside = i >= offset && i < offset + copied;
      ASSERT_EQ(out[i], inside ? bytes[i] : 0) << "offset " << offset << ", byte " << i;
    }
  }
}

TEST_F(Conformance, BuiltinKernelsTake256ThreadsPerGroupInSimdGroupsOf32) {
  auto lib = dev().builtinLibrary();
  auto names = lib->functionNames();
  ASSERT_FALSE(names.empty());
  for (const auto& name : names) {
    auto p = lib->newComputePipeline(name);
    EXPECT_GE(p->maxTotalThreadsPerThreadgroup(), 256u) << name;
    EXPECT_LE(p->maxTotalThreadsPerThreadgroup(), dev().info().max_threads_per_threadgroup) << name;
    EXPECT_EQ(p->threadExecutionWidth(), 32u) << name;
  }
}

TEST_F(Conformance, CompileErrorsNameTheCallersSourceAndLine) {
  const char* src =
      "#include <metal_stdlib>\n"
      "using namespace metal;\n"
      "kernel void broken(device float* out [[buffer(0)]],\n"
      "                   uint gid [[thread_position_in_grid]]) {\n"
      "  out[gid] = 1.0f +;\n"  // line 5
      "}\n";
  CompileOptions o;
  o.source_name = "user_shader.metal";
  EXPECT_RT_ERROR(dev().compileLibrary(src, o), ErrorKind::Compile, "user_shader.metal:5:");
}

TEST_F(Conformance, AnEmptyViewAtTheEndOfABufferCanBeBound) {
  auto data = bufferFrom(std::vector<int>(16, 5));
  const uint32_t zero = 0;
  auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
    e.setComputePipeline(pins()->newComputePipeline("add_n"));
    e.setBuffer(data, data->length(), 0);  // an empty tensor at the end of its storage
    e.setBytes(&zero, sizeof zero, 1);
    e.dispatchThreads({1, 1, 1}, {1, 1, 1});
  });
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  for (int v : read<int>(data, 16)) EXPECT_EQ(v, 5);
}

}  // namespace
}  // namespace metalx::rt::testing
