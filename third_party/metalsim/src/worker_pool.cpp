// The CPU threads that run threadgroups (see worker_pool.h).
#include "worker_pool.h"

#include <chrono>

#include "config.h"

namespace metalsim {

WorkerPool& WorkerPool::instance() {
  // Leaked on purpose: threads must not be joined during static destruction, when
  // command queues may still be finishing work.
  static WorkerPool* pool = new WorkerPool(config().threads);
  return *pool;
}

WorkerPool::WorkerPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

bool WorkerPool::work(Job& job) {
  bool did = false;
  for (;;) {
    size_t c = job.next.fetch_add(1);
    if (c >= job.chunks) return did;
    did = true;
    if (!job.failed.load(std::memory_order_relaxed)) {
      // Chunk c is [c n / chunks, (c + 1) n / chunks): sizes differ by at most one.
      size_t begin = c * job.n / job.chunks, end = (c + 1) * job.n / job.chunks;
      try {
        (*job.fn)(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(job.error_mutex);
        if (!job.error) job.error = std::current_exception();
        job.failed = true;
      }
    }
    job.finished.fetch_add(1, std::memory_order_acq_rel);
  }
}

void WorkerPool::parallelFor(size_t n, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->n = n;
  // Several chunks per thread balance uneven groups; not so many that the shared
  // counter becomes the cost. Equal chunks, a multiple of the thread count when n allows:
  // with n / (8 threads) rounded down and a short last chunk, 255 groups on 2 threads
  // made 17 chunks of 15, so one thread ran 9 of them and the other 8.
  job->chunks = std::min(n, static_cast<size_t>(threads()) * 8);
  bool shared = job->chunks > 1 && !workers_.empty();
  if (shared) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(job);
    }
    cv_.notify_all();
  }
  work(*job);
  while (job->finished.load(std::memory_order_acquire) < job->chunks) std::this_thread::yield();
  if (shared) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = jobs_.begin(); it != jobs_.end(); ++it)
      if (*it == job) {
        jobs_.erase(it);
        break;
      }
  }
  if (job->error) std::rethrow_exception(job->error);
}

void WorkerPool::workerLoop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      auto pick = [&] {
        for (auto& j : jobs_)
          if (j->next.load() < j->chunks) return j;
        return std::shared_ptr<Job>();
      };
      job = pick();
      if (!job) {
        // Brief spin with the lock released: dispatches come in bursts.
        lock.unlock();
        auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
        while (std::chrono::steady_clock::now() < until) {
          std::this_thread::yield();
          std::lock_guard<std::mutex> peek(mutex_);
          if ((job = pick()) || stopping_) break;
        }
        lock.lock();
        if (!job) {
          cv_.wait(lock, [&] { return stopping_ || (job = pick()); });
        }
      }
      if (stopping_ && !job) return;
    }
    work(*job);
  }
}

}  // namespace metalsim
