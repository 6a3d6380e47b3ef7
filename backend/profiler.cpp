// torch.profiler on metalx: a Kineto activity profiler (torch's PrivateUse1 profiler
// registry) that turns the device commands traced by core/command_trace.h into trace
// activities: kernels (by function name), copies and fills, on a row per device and
// stream, timed on the runtime's clock and linked to the host op that encoded them, so
// key_averages() shows device time per op and export_chrome_trace() shows the kernels.
#ifndef USE_KINETO
#define USE_KINETO 1  // the header's content is guarded by it; torch 2.13 wheels have Kineto
#endif
// Kineto's activity class formats its metadata with fmt, which libtorch uses but does
// not export: compile the few fmt functions it needs into this file instead.
#define FMT_HEADER_ONLY 1
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <libkineto.h>
#include <output_base.h>

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/command_trace.h"
#include "metalx/runtime/driver.h"

namespace metalx {
namespace {

using libkineto::ActivityType;

const std::set<ActivityType>& deviceActivities() {
  static const std::set<ActivityType> types = {ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY,
                                               ActivityType::GPU_MEMSET};
  return types;
}

ActivityType activityOf(CommandKind kind) {
  switch (kind) {
    case CommandKind::Copy: return ActivityType::GPU_MEMCPY;
    case CommandKind::Fill: return ActivityType::GPU_MEMSET;
    case CommandKind::Kernel: break;
  }
  return ActivityType::CONCURRENT_KERNEL;
}

class MetalxProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  explicit MetalxProfilerSession(std::set<ActivityType> wanted) : wanted_(std::move(wanted)) {}

  void start() override {
    command_trace::start();
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    command_trace::stop();
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  // Kineto forwards the id of each host op it records, on the op's thread.
  void pushCorrelationId(uint64_t id) override { command_trace::pushCorrelation(id); }
  void popCorrelationId() override { command_trace::popCorrelation(); }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0,
                 std::numeric_limits<int64_t>::max());
  }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked_activity,
                    int64_t /*start_ns*/, int64_t /*end_ns*/) override {
    std::vector<TracedCommand> commands = command_trace::take();
    // The runtime's clock to the trace's (system clock): a completion is seen on the
    // host right after the GPU end time; the smallest gap is the best offset estimate.
    double offset_s = std::numeric_limits<double>::infinity();
    for (const TracedCommand& c : commands) offset_s = std::min(offset_s, c.host_seen_s - c.gpu_end_s);
    auto ns = [&](double runtime_s) { return static_cast<int64_t>((runtime_s + offset_s) * 1e9); };

    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->gpuOpCount = 0;
    for (const TracedCommand& c : commands) {
      const ActivityType type = activityOf(c.kind);
      if (!wanted_.count(type)) continue;
      auto activity = std::make_unique<libkineto::GenericTraceActivity>(buffer_->span, type, c.name);
      activity->startTime = ns(c.gpu_start_s);
      activity->endTime = std::max(activity->startTime, ns(c.gpu_end_s));
      activity->device = c.device;
      activity->resource = static_cast<int32_t>(c.stream);
      activity->id = static_cast<int32_t>(c.correlation);
      if (c.correlation) {
        activity->linked = linked_activity(static_cast<int32_t>(c.correlation));
        activity->flow.id = static_cast<uint32_t>(c.correlation);
        activity->flow.type = libkineto::kLinkAsyncCpuGpu;
        activity->flow.start = false;
      }
      activity->addMetadata("device", c.device);
      activity->addMetadata("stream", c.stream);
      if (c.kind != CommandKind::Kernel) activity->addMetadata("bytes", c.bytes);
      streams_.emplace(c.device, c.stream);
      logger.handleGenericActivity(*activity);
      buffer_->activities.push_back(std::move(activity));
      ++buffer_->gpuOpCount;
    }
    status_ = libkineto::TraceStatus::READY;
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    std::string driver;
    try {
      driver = rt::driverName();
    } catch (...) {
      driver = "unavailable";
    }
    return std::make_unique<libkineto::DeviceInfo>(
        libkineto::DeviceInfo{0, 0, "metalx", "metalx (" + driver + " driver)"});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> infos;
    for (const auto& [device, stream] : streams_)
      infos.push_back(libkineto::ResourceInfo{stream, stream, device,
                                              "metalx:" + std::to_string(device) + " stream " + std::to_string(stream)});
    return infos;
  }

  // Kineto keeps the activities it was given through this buffer, so it must outlive
  // the logger's use of them: its ownership moves to Kineto here.
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    if (!buffer_) {
      buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
      buffer_->gpuOpCount = 0;
    }
    return std::move(buffer_);
  }

 private:
  std::set<ActivityType> wanted_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
  std::set<std::pair<int, int64_t>> streams_;
};

class MetalxActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return deviceActivities(); }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<ActivityType>& activity_types,
                                                                 const libkineto::Config& /*config*/) override {
    std::set<ActivityType> wanted;
    for (ActivityType t : activity_types)
      if (deviceActivities().count(t)) wanted.insert(t);
    if (wanted.empty()) return nullptr;
    return std::make_unique<MetalxProfilerSession>(std::move(wanted));
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t /*ts_ms*/, int64_t /*duration_ms*/,
                                                                 const std::set<ActivityType>& activity_types,
                                                                 const libkineto::Config& config) override {
    return configure(activity_types, config);
  }

 private:
  std::string name_ = "metalx";
};

REGISTER_PRIVATEUSE1_PROFILER(MetalxActivityProfiler);

}  // namespace
}  // namespace metalx
