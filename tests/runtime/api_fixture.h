// A fixture for the API-contract tests (validation, command model): a fresh queue, the
// kernels of kernels/api_kernels.metal, and small helpers that encode one of them and
// check its result, so each test can show that an object still works after an error.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "test_support.h"

namespace metalx::rt::testing {

// Tests whose suite name ends in "Env" need a simulator setting that is read once per
// process (CMakeLists.txt runs them under ctest with that environment). Run directly
// without it, they skip instead of failing.
inline bool envIs(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::string(v) == value;
}

inline constexpr char kApiKernels[] = "api_kernels.metal";

class ApiTest : public KernelFileTest<kApiKernels> {
 protected:

  // Encodes data[i] += 1 for i < n on `enc` (one thread per element).
  void encodeAddOne(ComputeEncoder& enc, const BufferPtr& data, uint32_t n) {
    enc.setComputePipeline(pipeline("add_one"));
    enc.setBuffer(data, 0, 0);
    enc.setBytes(&n, sizeof n, 1);
    enc.dispatchThreads({n, 1, 1}, {64, 1, 1});
  }

  // Encodes a single-threaded slow_write: busy work of `iters` steps, then out[0] = value.
  // `out` needs at least 2 uints.
  void encodeSlowWrite(ComputeEncoder& enc, const BufferPtr& out, uint32_t iters, uint32_t value) {
    enc.setComputePipeline(pipeline("slow_write"));
    enc.setBuffer(out, 0, 0);
    enc.setBytes(&iters, sizeof iters, 1);
    enc.setBytes(&value, sizeof value, 2);
    enc.dispatchThreads({1, 1, 1}, {1, 1, 1});
  }

  // Commits `cb`, waits, and expects it to have completed without error.
  static void commitAndWait(const CommandBufferPtr& cb) {
    cb->commit();
    cb->waitUntilCompleted();
    ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  }

  // Proof that the queue and device still work: a fresh command buffer runs add_one.
  void expectQueueStillWorks() {
    auto data = bufferFrom(std::vector<int>(100, 41));
    auto cb = queue->commandBuffer();
    auto enc = cb->computeEncoder();
    encodeAddOne(*enc, data, 100);
    enc->endEncoding();
    commitAndWait(cb);
    for (int v : read<int>(data, 100)) ASSERT_EQ(v, 42);
  }

  // Iterations of slow_write that take at least `ms` milliseconds on this machine,
  // measured once per process (the machine may be slow, loaded, or sanitized). The
  // shortest of three runs is used: load only makes a run longer, so the shortest
  // is the closest to the work's real cost, and the scaled count stays long enough.
  uint32_t slowIters(double ms = 20) {
    static uint32_t iters = 0;
    static double measured_ms = 0;
    if (iters == 0) {
      iters = 1u << 20;
      auto out = dev().newBuffer(16);
      for (;;) {
        double shortest = 1e30;
        for (int run = 0; run < 3; ++run) {
          auto cb = queue->commandBuffer();
          auto enc = cb->computeEncoder();
          encodeSlowWrite(*enc, out, iters, 1);
          enc->endEncoding();
          cb->commit();
          cb->waitUntilCompleted();
          shortest = std::min(shortest, (cb->gpuEndTime() - cb->gpuStartTime()) * 1000);
        }
        measured_ms = shortest;
        if (measured_ms >= 25 || iters >= (1u << 31)) break;
        iters *= 2;
      }
    }
    // Scale to the requested duration with a 1.5x margin.
    double scaled = double(iters) * (ms * 1.5) / measured_ms;
    if (scaled < iters) scaled = iters;
    if (scaled > 4e9) scaled = 4e9;
    return static_cast<uint32_t>(scaled);
  }
};

}  // namespace metalx::rt::testing
