// Host cost of recording one small kernel launch on a metalx stream: what a small torch
// op costs below the launch layer (bench/README.md, small-op section).
//
//     build/runtime/bench/metalx_encode_bench [ops per loop, default 200000]
//
// Each op is the launch of a 16-element float32 add as the elementwise launcher encodes
// it (pipeline, output and two inputs in one buffer as the caching allocator's small
// pool hands them out, the op's scalars and shape inline, one dispatch) through
// Stream::encodeCompute, which commits every Stream::kMaxCommandsPerCommandBuffer
// commands. Prints the encoding thread's CPU time per op (the host cost alone) and the
// wall time per op including the simulator running the kernels, medians of 7 loops.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/stream.h"
#include "metalx/runtime/runtime.h"

namespace {

double threadSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// backend/launch/elementwise_params.h's OpScalars and DenseShape, as add_dense_float reads them.
struct OpScalars {
  float f[4] = {1, 0, 0, 0};
  int64_t i[4] = {1, 0, 0, 0};
};
struct DenseShape {
  uint64_t count = 16;
  uint32_t per_thread = 64;
  uint32_t unused = 0;
};

}  // namespace

int main(int argc, char** argv) {
  metalx::rt::Device& device = metalx::rt::device(0);
  metalx::Stream stream(device, 0, 0);
  auto pipeline = stream.pipelines().builtin("add_dense_float");
  const size_t segment_bytes = 1 << 20;
  auto segment = device.newBuffer(segment_bytes);
  std::memset(segment->contents(), 0, segment_bytes);
  const OpScalars scalars;
  const DenseShape shape;
  const int ops = argc > 1 ? std::max(1, std::atoi(argv[1])) : 200000;
  auto op = [&] {
    stream.encodeCompute([&](metalx::rt::ComputeEncoder& e) {
      e.setComputePipeline(pipeline);
      e.setBuffer(segment, 0, 0);
      e.setBuffer(segment, 512, 1);
      e.setBuffer(segment, 1024, 2);
      e.setBytes(&scalars, sizeof scalars, 3);
      e.setBytes(&shape, sizeof shape, 4);
      e.dispatchThreads({1, 1, 1}, {1, 1, 1});
    });
  };
  for (int i = 0; i < 20000; ++i) op();  // warm-up: pipelines, allocator, caches
  stream.synchronize();
  std::vector<double> cpu_ns, wall_ns;
  for (int rep = 0; rep < 7; ++rep) {
    const double cpu_start = threadSeconds();
    const auto wall_start = std::chrono::steady_clock::now();
    for (int i = 0; i < ops; ++i) op();
    stream.synchronize();
    cpu_ns.push_back((threadSeconds() - cpu_start) / ops * 1e9);
    wall_ns.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count() / ops * 1e9);
  }
  std::sort(cpu_ns.begin(), cpu_ns.end());
  std::sort(wall_ns.begin(), wall_ns.end());
  std::printf("record one small elementwise launch: %.0f ns thread CPU, %.0f ns wall (median of 7 loops of %d)\n",
              cpu_ns[3], wall_ns[3], ops);
  return 0;
}
