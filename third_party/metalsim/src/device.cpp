// A simulated GPU (see device.h) and the simulator's entry point, openDevices().
#include "device.h"

#include <unistd.h>

#include <fstream>

#include "config.h"
#include "event.h"
#include "library.h"
#include "memory.h"
#include "metalsim/driver.h"
#include "metalx/runtime/error.h"
#include "metalx/runtime/validation.h"
#include "queue.h"
#include "shader_compiler.h"

namespace metalsim {
namespace {

using metalx::rt::Error;
using metalx::rt::ErrorKind;

std::string cpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) return line.substr(p + 2);
    }
  return "host CPU";
}

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

SimDevice::SimDevice(int index) : index_(index) {
  const Config& c = config();
  info_.name = "metalsim " + std::to_string(index) + " (simulated Apple GPU on " + cpuModel() + ")";
  info_.is_simulated = true;
  info_.has_unified_memory = true;
  info_.max_threads_per_threadgroup = 1024;
  info_.max_threads_per_threadgroup_dims = {1024, 1024, 1024};
  info_.max_threadgroup_memory_length = 32768;
  info_.simd_width = 32;
  info_.max_buffer_length = c.memory_capacity;
  info_.recommended_max_working_set_size = c.memory_capacity / 4 * 3;
}

metalx::rt::BufferPtr SimDevice::newBuffer(size_t length) {
  metalx::rt::validation::newBufferLength(length, info_.max_buffer_length);
  size_t before = allocated_.fetch_add(length);
  if (before + length > config().memory_capacity) {
    allocated_ -= length;
    throw Error(ErrorKind::OutOfMemory,
                "newBuffer: " + std::to_string(length) + " bytes do not fit: " +
                    mib(before) + " of the device's " + mib(config().memory_capacity) +
                    " are in use");
  }
  try {
    return std::make_shared<SimBuffer>(*this, length);
  } catch (...) {
    allocated_ -= length;
    throw;
  }
}

metalx::rt::BufferPtr SimDevice::wrapHostMemory(void* ptr, size_t length,
                                                std::function<void()> deallocator) {
  metalx::rt::validation::hostMemory(ptr, length, metalx::rt::hostPageSize());
  allocated_ += length;
  return std::make_shared<SimBuffer>(*this, ptr, length, std::move(deallocator));
}

metalx::rt::CommandQueuePtr SimDevice::newCommandQueue() {
  return std::make_shared<SimQueue>(*this);
}

metalx::rt::EventPtr SimDevice::newEvent() { return std::make_shared<SimEvent>(*this); }

metalx::rt::LibraryPtr SimDevice::builtinLibrary() {
  std::call_once(builtin_once_, [&] { builtin_ = SimLibrary::builtin(*this); });
  return builtin_;
}

metalx::rt::LibraryPtr SimDevice::compileLibrary(const std::string& source,
                                                 const metalx::rt::CompileOptions& options) {
  return compileShaderLibrary(*this, source, options);
}

std::vector<metalx::rt::DevicePtr> openDevices() {
  std::vector<metalx::rt::DevicePtr> devices;
  for (int i = 0; i < config().device_count; ++i) devices.push_back(std::make_shared<SimDevice>(i));
  return devices;
}

}  // namespace metalsim
