// Kernel execution with Metal's semantics: threadgroups, barriers, SIMD groups of 32,
// threadgroup memory, templates, atomics, and the errors a GPU would hang or fault on.
#include <cmath>
#include <numeric>

#include "test_support.h"

namespace metalx::rt::testing {
namespace {

constexpr char kExecutionKernels[] = "execution.metal";
using Execution = KernelFileTest<kExecutionKernels>;

// Odd sizes and group sizes: partial last threadgroups, partial last SIMD groups.
TEST_F(Execution, ThreadgroupBarrierReductionIsExact) {
  auto p = pipeline("tg_tree_sum");
  for (uint32_t n : {1u, 31u, 257u, 1000003u}) {
    for (uint32_t group : {32u, 100u, 1024u}) {
      std::vector<int> in(n);
      for (uint32_t i = 0; i < n; ++i) in[i] = int(i % 1013) - 500;
      uint32_t groups = (n + group - 1) / group;
      auto bin = bufferFrom(in);
      auto bout = dev().newBuffer(groups * sizeof(int));
      auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
        e.setComputePipeline(p);
        e.setBuffer(bin, 0, 0);
        e.setBuffer(bout, 0, 1);
        e.setBytes(&n, 4, 2);
        e.dispatchThreads({n, 1, 1}, {group, 1, 1});
      });
      ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
      auto sums = read<int>(bout, groups);
      for (uint32_t g = 0; g < groups; ++g) {
        long long expect = 0;
        for (uint32_t i = g * group; i < std::min(n, (g + 1) * group); ++i) expect += in[i];
        ASSERT_EQ(sums[g], expect) << "n=" << n << " group size=" << group << " group " << g;
      }
    }
  }
}

TEST_F(Execution, SimdSumReductionIsExactOverOddSizes) {
  auto p = pipeline("simd_atomic_sum");
  for (uint32_t n : {1u, 33u, 1000u, 123457u}) {
    for (uint32_t group : {32u, 96u, 100u}) {  // 100: the last SIMD group of each has 4 lanes
      std::vector<uint32_t> in(n);
      for (uint32_t i = 0; i < n; ++i) in[i] = (i * 2654435761u) % 1000u;
      auto bin = bufferFrom(in);
      auto total = bufferFrom(std::vector<uint32_t>{0});
      auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
        e.setComputePipeline(p);
        e.setBuffer(bin, 0, 0);
        e.setBuffer(total, 0, 1);
        e.setBytes(&n, 4, 2);
        e.dispatchThreads({n, 1, 1}, {group, 1, 1});
      });
      ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
      uint64_t expect = std::accumulate(in.begin(), in.end(), uint64_t(0));
      EXPECT_EQ(read<uint32_t>(total, 1)[0], expect) << "n=" << n << " group=" << group;
    }
  }
}

struct SimdResults {
  int sum, prefix_exclusive, prefix_inclusive, broadcast3, shuffle_down2, shuffle_xor1, maximum;
  uint32_t ballot_even_low, ballot_even_high, is_first;
};

TEST_F(Execution, SimdFunctionsFollowTheirDefinitions) {
  auto p = pipeline("simd_functions");
  const uint32_t n = 200, group = 100;  // SIMD groups of 32,32,32,4 in each threadgroup
  auto out = dev().newBuffer(n * sizeof(SimdResults));
  auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
    e.setComputePipeline(p);
    e.setBuffer(out, 0, 0);
    e.dispatchThreads({n, 1, 1}, {group, 1, 1});
  });
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  auto r = read<SimdResults>(out, n);
  auto value = [](uint32_t gid) { return int(gid % 7) + 1; };
  for (uint32_t gid = 0; gid < n; ++gid) {
    uint32_t local = gid % group, lane = local % 32, base = gid - lane;
    uint32_t width = std::min(32u, group - (local - lane));  // active lanes in this SIMD group
    int sum = 0, excl = 0, mx = 0;
    for (uint32_t l = 0; l < width; ++l) {
      sum += value(base + l);
      if (l < lane) excl += value(base + l);
      mx = std::max(mx, value(base + l));
    }
    SCOPED_TRACE("gid " + std::to_string(gid));
    EXPECT_EQ(r[gid].sum, sum);
    EXPECT_EQ(r[gid].prefix_exclusive, excl);
    EXPECT_EQ(r[gid].prefix_inclusive, excl + value(gid));
    EXPECT_EQ(r[gid].maximum, mx);
    if (width > 3) EXPECT_EQ(r[gid].broadcast3, value(base + 3));
    // shuffle_down past the last active lane keeps the lane's own value
    EXPECT_EQ(r[gid].shuffle_down2, lane + 2 < width ? value(gid + 2) : value(gid));
    if ((lane ^ 1u) < width) EXPECT_EQ(r[gid].shuffle_xor1, value(base + (lane ^ 1u)));
    uint64_t even = 0;
    for (uint32_t l = 0; l < width; l += 2) even |= uint64_t(1) << l;
    EXPECT_EQ(r[gid].ballot_even_low, uint32_t(even));
    EXPECT_EQ(r[gid].ballot_even_high, uint32_t(even >> 32));
    EXPECT_EQ(r[gid].is_first, lane == 0 ? 1u : 0u);
  }
}

TEST_F(Execution, SimdFunctionsInDivergentBranchesSeeOnlyTheirLanes) {
  auto p = pipeline("simd_divergent");
  const uint32_t n = 64 + 20;  // two full SIMD groups and one of 20 lanes
  auto out = dev().newBuffer(n * sizeof(int));
  auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
    e.setComputePipeline(p);
    e.setBuffer(out, 0, 0);
    e.dispatchThreads({n, 1, 1}, {n, 1, 1});
  });
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  auto r = read<int>(out, n);
  for (uint32_t gid = 0; gid < n; ++gid) {
    uint32_t lane = gid % 32, width = gid < 64 ? 32 : 20;
    int expect = lane < 10 ? 10 : 100 + 2 * int(width - 10);
    EXPECT_EQ(r[gid], expect) << "gid " << gid;
  }
}

TEST_F(Execution, LanesThatReturnedAreInactive) {
  auto p = pipeline("simd_after_return");
  const uint32_t n = 45, threads = 64;
  auto out = bufferFrom(std::vector<int>(threads, -1));
  auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
    e.setComputePipeline(p);
    e.setBuffer(out, 0, 0);
    e.setBytes(&n, 4, 1);
    e.dispatchThreads({threads, 1, 1}, {threads, 1, 1});
  });
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  auto r = read<int>(out, threads);
  for (uint32_t gid = 0; gid < threads; ++gid)
    EXPECT_EQ(r[gid], gid < 32 ? 32 : gid < n ? int(n - 32) : -1) << "gid " << gid;
}

TEST_F(Execution, DynamicThreadgroupMemoryIsSharedByTheGroup) {
  auto p = pipeline("reverse_in_group");
  const uint32_t n = 1000, group = 250;
  std::vector<float> in(n);
  std::iota(in.begin(), in.end(), 0.0f);
  auto bin = bufferFrom(in);
  auto bout = dev().newBuffer(n * sizeof(float));
  auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
    e.setComputePipeline(p);
    e.setBuffer(bin, 0, 0);
    e.setBuffer(bout, 0, 1);
    e.setThreadgroupMemoryLength(256 * sizeof(float), 0);
    e.dispatchThreadgroups({n / group, 1, 1}, {group, 1, 1});
  });
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  auto r = read<float>(bout, n);
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t g = i / group, t = i % group;
    ASSERT_EQ(r[i], in[g * group + (group - 1 - t)]) << i;
  }
}

TEST_F(Execution, ThreeDimensionalGridWithPartialEdgeGroups) {
  auto p = pipeline("positions_3d");
  const Size3 grid{13, 7, 5}, tg{4, 3, 2};
  const size_t count = grid.count();
  auto out = dev().newBuffer(count * 3 * 16);
  auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
    e.setComputePipeline(p);
    e.setBuffer(out, 0, 0);
    e.dispatchThreads(grid, tg);
  });
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  auto r = read<uint32_t>(out, count * 12);
  for (uint32_t z = 0; z < grid.depth; ++z)
    for (uint32_t y = 0; y < grid.height; ++y)
      for (uint32_t x = 0; x < grid.width; ++x) {
        size_t linear = (z * grid.height + y) * grid.width + x;
        const uint32_t* v = &r[linear * 12];
        uint32_t lx = x % 4, ly = y % 3, lz = z % 2;
        uint32_t sx = std::min<uint32_t>(4, 13 - x / 4 * 4), sy = std::min<uint32_t>(3, 7 - y / 3 * 3),
                 sz = std::min<uint32_t>(2, 5 - z / 2 * 2);
        SCOPED_TRACE("thread " + std::to_string(x) + "," + std::to_string(y) + "," + std::to_string(z));
        EXPECT_EQ(v[0], x);
        EXPECT_EQ(v[1], y);
        EXPECT_EQ(v[2], z);
        EXPECT_EQ(v[3], (lz * sy + ly) * sx + lx);  // index within the (clipped) group
        EXPECT_EQ(v[4], lx);
        EXPECT_EQ(v[5], ly);
        EXPECT_EQ(v[6], lz);
        EXPECT_EQ(v[7], sx * sy * sz);  // threads_per_threadgroup is clipped at edges
        EXPECT_EQ(v[8], x / 4);
        EXPECT_EQ(v[9], y / 3);
        EXPECT_EQ(v[10], z / 2);
      }
}

TEST_F(Execution, DeviceAtomicsAcrossConcurrentThreadgroups) {
  auto p = pipeline("histogram");
  const uint32_t n = 1 << 20;
  std::vector<uint32_t> in(n);
  std::vector<uint32_t> expect(16, 0);
  for (uint32_t i = 0; i < n; ++i) {
    in[i] = (i * 7919u) ^ (i >> 3);
    ++expect[in[i] % 16];
  }
  auto bin = bufferFrom(in);
  auto bins = bufferFrom(std::vector<uint32_t>(16, 0));
  auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
    e.setComputePipeline(p);
    e.setBuffer(bin, 0, 0);
    e.setBuffer(bins, 0, 1);
    e.setBytes(&n, 4, 2);
    e.dispatchThreads({n, 1, 1}, {256, 1, 1});
  });
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  EXPECT_EQ(read<uint32_t>(bins, 16), expect);
}

TEST_F(Execution, TemplateInstantiationsAreCallableByHostName) {
  for (auto name : {"scale_float", "scale_int", "scale_half"}) EXPECT_TRUE(lib->hasFunction(name)) << name;
  float factor = 2.5f;
  auto run = [&](const char* name, const BufferPtr& data, uint32_t n) {
    return runCompute(*queue, [&](ComputeEncoder& e) {
      e.setComputePipeline(pipeline(name));
      e.setBuffer(data, 0, 0);
      e.setBytes(&factor, 4, 1);
      e.dispatchThreads({n, 1, 1}, {64, 1, 1});
    });
  };
  auto f = bufferFrom(std::vector<float>{1, 2, 3, -4});
  auto i = bufferFrom(std::vector<int>{1, 2, 3, -4});
  ASSERT_EQ(run("scale_float", f, 4)->status(), CommandBufferStatus::Completed);
  ASSERT_EQ(run("scale_int", i, 4)->status(), CommandBufferStatus::Completed);
  EXPECT_EQ(read<float>(f, 4), (std::vector<float>{2.5f, 5.0f, 7.5f, -10.0f}));
  EXPECT_EQ(read<int>(i, 4), (std::vector<int>{2, 5, 7, -10}));
}

TEST_F(Execution, VectorTypesSwizzlesAndMath) {
  auto p = pipeline("vector_math");
  std::vector<float> in = {0.5f, 2.0f, 3.0f, -16.0f, -1.0f, 0.25f, 1.0f, 9.0f};
  auto bin = bufferFrom(in);
  auto bout = dev().newBuffer(in.size() * sizeof(float));
  auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
    e.setComputePipeline(p);
    e.setBuffer(bin, 0, 0);
    e.setBuffer(bout, 0, 1);
    e.dispatchThreads({2, 1, 1}, {2, 1, 1});
  });
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  auto r = read<float>(bout, 8);
  for (int v = 0; v < 2; ++v) {
    const float* x = &in[v * 4];
    float c = std::min(std::max(x[0], 0.0f), 1.0f);
    EXPECT_FLOAT_EQ(r[v * 4 + 0], x[0] * 2 + c);
    EXPECT_FLOAT_EQ(r[v * 4 + 1], x[1] * 2 + c);
    EXPECT_FLOAT_EQ(r[v * 4 + 2], x[2] * 2 + c);
    EXPECT_FLOAT_EQ(r[v * 4 + 3], std::sqrt(std::fabs(x[3])) + c);
  }
}

}  // namespace
}  // namespace metalx::rt::testing
