// Simulator-only command-model tests that need a simulator setting read once per
// process (suites named *Env; CMakeLists.txt runs each with its setting): strict mode
// and the event-wait timeout standing in for Metal's GPU watchdog.
#include <stdlib.h>

#include <chrono>

#include "api_fixture.h"

namespace metalx::rt::testing {
namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// Run by ctest with METALSIM_EVENT_TIMEOUT_S=1 (CMakeLists.txt). On Metal a wait that
// is never satisfied hangs the GPU until its watchdog kills the command buffer; the
// simulator fails it after the timeout, with a message saying what it waited for.
class EventTimeoutEnv : public ApiTest {
 protected:
  void SetUp() override {
    if (!envIs("METALSIM_EVENT_TIMEOUT_S", "1")) GTEST_SKIP() << "needs METALSIM_EVENT_TIMEOUT_S=1";
    ApiTest::SetUp();
  }
};

TEST_F(EventTimeoutEnv, WaitNobodySignalsFailsTheCommandBufferAfterTheTimeout) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  auto e = dev().newEvent();
  e->signal(2);
  auto cb = queue->commandBuffer();
  cb->encodeWait(e, 3);
  auto enc = cb->computeEncoder();
  encodeAddOne(*enc, data, 64);
  enc->endEncoding();
  auto t0 = Clock::now();
  cb->commit();
  cb->waitUntilCompleted();
  double waited = msSince(t0);
  ASSERT_EQ(cb->status(), CommandBufferStatus::Error);
  const std::string err = cb->error();
  EXPECT_NE(err.find("timed out after 1 s waiting for an event to reach 3 (it is at 2)"), std::string::npos) << err;
  EXPECT_GE(waited, 900.0);
  EXPECT_LT(waited, 10000.0);
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 0);  // the work after the wait did not run
  expectQueueStillWorks();
}

// ---------------------------------------------------------------- strict mode
// Run by ctest with METALSIM_STRICT=1 (CMakeLists.txt). Strict mode makes missing
// synchronisation and uninitialised reads fail every time instead of occasionally.

class StrictEnv : public ApiTest {
 protected:
  void SetUp() override {
    if (!envIs("METALSIM_STRICT", "1")) GTEST_SKIP() << "needs METALSIM_STRICT=1";
    // Widen strict mode's start delay (2 ms by default) so that a test thread
    // descheduled between commit and read on a loaded machine still reads before the
    // work starts. Takes effect when this is the first use of the simulator in the
    // process, as under ctest; an explicit setting wins.
    setenv("METALSIM_STRICT_DELAY_US", "50000", /*overwrite=*/0);
    ApiTest::SetUp();
  }
};

// Reading results without waiting is a bug that real GPUs hide when they are fast;
// strict mode delays every command buffer so such a read sees the old data every time.
TEST_F(StrictEnv, ReadingBeforeWaitUntilCompletedSeesOldData) {
  for (int round = 0; round < 5; ++round) {
    auto data = bufferFrom(std::vector<int>(64, 10));
    auto cb = queue->commandBuffer();
    auto enc = cb->computeEncoder();
    encodeAddOne(*enc, data, 64);
    enc->endEncoding();
    cb->commit();
    for (int v : read<int>(data, 64)) ASSERT_EQ(v, 10) << "round " << round;
    EXPECT_NE(cb->status(), CommandBufferStatus::Completed);
    cb->waitUntilCompleted();
    ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
    for (int v : read<int>(data, 64)) ASSERT_EQ(v, 11);
  }
}

// Code that forgets to initialise a new buffer gets 0xCD bytes (huge integers, NaN-like
// floats) instead of zeros that happen to look right.
TEST_F(StrictEnv, NewBuffersArePoisonedNotZeroed) {
  for (size_t size : {size_t(64), size_t(1000), size_t(1) << 20}) {  // heap and mmap paths
    auto b = dev().newBuffer(size);
    auto bytes = read<unsigned char>(b, size);
    for (size_t i = 0; i < size; ++i) ASSERT_EQ(bytes[i], 0xCD) << "size " << size << " byte " << i;
  }
  // Work still computes on what was written: poison is only the starting state.
  auto data = dev().newBuffer(64 * sizeof(int));
  auto cb = queue->commandBuffer();
  auto blit = cb->blitEncoder();
  blit->fillBuffer(data, 0, data->length(), 0);
  blit->endEncoding();
  auto enc = cb->computeEncoder();
  encodeAddOne(*enc, data, 64);
  enc->endEncoding();
  commitAndWait(cb);
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 1);
}

}  // namespace
}  // namespace metalx::rt::testing
