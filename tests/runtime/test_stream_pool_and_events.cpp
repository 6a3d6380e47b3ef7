// The streams of a device (default stream, pool, per-thread current stream) and events
// between them: record/block order work across streams on the device, query and
// synchronize let the host follow it, timing events measure it.
#include <atomic>
#include <functional>
#include <set>
#include <stdexcept>
#include <thread>

#include "core/stream_event.h"
#include "core/stream_pool.h"
#include "test_support.h"

namespace metalx::testing {
namespace {

using rt::testing::bufferFrom;
using rt::testing::dev;
using rt::testing::read;
using rt::testing::testLibrary;

// Makes `s` busy for a while, then writes `value` to out[0] (api_kernels.metal).
void slowWrite(Stream& s, const rt::BufferPtr& out, uint32_t iters, uint32_t value) {
  auto pipeline = s.pipelines().get(testLibrary("api_kernels.metal"), "slow_write");
  s.encodeCompute([&](rt::ComputeEncoder& e) {
    e.setComputePipeline(pipeline);
    e.setBuffer(out, 0, 0);
    e.setBytes(&iters, 4, 1);
    e.setBytes(&value, 4, 2);
    e.dispatchThreads({64, 1, 1}, {64, 1, 1});
  });
}

// dst[i] = src[i] on `s`.
void copyInts(Stream& s, const rt::BufferPtr& src, const rt::BufferPtr& dst, uint32_t n) {
  auto pipeline = s.pipelines().get(testLibrary("api_kernels.metal"), "copy_int");
  s.encodeCompute([&](rt::ComputeEncoder& e) {
    e.setComputePipeline(pipeline);
    e.setBuffer(src, 0, 0);
    e.setBuffer(dst, 0, 1);
    e.setBytes(&n, 4, 2);
    e.dispatchThreads({n, 1, 1}, {32, 1, 1});
  });
}

TEST(StreamPool, DefaultStreamIsOnePerDeviceWithIdZero) {
  Stream& a = defaultStream(0);
  EXPECT_EQ(&a, &defaultStream(0));
  EXPECT_EQ(&a, &streamById(0, 0));
  EXPECT_EQ(a.id(), 0);
  EXPECT_EQ(a.deviceIndex(), 0);
}

TEST(StreamPool, PoolStreamsAreDistinctRoundRobinAndNeverTheDefault) {
  std::set<Stream*> seen;
  for (int i = 0; i < kStreamPoolSize; ++i) {
    Stream& s = streamFromPool(0);
    EXPECT_NE(s.id(), 0);
    EXPECT_EQ(&s, &streamById(0, s.id()));
    seen.insert(&s);
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kStreamPoolSize));  // one full round: all distinct
  EXPECT_TRUE(seen.count(&streamFromPool(0)));                 // then they come round again
}

TEST(StreamPool, StreamsShareTheDevicePipelineCache) {
  EXPECT_EQ(&defaultStream(0).pipelines(), &devicePipelines(0));
  EXPECT_EQ(&streamFromPool(0).pipelines(), &devicePipelines(0));
}

TEST(StreamPool, BadIdsAndDevicesAreNamed) {
  try {
    streamById(0, kStreamPoolSize + 1);
    ADD_FAILURE() << "no error for a stream id past the pool";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("no stream with id"), std::string::npos) << e.what();
  }
  EXPECT_THROW(streamById(0, -1), std::out_of_range);
  EXPECT_THROW(defaultStream(static_cast<int>(rt::devices().size())), std::out_of_range);
}

TEST(StreamPool, CurrentStreamIsPerThread) {
  Stream& side = streamFromPool(0);
  EXPECT_EQ(&currentStream(0), &defaultStream(0));
  Stream& previous = setCurrentStream(side);
  EXPECT_EQ(&previous, &defaultStream(0));
  EXPECT_EQ(&currentStream(0), &side);
  Stream* other_thread_sees = nullptr;
  std::thread([&] { other_thread_sees = &currentStream(0); }).join();
  EXPECT_EQ(other_thread_sees, &defaultStream(0));
  setCurrentStream(previous);
  EXPECT_EQ(&currentStream(0), &defaultStream(0));
}

TEST(StreamEvent, AnUnrecordedEventIsCompleteAndBlocksNothing) {
  StreamEvent e(0, false);
  EXPECT_FALSE(e.recorded());
  EXPECT_TRUE(e.query());
  EXPECT_NO_THROW(e.synchronize());
  EXPECT_NO_THROW(e.block(defaultStream(0)));
}

TEST(StreamEvent, BlockOrdersWorkAcrossStreamsWithoutTheHostWaiting) {
  Stream& producer = streamFromPool(0);
  Stream& consumer = streamFromPool(0);
  ASSERT_NE(&producer, &consumer);
  auto slow = bufferFrom(std::vector<uint32_t>(65, 0));
  auto seen = bufferFrom(std::vector<int>(1, -1));
  StreamEvent done(0, false);
  slowWrite(producer, slow, 200000, 7);  // long enough to still run after encoding the rest
  done.record(producer);
  done.block(consumer);
  copyInts(consumer, slow, seen, 1);  // must see the producer's write
  consumer.synchronize();
  EXPECT_TRUE(done.query());
  EXPECT_EQ(read<int>(seen, 1)[0], 7);
}

TEST(StreamEvent, RecordCommitsSoTheHostCanWaitForIt) {
  Stream& s = streamFromPool(0);
  auto out = bufferFrom(std::vector<uint32_t>(65, 0));
  slowWrite(s, out, 1000, 3);
  StreamEvent e(0, false);
  e.record(s);
  e.synchronize();  // would hang if the signal were left in an uncommitted command buffer
  EXPECT_TRUE(e.query());
  EXPECT_EQ(read<uint32_t>(out, 1)[0], 3u);
}

TEST(StreamEvent, ReRecordingMovesTheEventToTheNewPoint) {
  Stream& s = streamFromPool(0);
  auto out = bufferFrom(std::vector<uint32_t>(65, 0));
  StreamEvent e(0, false);
  e.record(s);
  e.synchronize();
  slowWrite(s, out, 200000, 9);
  e.record(s);
  e.synchronize();
  EXPECT_EQ(read<uint32_t>(out, 1)[0], 9u);
}

TEST(StreamEvent, TimingEventsMeasureTheWorkBetweenThem) {
  Stream& s = streamFromPool(0);
  auto out = bufferFrom(std::vector<uint32_t>(65, 0));
  StreamEvent start(0, true), short_end(0, true), long_end(0, true);
  start.record(s);
  slowWrite(s, out, 1000, 1);
  short_end.record(s);
  slowWrite(s, out, 400000, 2);
  long_end.record(s);
  long_end.synchronize();
  const double short_ms = start.elapsedMilliseconds(short_end);
  const double long_ms = start.elapsedMilliseconds(long_end);
  EXPECT_GE(short_ms, 0.0);
  EXPECT_GT(long_ms, short_ms);
  EXPECT_NEAR(long_end.elapsedMilliseconds(start), -long_ms, 1e-9);
}

TEST(StreamEvent, ElapsedTimeErrorsNameTheProblem) {
  Stream& s = streamFromPool(0);
  StreamEvent timing(0, true), plain(0, false), unrecorded(0, true);
  timing.record(s);
  plain.record(s);
  timing.synchronize();
  plain.synchronize();
  auto message = [](const std::function<void()>& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message([&] { timing.elapsedMilliseconds(plain); }).find("enable_timing"), std::string::npos);
  EXPECT_NE(message([&] { timing.elapsedMilliseconds(unrecorded); }).find("not been recorded"), std::string::npos);
}

TEST(StreamEvent, AnotherDevicesStreamIsRejected) {
  StreamEvent e(1, false);  // an event of device 1 (whether or not it exists)
  try {
    e.record(defaultStream(0));
    ADD_FAILURE() << "recorded an event of another device";
  } catch (const std::invalid_argument& ex) {
    EXPECT_NE(std::string(ex.what()).find("belong to one device"), std::string::npos) << ex.what();
  }
  EXPECT_FALSE(e.recorded());
}

TEST(StreamPool, SynchronizeAllStreamsWaitsForEveryStream) {
  Stream& a = streamFromPool(0);
  Stream& b = streamFromPool(0);
  auto out_a = bufferFrom(std::vector<uint32_t>(65, 0));
  auto out_b = bufferFrom(std::vector<uint32_t>(65, 0));
  slowWrite(a, out_a, 100000, 11);
  slowWrite(b, out_b, 100000, 12);
  synchronizeAllStreams(0);
  EXPECT_EQ(read<uint32_t>(out_a, 1)[0], 11u);
  EXPECT_EQ(read<uint32_t>(out_b, 1)[0], 12u);
}

}  // namespace
}  // namespace metalx::testing
