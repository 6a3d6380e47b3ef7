// Costs of the runtime, each as a ratio against a baseline measured in the same run:
//   dispatch   an empty kernel, encode -> commit -> completion, against a condition
//              variable round trip between two threads (the least any async queue pays)
//   axpy       an elementwise kernel against a plain C++ loop over the same data
//   reduction  threadgroup-barrier and simd_sum reductions against a plain C++ sum
//   allocator  a cached allocate+free of the caching allocator against malloc+free
// Prints a table and writes JSON (argv[1], default: stdout only).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/caching_allocator.h"
#include "core/stream.h"
#include "metalx/runtime/runtime.h"

using namespace metalx::rt;
using Clock = std::chrono::steady_clock;

namespace {

// Median of `reps` timings of fn(), in seconds.
double timeIt(int reps, const std::function<void()>& fn) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto a = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double condvarRoundTrip(int iterations) {
  std::mutex m;
  std::condition_variable cv;
  int turn = 0;  // 0: main's turn, 1: worker's
  bool stop = false;
  std::thread worker([&] {
    std::unique_lock<std::mutex> lock(m);
    for (;;) {
      cv.wait(lock, [&] { return turn == 1 || stop; });
      if (stop) return;
      turn = 0;
      cv.notify_all();
    }
  });
  auto a = Clock::now();
  for (int i = 0; i < iterations; ++i) {
    std::unique_lock<std::mutex> lock(m);
    turn = 1;
    cv.notify_all();
    cv.wait(lock, [&] { return turn == 0; });
  }
  double per = std::chrono::duration<double>(Clock::now() - a).count() / iterations;
  {
    std::lock_guard<std::mutex> lock(m);
    stop = true;
  }
  cv.notify_all();
  worker.join();
  return per;
}

std::string readFile(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Row {
  std::string name, unit;
  double value, baseline, ratio, target;
  std::string target_text;
};

}  // namespace

int main(int argc, char** argv) {
  Device& d = device(0);
  auto q = d.newCommandQueue();
  PipelineCache cache(d);
  CompileOptions opt;
  opt.source_name = "runtime_bench.metal";
  auto lib = cache.compile(readFile(std::string(METALX_BENCH_KERNEL_DIR) + "/runtime_bench.metal"), opt);
  std::vector<Row> rows;

  // --- dispatch overhead ---
  {
    auto p = cache.get(lib, "empty_kernel");
    auto out = d.newBuffer(16);
    auto once = [&] {
      auto cb = q->commandBuffer();
      auto e = cb->computeEncoder();
      e->setComputePipeline(p);
      e->setBuffer(out, 0, 0);
      e->dispatchThreads({1, 1, 1}, {1, 1, 1});
      e->endEncoding();
      cb->commit();
      cb->waitUntilCompleted();
    };
    for (int i = 0; i < 200; ++i) once();
    const int n = 2000;
    double t = timeIt(5, [&] {
                 for (int i = 0; i < n; ++i) once();
               }) / n;
    double base = condvarRoundTrip(n);
    rows.push_back({"dispatch (empty kernel, encode to completion)", "us", t * 1e6, base * 1e6, t / base,
                    10.0, "< 10 us"});
  }

  // --- elementwise throughput ---
  const uint32_t n = 1u << 24;  // 16 Mi floats, 64 MiB per array
  auto a = d.newBuffer(size_t(n) * 4), b = d.newBuffer(size_t(n) * 4), out = d.newBuffer(size_t(n) * 4);
  {
    float* pa = static_cast<float*>(a->contents());
    float* pb = static_cast<float*>(b->contents());
    for (uint32_t i = 0; i < n; ++i) {
      pa[i] = float(i % 1000) * 0.5f;
      pb[i] = float(i % 7);
    }
    auto p = cache.get(lib, "axpy");
    float alpha = 1.5f;
    auto kernel = [&] {
      auto cb = q->commandBuffer();
      auto e = cb->computeEncoder();
      e->setComputePipeline(p);
      e->setBuffer(a, 0, 0);
      e->setBuffer(b, 0, 1);
      e->setBuffer(out, 0, 2);
      e->setBytes(&alpha, 4, 3);
      e->setBytes(&n, 4, 4);
      e->dispatchThreads({n, 1, 1}, {256, 1, 1});
      e->endEncoding();
      cb->commit();
      cb->waitUntilCompleted();
    };
    std::vector<float> plain_out(n);
    auto plain = [&] {
      const float* x = static_cast<const float*>(a->contents());
      const float* y = static_cast<const float*>(b->contents());
      float* o = plain_out.data();
      for (uint32_t i = 0; i < n; ++i) o[i] = x[i] * alpha + y[i];
    };
    kernel();
    plain();
    if (std::memcmp(out->contents(), plain_out.data(), size_t(n) * 4) != 0) {
      std::fprintf(stderr, "axpy kernel result differs from the C++ loop\n");
      return 1;
    }
    double tk = timeIt(7, kernel), tp = timeIt(7, plain);
    rows.push_back({"axpy 16M floats: kernel time / C++ loop time", "ms", tk * 1e3, tp * 1e3, tk / tp, 1.5,
                    "<= 1.5x"});
  }

  // --- reductions: barrier and SIMD costs ---
  {
    const uint32_t per_group = 256 * 16, groups = (n + per_group - 1) / per_group;
    auto partial = d.newBuffer(size_t(groups) * 4);
    double plain_sum = 0;
    auto plain = [&] {
      const float* x = static_cast<const float*>(a->contents());
      std::vector<float> sums(groups);
      for (uint32_t g = 0; g < groups; ++g) {
        float s = 0;
        for (uint32_t i = g * per_group; i < std::min(n, (g + 1) * per_group); ++i) s += x[i];
        sums[g] = s;
      }
      plain_sum = sums[0];
    };
    double tp = timeIt(5, plain);
    for (const char* name : {"block_sum_barrier", "block_sum_simd"}) {
      auto p = cache.get(lib, name);
      auto kernel = [&] {
        auto cb = q->commandBuffer();
        auto e = cb->computeEncoder();
        e->setComputePipeline(p);
        e->setBuffer(a, 0, 0);
        e->setBuffer(partial, 0, 1);
        e->setBytes(&n, 4, 2);
        e->dispatchThreadgroups({groups, 1, 1}, {256, 1, 1});
        e->endEncoding();
        cb->commit();
        cb->waitUntilCompleted();
      };
      kernel();
      double tk = timeIt(5, kernel);
      // One barrier (or SIMD step) costs a fiber switch per thread of the group;
      // per-barrier cost spread over the group's 256 threads:
      int syncs = std::string(name) == "block_sum_barrier" ? 9 : 3;
      double per_sync_ns = (tk - tp) / (double(groups) * syncs) * 1e9;
      rows.push_back({std::string(name) + " (" + std::to_string(syncs) + " syncs/group): kernel / C++ sum", "ms",
                      tk * 1e3, tp * 1e3, tk / tp, 0, "report; ~" + std::to_string(int(per_sync_ns)) +
                      " ns per group-wide sync"});
    }
  }

  // --- caching allocator: the cost of a tensor's memory once the cache is warm ---
  {
    metalx::Stream stream(d, 0, 99);
    metalx::CachingAllocator allocator(d, 0);
    const int n = 200000;
    allocator.free(allocator.allocate(4096, stream));  // warm the cache
    double t = timeIt(5, [&] {
                 for (int i = 0; i < n; ++i) allocator.free(allocator.allocate(4096, stream));
               }) / n;
    double base = timeIt(5, [&] {
                    for (int i = 0; i < n; ++i) {
                      void* volatile p = std::malloc(4096);
                      std::free(p);
                    }
                  }) / n;
    rows.push_back({"cached allocate+free (4 KiB)", "us", t * 1e6, base * 1e6, t / base, 1.0, "< 1 us"});
  }

  std::printf("%-62s %12s %12s %8s  %s\n", "measurement", "metalx", "baseline", "ratio", "target");
  for (auto& r : rows)
    std::printf("%-62s %9.3f %-2s %9.3f %-2s %8.2f  %s\n", r.name.c_str(), r.value, r.unit.c_str(), r.baseline,
                r.unit.c_str(), r.ratio, r.target_text.c_str());
  std::ostringstream json;
  json << "{\n  \"driver\": \"" << driverName() << "\",\n  \"device\": \"" << d.info().name
       << "\",\n  \"threads\": " << std::thread::hardware_concurrency() << ",\n  \"results\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    auto& r = rows[i];
    json << "    {\"name\": \"" << r.name << "\", \"unit\": \"" << r.unit << "\", \"value\": " << r.value
         << ", \"baseline\": " << r.baseline << ", \"ratio\": " << r.ratio << ", \"target\": \""
         << r.target_text << "\"}" << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  json << "  ]\n}\n";
  if (argc > 1) std::ofstream(argv[1]) << json.str();
  return 0;
}
