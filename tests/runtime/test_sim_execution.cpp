// Simulator-only execution tests: errors a GPU would hang on (a barrier some threads
// never reach) or that Metal reports at another point (too much threadgroup memory
// declared by a kernel is refused when the pipeline is made, before any dispatch).
#include "test_support.h"

namespace metalx::rt::testing {
namespace {

constexpr char kSimOnlyKernels[] = "sim_only.metal";
using SimExecution = KernelFileTest<kSimOnlyKernels>;

TEST_F(SimExecution, BarrierNotReachedByAllThreadsFailsTheCommandBuffer) {
  auto p = pipeline("divergent_barrier");
  auto out = dev().newBuffer(64 * sizeof(int));
  auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
    e.setComputePipeline(p);
    e.setBuffer(out, 0, 0);
    e.dispatchThreads({64, 1, 1}, {64, 1, 1});
  });
  EXPECT_EQ(cb->status(), CommandBufferStatus::Error);
  EXPECT_NE(cb->error().find("divergent_barrier"), std::string::npos) << cb->error();
  EXPECT_NE(cb->error().find("threadgroup_barrier reached by 16 of 64 threads"), std::string::npos)
      << cb->error();
  // The queue goes on: the next command buffer runs normally.
  auto blit_cb = queue->commandBuffer();
  auto blit = blit_cb->blitEncoder();
  blit->fillBuffer(out, 0, 64, 7);
  blit->endEncoding();
  blit_cb->commit();
  blit_cb->waitUntilCompleted();
  EXPECT_EQ(blit_cb->status(), CommandBufferStatus::Completed);
  EXPECT_EQ(read<unsigned char>(out, 1)[0], 7);
}

TEST_F(SimExecution, ThreadgroupVariablesBeyondTheDeviceLimitFail) {
  auto p = pipeline("too_much_threadgroup_memory");
  auto out = dev().newBuffer(64 * sizeof(float));
  auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
    e.setComputePipeline(p);
    e.setBuffer(out, 0, 0);
    e.dispatchThreads({32, 1, 1}, {32, 1, 1});
  });
  EXPECT_EQ(cb->status(), CommandBufferStatus::Error);
  EXPECT_NE(cb->error().find("36000 bytes of threadgroup memory"), std::string::npos) << cb->error();
}

}  // namespace
}  // namespace metalx::rt::testing
