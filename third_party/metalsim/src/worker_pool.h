// The CPU threads that run threadgroups: the simulated GPU's cores.
//
// Threadgroups of one dispatch are spread over the pool (and the queue thread that
// issued the dispatch, which works too rather than wait). Dispatches from several
// queues share the pool, as kernels from several queues share a GPU.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace metalsim {

class WorkerPool {
 public:
  static WorkerPool& instance();
  ~WorkerPool();

  // Calls fn(begin, end) over [0, n) in chunks, on the pool and the calling thread;
  // returns when all chunks ran. The first exception a chunk threw is rethrown here
  // (the remaining chunks are skipped).
  void parallelFor(size_t n, const std::function<void(size_t, size_t)>& fn);
  int threads() const { return static_cast<int>(workers_.size()) + 1; }

 private:
  explicit WorkerPool(int threads);
  struct Job {
    const std::function<void(size_t, size_t)>* fn;
    size_t n;
    std::atomic<size_t> next{0};
    std::atomic<size_t> finished{0};  // chunks done
    size_t chunks;
    std::atomic<bool> failed{false};
    std::exception_ptr error;
    std::mutex error_mutex;
  };
  static bool work(Job& job);  // runs chunks of job until none is left
  void workerLoop();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace metalsim
