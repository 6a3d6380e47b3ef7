// Every validation rule of the runtime interface, one test each.
//
// Metal's API validation layer aborts the process on misuse; the interface instead
// throws Error(Validation) naming the rule, and "leaves the object as it was"
// (command.h). So each test checks three things: the error kind, that the message
// names the problem (the user sees it through Python), and that the object is still
// usable afterwards: the rejected call had no effect and correct work still runs.
#include <atomic>
#include <cstdlib>
#include <thread>

#include "api_fixture.h"

namespace metalx::rt::testing {
namespace {

using Validation = ApiTest;

constexpr ErrorKind kValidation = ErrorKind::Validation;

// ---------------------------------------------------------------- command buffer life

// A committed command buffer is owned by the queue; encoding into it would race with
// its execution, so every encoding operation is rejected after commit.
TEST_F(Validation, EncodingAfterCommitIsRejected) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  auto event = dev().newEvent();
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  encodeAddOne(*enc, data, 64);
  enc->endEncoding();
  cb->commit();

  EXPECT_RT_ERROR(cb->computeEncoder(), kValidation, "computeEncoder: command buffer was already committed");
  EXPECT_RT_ERROR(cb->blitEncoder(), kValidation, "blitEncoder: command buffer was already committed");
  EXPECT_RT_ERROR(cb->encodeSignal(event, 1), kValidation, "encodeSignal: command buffer was already committed");
  EXPECT_RT_ERROR(cb->encodeWait(event, 1), kValidation, "encodeWait: command buffer was already committed");
  EXPECT_RT_ERROR(cb->addCompletedHandler([](CommandBuffer&) {}), kValidation,
                  "addCompletedHandler: command buffer was already committed");

  // The committed work is unaffected: it runs once, and nothing was added to it (the
  // rejected signal must not have reached the event).
  cb->waitUntilCompleted();
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 1);
  EXPECT_EQ(event->signaledValue(), 0u);
  expectQueueStillWorks();
}

// The message names the command buffer by its label, so the user can find it.
TEST_F(Validation, MessagesNameTheLabelledCommandBuffer) {
  auto cb = queue->commandBuffer();
  cb->setLabel("my-step");
  EXPECT_EQ(cb->label(), "my-step");
  commitAndWait(cb);
  EXPECT_RT_ERROR(cb->computeEncoder(), kValidation, "command buffer 'my-step' was already committed");
}

// Committing twice would run the work twice (or corrupt the queue).
TEST_F(Validation, CommittingTwiceIsRejectedAndWorkRunsOnce) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  encodeAddOne(*enc, data, 64);
  enc->endEncoding();
  cb->commit();
  EXPECT_RT_ERROR(cb->commit(), kValidation, "commit: command buffer was already committed");
  cb->waitUntilCompleted();
  EXPECT_RT_ERROR(cb->commit(), kValidation, "commit: command buffer was already committed");
  queue->waitUntilIdle();
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 1);  // ran exactly once
}

// A command buffer has at most one open encoder: Metal orders commands by encoder, and
// two open ones would interleave.
TEST_F(Validation, SecondEncoderWhileComputeEncoderIsOpenIsRejected) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  EXPECT_RT_ERROR(cb->computeEncoder(), kValidation, "computeEncoder: a compute encoder is still open");
  EXPECT_RT_ERROR(cb->blitEncoder(), kValidation, "blitEncoder: a compute encoder is still open");
  // The open encoder is still the open one and still works.
  encodeAddOne(*enc, data, 64);
  enc->endEncoding();
  // And once it is ended, another encoder may be made.
  auto blit = cb->blitEncoder();
  blit->fillBuffer(data, 0, 4, 0);  // data[0] = 0 after the add
  blit->endEncoding();
  commitAndWait(cb);
  auto out = read<int>(data, 64);
  EXPECT_EQ(out[0], 0);
  for (int i = 1; i < 64; ++i) ASSERT_EQ(out[i], 1);
}

TEST_F(Validation, SecondEncoderWhileBlitEncoderIsOpenIsRejected) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  auto cb = queue->commandBuffer();
  auto blit = cb->blitEncoder();
  EXPECT_RT_ERROR(cb->computeEncoder(), kValidation, "computeEncoder: a blit encoder is still open");
  EXPECT_RT_ERROR(cb->blitEncoder(), kValidation, "blitEncoder: a blit encoder is still open");
  blit->fillBuffer(data, 0, data->length(), 0x01);
  blit->endEncoding();
  commitAndWait(cb);
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 0x01010101);
}

// Events are encoded between encoders (Metal has no event command inside an encoder).
TEST_F(Validation, EventCommandsWhileAnEncoderIsOpenAreRejected) {
  auto event = dev().newEvent();
  auto data = bufferFrom(std::vector<int>(64, 0));
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  EXPECT_RT_ERROR(cb->encodeSignal(event, 1), kValidation, "encodeSignal: end the open compute encoder");
  EXPECT_RT_ERROR(cb->encodeWait(event, 1), kValidation, "encodeWait: end the open compute encoder");
  encodeAddOne(*enc, data, 64);
  enc->endEncoding();
  cb->encodeSignal(event, 1);
  commitAndWait(cb);
  EXPECT_EQ(event->signaledValue(), 1u);
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 1);
}

// Committing with an open encoder would run a half-encoded pass.
TEST_F(Validation, CommitWithAnOpenEncoderIsRejected) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  encodeAddOne(*enc, data, 64);
  EXPECT_RT_ERROR(cb->commit(), kValidation, "commit: the compute encoder of command buffer is still open");
  EXPECT_EQ(cb->status(), CommandBufferStatus::NotEnqueued);
  // Still encoding: more work can be added, then the commit succeeds.
  encodeAddOne(*enc, data, 64);
  enc->endEncoding();
  commitAndWait(cb);
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 2);
}

// An ended encoder's commands are final; later calls would be silently lost on Metal.
TEST_F(Validation, UsingAComputeEncoderAfterEndEncodingIsRejected) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  uint32_t n = 64;
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  enc->setLabel("adder");
  encodeAddOne(*enc, data, 64);
  enc->endEncoding();
  EXPECT_TRUE(enc->isEnded());
  EXPECT_RT_ERROR(enc->setComputePipeline(pipeline("add_one")), kValidation,
                  "setComputePipeline: the compute encoder 'adder' of command buffer has already ended");
  EXPECT_RT_ERROR(enc->setBuffer(data, 0, 0), kValidation, "setBuffer: the compute encoder 'adder'");
  EXPECT_RT_ERROR(enc->setBytes(&n, 4, 1), kValidation, "setBytes: the compute encoder 'adder'");
  EXPECT_RT_ERROR(enc->setThreadgroupMemoryLength(16, 0), kValidation, "has already ended");
  EXPECT_RT_ERROR(enc->dispatchThreads({64, 1, 1}, {64, 1, 1}), kValidation,
                  "dispatchThreads: the compute encoder 'adder' of command buffer has already ended");
  EXPECT_RT_ERROR(enc->dispatchThreadgroups({1, 1, 1}, {64, 1, 1}), kValidation,
                  "dispatchThreadgroups: the compute encoder 'adder'");
  commitAndWait(cb);
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 1);  // only the dispatch before the end ran
}

TEST_F(Validation, UsingABlitEncoderAfterEndEncodingIsRejected) {
  auto a = bufferFrom(std::vector<int>(16, 7));
  auto b = bufferFrom(std::vector<int>(16, 0));
  auto cb = queue->commandBuffer();
  auto blit = cb->blitEncoder();
  blit->copyBuffer(a, 0, b, 0, 32);
  blit->endEncoding();
  EXPECT_RT_ERROR(blit->copyBuffer(a, 0, b, 32, 32), kValidation, "copyBuffer: the blit encoder of command buffer has already ended");
  EXPECT_RT_ERROR(blit->fillBuffer(b, 0, 64, 0xFF), kValidation, "fillBuffer: the blit encoder");
  commitAndWait(cb);
  auto out = read<int>(b, 16);
  for (int i = 0; i < 16; ++i) ASSERT_EQ(out[i], i < 8 ? 7 : 0) << i;
}

TEST_F(Validation, EndEncodingTwiceIsRejectedAndDoesNotCloseANewerEncoder) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  auto cb = queue->commandBuffer();
  auto first = cb->computeEncoder();
  encodeAddOne(*first, data, 64);
  first->endEncoding();
  EXPECT_RT_ERROR(first->endEncoding(), kValidation, "endEncoding: the compute encoder of command buffer has already ended");
  // A stale endEncoding() on the old encoder must not end the one open now.
  auto second = cb->computeEncoder();
  EXPECT_RT_ERROR(first->endEncoding(), kValidation, "has already ended");
  EXPECT_FALSE(second->isEnded());
  EXPECT_RT_ERROR(cb->commit(), kValidation, "is still open");
  encodeAddOne(*second, data, 64);
  second->endEncoding();
  commitAndWait(cb);
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 2);
}

// Dropping an encoder without ending it is a lost pass on Metal (and an assertion in
// its validation layer); the simulator remembers it and refuses the commit.
TEST_F(Validation, EncoderDestroyedWithoutEndEncodingMakesCommitFail) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  auto cb = queue->commandBuffer();
  {
    auto enc = cb->computeEncoder();
    enc->setLabel("forgotten");
    encodeAddOne(*enc, data, 64);
  }
  EXPECT_RT_ERROR(cb->commit(), kValidation,
                  "commit: in command buffer, compute encoder 'forgotten' of command buffer was destroyed without endEncoding()");
  EXPECT_EQ(cb->status(), CommandBufferStatus::NotEnqueued);
  // The rule holds however often it is asked, and nothing ran.
  EXPECT_RT_ERROR(cb->commit(), kValidation, "destroyed without endEncoding()");
  EXPECT_RT_ERROR(cb->waitUntilCompleted(), kValidation, "never committed");
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 0);
  expectQueueStillWorks();
}

// Waiting for a command buffer that was never committed would block forever.
TEST_F(Validation, WaitUntilCompletedOnANeverCommittedCommandBufferIsRejected) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  auto cb = queue->commandBuffer();
  EXPECT_RT_ERROR(cb->waitUntilCompleted(), kValidation,
                  "waitUntilCompleted: command buffer was never committed");
  auto enc = cb->computeEncoder();
  encodeAddOne(*enc, data, 64);
  enc->endEncoding();
  EXPECT_RT_ERROR(cb->waitUntilCompleted(), kValidation, "never committed");
  commitAndWait(cb);
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 1);
}

// ---------------------------------------------------------------- blit encoder rules

// Metal on macOS requires 4-byte aligned blit offsets and sizes.
TEST_F(Validation, BlitCopyWithMisalignedOffsetsOrSizeIsRejected) {
  std::vector<int> src_values(16);
  for (int i = 0; i < 16; ++i) src_values[i] = 100 + i;
  auto src = bufferFrom(src_values);
  auto dst = bufferFrom(std::vector<int>(16, -1));
  auto cb = queue->commandBuffer();
  auto blit = cb->blitEncoder();
  EXPECT_RT_ERROR(blit->copyBuffer(src, 2, dst, 0, 8), kValidation,
                  "copyBuffer: source offset (2) must be a multiple of 4 bytes");
  EXPECT_RT_ERROR(blit->copyBuffer(src, 0, dst, 6, 8), kValidation,
                  "copyBuffer: destination offset (6) must be a multiple of 4 bytes");
  EXPECT_RT_ERROR(blit->copyBuffer(src, 0, dst, 0, 10), kValidation,
                  "copyBuffer: size (10) must be a multiple of 4 bytes");
  blit->copyBuffer(src, 4, dst, 8, 8);  // src[1..2] -> dst[2..3]
  blit->endEncoding();
  commitAndWait(cb);
  auto out = read<int>(dst, 16);
  for (int i = 0; i < 16; ++i) ASSERT_EQ(out[i], i == 2 ? 101 : i == 3 ? 102 : -1) << i;
}

// A copy may not leave either buffer (on a GPU it would read or write other memory).
TEST_F(Validation, BlitCopyOutOfRangeIsRejected) {
  auto src = bufferFrom(std::vector<int>(16, 5));  // 64 bytes
  auto dst = bufferFrom(std::vector<int>(8, -1));  // 32 bytes
  auto cb = queue->commandBuffer();
  auto blit = cb->blitEncoder();
  EXPECT_RT_ERROR(blit->copyBuffer(src, 60, dst, 0, 8), kValidation,
                  "copyBuffer: bytes [60, 68) are outside the source buffer (64 bytes)");
  EXPECT_RT_ERROR(blit->copyBuffer(src, 0, dst, 0, 36), kValidation,
                  "copyBuffer: bytes [0, 36) are outside the destination buffer (32 bytes)");
  EXPECT_RT_ERROR(blit->copyBuffer(src, 0, dst, 28, 8), kValidation, "outside the destination buffer");
  // Offsets near SIZE_MAX must not wrap around and pass the check.
  const size_t huge = ~size_t(3);
  EXPECT_RT_ERROR(blit->copyBuffer(src, huge, dst, 0, 8), kValidation, "outside the source buffer");
  EXPECT_RT_ERROR(blit->copyBuffer(src, 0, dst, huge, 8), kValidation, "outside the destination buffer");
  blit->copyBuffer(src, 32, dst, 0, 32);  // exactly the whole destination is fine
  blit->endEncoding();
  commitAndWait(cb);
  for (int v : read<int>(dst, 8)) ASSERT_EQ(v, 5);
}

// Overlapping copies within one buffer are undefined on Metal (no memmove guarantee).
TEST_F(Validation, OverlappingCopyInOneBufferIsRejected) {
  std::vector<int> values(16);
  for (int i = 0; i < 16; ++i) values[i] = i;
  auto a = bufferFrom(values);
  auto cb = queue->commandBuffer();
  auto blit = cb->blitEncoder();
  EXPECT_RT_ERROR(blit->copyBuffer(a, 0, a, 4, 8), kValidation,
                  "copyBuffer: source and destination ranges overlap in the same buffer");
  EXPECT_RT_ERROR(blit->copyBuffer(a, 8, a, 0, 12), kValidation, "overlap");
  EXPECT_RT_ERROR(blit->copyBuffer(a, 0, a, 0, 4), kValidation, "overlap");
  blit->copyBuffer(a, 0, a, 32, 32);  // disjoint ranges of one buffer are fine
  blit->endEncoding();
  commitAndWait(cb);
  auto out = read<int>(a, 16);
  for (int i = 0; i < 16; ++i) ASSERT_EQ(out[i], i < 8 ? i : i - 8) << i;
}

TEST_F(Validation, FillWithZeroOrMisalignedLengthOrOutOfRangeIsRejected) {
  auto b = bufferFrom(std::vector<int>(16, 0));  // 64 bytes
  auto cb = queue->commandBuffer();
  auto blit = cb->blitEncoder();
  EXPECT_RT_ERROR(blit->fillBuffer(b, 0, 0, 0xAB), kValidation, "fillBuffer: length must be greater than 0");
  EXPECT_RT_ERROR(blit->fillBuffer(b, 2, 8, 0xAB), kValidation,
                  "fillBuffer: offset (2) must be a multiple of 4 bytes");
  EXPECT_RT_ERROR(blit->fillBuffer(b, 0, 6, 0xAB), kValidation,
                  "fillBuffer: length (6) must be a multiple of 4 bytes");
  EXPECT_RT_ERROR(blit->fillBuffer(b, 60, 8, 0xAB), kValidation,
                  "fillBuffer: bytes [60, 68) are outside the filled buffer (64 bytes)");
  EXPECT_RT_ERROR(blit->fillBuffer(b, ~size_t(3), 8, 0xAB), kValidation, "outside the filled buffer");
  blit->fillBuffer(b, 56, 8, 0x11);
  blit->endEncoding();
  commitAndWait(cb);
  auto out = read<int>(b, 16);
  for (int i = 0; i < 16; ++i) ASSERT_EQ(out[i], i >= 14 ? 0x11111111 : 0) << i;
}

// ---------------------------------------------------------------- compute bindings

// offset == length binds an empty view at the end (a zero-size tensor's storage);
// anything past it points outside the buffer.
TEST_F(Validation, SetBufferOffsetPastTheEndIsRejected) {
  auto data = bufferFrom(std::vector<int>(64, 0));  // 256 bytes
  uint32_t n = 64;
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  enc->setComputePipeline(pipeline("add_one"));
  EXPECT_RT_ERROR(enc->setBuffer(data, 260, 0), kValidation,
                  "setBuffer: offset 260 is past the end of the buffer (256 bytes) at index 0");
  EXPECT_RT_ERROR(enc->setBuffer(data, 257, 0), kValidation, "past the end");
  // Nothing was bound by the rejected calls: the dispatch reports buffer(0) unbound.
  enc->setBytes(&n, sizeof n, 1);
  EXPECT_RT_ERROR(enc->dispatchThreads({64, 1, 1}, {64, 1, 1}), kValidation, "nothing is bound at [[buffer(0)]]");
  EXPECT_NO_THROW(enc->setBuffer(data, 256, 0));  // empty view at the end
  enc->setBuffer(data, 128, 0);                   // second half
  n = 32;
  enc->setBytes(&n, sizeof n, 1);
  enc->dispatchThreads({32, 1, 1}, {32, 1, 1});
  enc->endEncoding();
  commitAndWait(cb);
  auto out = read<int>(data, 64);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(out[i], i >= 32 ? 1 : 0) << i;
}

// Metal has 31 buffer argument slots (0-30).
TEST_F(Validation, BindingIndex31OrAboveIsRejected) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  uint32_t n = 64;
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  EXPECT_RT_ERROR(enc->setBuffer(data, 0, 31), kValidation,
                  "setBuffer: index 31 is out of range (Metal has slots 0-30)");
  EXPECT_RT_ERROR(enc->setBytes(&n, sizeof n, 31), kValidation, "setBytes: index 31 is out of range");
  EXPECT_RT_ERROR(enc->setBytes(&n, sizeof n, 1000), kValidation, "setBytes: index 1000 is out of range");
  EXPECT_RT_ERROR(enc->setThreadgroupMemoryLength(16, 31), kValidation,
                  "setThreadgroupMemoryLength: index 31 is out of range");
  // Slot 30 is valid (bound before a pipeline is set, so it is not "meant" for it).
  EXPECT_NO_THROW(enc->setBuffer(data, 0, 30));
  EXPECT_NO_THROW(enc->setBytes(&n, sizeof n, 30));
  encodeAddOne(*enc, data, 64);
  enc->endEncoding();
  commitAndWait(cb);
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 1);
}

// setBytes is for small constants (Metal: at most 4 KiB); zero bytes binds nothing.
TEST_F(Validation, SetBytesOutside1To4096BytesIsRejected) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  std::vector<unsigned char> big(4097, 0);
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  enc->setComputePipeline(pipeline("add_one"));
  enc->setBuffer(data, 0, 0);
  EXPECT_RT_ERROR(enc->setBytes(big.data(), 4097, 1), kValidation,
                  "setBytes: length 4097 must be between 1 and 4096 bytes");
  EXPECT_RT_ERROR(enc->setBytes(big.data(), 0, 1), kValidation, "setBytes: length 0 must be between 1 and 4096");
  EXPECT_RT_ERROR(enc->dispatchThreads({64, 1, 1}, {64, 1, 1}), kValidation,
                  "nothing is bound at [[buffer(1)]]");  // the rejected calls bound nothing
  // 4096 bytes is the limit, inclusive; the kernel reads n from the first 4 of them.
  uint32_t n = 64;
  std::memcpy(big.data(), &n, sizeof n);
  EXPECT_NO_THROW(enc->setBytes(big.data(), 4096, 1));
  enc->dispatchThreads({64, 1, 1}, {64, 1, 1});
  enc->endEncoding();
  commitAndWait(cb);
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 1);
}

// Metal requires threadgroup memory lengths in 16-byte units, within the device limit.
TEST_F(Validation, ThreadgroupMemoryLengthMustBeAMultipleOf16AndAtMost32KiB) {
  auto out = dev().newBuffer(64 * sizeof(int));
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  enc->setComputePipeline(pipeline("tg_double"));
  enc->setBuffer(out, 0, 0);
  EXPECT_RT_ERROR(enc->setThreadgroupMemoryLength(20, 0), kValidation,
                  "setThreadgroupMemoryLength: length 20 must be a multiple of 16 bytes");
  EXPECT_RT_ERROR(enc->setThreadgroupMemoryLength(32768 + 16, 0), kValidation,
                  "setThreadgroupMemoryLength: 32784 bytes is more than the device's 32768");
  // The rejected lengths were not recorded.
  EXPECT_RT_ERROR(enc->dispatchThreads({64, 1, 1}, {64, 1, 1}), kValidation,
                  "no threadgroup memory length is set for [[threadgroup(0)]]");
  EXPECT_NO_THROW(enc->setThreadgroupMemoryLength(32768, 0));
  enc->setThreadgroupMemoryLength(64 * sizeof(int), 0);
  enc->dispatchThreads({64, 1, 1}, {32, 1, 1});
  enc->endEncoding();
  commitAndWait(cb);
  auto got = read<int>(out, 64);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(got[i], 2 * i) << i;
}

// ---------------------------------------------------------------- dispatch rules

TEST_F(Validation, DispatchWithoutAPipelineIsRejected) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  uint32_t n = 64;
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  enc->setBuffer(data, 0, 0);
  enc->setBytes(&n, sizeof n, 1);
  EXPECT_RT_ERROR(enc->dispatchThreads({64, 1, 1}, {64, 1, 1}), kValidation,
                  "dispatch: no compute pipeline is set on the compute encoder");
  EXPECT_RT_ERROR(enc->dispatchThreadgroups({1, 1, 1}, {64, 1, 1}), kValidation, "no compute pipeline is set");
  // The bindings made before are kept: setting the pipeline is enough.
  enc->setComputePipeline(pipeline("add_one"));
  enc->dispatchThreads({64, 1, 1}, {64, 1, 1});
  enc->endEncoding();
  commitAndWait(cb);
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 1);
}

// An unbound argument reads whatever the slot last held on a GPU; the message names
// the parameter so the caller can find which one it forgot.
TEST_F(Validation, DispatchWithADeclaredBufferUnboundIsRejected) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  uint32_t n = 64;
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  enc->setComputePipeline(pipeline("add_one"));
  EXPECT_RT_ERROR(enc->dispatchThreads({64, 1, 1}, {64, 1, 1}), kValidation,
                  "dispatch of kernel 'add_one': nothing is bound at [[buffer(0)]] (parameter 'data')");
  enc->setBuffer(data, 0, 0);
  EXPECT_RT_ERROR(enc->dispatchThreads({64, 1, 1}, {64, 1, 1}), kValidation,
                  "dispatch of kernel 'add_one': nothing is bound at [[buffer(1)]] (parameter 'n')");
  enc->setBytes(&n, sizeof n, 1);
  enc->dispatchThreads({64, 1, 1}, {64, 1, 1});
  enc->endEncoding();
  commitAndWait(cb);
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 1);
}

// A binding at an index the current kernel does not declare, made after the pipeline
// was set, is a binding meant for another kernel or an off-by-one in the caller.
TEST_F(Validation, BindingAnUndeclaredIndexAfterSettingThePipelineIsRejected) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  int k = 5;
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  encodeAddOne(*enc, data, 64);  // sets add_one, binds 0 and 1: fine
  enc->setBytes(&k, sizeof k, 2);
  EXPECT_RT_ERROR(enc->dispatchThreads({64, 1, 1}, {64, 1, 1}), kValidation,
                  "dispatch of kernel 'add_one': [[buffer(2)]] is bound but the kernel declares no such argument");
  // Setting a pipeline starts a new set of "bindings for this kernel"; the stale one
  // at index 2 no longer counts as meant for add_one.
  enc->setComputePipeline(pipeline("add_one"));
  enc->dispatchThreads({64, 1, 1}, {64, 1, 1});
  enc->endEncoding();
  commitAndWait(cb);
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 2);
}

// Metal keeps bindings across pipeline changes; callers rely on it (bind once, run
// several kernels), so leftovers from the previous kernel must not be an error.
TEST_F(Validation, BindingsMadeBeforeSwitchingPipelineAreKeptAndNotRejected) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  uint32_t n = 64;
  int k = 5;
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  enc->setComputePipeline(pipeline("add_k"));
  enc->setBuffer(data, 0, 0);
  enc->setBytes(&n, sizeof n, 1);
  enc->setBytes(&k, sizeof k, 2);
  enc->dispatchThreads({64, 1, 1}, {64, 1, 1});   // += 5
  enc->setComputePipeline(pipeline("add_one"));   // buffer(2) is now undeclared
  EXPECT_NO_THROW(enc->dispatchThreads({64, 1, 1}, {64, 1, 1}));  // += 1 with kept 0 and 1
  enc->endEncoding();
  commitAndWait(cb);
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 6);
}

// encodeDispatchThreads stands for setComputePipeline, a setBuffer/setBytes per argument
// and dispatchThreads: the same result, the same bindings left in the encoder, and the
// same errors (the simulator checks them in one pass).
TEST_F(Validation, OneCallDispatchIsTheCallsItStandsFor) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  uint32_t n = 64;
  int k = 3;
  ComputeEncoder::Argument args[3];
  args[0].buffer = &data;
  args[1].bytes = &n, args[1].length = sizeof n;
  args[2].bytes = &k, args[2].length = sizeof k;
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  enc->encodeDispatchThreads(pipeline("add_k"), args, 3, {64, 1, 1}, {64, 1, 1});  // += 3
  enc->dispatchThreads({64, 1, 1}, {64, 1, 1});  // += 3 again, with the bindings it left
  // Past Metal's 31 slots: the error setBytes gives at that index.
  std::vector<ComputeEncoder::Argument> many(32, args[1]);
  many[0] = args[0];
  EXPECT_RT_ERROR(enc->encodeDispatchThreads(pipeline("add_k"), many.data(), 32, {64, 1, 1}, {64, 1, 1}),
                  kValidation, "index 31 is out of range");
  enc->endEncoding();
  EXPECT_RT_ERROR(enc->encodeDispatchThreads(pipeline("add_k"), args, 3, {64, 1, 1}, {64, 1, 1}), kValidation,
                  "setComputePipeline");
  commitAndWait(cb);
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 6);
}

// The device allows 1024 threads per threadgroup; a kernel may declare fewer with
// [[max_total_threads_per_threadgroup]], and the pipeline reports that bound.
TEST_F(Validation, ThreadsPerThreadgroupAboveThePipelineMaximumAreRejected) {
  auto data = bufferFrom(std::vector<int>(2048, 0));
  uint32_t n = 2048;
  auto add_one = pipeline("add_one");
  auto capped = pipeline("capped64");
  EXPECT_EQ(add_one->maxTotalThreadsPerThreadgroup(), 1024u);
  EXPECT_EQ(capped->maxTotalThreadsPerThreadgroup(), 64u);
  EXPECT_EQ(add_one->functionName(), "add_one");
  EXPECT_EQ(add_one->threadExecutionWidth(), 32u);

  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  enc->setComputePipeline(add_one);
  enc->setBuffer(data, 0, 0);
  enc->setBytes(&n, sizeof n, 1);
  EXPECT_RT_ERROR(enc->dispatchThreads({2048, 1, 1}, {1025, 1, 1}), kValidation,
                  "dispatch of kernel 'add_one': 1025 threads per threadgroup (1025, 1, 1) is more than "
                  "the pipeline's maximum of 1024");
  // The bound is on the product of the dimensions, not each one.
  EXPECT_RT_ERROR(enc->dispatchThreadgroups({1, 1, 1}, {32, 32, 2}), kValidation,
                  "2048 threads per threadgroup (32, 32, 2) is more than the pipeline's maximum of 1024");
  enc->dispatchThreads({2048, 1, 1}, {1024, 1, 1});  // the maximum itself is fine

  auto out = dev().newBuffer(128 * sizeof(int));
  enc->setComputePipeline(capped);
  enc->setBuffer(out, 0, 0);
  EXPECT_RT_ERROR(enc->dispatchThreads({128, 1, 1}, {65, 1, 1}), kValidation,
                  "dispatch of kernel 'capped64': 65 threads per threadgroup (65, 1, 1) is more than "
                  "the pipeline's maximum of 64");
  EXPECT_RT_ERROR(enc->dispatchThreads({128, 1, 1}, {16, 8, 1}), kValidation, "maximum of 64");
  enc->dispatchThreads({128, 1, 1}, {64, 1, 1});
  enc->endEncoding();
  commitAndWait(cb);
  for (int v : read<int>(data, 2048)) ASSERT_EQ(v, 1);  // only the valid dispatch ran
  auto got = read<int>(out, 128);
  for (int i = 0; i < 128; ++i) ASSERT_EQ(got[i], i);
}

TEST_F(Validation, ZeroThreadgroupDimensionIsRejected) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  encodeAddOne(*enc, data, 64);
  EXPECT_RT_ERROR(enc->dispatchThreads({64, 1, 1}, {0, 1, 1}), kValidation,
                  "dispatch of kernel 'add_one': threadgroup size (0, 1, 1) has a zero dimension");
  EXPECT_RT_ERROR(enc->dispatchThreads({64, 1, 1}, {64, 0, 1}), kValidation, "(64, 0, 1) has a zero dimension");
  EXPECT_RT_ERROR(enc->dispatchThreadgroups({1, 1, 1}, {64, 1, 0}), kValidation, "(64, 1, 0) has a zero dimension");
  enc->dispatchThreadgroups({1, 1, 1}, {64, 1, 1});
  enc->endEncoding();
  commitAndWait(cb);
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 2);
}

// A [[threadgroup(n)]] argument without a length would point at no memory.
TEST_F(Validation, ThreadgroupArgumentWithoutALengthIsRejected) {
  auto out = dev().newBuffer(64 * sizeof(int));
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  enc->setComputePipeline(pipeline("tg_double"));
  enc->setBuffer(out, 0, 0);
  EXPECT_RT_ERROR(enc->dispatchThreads({64, 1, 1}, {64, 1, 1}), kValidation,
                  "dispatch of kernel 'tg_double': no threadgroup memory length is set for "
                  "[[threadgroup(0)]] (parameter 'scratch')");
  enc->setThreadgroupMemoryLength(64 * sizeof(int), 0);
  enc->dispatchThreads({64, 1, 1}, {64, 1, 1});
  enc->endEncoding();
  commitAndWait(cb);
  auto got = read<int>(out, 64);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(got[i], 2 * i);
}

// Each length may be within the limit and their sum still exceed the device's 32 KiB.
TEST_F(Validation, TotalThreadgroupMemoryAcrossIndicesAbove32KiBIsRejected) {
  auto out = dev().newBuffer(64 * sizeof(int));
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  enc->setComputePipeline(pipeline("tg_two"));
  enc->setBuffer(out, 0, 0);
  enc->setThreadgroupMemoryLength(16384, 0);
  enc->setThreadgroupMemoryLength(16384 + 16, 1);
  EXPECT_RT_ERROR(enc->dispatchThreads({64, 1, 1}, {64, 1, 1}), kValidation,
                  "dispatch of kernel 'tg_two': 32784 bytes of threadgroup memory (32784 bound, 0 declared by the kernel) is more than the device's 32768");
  enc->setThreadgroupMemoryLength(16384, 1);  // exactly 32 KiB in total is fine
  enc->dispatchThreads({64, 1, 1}, {64, 1, 1});
  enc->endEncoding();
  commitAndWait(cb);
  auto got = read<int>(out, 64);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(got[i], 2 * i);
}

// Metal's limit is on static (threadgroup variables declared in the kernel) plus
// dynamic threadgroup memory; the pipeline reports the static part so callers can
// size the dynamic part. Exceeding the sum must be caught at dispatch, not by a
// failure while the kernel runs.
// The simulator learns a kernel's static threadgroup memory when it first runs (its
// variables are declared inside the kernel body); from then on the pipeline reports it
// and dispatch validation counts it, as Metal does from the start.
TEST_F(Validation, StaticPlusDynamicThreadgroupMemoryAbove32KiBIsRejected) {
  auto tg_static = pipeline("tg_static");
  auto out = dev().newBuffer(64 * sizeof(int));
  {
    auto cb = queue->commandBuffer();
    auto enc = cb->computeEncoder();
    enc->setComputePipeline(tg_static);
    enc->setBuffer(out, 0, 0);
    enc->setThreadgroupMemoryLength(256, 0);
    enc->dispatchThreads({64, 1, 1}, {64, 1, 1});
    enc->endEncoding();
    commitAndWait(cb);
  }
  EXPECT_EQ(tg_static->staticThreadgroupMemoryLength(), 4096u * sizeof(int))
      << "the pipeline does not report the kernel's static threadgroup memory";
  EXPECT_EQ(pipeline("tg_double")->staticThreadgroupMemoryLength(), 0u);
  {
    auto cb = queue->commandBuffer();
    auto enc = cb->computeEncoder();
    enc->setComputePipeline(tg_static);
    enc->setBuffer(out, 0, 0);
    enc->setThreadgroupMemoryLength(32768, 0);  // fine alone, too much with the static 16 KiB
    EXPECT_RT_ERROR(enc->dispatchThreads({64, 1, 1}, {64, 1, 1}), kValidation,
                    "is more than the device's 32768");
    enc->endEncoding();
  }
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  enc->setComputePipeline(tg_static);
  enc->setBuffer(out, 0, 0);
  enc->setThreadgroupMemoryLength(16384, 0);  // 16 KiB + 16 KiB: exactly the limit
  enc->dispatchThreads({64, 1, 1}, {64, 1, 1});
  enc->endEncoding();
  commitAndWait(cb);
  auto got = read<int>(out, 64);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(got[i], 2 * i);
}

// ---------------------------------------------------------------- device and library

TEST_F(Validation, NewBufferOfZeroBytesIsRejected) {
  size_t before = dev().currentAllocatedSize();
  EXPECT_RT_ERROR(dev().newBuffer(0), kValidation, "newBuffer: length must be greater than 0");
  EXPECT_EQ(dev().currentAllocatedSize(), before);  // nothing was accounted
  auto b = dev().newBuffer(4);
  EXPECT_EQ(b->length(), 4u);
}

TEST(DeviceValidation, NewBufferAboveTheMaximumLengthIsOutOfMemory) {
  const size_t max = dev().info().max_buffer_length;
  size_t before = dev().currentAllocatedSize();
  EXPECT_RT_ERROR(dev().newBuffer(max + 1), ErrorKind::OutOfMemory, "maximum buffer length");
  EXPECT_EQ(dev().currentAllocatedSize(), before);
}

// Wrapping host memory without a copy maps whole pages into the GPU's address space,
// so both the pointer and the length must be page-aligned.
TEST(DeviceValidation, WrapHostMemoryRequiresPageAlignedPointerAndLength) {
  const size_t page = hostPageSize();
  void* mem = std::aligned_alloc(page, 2 * page);
  ASSERT_NE(mem, nullptr);
  int deallocated = 0;
  auto count = [&] { ++deallocated; };
  auto* bytes = static_cast<unsigned char*>(mem);
  size_t before = dev().currentAllocatedSize();

  EXPECT_RT_ERROR(dev().wrapHostMemory(bytes + 64, page, count), kValidation,
                  "wrapHostMemory: pointer must be aligned to the page size (" + std::to_string(page));
  EXPECT_RT_ERROR(dev().wrapHostMemory(nullptr, page, count), kValidation, "pointer must be aligned");
  EXPECT_RT_ERROR(dev().wrapHostMemory(mem, page + 4, count), kValidation,
                  "wrapHostMemory: length " + std::to_string(page + 4) + " must be a nonzero multiple of the page size");
  EXPECT_RT_ERROR(dev().wrapHostMemory(mem, 0, count), kValidation, "length 0 must be a nonzero multiple");
  // A rejected wrap does not take ownership: running the deallocator would free
  // memory the caller still owns.
  EXPECT_EQ(deallocated, 0);
  EXPECT_EQ(dev().currentAllocatedSize(), before);

  {
    auto b = dev().wrapHostMemory(mem, 2 * page, [&] {
      ++deallocated;
      std::free(mem);
    });
    EXPECT_TRUE(b->wrapsHostMemory());
    EXPECT_EQ(b->contents(), mem);
    EXPECT_EQ(b->length(), 2 * page);
    EXPECT_EQ(dev().currentAllocatedSize(), before + 2 * page);
    // The device writes the caller's memory itself.
    auto q = dev().newCommandQueue();
    auto cb = q->commandBuffer();
    auto blit = cb->blitEncoder();
    blit->fillBuffer(b, 0, 2 * page, 0x5A);
    blit->endEncoding();
    cb->commit();
    cb->waitUntilCompleted();
    ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
    EXPECT_EQ(bytes[0], 0x5A);
    EXPECT_EQ(bytes[2 * page - 1], 0x5A);
    EXPECT_EQ(deallocated, 0);
  }
  EXPECT_EQ(deallocated, 1);
  EXPECT_EQ(dev().currentAllocatedSize(), before);
}

TEST_F(Validation, UnknownKernelNameIsNotFoundAndListsAvailableNames) {
  EXPECT_RT_ERROR(lib->newComputePipeline("add_two"), ErrorKind::NotFound, "no kernel function 'add_two' in library");
  EXPECT_RT_ERROR(lib->newComputePipeline("add_two"), ErrorKind::NotFound, "add_one");
  EXPECT_RT_ERROR(lib->newComputePipeline("add_two"), ErrorKind::NotFound, "copy_int");
  EXPECT_FALSE(lib->hasFunction("add_two"));
  EXPECT_TRUE(lib->hasFunction("add_one"));
  auto builtin = dev().builtinLibrary();
  EXPECT_RT_ERROR(builtin->newComputePipeline("fill_dense_cfloat"), ErrorKind::NotFound,
                  "no kernel function 'fill_dense_cfloat' in library builtin");
  // Some of its real names are listed (not necessarily all: it has hundreds).
  auto names = builtin->functionNames();
  ASSERT_FALSE(names.empty());
  try {
    builtin->newComputePipeline("fill_dense_cfloat");
    ADD_FAILURE() << "expected NotFound";
  } catch (const Error& e) {
    std::string m = e.what();
    size_t listed = 0;
    for (auto& name : names) listed += m.find(name) != std::string::npos;
    EXPECT_GE(listed, std::min<size_t>(names.size(), 3)) << m;
  }
  // The library is unaffected.
  EXPECT_EQ(lib->newComputePipeline("add_one")->functionName(), "add_one");
  expectQueueStillWorks();
}

// ---------------------------------------------------------------- threads

// Metal command buffers and encoders are not thread-safe. Two threads encoding into
// one at once must either be serialised by luck or be reported; never corrupt state.
// The collision is timing-dependent, so both outcomes pass; what must never happen is
// a different error, a crash, or a broken encoder afterwards.
TEST_F(Validation, ConcurrentUseOfOneEncoderFromTwoThreadsIsReportedOrHarmless) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  std::atomic<int> collisions{0}, other_errors{0};
  std::atomic<bool> go{false};
  std::string other_message;
  auto hammer = [&](int k) {
    while (!go.load()) std::this_thread::yield();
    for (int i = 0; i < 20000; ++i) {
      try {
        enc->setBytes(&k, sizeof k, 2);
      } catch (const Error& e) {
        std::string m = e.what();
        if (e.kind() == ErrorKind::Validation && m.find("two threads") != std::string::npos) ++collisions;
        else if (other_errors++ == 0) other_message = m;
      }
    }
  };
  std::thread t1(hammer, 3), t2(hammer, 4);
  go = true;
  t1.join();
  t2.join();
  EXPECT_EQ(other_errors.load(), 0) << other_message;
  ::testing::Test::RecordProperty("collisions", collisions.load());

  // The encoder is not left "busy": it works for one thread afterwards.
  uint32_t n = 64;
  int k = 10;
  enc->setComputePipeline(pipeline("add_k"));
  enc->setBuffer(data, 0, 0);
  enc->setBytes(&n, sizeof n, 1);
  enc->setBytes(&k, sizeof k, 2);
  enc->dispatchThreads({64, 1, 1}, {64, 1, 1});
  enc->endEncoding();
  commitAndWait(cb);
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 10);
}

// The same for the command buffer itself: two threads making encoders at once.
TEST_F(Validation, ConcurrentUseOfOneCommandBufferFromTwoThreadsIsReportedOrHarmless) {
  auto cb = queue->commandBuffer();
  std::atomic<int> other_errors{0};
  std::atomic<bool> go{false};
  std::string other_message;
  auto event = dev().newEvent();
  auto hammer = [&] {
    while (!go.load()) std::this_thread::yield();
    for (int i = 0; i < 5000; ++i) {
      try {
        cb->encodeSignal(event, 1);
      } catch (const Error& e) {
        std::string m = e.what();
        if (!(e.kind() == ErrorKind::Validation && m.find("two threads") != std::string::npos) &&
            other_errors++ == 0)
          other_message = m;
      }
    }
  };
  std::thread t1(hammer), t2(hammer);
  go = true;
  t1.join();
  t2.join();
  EXPECT_EQ(other_errors.load(), 0) << other_message;
  commitAndWait(cb);
  EXPECT_EQ(event->signaledValue(), 1u);
}

// ---------------------------------------------------------------- several devices
// Run by ctest with METALSIM_DEVICE_COUNT=2 (CMakeLists.txt). Objects of one device
// mean nothing to another: on a discrete-memory system the buffer is not even
// reachable, so every cross-device use is rejected.

class MultiDeviceEnv : public ApiTest {
 protected:
  void SetUp() override {
    if (devices().size() < 2) GTEST_SKIP() << "needs METALSIM_DEVICE_COUNT=2";
    ApiTest::SetUp();
  }
};

TEST_F(MultiDeviceEnv, DevicesAreDistinct) {
  EXPECT_EQ(dev(0).index(), 0);
  EXPECT_EQ(dev(1).index(), 1);
  EXPECT_NE(dev(0).info().name, dev(1).info().name);
  auto b = dev(1).newBuffer(64);
  EXPECT_EQ(&b->device(), &dev(1));
  EXPECT_EQ(&dev(1).newEvent()->device(), &dev(1));
  EXPECT_EQ(&dev(1).newCommandQueue()->device(), &dev(1));
}

TEST_F(MultiDeviceEnv, BufferFromAnotherDeviceIsRejected) {
  auto data = bufferFrom(std::vector<int>(64, 0));
  auto foreign = bufferFrom(std::vector<int>(64, 9), dev(1));
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  enc->setComputePipeline(pipeline("add_one"));
  EXPECT_RT_ERROR(enc->setBuffer(foreign, 0, 0), kValidation,
                  "setBuffer: the buffer belongs to another device than the compute encoder");
  encodeAddOne(*enc, data, 64);
  enc->endEncoding();
  auto blit = cb->blitEncoder();
  EXPECT_RT_ERROR(blit->copyBuffer(foreign, 0, data, 0, 64), kValidation,
                  "copyBuffer: the buffer belongs to another device than the blit encoder");
  EXPECT_RT_ERROR(blit->copyBuffer(data, 0, foreign, 0, 64), kValidation, "belongs to another device");
  EXPECT_RT_ERROR(blit->fillBuffer(foreign, 0, 64, 0), kValidation, "fillBuffer: the buffer belongs to another device");
  blit->endEncoding();
  commitAndWait(cb);
  for (int v : read<int>(data, 64)) ASSERT_EQ(v, 1);
  for (int v : read<int>(foreign, 64)) ASSERT_EQ(v, 9);  // untouched
}

TEST_F(MultiDeviceEnv, EventFromAnotherDeviceIsRejected) {
  auto foreign = dev(1).newEvent();
  auto own = dev(0).newEvent();
  auto cb = queue->commandBuffer();
  EXPECT_RT_ERROR(cb->encodeSignal(foreign, 1), kValidation,
                  "encodeSignal: the event belongs to another device than command buffer");
  EXPECT_RT_ERROR(cb->encodeWait(foreign, 1), kValidation,
                  "encodeWait: the event belongs to another device than command buffer");
  cb->encodeSignal(own, 1);
  commitAndWait(cb);
  EXPECT_EQ(foreign->signaledValue(), 0u);
  EXPECT_EQ(own->signaledValue(), 1u);
}

// A pipeline is compiled for one device (MTLComputePipelineState.device); Metal's
// validation rejects setting it on another device's encoder.
TEST_F(MultiDeviceEnv, PipelineFromAnotherDeviceIsRejected) {
  auto foreign_pipeline = testLibrary("api_kernels.metal", dev(1))->newComputePipeline("add_one");
  auto cb = queue->commandBuffer();
  auto enc = cb->computeEncoder();
  EXPECT_RT_ERROR(enc->setComputePipeline(foreign_pipeline), kValidation, "another device");
  enc->endEncoding();
}

// Each device runs its own work on its own memory.
TEST_F(MultiDeviceEnv, BothDevicesRunWork) {
  auto q1 = dev(1).newCommandQueue();
  auto lib1 = testLibrary("api_kernels.metal", dev(1));
  auto data1 = bufferFrom(std::vector<int>(64, 10), dev(1));
  uint32_t n = 64;
  auto cb = q1->commandBuffer();
  auto enc = cb->computeEncoder();
  enc->setComputePipeline(lib1->newComputePipeline("add_one"));
  enc->setBuffer(data1, 0, 0);
  enc->setBytes(&n, sizeof n, 1);
  enc->dispatchThreads({64, 1, 1}, {64, 1, 1});
  enc->endEncoding();
  commitAndWait(cb);
  for (int v : read<int>(data1, 64)) ASSERT_EQ(v, 11);
  expectQueueStillWorks();
}

}  // namespace
}  // namespace metalx::rt::testing
