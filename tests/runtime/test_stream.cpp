// metalx::Stream: the single place work for a stream is encoded. Kernels are coalesced
// into one compute encoder, blits and events end it, command buffers are numbered and
// committed in batches, completion callbacks and failures reach the host.
#include <thread>

#include "core/stream.h"
#include "stream_test_support.h"

namespace metalx::testing {
namespace {

using rt::testing::bufferFrom;
using rt::testing::dev;
using rt::testing::read;
using rt::testing::testLibrary;

TEST(Stream, KernelsAndBlitsRunInEncodingOrder) {
  Stream s(dev(), 0, 1);
  const uint32_t n = 100;
  auto data = bufferFrom(std::vector<int>(n, 0));
  auto copy = dev().newBuffer(n * sizeof(int));
  addOne(s, data, n);
  addOne(s, data, n);
  s.encodeBlit([&](rt::BlitEncoder& b) { b.copyBuffer(data, 0, copy, 0, n * sizeof(int)); });
  addOne(s, data, n);  // after the copy: must not show in it
  s.synchronize();
  EXPECT_EQ(read<int>(copy, n), std::vector<int>(n, 2));
  EXPECT_EQ(read<int>(data, n), std::vector<int>(n, 3));
}

TEST(Stream, WorkIsBatchedIntoNumberedCommandBuffers) {
  Stream s(dev(), 0, 2);
  auto data = bufferFrom(std::vector<int>(8, 0));
  EXPECT_EQ(s.currentSequence(), 0u);  // nothing encoded yet
  addOne(s, data, 8);
  EXPECT_EQ(s.currentSequence(), 1u);
  for (int i = 1; i < Stream::kMaxCommandsPerCommandBuffer; ++i) addOne(s, data, 8);
  // The batch is full: committed, and the next command opens command buffer 2.
  addOne(s, data, 8);
  EXPECT_EQ(s.currentSequence(), 2u);
  s.synchronize();
  EXPECT_EQ(s.completedSequence(), 2u);
  EXPECT_TRUE(s.query());
  EXPECT_EQ(read<int>(data, 8), std::vector<int>(8, Stream::kMaxCommandsPerCommandBuffer + 1));
}

TEST(Stream, CompletionCallbacksRunAfterTheirCommandBuffer) {
  Stream s(dev(), 0, 3);
  auto data = bufferFrom(std::vector<int>(16, 0));
  addOne(s, data, 16);
  uint64_t seq = s.currentSequence();
  std::atomic<int> seen{-1};
  s.onCompleted(seq, [&] { seen = read<int>(data, 1)[0]; });
  EXPECT_EQ(seen.load(), -1);  // not committed yet, so it cannot have run
  s.synchronize();
  EXPECT_EQ(seen.load(), 1);  // ran after the kernel's write
  bool immediate = false;
  s.onCompleted(seq, [&] { immediate = true; });  // already completed: runs now
  EXPECT_TRUE(immediate);
}

TEST(Stream, WaitForCommitsAndWaitsForOneCommandBuffer) {
  Stream s(dev(), 0, 4);
  auto data = bufferFrom(std::vector<int>(4, 0));
  addOne(s, data, 4);
  uint64_t seq = s.currentSequence();
  s.waitFor(seq);
  EXPECT_GE(s.completedSequence(), seq);
  EXPECT_EQ(read<int>(data, 4), std::vector<int>(4, 1));
}

TEST(Stream, AFailedCommandBufferIsReportedOnceAtSynchronize) {
  // Fails a command buffer with a barrier some threads never reach: only the simulator
  // turns that into a failure.
  if (rt::driverName() != "sim")
    GTEST_SKIP() << "no portable way to make a command buffer fail on " << rt::driverName();
  Stream s(dev(), 0, 5);
  auto out = dev().newBuffer(64 * sizeof(int));
  auto bad = s.pipelines().get(testLibrary("api_kernels.metal"), "partial_barrier");
  s.encodeCompute([&](rt::ComputeEncoder& e) {
    e.setComputePipeline(bad);
    e.setBuffer(out, 0, 0);
    e.dispatchThreads({64, 1, 1}, {64, 1, 1});
  });
  try {
    s.synchronize();
    ADD_FAILURE() << "synchronize() did not report the failed kernel";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("partial_barrier"), std::string::npos) << e.what();
  }
  // Reported once; the stream keeps working.
  auto data = bufferFrom(std::vector<int>(4, 0));
  addOne(s, data, 4);
  EXPECT_NO_THROW(s.synchronize());
  EXPECT_EQ(read<int>(data, 4), std::vector<int>(4, 1));
}

TEST(Stream, AValidationErrorLeavesTheStreamUsable) {
  Stream s(dev(), 0, 6);
  auto data = bufferFrom(std::vector<int>(4, 0));
  auto pipeline = s.pipelines().get(testLibrary("api_kernels.metal"), "add_one");
  EXPECT_THROW(s.encodeCompute([&](rt::ComputeEncoder& e) {
    e.setComputePipeline(pipeline);
    e.dispatchThreads({4, 1, 1}, {4, 1, 1});  // nothing bound
  }),
               rt::Error);
  addOne(s, data, 4);
  s.synchronize();
  EXPECT_EQ(read<int>(data, 4), std::vector<int>(4, 1));
}

TEST(Stream, ThreadsEncodingConcurrentlyAreSerialised) {
  Stream s(dev(), 0, 7);
  const uint32_t n = 32;
  auto data = bufferFrom(std::vector<int>(n, 0));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) addOne(s, data, n);
    });
  for (auto& t : threads) t.join();
  s.synchronize();
  EXPECT_EQ(read<int>(data, n), std::vector<int>(n, 200));
}

}  // namespace
}  // namespace metalx::testing
