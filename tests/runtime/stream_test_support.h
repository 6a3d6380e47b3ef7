// Helpers for the tests of metalx::Stream and what sits on it (stream pool, events,
// command tracing): small kernels from api_kernels.metal encoded on a stream.
#pragma once

#include <cstdint>

#include "core/stream.h"
#include "test_support.h"

namespace metalx::testing {

// data[i] += 1 for i < n, on `s`.
inline void addOne(Stream& s, const rt::BufferPtr& data, uint32_t n) {
  auto pipeline = s.pipelines().get(rt::testing::testLibrary("api_kernels.metal"), "add_one");
  s.encodeCompute([&](rt::ComputeEncoder& e) {
    e.setComputePipeline(pipeline);
    e.setBuffer(data, 0, 0);
    e.setBytes(&n, 4, 1);
    e.dispatchThreads({n, 1, 1}, {32, 1, 1});
  });
}

}  // namespace metalx::testing
