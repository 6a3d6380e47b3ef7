// Strided copy kernels (kernels/copy.metal) on whichever driver the build has: the
// NCHW -> NHWC float32 copy of an [8, 64, 56, 56] activation, against the same bytes
// copied contiguously (the kernel, a blit, and host memcpy). Compare the first with
// CPU torch's x.permute(0, 2, 3, 1).contiguous() on the same machine.
// Prints milliseconds, each run being encode -> commit -> completion: the median of the
// runs and, for a machine shared with other work, the fastest.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "metalx/runtime/runtime.h"
#include "strided_copy.h"

using namespace metalx;
using Clock = std::chrono::steady_clock;

namespace {

struct Timing {
  double median, best;
};

Timing timeMs(int reps, const std::function<void()>& fn) {
  fn();  // warm-up: first-touch page faults, pipeline creation
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto a = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t[0]};
}

}  // namespace

int main() {
  rt::Device& dev = rt::device(0);
  auto queue = dev.newCommandQueue();
  rt::PipelineCache pipelines(dev);
  const int64_t N = 8, C = 64, H = 56, W = 56, n = N * C * H * W;
  const size_t bytes = size_t(n) * 4;
  auto src = dev.newBuffer(bytes), dst = dev.newBuffer(bytes), half_dst = dev.newBuffer(bytes / 2);
  auto* s = static_cast<float*>(src->contents());
  for (int64_t i = 0; i < n; ++i) s[i] = float(i % 1000) * 0.5f;

  auto runCopy = [&](const kernels::StridedView& d, const kernels::StridedView& sv) {
    auto cb = queue->commandBuffer();
    auto enc = cb->computeEncoder();
    kernels::encodeStridedCopy(*enc, pipelines, d, sv);
    enc->endEncoding();
    cb->commit();
    cb->waitUntilCompleted();
  };
  using kernels::DType;
  // dst is NHWC-contiguous; src is the NCHW tensor seen in NHWC order.
  kernels::StridedView nhwc{dst, 0, DType::Float32, {N, H, W, C}, {H * W * C, W * C, C, 1}};
  kernels::StridedView nchw_as_nhwc{src, 0, DType::Float32, {N, H, W, C}, {C * H * W, W, 1, H * W}};
  kernels::StridedView flat_dst{dst, 0, DType::Float32, {n}, {1}};
  kernels::StridedView flat_src{src, 0, DType::Float32, {n}, {1}};
  kernels::StridedView flat_half{half_dst, 0, DType::Float16, {n}, {1}};

  const int reps = 200;
  Timing permute = timeMs(reps, [&] { runCopy(nhwc, nchw_as_nhwc); });
  Timing contiguous_kernel = timeMs(reps, [&] { runCopy(flat_dst, flat_src); });
  Timing cast_half = timeMs(reps, [&] { runCopy(flat_half, flat_src); });
  Timing blit = timeMs(reps, [&] {
    auto cb = queue->commandBuffer();
    auto b = cb->blitEncoder();
    b->copyBuffer(src, 0, dst, 0, bytes);
    b->endEncoding();
    cb->commit();
    cb->waitUntilCompleted();
  });
  std::vector<float> host_dst(n);
  Timing host_memcpy = timeMs(reps, [&] { std::memcpy(host_dst.data(), s, bytes); });
  Timing empty = timeMs(reps, [&] {
    auto cb = queue->commandBuffer();
    cb->commit();
    cb->waitUntilCompleted();
  });

  std::printf("driver %s, [8, 64, 56, 56] float32 (%.1f MiB); ms: median, best of %d\n",
              rt::driverName().c_str(), bytes / 1048576.0, reps);
  auto row = [](const char* what, Timing t) { std::printf("  %-36s %7.3f %7.3f\n", what, t.median, t.best); };
  row("NCHW -> NHWC strided copy kernel", permute);
  row("contiguous copy kernel", contiguous_kernel);
  row("contiguous float32 -> float16 cast", cast_half);
  row("contiguous blit", blit);
  row("host memcpy", host_memcpy);
  row("empty command buffer round trip", empty);
  return 0;
}
