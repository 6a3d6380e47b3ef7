// Memory introspection for Python (see python_memory.h). The numbers are read from
// the caching allocator under its lock, so a snapshot is one consistent state.
#include "python_memory.h"

#include <limits>

#include "allocator.h"
#include "device.h"
#include "python_errors.h"
#include "metalx/runtime/device.h"

namespace py = pybind11;

namespace metalx {
namespace {

c10::DeviceIndex checkedIndex(int64_t index) {
  const c10::DeviceIndex device = toDeviceIndex(index);
  checkDeviceIndex(device);
  return device;
}

const char* stateName(BlockSnapshot::State state) {
  // The state names torch.cuda.memory_snapshot() uses, so tools reading one read both.
  switch (state) {
    case BlockSnapshot::State::Allocated: return "active_allocated";
    case BlockSnapshot::State::PendingFree: return "active_pending_free";
    case BlockSnapshot::State::Free: return "inactive";
  }
  return "inactive";
}

py::list snapshot(c10::DeviceIndex device) {
  using namespace py::literals;
  py::list segments;
  for (const SegmentSnapshot& s : allocatorSnapshot(device)) {
    py::list blocks;
    size_t allocated = 0, active = 0, requested = 0;
    for (const BlockSnapshot& b : s.blocks) {
      if (b.state == BlockSnapshot::State::Allocated) allocated += b.size;
      if (b.state != BlockSnapshot::State::Free) active += b.size;
      requested += b.requested;
      blocks.append(py::dict("address"_a = s.address + b.offset, "offset"_a = b.offset, "size"_a = b.size,
                             "requested_size"_a = b.requested, "state"_a = stateName(b.state),
                             "stream"_a = b.stream));
    }
    segments.append(py::dict("device"_a = static_cast<int>(device), "address"_a = s.address,
                             "total_size"_a = s.size, "allocated_size"_a = allocated,
                             "active_size"_a = active, "requested_size"_a = requested,
                             "segment_type"_a = s.small ? "small" : "large", "blocks"_a = blocks));
  }
  return segments;
}

}  // namespace

void registerMemoryBindings(py::module_& m) {
  m.def("_memory_snapshot", [](int64_t index) { return translated([&] { return snapshot(checkedIndex(index)); }); });
  m.def("_set_memory_fraction", [](double fraction, int64_t index) {
    translated([&] {
      const c10::DeviceIndex device = checkedIndex(index);
      try {
        setAllocatorMemoryFraction(device, fraction);
      } catch (const std::invalid_argument& e) {
        TORCH_CHECK_VALUE(false, "set_per_process_memory_fraction: ", e.what(), ", got ", fraction);
      }
    });
  });
  m.def("_memory_fraction",
        [](int64_t index) { return translated([&] { return allocatorMemoryFraction(checkedIndex(index)); }); });
  m.def("_memory_limit", [](int64_t index) { return translated([&] { return allocatorLimit(checkedIndex(index)); }); });
  m.def("_mem_get_info", [](int64_t index) { return translated([&] { return allocatorMemoryInfo(checkedIndex(index)); }); });
  // What the runtime itself says the device holds (MTLDevice.currentAllocatedSize):
  // the ground truth the allocator's "reserved" is checked against.
  m.def("_device_allocated_size", [](int64_t index) {
    return translated([&] { return runtimeDevice(checkedIndex(index)).currentAllocatedSize(); });
  });
}

}  // namespace metalx
