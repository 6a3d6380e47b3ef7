// A simulated MTLCommandBuffer: records commands on the encoding thread, then runs them
// on its queue's worker thread after commit.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "commands.h"
#include "metalx/runtime/command.h"
#include "metalx/runtime/validation.h"

namespace metalsim {

class SimQueue;
class SimDevice;
class SimEncoderBase;

using ExclusiveUse = metalx::rt::validation::ExclusiveUse;

class SimCommandBuffer final : public metalx::rt::CommandBuffer,
                               public std::enable_shared_from_this<SimCommandBuffer> {
 public:
  explicit SimCommandBuffer(std::shared_ptr<SimQueue> queue);

  metalx::rt::ComputeEncoderPtr computeEncoder() override;
  metalx::rt::BlitEncoderPtr blitEncoder() override;
  void encodeWait(const metalx::rt::EventPtr& event, uint64_t value) override;
  void encodeSignal(const metalx::rt::EventPtr& event, uint64_t value) override;
  void addCompletedHandler(std::function<void(metalx::rt::CommandBuffer&)> handler) override;
  void commit() override;
  void waitUntilCompleted() override;
  metalx::rt::CommandBufferStatus status() const override { return status_.load(); }
  std::string error() const override;
  double gpuStartTime() const override { return gpu_start_.load(std::memory_order_acquire); }
  double gpuEndTime() const override { return gpu_end_.load(std::memory_order_acquire); }
  void setLabel(const std::string& label) override { rules_.label = label; }
  const std::string& label() const override { return rules_.label; }

  // For encoders.
  SimDevice& device();
  void append(Command command) { commands_.push_back(std::move(command)); }
  // A new, empty dispatch command at the end, for the compute encoder to fill in place
  // (a DispatchCommand is large; building it elsewhere and moving it in costs a copy).
  DispatchCommand& appendDispatch() {
    return std::get<DispatchCommand>(commands_.emplace_back(std::in_place_type<DispatchCommand>));
  }
  // Keeps `buffer` / `pipeline` alive until the command buffer finishes, as a Metal
  // command buffer retains what its commands use. Each distinct one is retained once
  // (recent ones are checked), so a dispatch adds no reference count that the queue's
  // thread must drop again: a count shared by the encoding and the executing thread
  // bounces between their cores, which cost more than the rest of recording a small
  // dispatch (bench/README.md, small-op section).
  void retain(const metalx::rt::BufferPtr& buffer) { retainOnce(retained_buffers_, buffer); }
  void retain(const std::shared_ptr<SimPipeline>& pipeline) { retainOnce(retained_pipelines_, pipeline); }
  void encoderEnded(SimEncoderBase* encoder);
  void encoderAbandoned(SimEncoderBase* encoder, const std::string& what);
  // "command buffer 'label'" for messages.
  std::string describe() const { return rules_.describe(); }

  // For the queue worker.
  void execute();

 private:
  void finish(metalx::rt::CommandBufferStatus final_status, const std::string& error);
  template <class Ptr>
  static void retainOnce(std::vector<Ptr>& retained, const Ptr& p) {
    // The last few only: a repeat further back is retained twice, which is harmless.
    constexpr size_t kRecent = 16;
    const size_t n = retained.size(), from = n > kRecent ? n - kRecent : 0;
    for (size_t i = n; i-- > from;)
      if (retained[i].get() == p.get()) return;
    retained.push_back(p);
  }

  std::shared_ptr<SimQueue> queue_;
  metalx::rt::validation::CommandBufferRules rules_;  // label, open encoder, committed
  // Room for a stream's batch (metalx commits every 16 commands) without regrowing.
  static constexpr size_t kReservedCommands = 16;
  std::vector<Command> commands_;
  std::vector<std::function<void(metalx::rt::CommandBuffer&)>> handlers_;
  std::vector<metalx::rt::BufferPtr> retained_buffers_;           // see retain()
  std::vector<std::shared_ptr<SimPipeline>> retained_pipelines_;
  ExclusiveUse use_;

  std::atomic<metalx::rt::CommandBufferStatus> status_{metalx::rt::CommandBufferStatus::NotEnqueued};
  std::atomic<bool> done_{false};  // completed or failed, and handlers have run
  mutable std::mutex mutex_;
  std::condition_variable done_cv_;
  std::string error_;
  // Published together when the command buffer finishes (0 until then, as documented).
  std::atomic<double> gpu_start_{0}, gpu_end_{0};
};

// Seconds on the simulator's clock (steady, shared by all devices).
double simClockSeconds();

}  // namespace metalsim
