// metalx::CachingAllocator: reuse, pools, splitting and merging, reuse deferred until
// in-flight GPU work completes, statistics, the memory limit and its error.
#include <limits>
#include <string>
#include <thread>

#include "core/caching_allocator.h"
#include "test_support.h"

namespace metalx::testing {
namespace {

using rt::testing::dev;
using rt::testing::testLibrary;
constexpr size_t MiB = 1 << 20;

char* ptr(CachingAllocator::Block* b) { return static_cast<char*>(CachingAllocator::pointer(b)); }

// Encodes work on `s` that writes into `target`'s memory only after `gate` is
// signalled: the test decides when the GPU work finishes, so nothing depends on timing.
void gatedWriteInto(Stream& s, CachingAllocator& a, CachingAllocator::Block* target,
                    const rt::EventPtr& gate) {
  rt::BufferPtr buffer;
  size_t offset = 0;
  ASSERT_TRUE(a.lookup(CachingAllocator::pointer(target), &buffer, &offset));
  auto p = s.pipelines().get(testLibrary("api_kernels.metal"), "slow_write");
  uint32_t iters = 1, value = 7;
  s.encodeWait(gate, 1);
  s.encodeCompute([&](rt::ComputeEncoder& e) {
    e.setComputePipeline(p);
    e.setBuffer(buffer, offset, 0);
    e.setBytes(&iters, 4, 1);
    e.setBytes(&value, 4, 2);
    e.dispatchThreads({1, 1, 1}, {1, 1, 1});
  });
  s.flush();
}

TEST(CachingAllocator, FreedMemoryIsReusedWithoutNewBuffers) {
  Stream s(dev(), 0, 11);
  CachingAllocator a(dev(), 0);
  auto* b1 = a.allocate(1000, s);
  char* first = ptr(b1);
  a.free(b1);
  auto* b2 = a.allocate(1000, s);
  EXPECT_EQ(ptr(b2), first);
  auto st = a.stats();
  EXPECT_EQ(st.buffer_allocations, 1u);
  EXPECT_EQ(st.cache_hits, 1u);
  EXPECT_EQ(st.allocations, 2u);
  EXPECT_EQ(st.frees, 1u);
  a.free(b2);
}

TEST(CachingAllocator, SmallRequestsShareABufferAndAreAligned) {
  Stream s(dev(), 0, 12);
  CachingAllocator a(dev(), 0);
  std::vector<CachingAllocator::Block*> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(a.allocate(1000, s));
  EXPECT_EQ(a.stats().reserved_bytes, 2 * MiB);
  EXPECT_EQ(a.stats().allocated_bytes, 10 * 1024u);  // 1000 rounds up to 1024
  EXPECT_EQ(a.stats().requested_bytes, 10 * 1000u);
  for (size_t i = 0; i < blocks.size(); ++i) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(ptr(blocks[i])) % 256, 0u);
    for (size_t j = i + 1; j < blocks.size(); ++j)
      EXPECT_GE(std::abs(ptr(blocks[i]) - ptr(blocks[j])), 1024) << "blocks overlap";
  }
  for (auto* b : blocks) a.free(b);
  EXPECT_EQ(a.stats().allocated_bytes, 0u);
}

TEST(CachingAllocator, LargeBlocksAreRoundedSplitAndMerged) {
  Stream s(dev(), 0, 13);
  CachingAllocator a(dev(), 0);
  auto* big = a.allocate(7 * MiB, s);  // an 8 MiB buffer
  EXPECT_EQ(a.stats().reserved_bytes, 8 * MiB);
  char* base = ptr(big);
  a.free(big);
  // Two requests fit in the cached 8 MiB buffer: it is split, no new buffer.
  auto* x = a.allocate(3 * MiB, s);
  auto* y = a.allocate(3 * MiB, s);
  EXPECT_EQ(a.stats().buffer_allocations, 1u);
  EXPECT_EQ(ptr(x), base);
  EXPECT_EQ(ptr(y), base + 3 * MiB);
  a.free(x);
  a.free(y);
  // The pieces merged back: the whole buffer serves a request as large as it.
  auto* whole = a.allocate(8 * MiB, s);
  EXPECT_EQ(ptr(whole), base);
  EXPECT_EQ(a.stats().buffer_allocations, 1u);
  a.free(whole);
}

TEST(CachingAllocator, BestFitPicksTheSmallestFreeBlock) {
  Stream s(dev(), 0, 14);
  CachingAllocator a(dev(), 0);
  auto* b0 = a.allocate(256 * 1024, s);
  auto* b1 = a.allocate(512 * 1024, s);  // will be a 512 KiB hole
  auto* b2 = a.allocate(256 * 1024, s);
  auto* b3 = a.allocate(128 * 1024, s);  // will be a 128 KiB hole
  auto* b4 = a.allocate(256 * 1024, s);
  char* hole_small = ptr(b3);
  a.free(b1);
  a.free(b3);
  auto* fit = a.allocate(100 * 1024, s);
  EXPECT_EQ(ptr(fit), hole_small);
  for (auto* b : {b0, b2, b4, fit}) a.free(b);
}

TEST(CachingAllocator, FreedBlockIsNotReusedWhileQueuedWorkMayUseIt) {
  Stream s(dev(), 0, 15);
  CachingAllocator a(dev(), 0);
  auto* b = a.allocate(4096, s);
  char* first = ptr(b);
  auto gate = dev().newEvent();
  gatedWriteInto(s, a, b, gate);  // queued, will write into b
  a.free(b);
  EXPECT_GT(a.stats().pending_free_bytes, 0u);
  auto* other = a.allocate(4096, s);
  EXPECT_NE(ptr(other), first) << "memory still used by queued work was handed out";
  gate->signal(1);
  s.synchronize();
  EXPECT_EQ(a.stats().pending_free_bytes, 0u);
  EXPECT_EQ(reinterpret_cast<uint32_t*>(first)[0], 7u);  // the kernel did write there
  auto* again = a.allocate(4096, s);
  EXPECT_EQ(ptr(again), first);  // reusable once the work completed
  a.free(other);
  a.free(again);
}

TEST(CachingAllocator, RecordedStreamsDelayReuseToo) {
  Stream s1(dev(), 0, 16), s2(dev(), 0, 17);
  CachingAllocator a(dev(), 0);
  auto* b = a.allocate(4096, s1);
  char* first = ptr(b);
  auto gate = dev().newEvent();
  gatedWriteInto(s2, a, b, gate);
  a.recordStream(b, s2);
  a.free(b);  // s1 has nothing in flight; s2 does
  auto* other = a.allocate(4096, s1);
  EXPECT_NE(ptr(other), first);
  gate->signal(1);
  s2.synchronize();
  EXPECT_EQ(a.stats().pending_free_bytes, 0u);
  a.free(other);
}

TEST(CachingAllocator, StatisticsTrackPeaksAndEmptyCacheReturnsMemory) {
  Stream s(dev(), 0, 18);
  CachingAllocator a(dev(), 0);
  size_t device_before = dev().currentAllocatedSize();
  auto* x = a.allocate(3 * MiB, s);
  auto* y = a.allocate(5 * MiB, s);
  a.free(x);
  auto st = a.stats();
  // y: a 5 MiB block of a 6 MiB buffer (the 1 MiB tail stays free); x's 4 MiB cached.
  EXPECT_EQ(st.allocated_bytes, 5 * MiB);
  EXPECT_EQ(st.peak_allocated_bytes, 8 * MiB);  // 3 + 5
  EXPECT_EQ(st.reserved_bytes, 10 * MiB);       // 4 + 6
  EXPECT_EQ(st.active_blocks, 1u);
  a.resetPeakStats();
  EXPECT_EQ(a.stats().peak_allocated_bytes, 5 * MiB);
  a.emptyCache();  // x's buffer is free: released; y's is live: kept
  EXPECT_EQ(a.stats().reserved_bytes, 6 * MiB);
  EXPECT_EQ(dev().currentAllocatedSize(), device_before + 6 * MiB);
  a.free(y);
  a.emptyCache();
  EXPECT_EQ(a.stats().reserved_bytes, 0u);
  EXPECT_EQ(dev().currentAllocatedSize(), device_before);
}

TEST(CachingAllocator, OverTheLimitCachedMemoryIsReleasedAndTheRequestRetried) {
  Stream s(dev(), 0, 19);
  CachingAllocator a(dev(), 0, 8 * MiB);
  auto* x = a.allocate(6 * MiB, s);
  a.free(x);  // 6 MiB cached
  auto* y = a.allocate(7 * MiB, s);  // 6 + 8 > limit: the cache must go first
  EXPECT_EQ(a.stats().oom_retries, 1u);
  EXPECT_EQ(a.stats().reserved_bytes, 8 * MiB);
  a.free(y);
}

TEST(CachingAllocator, OutOfMemorySaysWhatWasAskedHeldAndCachedAndLosesNothing) {
  Stream s(dev(), 0, 20);
  CachingAllocator a(dev(), 0, 8 * MiB);
  auto* x = a.allocate(6 * MiB, s);
  auto before = a.stats();
  try {
    a.allocate(6 * MiB, s);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("tried to allocate 6.00 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("6.00 MiB is allocated by tensors"), std::string::npos) << m;
    EXPECT_NE(m.find("the limit is 8.00 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("METALX_HIGH_WATERMARK_RATIO"), std::string::npos) << m;
  }
  auto after = a.stats();
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.reserved_bytes, before.reserved_bytes);
  EXPECT_EQ(after.active_blocks, before.active_blocks);
  EXPECT_EQ(after.ooms, 1u);
  a.free(x);
  auto* y = a.allocate(6 * MiB, s);  // usable afterwards
  a.free(y);
}

TEST(CachingAllocator, LookupFindsBufferAndOffsetOfInteriorPointers) {
  Stream s(dev(), 0, 21);
  CachingAllocator a(dev(), 0);
  auto* b0 = a.allocate(1000, s);
  auto* b1 = a.allocate(1000, s);
  rt::BufferPtr buffer;
  size_t offset = 0;
  ASSERT_TRUE(a.lookup(ptr(b1) + 10, &buffer, &offset));
  EXPECT_EQ(static_cast<char*>(buffer->contents()) + offset, ptr(b1) + 10);
  int on_stack = 0;
  EXPECT_FALSE(a.lookup(&on_stack, nullptr, nullptr));
  a.free(b0);
  a.free(b1);
}

TEST(CachingAllocator, ConcurrentAllocateAndFreeKeepStatisticsConsistent) {
  Stream s(dev(), 0, 22);
  CachingAllocator a(dev(), 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::vector<CachingAllocator::Block*> mine;
      for (int i = 0; i < 300; ++i) {
        mine.push_back(a.allocate(size_t(1 + (i * 7919 + t) % 3000000), s));
        std::memset(CachingAllocator::pointer(mine.back()), t, 64);
        if (i % 3 == 0) {
          a.free(mine.front());
          mine.erase(mine.begin());
        }
      }
      for (auto* b : mine) a.free(b);
    });
  for (auto& t : threads) t.join();
  auto st = a.stats();
  EXPECT_EQ(st.allocated_bytes, 0u);
  EXPECT_EQ(st.requested_bytes, 0u);
  EXPECT_EQ(st.active_blocks, 0u);
  EXPECT_EQ(st.allocations, st.frees);
  a.emptyCache();
  EXPECT_EQ(a.stats().reserved_bytes, 0u);
}

TEST(CachingAllocator, SnapshotTilesEachSegmentWithItsBlocksAndTheirStates) {
  Stream s(dev(), 0, 23);
  CachingAllocator a(dev(), 0);
  auto* small = a.allocate(1000, s);
  auto* large = a.allocate(3 * MiB, s);
  auto* freed = a.allocate(1000, s);
  a.free(freed);  // no queued work: free at once, merged into the small segment's tail

  auto segments = a.snapshot();
  ASSERT_EQ(segments.size(), 2u);
  uint64_t total = 0;
  for (const SegmentSnapshot& seg : segments) {
    size_t offset = 0;
    for (const BlockSnapshot& b : seg.blocks) {
      EXPECT_EQ(b.offset, offset);
      offset += b.size;
    }
    EXPECT_EQ(offset, seg.size);
    total += seg.size;
  }
  EXPECT_EQ(total, a.stats().reserved_bytes);
  const SegmentSnapshot& small_segment = segments[0].small ? segments[0] : segments[1];
  const SegmentSnapshot& large_segment = segments[0].small ? segments[1] : segments[0];
  ASSERT_EQ(small_segment.blocks.size(), 2u);
  EXPECT_EQ(small_segment.address + small_segment.blocks[0].offset, reinterpret_cast<uintptr_t>(ptr(small)));
  EXPECT_EQ(small_segment.blocks[0].state, BlockSnapshot::State::Allocated);
  EXPECT_EQ(small_segment.blocks[0].requested, 1000u);
  EXPECT_EQ(small_segment.blocks[0].stream, 23);
  EXPECT_EQ(small_segment.blocks[1].state, BlockSnapshot::State::Free);
  EXPECT_EQ(small_segment.blocks[1].size, 2 * MiB - 1024);
  EXPECT_EQ(large_segment.blocks[0].state, BlockSnapshot::State::Allocated);
  EXPECT_EQ(large_segment.blocks[0].size, 3 * MiB);

  a.free(small);
  a.free(large);
  a.emptyCache();
  EXPECT_TRUE(a.snapshot().empty());
}

TEST(CachingAllocator, SnapshotShowsBlocksFreedWhileGpuWorkIsQueuedAsPending) {
  Stream s(dev(), 0, 24);
  CachingAllocator a(dev(), 0);
  auto gate = dev().newEvent();
  auto* b = a.allocate(4 * MiB, s);
  gatedWriteInto(s, a, b, gate);
  a.free(b);
  EXPECT_EQ(a.snapshot()[0].blocks[0].state, BlockSnapshot::State::PendingFree);
  gate->signal(1);
  s.synchronize();
  EXPECT_EQ(a.snapshot()[0].blocks[0].state, BlockSnapshot::State::Free);
}

TEST(CachingAllocator, MemoryFractionSetsTheLimitAndTheErrorNamesIt) {
  Stream s(dev(), 0, 25);
  CachingAllocator a(dev(), 0);
  const uint64_t working_set = dev().info().recommended_max_working_set_size;
  const double fraction = double(8 * MiB) / double(working_set);
  a.setMemoryFraction(fraction);
  EXPECT_EQ(a.memoryFraction(), fraction);
  EXPECT_EQ(a.limit(), static_cast<uint64_t>(fraction * double(working_set)));
  auto* x = a.allocate(6 * MiB, s);
  try {
    a.allocate(4 * MiB, s);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("set_per_process_memory_fraction"), std::string::npos) << m;
    EXPECT_EQ(m.find("METALX_HIGH_WATERMARK_RATIO"), std::string::npos) << m;
  }
  EXPECT_THROW(a.setMemoryFraction(0), std::invalid_argument);
  EXPECT_THROW(a.setMemoryFraction(-1), std::invalid_argument);
  EXPECT_THROW(a.setMemoryFraction(std::numeric_limits<double>::infinity()), std::invalid_argument);
  EXPECT_EQ(a.memoryFraction(), fraction);  // unchanged by the rejected values
  a.free(x);
}

}  // namespace
}  // namespace metalx::testing
