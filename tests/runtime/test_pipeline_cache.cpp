// BoundedCache and PipelineCache (bounded_cache.h, pipeline_cache.h).
//
// Every cache in metalx is a BoundedCache so none grows without bound as shapes and
// sources vary; PipelineCache is what keeps a dispatch from paying a pipeline creation
// (a compile-and-link on Metal). Both must hand back the same object for the same key,
// evict least-recently-used entries first, and stay correct under concurrent use.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"

namespace metalx::rt::testing {
namespace {

using IntCache = BoundedCache<int, int>;

// getOrCreate that records whether `make` ran (a miss) and returns key * 10.
struct Probe {
  IntCache& cache;
  int made = 0;
  int get(int key) {
    return cache.getOrCreate(key, [&] {
      ++made;
      return key * 10;
    });
  }
  // True if `key` is cached; a lookup of a cached key refreshes it (as any hit does).
  bool cached(int key) {
    int before = made;
    get(key);
    return made == before;
  }
};

// ---------------------------------------------------------------- BoundedCache

TEST(BoundedCache, HitReturnsTheStoredValueWithoutCallingMake) {
  IntCache cache(4);
  Probe p{cache};
  EXPECT_EQ(p.get(1), 10);
  EXPECT_EQ(p.made, 1);
  EXPECT_EQ(p.get(1), 10);
  EXPECT_EQ(p.made, 1);
  auto s = cache.stats();
  EXPECT_EQ(s.size, 1u);
  EXPECT_EQ(s.capacity, 4u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.evictions, 0u);
}

TEST(BoundedCache, EvictsTheLeastRecentlyUsedEntry) {
  IntCache cache(3);
  Probe p{cache};
  p.get(1);
  p.get(2);
  p.get(3);
  p.get(1);  // hit: 1 becomes the most recently used; 2 is now the oldest
  p.get(4);  // evicts 2
  auto s = cache.stats();
  EXPECT_EQ(s.size, 3u);
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 4u);
  // Order of the checks matters: each hit refreshes; check the expected survivors
  // first (1, 3, 4), then the evicted one (which re-inserts and evicts the oldest).
  EXPECT_TRUE(p.cached(1));
  EXPECT_TRUE(p.cached(3));
  EXPECT_TRUE(p.cached(4));
  EXPECT_FALSE(p.cached(2));  // re-created; evicts 1, the least recently used now
  EXPECT_EQ(cache.stats().evictions, 2u);
  EXPECT_FALSE(p.cached(1));
}

TEST(BoundedCache, SizeNeverExceedsCapacityAndEvictionsAreCounted) {
  IntCache cache(10);
  Probe p{cache};
  for (int k = 0; k < 100; ++k) {
    EXPECT_EQ(p.get(k), k * 10);
    ASSERT_LE(cache.stats().size, 10u);
  }
  auto s = cache.stats();
  EXPECT_EQ(s.size, 10u);
  EXPECT_EQ(s.misses, 100u);
  EXPECT_EQ(s.evictions, 90u);
  EXPECT_EQ(s.hits, 0u);
  for (int k = 90; k < 100; ++k) EXPECT_TRUE(p.cached(k)) << k;  // the newest ten
}

TEST(BoundedCache, ZeroCapacityMeansOne) {
  IntCache cache(0);
  Probe p{cache};
  EXPECT_EQ(cache.stats().capacity, 1u);
  p.get(1);
  p.get(2);
  EXPECT_EQ(cache.stats().size, 1u);
  EXPECT_TRUE(p.cached(2));
  EXPECT_FALSE(p.cached(1));
}

TEST(BoundedCache, ClearEmptiesTheCache) {
  IntCache cache(8);
  Probe p{cache};
  for (int k = 0; k < 5; ++k) p.get(k);
  cache.clear();
  EXPECT_EQ(cache.stats().size, 0u);
  EXPECT_EQ(cache.stats().capacity, 8u);
  for (int k = 0; k < 5; ++k) EXPECT_FALSE(p.cached(k)) << k;
  EXPECT_EQ(p.made, 10);
  EXPECT_EQ(cache.stats().size, 5u);
}

// Values are released when evicted or cleared (the cache is how memory of unused
// pipelines and modules is given back).
TEST(BoundedCache, EvictionAndClearReleaseValues) {
  BoundedCache<int, std::shared_ptr<int>> cache(2);
  std::weak_ptr<int> first;
  {
    auto v = cache.getOrCreate(1, [] { return std::make_shared<int>(1); });
    first = v;
  }
  EXPECT_FALSE(first.expired());
  cache.getOrCreate(2, [] { return std::make_shared<int>(2); });
  cache.getOrCreate(3, [] { return std::make_shared<int>(3); });  // evicts 1
  EXPECT_TRUE(first.expired());
  std::weak_ptr<int> third = cache.getOrCreate(3, [] { return std::make_shared<int>(-1); });
  EXPECT_EQ(*third.lock(), 3);
  cache.clear();
  EXPECT_TRUE(third.expired());
}

TEST(BoundedCache, SetCapacityShrinksKeepingTheMostRecentlyUsed) {
  IntCache cache(5);
  Probe p{cache};
  for (int k = 1; k <= 5; ++k) p.get(k);
  p.get(2);  // recency, newest first: 2 5 4 3 1
  cache.setCapacity(2);
  auto s = cache.stats();
  EXPECT_EQ(s.capacity, 2u);
  EXPECT_EQ(s.size, 2u);
  EXPECT_EQ(s.evictions, 3u);
  EXPECT_TRUE(p.cached(2));
  EXPECT_TRUE(p.cached(5));
  EXPECT_EQ(p.made, 5);
  // Growing again keeps what is there and admits more.
  cache.setCapacity(4);
  p.get(6);
  p.get(7);
  EXPECT_EQ(cache.stats().size, 4u);
  EXPECT_EQ(cache.stats().evictions, 3u);
  cache.setCapacity(0);  // as in the constructor, 0 means 1
  EXPECT_EQ(cache.stats().capacity, 1u);
  EXPECT_EQ(cache.stats().size, 1u);
  EXPECT_TRUE(p.cached(7));
}

// A failing make (a compile error) inserts nothing; the next lookup tries again.
TEST(BoundedCache, AMakeThatThrowsCachesNothing) {
  IntCache cache(4);
  EXPECT_THROW(cache.getOrCreate(1, []() -> int { throw std::runtime_error("compile failed"); }),
               std::runtime_error);
  EXPECT_EQ(cache.stats().size, 0u);
  EXPECT_EQ(cache.getOrCreate(1, [] { return 11; }), 11);
  EXPECT_EQ(cache.getOrCreate(1, [] { return 12; }), 11);
}

// make() runs without the lock, so two threads can create one key at once; the first
// insert wins and both callers get that one value (one pipeline object per key).
TEST(BoundedCache, RacingCreatorsOfOneKeyGetTheSameValue) {
  BoundedCache<int, std::shared_ptr<int>> cache(4);
  std::atomic<int> in_make{0};
  auto make = [&](int id) {
    return [&, id] {
      ++in_make;
      // Both threads inside make() at once (or give up after 2 s: then the cache
      // serialised the makes, which the header says it does not).
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (in_make.load() < 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      return std::make_shared<int>(id);
    };
  };
  std::shared_ptr<int> got1, got2;
  std::thread t1([&] { got1 = cache.getOrCreate(7, make(1)); });
  std::thread t2([&] { got2 = cache.getOrCreate(7, make(2)); });
  t1.join();
  t2.join();
  EXPECT_EQ(in_make.load(), 2) << "make() ran under the lock";
  ASSERT_TRUE(got1 && got2);
  EXPECT_EQ(got1.get(), got2.get());
  EXPECT_EQ(cache.getOrCreate(7, make(3)).get(), got1.get());
  EXPECT_EQ(cache.stats().size, 1u);
}

// Several threads on overlapping keys, with evictions going on: every value is right
// and the bound holds throughout.
TEST(BoundedCache, ConcurrentUseIsSafe) {
  BoundedCache<int, std::shared_ptr<const int>> cache(16);
  const int kThreads = 4, kOps = 5000, kKeys = 48;
  std::atomic<int> wrong{0}, over{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      uint32_t x = 12345u + t;
      for (int i = 0; i < kOps; ++i) {
        x = x * 1664525u + 1013904223u;
        int key = int((x >> 8) % kKeys);
        auto v = cache.getOrCreate(key, [&] { return std::make_shared<const int>(key * 3 + 1); });
        if (!v || *v != key * 3 + 1) ++wrong;
        if (i % 64 == 0 && cache.stats().size > 16) ++over;
        if (t == 0 && i % 1000 == 999) cache.setCapacity(16);  // mutation under load
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(over.load(), 0);
  auto s = cache.stats();
  EXPECT_LE(s.size, 16u);
  EXPECT_EQ(s.hits + s.misses, size_t(kThreads) * kOps);
  EXPECT_GT(s.evictions, 0u);
}

// ---------------------------------------------------------------- PipelineCache

// Small run-time shaders for the library cache; each distinct source is one compile
// (cached on disk across runs by the simulator).
std::string tinySource(int value) {
  return "#include <metal_stdlib>\nusing namespace metal;\n"
         "kernel void write_value(device int* out [[buffer(0)]], uint gid [[thread_position_in_grid]]) {\n"
         "  out[gid] = " + std::to_string(value) + ";\n}\n";
}

TEST(PipelineCache, RepeatedGetReturnsTheSamePipeline) {
  PipelineCache cache(dev());
  auto lib = testLibrary("api_kernels.metal");
  auto a = cache.get(lib, "add_one");
  auto b = cache.get(lib, "add_one");
  auto c = cache.get(lib, "copy_int");
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), c.get());
  EXPECT_EQ(a->functionName(), "add_one");
  EXPECT_EQ(c->functionName(), "copy_int");
  EXPECT_EQ(cache.builtin("fill_dense_int").get(), cache.builtin("fill_dense_int").get());
  auto s = cache.pipelineStats();
  EXPECT_EQ(s.size, 3u);
  EXPECT_EQ(s.misses, 3u);
  EXPECT_EQ(s.hits, 2u);
}

// Pipelines are keyed by the library's identity (its source), not its address: a
// library compiled again from the same source maps to the same pipelines.
TEST(PipelineCache, PipelinesAreKeyedByLibraryIdentity) {
  PipelineCache cache(dev());
  CompileOptions opt;
  opt.source_name = "api_kernels.metal";
  auto lib1 = dev().compileLibrary(readKernelSource("api_kernels.metal"), opt);
  auto lib2 = dev().compileLibrary(readKernelSource("api_kernels.metal"), opt);
  EXPECT_EQ(lib1->identity(), lib2->identity());
  EXPECT_NE(lib1->identity(), dev().builtinLibrary()->identity());
  EXPECT_EQ(cache.get(lib1, "add_one").get(), cache.get(lib2, "add_one").get());
}

TEST(PipelineCache, UnknownFunctionIsNotFoundAndNotCached) {
  PipelineCache cache(dev());
  EXPECT_RT_ERROR(cache.builtin("no_such_kernel"), ErrorKind::NotFound, "no kernel function 'no_such_kernel'");
  EXPECT_EQ(cache.pipelineStats().size, 0u);
  EXPECT_NE(cache.builtin("fill_dense_int"), nullptr);
  EXPECT_EQ(cache.pipelineStats().size, 1u);
}

// The built-in library's fill kernel, end to end: fill_dense_int (the kernel of every
// 4-byte dtype) writes the low 4 bytes of `bits` to the first `count` elements (a
// grid-stride loop, so fewer threads than elements work); here float bit patterns.
TEST(PipelineCache, BuiltinFillDenseIntFillsABufferWithABitPattern) {
  PipelineCache cache(dev());
  auto fill = cache.builtin("fill_dense_int");
  EXPECT_EQ(fill->functionName(), "fill_dense_int");
  const size_t n = 1000;
  auto out = bufferFrom(std::vector<float>(n, -1.0f));
  auto q = dev().newCommandQueue();
  struct FillParams {  // kernels/fill.metal
    uint64_t bits;
    uint64_t count;
  };
  auto run = [&](float value, uint64_t count, uint64_t threads) {
    FillParams params{0, count};
    std::memcpy(&params.bits, &value, sizeof value);
    auto cb = runCompute(*q, [&](ComputeEncoder& enc) {
      enc.setComputePipeline(fill);
      enc.setBuffer(out, 0, 0);
      enc.setBytes(&params, sizeof params, 1);
      enc.dispatchThreads({threads, 1, 1}, {std::min<uint64_t>(threads, 256), 1, 1});
    });
    ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  };
  run(3.5f, n, n);
  for (float v : read<float>(out, n)) ASSERT_EQ(v, 3.5f);
  run(-0.25f, 700, 64);  // 64 threads cover 700 elements; the rest stays 3.5
  auto got = read<float>(out, n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], i < 700 ? -0.25f : 3.5f) << i;
}

TEST(PipelineCache, CompileReturnsTheSameLibraryForTheSameSourceAndOptions) {
  PipelineCache cache(dev());
  auto a = cache.compile(tinySource(1));
  auto b = cache.compile(tinySource(1));
  EXPECT_EQ(a.get(), b.get());
  auto c = cache.compile(tinySource(2));
  EXPECT_NE(a.get(), c.get());
  EXPECT_NE(a->identity(), c->identity());
  CompileOptions named;
  named.source_name = "other.metal";  // different options: a separate entry
  auto d = cache.compile(tinySource(1), named);
  EXPECT_NE(a.get(), d.get());
  auto s = cache.libraryStats();
  EXPECT_EQ(s.size, 3u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 3u);
  // The compiled kernel runs, through the pipeline cache.
  auto pipeline = cache.get(c, "write_value");
  auto out = dev().newBuffer(16 * sizeof(int));
  auto q = dev().newCommandQueue();
  auto cb = runCompute(*q, [&](ComputeEncoder& enc) {
    enc.setComputePipeline(pipeline);
    enc.setBuffer(out, 0, 0);
    enc.dispatchThreads({16, 1, 1}, {16, 1, 1});
  });
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  for (int v : read<int>(out, 16)) ASSERT_EQ(v, 2);
}

// A source that does not compile is a Compile error, and is not cached.
TEST(PipelineCache, CompileErrorIsReportedAndNotCached) {
  PipelineCache cache(dev());
  const std::string bad = "kernel void broken(device int* out [[buffer(0)]]) { out[0] = ; }\n";
  try {
    cache.compile(bad);
    ADD_FAILURE() << "expected a compile error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Compile) << e.what();
  }
  EXPECT_EQ(cache.libraryStats().size, 0u);
}

// METALX_PIPELINE_CACHE_SIZE / METALX_LIBRARY_CACHE_SIZE are read at construction;
// setCapacities applies the same bounds to a live cache.
TEST(PipelineCache, CapacitiesBoundTheCaches) {
  PipelineCache cache(dev());
  cache.setCapacities(2, 1);
  EXPECT_EQ(cache.pipelineStats().capacity, 2u);
  EXPECT_EQ(cache.libraryStats().capacity, 1u);
  auto lib = testLibrary("api_kernels.metal");
  auto first = cache.get(lib, "add_one");
  cache.get(lib, "add_k");
  cache.get(lib, "copy_int");  // evicts add_one
  auto s = cache.pipelineStats();
  EXPECT_EQ(s.size, 2u);
  EXPECT_EQ(s.evictions, 1u);
  // add_one is created afresh: a miss, and evicts add_k.
  size_t misses = s.misses;
  auto again = cache.get(lib, "add_one");
  EXPECT_EQ(cache.pipelineStats().misses, misses + 1);
  EXPECT_EQ(again->functionName(), "add_one");
  EXPECT_EQ(cache.pipelineStats().size, 2u);

  auto l1 = cache.compile(tinySource(1));
  auto l2 = cache.compile(tinySource(2));  // evicts l1
  EXPECT_EQ(cache.libraryStats().size, 1u);
  EXPECT_EQ(cache.libraryStats().evictions, 1u);
  EXPECT_EQ(cache.compile(tinySource(2)).get(), l2.get());
}

TEST(PipelineCache, ClearEmptiesBothCaches) {
  PipelineCache cache(dev());
  cache.builtin("fill_dense_int");
  cache.compile(tinySource(1));
  EXPECT_EQ(cache.pipelineStats().size, 1u);
  EXPECT_EQ(cache.libraryStats().size, 1u);
  cache.clear();
  EXPECT_EQ(cache.pipelineStats().size, 0u);
  EXPECT_EQ(cache.libraryStats().size, 0u);
  size_t misses = cache.pipelineStats().misses;
  EXPECT_EQ(cache.builtin("fill_dense_int")->functionName(), "fill_dense_int");
  EXPECT_EQ(cache.pipelineStats().misses, misses + 1);
}

}  // namespace
}  // namespace metalx::rt::testing

namespace metalx::rt::testing {
namespace {

TEST(PipelineReflection, ArgumentsListTheKernelsBufferAndThreadgroupBindings) {
  auto lib = testLibrary("execution.metal");
  auto reverse = lib->newComputePipeline("reverse_in_group");
  const auto& args = reverse->arguments();
  ASSERT_EQ(args.size(), 3u);  // positions like [[thread_position_in_grid]] are not arguments
  EXPECT_EQ(args[0].kind, KernelArgument::Kind::Buffer);
  EXPECT_EQ(args[0].index, 0u);
  EXPECT_EQ(args[0].name, "in");
  EXPECT_EQ(args[1].index, 1u);
  EXPECT_EQ(args[1].name, "out");
  EXPECT_EQ(args[2].kind, KernelArgument::Kind::Threadgroup);
  EXPECT_EQ(args[2].name, "shared");
  auto fill = dev().builtinLibrary()->newComputePipeline("fill_dense_int");
  EXPECT_EQ(fill->arguments().size(), 2u);  // out, params
}

}  // namespace
}  // namespace metalx::rt::testing
