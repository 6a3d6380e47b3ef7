// A simulated MTLCommandQueue: a worker thread that runs committed command buffers one
// after another, asynchronously to the thread that encoded them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "metalx/runtime/command.h"

namespace metalsim {

class SimDevice;
class SimCommandBuffer;

class SimQueue final : public metalx::rt::CommandQueue,
                       public std::enable_shared_from_this<SimQueue> {
 public:
  explicit SimQueue(SimDevice& device);
  ~SimQueue() override;

  metalx::rt::Device& device() override;
  metalx::rt::CommandBufferPtr commandBuffer() override;
  void waitUntilIdle() override;

  SimDevice& simDevice() { return device_; }
  void submit(std::shared_ptr<SimCommandBuffer> cb);

 private:
  // What the worker thread shares with the queue. The worker owns a reference, so the
  // queue may be destroyed on any thread, the worker's own included (when a command
  // buffer holding the last reference to the queue completes).
  struct Core {
    std::mutex mutex;
    std::condition_variable work_cv, idle_cv;
    std::deque<std::shared_ptr<SimCommandBuffer>> pending;
    bool busy = false;
    bool stopping = false;
    // pending is non-empty or stopping is set: what the worker's spin reads, without
    // taking the mutex the committing thread needs.
    std::atomic<bool> has_work{false};
  };
  static void run(std::shared_ptr<Core> core);

  SimDevice& device_;
  std::shared_ptr<Core> core_;
  std::thread worker_;
};

}  // namespace metalsim
