// Built only with -DMETALSIM_SANITIZE=ON: an out-of-bounds write by a kernel must stop
// with AddressSanitizer's report, not corrupt memory silently. Run by ctest with
// METALSIM_SHADER_VALIDATION=0 (shader validation would report the write first; see
// test_shader_validation.cpp).
#include "test_support.h"

namespace metalx::rt::testing {
namespace {

TEST(ValidationOffEnvDeathTest, KernelWritingPastTheBufferIsCaughtBySanitizer) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_DEATH(
      {
        auto lib = testLibrary("out_of_bounds.metal");
        auto q = dev().newCommandQueue();
        auto data = dev().newBuffer(64 * sizeof(int));
        uint32_t n = 64;
        runCompute(*q, [&](ComputeEncoder& e) {
          e.setComputePipeline(lib->newComputePipeline("write_past_end"));
          e.setBuffer(data, 0, 0);
          e.setBytes(&n, 4, 1);
          e.dispatchThreads({1, 1, 1}, {1, 1, 1});
        });
      },
      "AddressSanitizer: heap-buffer-overflow");
}

}  // namespace
}  // namespace metalx::rt::testing
