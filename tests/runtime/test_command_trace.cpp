// Command tracing for profilers: while on, every kernel, copy and fill a stream runs is
// recorded with its name, kind, stream, GPU times and the host op (correlation id)
// that encoded it; while off, nothing is.
#include "core/command_trace.h"
#include "core/stream_pool.h"
#include "stream_test_support.h"

namespace metalx::testing {
namespace {

using rt::testing::bufferFrom;
using rt::testing::dev;
using rt::testing::read;
using rt::testing::testLibrary;

TEST(CommandTrace, RecordsEachCommandWithItsNameKindStreamTimesAndOp) {
  Stream& s = streamFromPool(0);
  const uint32_t n = 256;
  auto data = bufferFrom(std::vector<int>(n, 0));
  auto copy = dev().newBuffer(n * sizeof(int));
  command_trace::start();
  command_trace::pushCorrelation(41);
  addOne(s, data, n);
  addOne(s, data, n);
  command_trace::popCorrelation();
  command_trace::pushCorrelation(42);
  s.encodeBlit([&](rt::BlitEncoder& b) { b.copyBuffer(data, 0, copy, 0, n * sizeof(int)); });
  s.encodeBlit([&](rt::BlitEncoder& b) { b.fillBuffer(data, 0, 64, 0); });
  command_trace::popCorrelation();
  s.synchronize();
  command_trace::stop();
  std::vector<TracedCommand> trace = command_trace::take();

  ASSERT_EQ(trace.size(), 4u);
  EXPECT_EQ(trace[0].name, "add_one");
  EXPECT_EQ(trace[0].kind, CommandKind::Kernel);
  EXPECT_EQ(trace[0].correlation, 41u);
  EXPECT_EQ(trace[1].correlation, 41u);
  EXPECT_EQ(trace[2].kind, CommandKind::Copy);
  EXPECT_EQ(trace[2].bytes, n * sizeof(int));
  EXPECT_EQ(trace[2].correlation, 42u);
  EXPECT_EQ(trace[3].kind, CommandKind::Fill);
  EXPECT_EQ(trace[3].bytes, 64u);
  for (size_t i = 0; i < trace.size(); ++i) {
    EXPECT_EQ(trace[i].device, 0);
    EXPECT_EQ(trace[i].stream, s.id());
    EXPECT_LE(trace[i].gpu_start_s, trace[i].gpu_end_s);
    if (i) EXPECT_LE(trace[i - 1].gpu_end_s, trace[i].gpu_start_s) << "one stream runs its commands in order";
  }
  // The work itself ran as usual.
  EXPECT_EQ(read<int>(copy, n), std::vector<int>(n, 2));
  EXPECT_TRUE(command_trace::take().empty());  // taken
}

TEST(CommandTrace, NothingIsRecordedWhileOff) {
  Stream& s = streamFromPool(0);
  auto data = bufferFrom(std::vector<int>(32, 0));
  command_trace::stop();
  (void)command_trace::take();
  addOne(s, data, 32);
  s.synchronize();
  EXPECT_TRUE(command_trace::take().empty());
  EXPECT_EQ(read<int>(data, 32), std::vector<int>(32, 1));
}

TEST(CommandTrace, AFailedEncodeLeavesTracingUsable) {
  Stream& s = streamFromPool(0);
  auto data = bufferFrom(std::vector<int>(32, 0));
  command_trace::start();
  EXPECT_THROW(s.encodeCompute([&](rt::ComputeEncoder& e) {
    e.setComputePipeline(s.pipelines().get(testLibrary("api_kernels.metal"), "add_one"));
    e.dispatchThreads({32, 1, 1}, {32, 1, 1});  // nothing bound: rejected
  }),
               rt::Error);
  addOne(s, data, 32);
  s.synchronize();
  command_trace::stop();
  auto trace = command_trace::take();
  ASSERT_FALSE(trace.empty());
  EXPECT_EQ(trace.back().name, "add_one");
  EXPECT_EQ(read<int>(data, 32), std::vector<int>(32, 1));
}

}  // namespace
}  // namespace metalx::testing
