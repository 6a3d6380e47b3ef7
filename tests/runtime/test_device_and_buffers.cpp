// Devices, buffers, and the blit path: the simplest end-to-end use of the interface.
#include "test_support.h"

namespace metalx::rt::testing {
namespace {

TEST(Device, ReportsMetalLimits) {
  ASSERT_FALSE(devices().empty());
  const DeviceInfo& info = dev().info();
  EXPECT_EQ(info.simd_width, 32u);
  EXPECT_EQ(info.max_threads_per_threadgroup, 1024u);
  EXPECT_EQ(info.max_threadgroup_memory_length, 32768u);
  EXPECT_TRUE(info.has_unified_memory);
  EXPECT_GT(info.recommended_max_working_set_size, 0u);
  // Not max_buffer_length >= the working set: on Apple GPUs one buffer may be limited
  // to less than the recommended working set, and metalx relies on neither order.
  EXPECT_GT(info.max_buffer_length, 0u);
  EXPECT_FALSE(info.name.empty());
}

TEST(Device, UnknownIndexIsNotFound) {
  EXPECT_RT_ERROR(device(static_cast<int>(devices().size())), ErrorKind::NotFound, "no metalx device");
  EXPECT_RT_ERROR(device(-1), ErrorKind::NotFound, "no metalx device");
}

TEST(Buffer, ContentsAreSharedAndZeroedAndAccounted) {
  size_t before = dev().currentAllocatedSize();
  {
    auto b = dev().newBuffer(1000);
    EXPECT_EQ(b->length(), 1000u);
    EXPECT_EQ(dev().currentAllocatedSize(), before + 1000);
    auto bytes = read<unsigned char>(b, 1000);
    for (unsigned char c : bytes) ASSERT_EQ(c, 0);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->contents()) % 256, 0u);
    EXPECT_FALSE(b->wrapsHostMemory());
  }
  EXPECT_EQ(dev().currentAllocatedSize(), before);
}

TEST(Blit, CopyAndFillRunInOrder) {
  auto q = dev().newCommandQueue();
  std::vector<int> src(64);
  for (int i = 0; i < 64; ++i) src[i] = i * 3;
  auto a = bufferFrom(src);
  auto b = dev().newBuffer(64 * sizeof(int));
  auto cb = q->commandBuffer();
  auto blit = cb->blitEncoder();
  blit->fillBuffer(b, 0, b->length(), 0xFF);
  blit->copyBuffer(a, 8 * sizeof(int), b, 16 * sizeof(int), 8 * sizeof(int));
  blit->endEncoding();
  cb->commit();
  cb->waitUntilCompleted();
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  auto out = read<int>(b, 64);
  for (int i = 0; i < 64; ++i) {
    int expected = (i >= 16 && i < 24) ? (i - 8) * 3 : -1;
    EXPECT_EQ(out[i], expected) << "at " << i;
  }
}

}  // namespace
}  // namespace metalx::rt::testing
