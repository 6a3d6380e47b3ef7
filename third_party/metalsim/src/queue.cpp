// A simulated MTLCommandQueue (see queue.h).
#include "queue.h"

#include <chrono>

#include "command_buffer.h"
#include "device.h"

namespace metalsim {

SimQueue::SimQueue(SimDevice& device) : device_(device), core_(std::make_shared<Core>()) {
  worker_ = std::thread(&SimQueue::run, core_);
}

SimQueue::~SimQueue() {
  {
    std::lock_guard<std::mutex> lock(core_->mutex);
    core_->stopping = true;
    core_->has_work.store(true, std::memory_order_release);
  }
  core_->work_cv.notify_all();
  // The worker finishes what was committed, as a GPU would, then exits on its own.
  if (worker_.get_id() == std::this_thread::get_id()) worker_.detach();
  else worker_.join();
}

metalx::rt::Device& SimQueue::device() { return device_; }

metalx::rt::CommandBufferPtr SimQueue::commandBuffer() {
  return std::make_shared<SimCommandBuffer>(shared_from_this());
}

void SimQueue::submit(std::shared_ptr<SimCommandBuffer> cb) {
  {
    std::lock_guard<std::mutex> lock(core_->mutex);
    core_->pending.push_back(std::move(cb));
    core_->has_work.store(true, std::memory_order_release);
  }
  core_->work_cv.notify_one();
}

void SimQueue::waitUntilIdle() {
  std::unique_lock<std::mutex> lock(core_->mutex);
  core_->idle_cv.wait(lock, [&] { return core_->pending.empty() && !core_->busy; });
}

void SimQueue::run(std::shared_ptr<Core> core) {
  for (;;) {
    std::shared_ptr<SimCommandBuffer> cb;
    {
      std::unique_lock<std::mutex> lock(core->mutex);
      if (core->pending.empty() && !core->stopping) {
        // Spin a little before sleeping: back-to-back small command buffers are the
        // common case, and a futex wake-up costs more than the work they carry.
        lock.unlock();
        auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
        while (!core->has_work.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until)
          std::this_thread::yield();
        lock.lock();
        core->work_cv.wait(lock, [&] { return !core->pending.empty() || core->stopping; });
      }
      if (core->pending.empty()) return;  // stopping, and nothing left to run
      cb = std::move(core->pending.front());
      core->pending.pop_front();
      core->has_work.store(!core->pending.empty() || core->stopping, std::memory_order_relaxed);
      core->busy = true;
    }
    cb->execute();
    cb.reset();  // may destroy the queue (see Core); the core stays alive
    {
      std::lock_guard<std::mutex> lock(core->mutex);
      core->busy = false;
    }
    core->idle_cv.notify_all();
  }
}

}  // namespace metalsim
