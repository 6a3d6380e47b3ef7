// The command model of command.h and event.h: asynchrony, ordering, completion,
// failures, events across queues and object lifetimes. (The simulator's strict mode
// and event timeout are in test_sim_env.cpp.)
//
// Everything above the runtime (the caching allocator, stream semantics, the Python
// synchronize()) is built on these guarantees, so each is checked with data: work that
// ran out of order or too early leaves a wrong value behind.
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "api_fixture.h"

namespace metalx::rt::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

using CommandModel = ApiTest;

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// Waits up to `timeout` for `condition`; for effects that happen on a runtime thread.
template <class Cond>
bool eventually(Cond&& condition, milliseconds timeout = milliseconds(2000)) {
  auto until = Clock::now() + timeout;
  while (Clock::now() < until) {
    if (condition()) return true;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return condition();
}

// ---------------------------------------------------------------- asynchrony

// commit() hands the work to the queue and returns: the host encodes the next step
// while the device runs this one. A synchronous commit would serialise everything.
TEST_F(CommandModel, CommitReturnsBeforeSlowWorkFinishes) {
  const uint32_t iters = slowIters(20);
  auto out = dev().newBuffer(16);
  auto cb = queue->commandBuffer();
  EXPECT_EQ(cb->status(), CommandBufferStatus::NotEnqueued);
  auto enc = cb->computeEncoder();
  encodeSlowWrite(*enc, out, iters, 77);
  enc->endEncoding();
  auto t0 = Clock::now();
  cb->commit();
  double commit_ms = msSince(t0);
  auto status = cb->status();
  uint32_t early = read<uint32_t>(out, 1)[0];
  EXPECT_TRUE(status == CommandBufferStatus::Committed || status == CommandBufferStatus::Scheduled)
      << statusName(status);
  EXPECT_EQ(early, 0u) << "the kernel's result was visible right after commit";
  cb->waitUntilCompleted();
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  EXPECT_EQ(cb->error(), "");
  EXPECT_EQ(read<uint32_t>(out, 1)[0], 77u);
  const double work_ms = (cb->gpuEndTime() - cb->gpuStartTime()) * 1000;
  EXPECT_GE(work_ms, 15.0);
  EXPECT_LT(commit_ms, work_ms) << "commit() waited for the work";
}

// ---------------------------------------------------------------- ordering

// One queue runs its command buffers in commit order, one after another: the second
// sees everything the first wrote, even when the first is slow.
TEST_F(CommandModel, CommandBuffersOnOneQueueRunInCommitOrder) {
  const uint32_t iters = slowIters(20);
  auto marker = dev().newBuffer(16);
  auto copied = bufferFrom(std::vector<int>(1, -1));
  auto data = bufferFrom(std::vector<int>(256, 0));
  std::vector<CommandBufferPtr> cbs;

  // 1: slow, then writes the marker.
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  encodeSlowWrite(*enc, marker, iters, 1234);
  enc->endEncoding();
  cb->commit();
  cbs.push_back(cb);
  // 2: copies the marker; sees 1234 only if it ran after 1 finished.
  cb = queue->commandBuffer();
  enc = cb->computeEncoder();
  uint32_t one = 1;
  enc->setComputePipeline(pipeline("copy_int"));
  enc->setBuffer(marker, 0, 0);
  enc->setBuffer(copied, 0, 1);
  enc->setBytes(&one, sizeof one, 2);
  enc->dispatchThreads({1, 1, 1}, {1, 1, 1});
  enc->endEncoding();
  cb->commit();
  cbs.push_back(cb);
  // 3..: alternating non-commuting steps: fill with byte i, then add one. Only commit
  // order leaves 0x10101010 + 1 behind (the last fill, then the last add).
  for (int i = 1; i <= 16; ++i) {
    cb = queue->commandBuffer();
    auto blit = cb->blitEncoder();
    blit->fillBuffer(data, 0, data->length(), uint8_t(i));
    blit->endEncoding();
    auto add = cb->computeEncoder();
    encodeAddOne(*add, data, 256);
    add->endEncoding();
    cb->commit();
    cbs.push_back(cb);
  }
  // Waiting for the last one is enough: everything before it has completed too.
  cbs.back()->waitUntilCompleted();
  for (size_t i = 0; i < cbs.size(); ++i)
    EXPECT_EQ(cbs[i]->status(), CommandBufferStatus::Completed) << "command buffer " << i << " "
                                                                << cbs[i]->error();
  EXPECT_EQ(read<int>(copied, 1)[0], 1234);
  for (int v : read<int>(data, 256)) ASSERT_EQ(v, 0x10101010 + 1);
  // And they ran one after another, never overlapping.
  for (size_t i = 1; i < cbs.size(); ++i)
    EXPECT_LE(cbs[i - 1]->gpuEndTime(), cbs[i]->gpuStartTime()) << i;
}

// Read-modify-write kernels in separate command buffers: none may be lost or doubled.
TEST_F(CommandModel, ManyCommandBuffersOnTheSameDataAllApplyOnce) {
  auto data = bufferFrom(std::vector<int>(4096, 0));
  const int kCount = 25;
  CommandBufferPtr last;
  for (int i = 0; i < kCount; ++i) {
    last = queue->commandBuffer();
    auto enc = last->computeEncoder();
    encodeAddOne(*enc, data, 4096);
    enc->endEncoding();
    last->commit();
  }
  last->waitUntilCompleted();
  for (int v : read<int>(data, 4096)) ASSERT_EQ(v, kCount);
}

// Commands inside one command buffer run in encoding order (command.h).
TEST_F(CommandModel, CommandsInsideOneCommandBufferRunInOrder) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  auto copy = bufferFrom(std::vector<int>(64, 0));
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  encodeAddOne(*enc, data, 64);
  encodeAddOne(*enc, data, 64);
  enc->endEncoding();
  auto blit = cb->blitEncoder();
  blit->copyBuffer(data, 0, copy, 0, 256);   // copy sees 2
  blit->fillBuffer(data, 0, 256, 0);
  blit->endEncoding();
  enc = cb->computeEncoder();
  encodeAddOne(*enc, data, 64);  // 0 + 1
  enc->endEncoding();
  commitAndWait(cb);
  for (int v : read<int>(copy, 64)) ASSERT_EQ(v, 2);
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 1);
}

// ---------------------------------------------------------------- completion

// Completed handlers are how the allocator learns a block is free again: each must
// run exactly once, see the final status, and have run by the time waitUntilCompleted
// returns (callers rely on their effects right after waiting).
TEST_F(CommandModel, CompletedHandlersRunOnceWithFinalStatusBeforeWaitReturns) {
  const uint32_t iters = slowIters(20);
  auto out = dev().newBuffer(16);
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  encodeSlowWrite(*enc, out, iters, 5);
  enc->endEncoding();
  std::atomic<int> calls_a{0}, calls_b{0};
  std::atomic<bool> a_saw_completed{false}, same_object{false}, a_saw_result{false};
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> on_caller_thread{true};
  CommandBuffer* raw = cb.get();
  cb->addCompletedHandler([&](CommandBuffer& c) {
    ++calls_a;
    a_saw_completed = c.status() == CommandBufferStatus::Completed;
    same_object = &c == raw;
    a_saw_result = read<uint32_t>(out, 1)[0] == 5;
    on_caller_thread = std::this_thread::get_id() == caller;
  });
  cb->addCompletedHandler([&](CommandBuffer&) {
    ++calls_b;
  });
  cb->commit();
  EXPECT_EQ(calls_a.load(), 0);  // the work takes >= 20 ms: not done yet
  cb->waitUntilCompleted();
  EXPECT_EQ(calls_a.load(), 1);
  EXPECT_EQ(calls_b.load(), 1);
  EXPECT_TRUE(a_saw_completed);
  EXPECT_TRUE(same_object);
  EXPECT_TRUE(a_saw_result) << "a handler ran before the work's results were visible";
  EXPECT_FALSE(on_caller_thread) << "handlers run on a runtime thread";
  queue->waitUntilIdle();
  std::this_thread::sleep_for(milliseconds(5));
  EXPECT_EQ(calls_a.load(), 1);
  EXPECT_EQ(calls_b.load(), 1);
}

// GPU timestamps measure kernels in profiles: 0 until completion, then ordered.
TEST_F(CommandModel, GpuTimesAreSetOnCompletionAndOrdered) {
  const uint32_t iters = slowIters(20);
  auto out = dev().newBuffer(16);
  auto make = [&] {
    auto cb = queue->commandBuffer();
    auto enc = cb->computeEncoder();
    encodeSlowWrite(*enc, out, iters / 4, 1);
    enc->endEncoding();
    return cb;
  };
  auto first = make(), second = make();
  EXPECT_EQ(first->gpuStartTime(), 0.0);
  EXPECT_EQ(first->gpuEndTime(), 0.0);
  first->commit();
  second->commit();
  second->waitUntilCompleted();
  first->waitUntilCompleted();
  for (auto& cb : {first, second}) {
    EXPECT_GT(cb->gpuStartTime(), 0.0);
    EXPECT_GT(cb->gpuEndTime(), 0.0);
    EXPECT_LT(cb->gpuStartTime(), cb->gpuEndTime());
  }
  EXPECT_LE(first->gpuEndTime(), second->gpuStartTime());
  // Sequential on the host too: a later command buffer starts after an earlier ended.
  auto third = make();
  commitAndWait(third);
  EXPECT_LE(second->gpuEndTime(), third->gpuStartTime());
}

// gpuStartTime/gpuEndTime are 0 until the command buffer has completed (command.h); a
// profiler polling them meanwhile must not see a half-written pair.
TEST_F(CommandModel, GpuTimesStayZeroWhileRunning) {
  const uint32_t iters = slowIters(20);
  auto out = dev().newBuffer(16);
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  encodeSlowWrite(*enc, out, iters * 2, 1);  // >= 40 ms
  enc->endEncoding();
  cb->commit();
  ASSERT_TRUE(eventually([&] { return cb->status() == CommandBufferStatus::Scheduled; }, milliseconds(1000)));
  std::this_thread::sleep_for(milliseconds(2));
  EXPECT_NE(cb->status(), CommandBufferStatus::Completed);
  EXPECT_EQ(cb->gpuStartTime(), 0.0) << "start time visible while the command buffer is still running";
  EXPECT_EQ(cb->gpuEndTime(), 0.0);
  cb->waitUntilCompleted();
  EXPECT_GT(cb->gpuStartTime(), 0.0);
}

// A kernel fault fails its command buffer, not the process: status Error with a
// message naming the kernel and the cause, and the queue carries on.
TEST_F(CommandModel, FailedCommandBufferReportsErrorAndQueueCarriesOn) {
  // The failure is provoked with a barrier some threads never reach, which only the
  // simulator turns into a failed command buffer (a GPU may hang or carry on).
  if (driverName() != "sim") GTEST_SKIP() << "no portable way to make a command buffer fail on " << driverName();
  auto out = dev().newBuffer(64 * sizeof(int));
  auto cb = queue->commandBuffer();
  cb->setLabel("bad-step");
  auto enc = cb->computeEncoder();
  enc->setComputePipeline(pipeline("partial_barrier"));
  enc->setBuffer(out, 0, 0);
  enc->dispatchThreads({64, 1, 1}, {64, 1, 1});
  enc->endEncoding();
  std::atomic<int> calls{0};
  std::atomic<bool> saw_error{false};
  std::string handler_error;
  cb->addCompletedHandler([&](CommandBuffer& c) {
    ++calls;
    saw_error = c.status() == CommandBufferStatus::Error;
    handler_error = c.error();
  });
  cb->commit();
  EXPECT_NO_THROW(cb->waitUntilCompleted());  // failure is reported by status, not thrown
  ASSERT_EQ(cb->status(), CommandBufferStatus::Error);
  const std::string err = cb->error();
  EXPECT_NE(err.find("bad-step"), std::string::npos) << err;
  EXPECT_NE(err.find("partial_barrier"), std::string::npos) << err;
  EXPECT_NE(err.find("barrier"), std::string::npos) << err;
  EXPECT_NE(err.find("16 of 64"), std::string::npos) << err;
  EXPECT_EQ(calls.load(), 1);
  EXPECT_TRUE(saw_error);
  EXPECT_EQ(handler_error, err);
  EXPECT_GT(cb->gpuEndTime(), 0.0);
  // Later work on the same queue runs normally.
  expectQueueStillWorks();
  queue->waitUntilIdle();
}

// waitUntilIdle waits for everything committed so far (synchronize() on a stream).
TEST_F(CommandModel, QueueWaitUntilIdleWaitsForAllCommittedWork) {
  const uint32_t iters = slowIters(20);
  auto out = dev().newBuffer(16);
  auto data = bufferFrom(std::vector<int>(64, 0));
  std::vector<CommandBufferPtr> cbs;
  for (int i = 0; i < 3; ++i) {
    auto cb = queue->commandBuffer();
    auto enc = cb->computeEncoder();
    if (i == 0) encodeSlowWrite(*enc, out, iters, 31);
    else encodeAddOne(*enc, data, 64);
    enc->endEncoding();
    cb->commit();
    cbs.push_back(cb);
  }
  queue->waitUntilIdle();
  for (auto& cb : cbs) EXPECT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  EXPECT_EQ(read<uint32_t>(out, 1)[0], 31u);
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 2);
  // An idle queue returns at once, and a queue that never had work too.
  queue->waitUntilIdle();
  dev().newCommandQueue()->waitUntilIdle();
}

// ---------------------------------------------------------------- events, host side

TEST(Events, HostWaitTimesOutWithFalseAndSucceedsOnceSignalled) {
  auto e = dev().newEvent();
  EXPECT_EQ(e->signaledValue(), 0u);
  EXPECT_EQ(&e->device(), &dev());
  auto t0 = Clock::now();
  EXPECT_FALSE(e->waitUntilSignaled(1, milliseconds(50)));
  EXPECT_GE(msSince(t0), 45.0);
  EXPECT_TRUE(e->waitUntilSignaled(0, milliseconds(0)));  // already reached

  std::thread signaller([&] {
    std::this_thread::sleep_for(milliseconds(20));
    e->signal(3);
  });
  t0 = Clock::now();
  EXPECT_TRUE(e->waitUntilSignaled(2, milliseconds(5000)));  // 3 >= 2
  EXPECT_LT(msSince(t0), 4000.0);
  signaller.join();
  EXPECT_EQ(e->signaledValue(), 3u);
  EXPECT_TRUE(e->waitUntilSignaled(3, milliseconds(0)));
  EXPECT_FALSE(e->waitUntilSignaled(4, milliseconds(1)));
}

// As on Metal, an event is a monotonic counter: a stale (smaller) signal is ignored,
// so a late host signal cannot un-complete work others already waited for.
TEST(Events, ValuesOnlyMoveForward) {
  auto e = dev().newEvent();
  e->signal(5);
  EXPECT_EQ(e->signaledValue(), 5u);
  e->signal(3);
  EXPECT_EQ(e->signaledValue(), 5u);
  e->signal(5);
  EXPECT_EQ(e->signaledValue(), 5u);
  e->signal(0);
  EXPECT_EQ(e->signaledValue(), 5u);
  e->signal(6);
  EXPECT_EQ(e->signaledValue(), 6u);
  e->signal(~uint64_t(0));
  EXPECT_EQ(e->signaledValue(), ~uint64_t(0));
}

TEST(Events, NotifyFiresOnceAtOrAfterItsValue) {
  auto e = dev().newEvent();
  std::atomic<int> at3{0}, at10{0}, already{0};
  std::atomic<uint64_t> value_seen{0};
  e->notify(3, [&] {
    ++at3;
    value_seen = e->signaledValue();
  });
  e->notify(10, [&] { ++at10; });
  e->signal(2);
  std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(at3.load(), 0) << "fired before the value was reached";
  e->signal(5);  // passes 3 without hitting it exactly
  EXPECT_TRUE(eventually([&] { return at3.load() == 1; }));
  EXPECT_GE(value_seen.load(), 3u);
  e->signal(7);
  e->signal(9);
  std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(at3.load(), 1) << "fired more than once";
  EXPECT_EQ(at10.load(), 0);
  // Already reached: fires without another signal.
  e->notify(4, [&] { ++already; });
  EXPECT_TRUE(eventually([&] { return already.load() == 1; }));
  e->signal(10);
  EXPECT_TRUE(eventually([&] { return at10.load() == 1; }));
  e->signal(20);
  std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(at3.load(), 1);
  EXPECT_EQ(at10.load(), 1);
  EXPECT_EQ(already.load(), 1);
}

// Listeners run on a runtime thread (event.h), as MTLSharedEventListener's do on its
// dispatch queue, never inside the caller's signal() or notify(): a caller that holds
// a lock its listener also takes (the allocator does) would otherwise deadlock.
TEST(Events, NotifyCallbacksRunOnARuntimeThreadNotInTheCaller) {
  auto e = dev().newEvent();
  const auto me = std::this_thread::get_id();
  std::atomic<int> ran{0}, on_caller{0};
  auto listener = [&] {
    if (std::this_thread::get_id() == me) ++on_caller;
    ++ran;
  };
  e->notify(1, listener);
  e->signal(1);  // host signal: the listener must not run inside this call
  e->notify(1, listener);  // already reached: neither inside this one
  ASSERT_TRUE(eventually([&] { return ran.load() == 2; }));
  EXPECT_EQ(on_caller.load(), 0) << "a listener ran on the thread that called signal() or notify()";
}

// A listener may touch the event it listens to (e.g. signal the next value): it must
// not deadlock.
TEST(Events, NotifyCallbackMaySignalTheSameEvent) {
  auto e = dev().newEvent();
  std::atomic<int> second{0};
  e->notify(1, [&] { e->signal(2); });
  e->notify(2, [&] { ++second; });
  e->signal(1);
  EXPECT_TRUE(e->waitUntilSignaled(2, milliseconds(2000)));
  EXPECT_TRUE(eventually([&] { return second.load() == 1; }));
}

// ---------------------------------------------------------------- events, device side

// encodeSignal between two parts of a command buffer lets the host wait for the first
// part without waiting for the whole command buffer (or queue).
TEST_F(CommandModel, EncodeSignalLetsTheHostWaitForAPointInsideACommandBuffer) {
  const uint32_t iters = slowIters(20);
  auto first = dev().newBuffer(16), second = dev().newBuffer(16);
  auto e = dev().newEvent();
  std::atomic<int> notified{0};
  std::atomic<bool> first_done_when_notified{false};
  e->notify(1, [&] {
    first_done_when_notified = read<uint32_t>(first, 1)[0] == 7;
    ++notified;
  });
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  encodeSlowWrite(*enc, first, iters / 4, 7);
  enc->endEncoding();
  cb->encodeSignal(e, 1);
  enc = cb->computeEncoder();
  encodeSlowWrite(*enc, second, iters * 2, 8);  // >= 40 ms after the signal
  enc->endEncoding();
  cb->commit();
  ASSERT_TRUE(e->waitUntilSignaled(1, milliseconds(10000)));
  // The work before the signal is done and visible...
  EXPECT_EQ(read<uint32_t>(first, 1)[0], 7u);
  // ...the work after it is not (it takes >= 40 ms more).
  EXPECT_NE(cb->status(), CommandBufferStatus::Completed);
  EXPECT_EQ(read<uint32_t>(second, 1)[0], 0u);
  cb->waitUntilCompleted();
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  EXPECT_EQ(read<uint32_t>(second, 1)[0], 8u);
  EXPECT_EQ(notified.load(), 1);
  EXPECT_TRUE(first_done_when_notified);
}

// Two queues run independently; an event orders them. Queue B waits for what queue A
// signals, so B reads A's result even though A's work is slow and B was committed first.
TEST_F(CommandModel, EncodeWaitOrdersAnotherQueueAfterTheSignal) {
  const uint32_t iters = slowIters(20);
  auto queue_b = dev().newCommandQueue();
  auto shared = dev().newBuffer(16);
  auto result = bufferFrom(std::vector<int>(1, -1));
  auto e = dev().newEvent();

  auto b = queue_b->commandBuffer();
  b->encodeWait(e, 1);
  auto enc = b->computeEncoder();
  uint32_t one = 1;
  enc->setComputePipeline(pipeline("copy_int"));
  enc->setBuffer(shared, 0, 0);
  enc->setBuffer(result, 0, 1);
  enc->setBytes(&one, sizeof one, 2);
  enc->dispatchThreads({1, 1, 1}, {1, 1, 1});
  enc->endEncoding();
  b->encodeSignal(e, 2);
  b->commit();  // before A: B must block in its wait

  std::this_thread::sleep_for(milliseconds(5));
  EXPECT_NE(b->status(), CommandBufferStatus::Completed) << "B did not wait for the event";

  auto a = queue->commandBuffer();
  enc = a->computeEncoder();
  encodeSlowWrite(*enc, shared, iters, 4242);
  enc->endEncoding();
  a->encodeSignal(e, 1);
  a->commit();

  b->waitUntilCompleted();
  ASSERT_EQ(b->status(), CommandBufferStatus::Completed) << b->error();
  EXPECT_EQ(read<int>(result, 1)[0], 4242) << "B ran before A's write";
  EXPECT_EQ(e->signaledValue(), 2u);
  a->waitUntilCompleted();
  ASSERT_EQ(a->status(), CommandBufferStatus::Completed) << a->error();
}

// The host can release a device wait too (CPU-produced data handed to the GPU).
TEST_F(CommandModel, HostSignalReleasesAnEncodedWait) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  auto e = dev().newEvent();
  auto cb = queue->commandBuffer();
  cb->encodeWait(e, 5);
  auto enc = cb->computeEncoder();
  encodeAddOne(*enc, data, 64);
  enc->endEncoding();
  cb->commit();
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_NE(cb->status(), CommandBufferStatus::Completed);
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 0);
  e->signal(5);
  cb->waitUntilCompleted();
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 1);
}

// ---------------------------------------------------------------- lifetimes

// A command buffer keeps what it uses alive until it completes (command.h), so callers
// may drop their references right after encoding; the memory is released afterwards,
// not leaked.
TEST_F(CommandModel, BuffersStayAliveWhileACommandBufferUsesThem) {
  const uint32_t iters = slowIters(20);
  const size_t before = dev().currentAllocatedSize();
  auto result = bufferFrom(std::vector<int>(1, -1));
  std::weak_ptr<Buffer> weak_tmp;
  const size_t tmp_size = 64 * 1024;
  CommandBufferPtr cb = queue->commandBuffer();
  {
    auto tmp = dev().newBuffer(tmp_size);
    weak_tmp = tmp;
    auto enc = cb->computeEncoder();
    encodeSlowWrite(*enc, tmp, iters, 99);  // writes tmp[0] late
    enc->endEncoding();
    enc = cb->computeEncoder();
    uint32_t one = 1;
    enc->setComputePipeline(pipeline("copy_int"));
    enc->setBuffer(tmp, 0, 0);
    enc->setBuffer(result, 0, 1);
    enc->setBytes(&one, sizeof one, 2);
    enc->dispatchThreads({1, 1, 1}, {1, 1, 1});
    enc->endEncoding();
  }  // the caller's references to tmp, the encoders and pipelines are gone
  cb->commit();
  EXPECT_FALSE(weak_tmp.expired()) << "a buffer in use was released";
  EXPECT_EQ(dev().currentAllocatedSize(), before + sizeof(int) + tmp_size);
  cb->waitUntilCompleted();
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  EXPECT_EQ(read<int>(result, 1)[0], 99);
  // Released on completion, before waitUntilCompleted returned, even though the
  // command buffer object itself is still alive.
  EXPECT_TRUE(weak_tmp.expired()) << "the command buffer kept the buffer after completing";
  EXPECT_EQ(dev().currentAllocatedSize(), before + sizeof(int));
  result.reset();
  EXPECT_EQ(dev().currentAllocatedSize(), before);
}

// The queue object may be dropped while its work is in flight: the work still runs.
TEST_F(CommandModel, DroppingTheQueueDoesNotCancelCommittedWork) {
  const uint32_t iters = slowIters(20);
  auto out = dev().newBuffer(16);
  auto q = dev().newCommandQueue();
  auto cb = q->commandBuffer();
  auto enc = cb->computeEncoder();
  encodeSlowWrite(*enc, out, iters, 55);
  enc->endEncoding();
  enc.reset();
  cb->commit();
  q.reset();
  cb->waitUntilCompleted();
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  EXPECT_EQ(read<uint32_t>(out, 1)[0], 55u);
}

}  // namespace
}  // namespace metalx::rt::testing
