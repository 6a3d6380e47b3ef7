// The streams of each device (see stream_pool.h).
#include "core/stream_pool.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace metalx {
namespace {

struct DeviceStreams {
  std::mutex mutex;
  std::unique_ptr<rt::PipelineCache> pipelines;
  std::array<std::atomic<Stream*>, 1 + kStreamPoolSize> streams{};  // [0]: default
  std::atomic<unsigned> next_pool{0};
};

// Devices whose streams are reached without a lock once made (every op asks for its
// current stream).
constexpr int kMaxFastDevices = 64;

DeviceStreams& deviceStreams(int device_index) {
  static std::atomic<DeviceStreams*> made[kMaxFastDevices];
  if (device_index >= 0 && device_index < kMaxFastDevices)
    if (DeviceStreams* d = made[device_index].load(std::memory_order_acquire)) return *d;
  // Leaked with the streams: storages freed during exit still reach their stream.
  static std::mutex mutex;
  static auto* all = new std::vector<DeviceStreams*>();
  const int count = static_cast<int>(rt::devices().size());
  if (device_index < 0 || device_index >= count)
    throw std::out_of_range("metalx: device index " + std::to_string(device_index) +
                            " is out of range; there are " + std::to_string(count) +
                            " metalx device(s)");
  std::lock_guard<std::mutex> lock(mutex);
  if (all->empty()) all->resize(static_cast<size_t>(count), nullptr);
  auto& slot = (*all)[static_cast<size_t>(device_index)];
  if (!slot) {
    slot = new DeviceStreams();
    slot->pipelines = std::make_unique<rt::PipelineCache>(rt::device(device_index));
    if (device_index < kMaxFastDevices) made[device_index].store(slot, std::memory_order_release);
  }
  return *slot;
}

Stream& streamAt(int device_index, size_t slot) {
  DeviceStreams& d = deviceStreams(device_index);
  Stream* s = d.streams[slot].load(std::memory_order_acquire);
  if (s) return *s;
  std::lock_guard<std::mutex> lock(d.mutex);
  s = d.streams[slot].load(std::memory_order_relaxed);
  if (!s) {
    s = new Stream(rt::device(device_index), device_index, static_cast<int64_t>(slot), d.pipelines.get());
    d.streams[slot].store(s, std::memory_order_release);
  }
  return *s;
}

// This thread's current stream per device (null: the default stream). A plain array:
// a thread_local with nothing to construct or destroy is read without a guard.
thread_local Stream* t_current[kMaxFastDevices] = {};

}  // namespace

Stream& defaultStream(int device_index) { return streamAt(device_index, 0); }

Stream& streamById(int device_index, int64_t id) {
  if (id < 0 || id > kStreamPoolSize)
    throw std::out_of_range("metalx: no stream with id " + std::to_string(id) + " on metalx:" +
                            std::to_string(device_index) + " (ids are 0, the default stream, to " +
                            std::to_string(kStreamPoolSize) + ")");
  return streamAt(device_index, static_cast<size_t>(id));
}

Stream& streamFromPool(int device_index) {
  unsigned n = deviceStreams(device_index).next_pool.fetch_add(1, std::memory_order_relaxed);
  return streamAt(device_index, 1 + n % kStreamPoolSize);
}

Stream& currentStream(int device_index) {
  rt::checkNotForkedChild();
  if (device_index >= 0 && device_index < kMaxFastDevices)
    if (Stream* s = t_current[device_index]) return *s;
  return defaultStream(device_index);
}

Stream& setCurrentStream(Stream& stream) {
  const int index = stream.deviceIndex();
  if (index < 0 || index >= kMaxFastDevices)
    throw std::out_of_range("metalx: streams of device " + std::to_string(index) + " cannot be made current (at most " +
                            std::to_string(kMaxFastDevices) + " devices)");
  Stream& previous = currentStream(index);
  t_current[index] = &stream;
  return previous;
}

void forEachStream(int device_index, const std::function<void(Stream&)>& fn) {
  DeviceStreams& d = deviceStreams(device_index);
  for (auto& slot : d.streams)
    if (Stream* s = slot.load(std::memory_order_acquire)) fn(*s);
}

void synchronizeAllStreams(int device_index) {
  // Every stream is waited for even if one failed, so no work is left running behind
  // the error.
  std::string first_error;
  forEachStream(device_index, [&](Stream& s) {
    try {
      s.synchronize();
    } catch (const std::runtime_error& e) {
      if (first_error.empty()) first_error = e.what();
    }
  });
  if (!first_error.empty()) throw std::runtime_error(first_error);
}

bool synchronizeAllStreamsPolling(int device_index, const std::function<bool()>& keep_waiting) {
  bool stopped = false;
  forEachStream(device_index, [&](Stream& s) { stopped = stopped || !s.waitAllPolling(keep_waiting); });
  if (stopped) return false;
  synchronizeAllStreams(device_index);  // everything has completed: this reports failures
  return true;
}

rt::PipelineCache& devicePipelines(int device_index) {
  return *deviceStreams(device_index).pipelines;
}

}  // namespace metalx
