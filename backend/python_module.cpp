// metalx._C: the Python extension. Loading it registers the metalx device with torch
// (guard, hooks, allocator, generator, ops: static registrations in the other
// files); the functions below are what python/metalx/ needs on top.
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include <atomic>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "allocator.h"
#include "core/command_trace.h"
#include "core/host_waits.h"
#include "fallback_report.h"
#include "device.h"
#include "extension_api.h"
#include "generator.h"
#include "host_wait.h"
#include "pinned_memory.h"
#include "python_distributed.h"
#include "python_errors.h"
#include "python_memory.h"
#include "python_sharing.h"
#include "shader_library.h"
#include "metalx/runtime/device.h"
#include "metalx/runtime/driver.h"

#ifndef METALX_BUILT_FOR_TORCH
#error "METALX_BUILT_FOR_TORCH must name the torch version metalx is compiled against"
#endif

namespace py = pybind11;

namespace metalx {
namespace {

c10::DeviceIndex toIndex(int64_t index) { return toDeviceIndex(index); }

// Between the slices of a long wait: runs Python's signal handlers (with the GIL). A
// handler that raised (KeyboardInterrupt) leaves its exception set on this thread and
// the wait stops.
bool pythonSignalsAllowWaiting() {
  py::gil_scoped_acquire gil;
  return PyErr_CheckSignals() == 0;
}

// The interpreter's main thread: the only one Python runs signal handlers on.
std::atomic<unsigned long> python_main_thread{0};

// The host-wait interrupt check (host_wait.h): on the main thread, runs Python's
// signal handlers; one that raised (Ctrl-C) ends the wait with its exception, which
// torch's bindings hand back to Python as it is (KeyboardInterrupt).
void interruptHostWaitOnSignal() {
  if (PyThread_get_thread_ident() != python_main_thread.load(std::memory_order_relaxed)) return;
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

// (byte offset of the tensor's data in its buffer, buffer length): lets tests check
// bufferFor() on views.
std::tuple<size_t, size_t> bufferInfo(const at::Tensor& tensor) {
  TORCH_CHECK(tensor.device().type() == c10::DeviceType::PrivateUse1,
              "expected a metalx tensor, got one on ", tensor.device());
  auto [buffer, offset] = bufferFor(tensor.data_ptr());
  return {offset, buffer->length()};
}

// The caching allocator's statistics, with the key names torch.cuda.memory_stats uses
// where a counterpart exists.
py::dict memoryStats(c10::DeviceIndex index) {
  AllocatorStats s = allocatorStats(index);
  py::dict d;
  d["allocated_bytes.all.current"] = s.allocated_bytes;
  d["allocated_bytes.all.peak"] = s.peak_allocated_bytes;
  d["requested_bytes.all.current"] = s.requested_bytes;
  d["requested_bytes.all.peak"] = s.peak_requested_bytes;
  d["reserved_bytes.all.current"] = s.reserved_bytes;
  d["reserved_bytes.all.peak"] = s.peak_reserved_bytes;
  d["active.all.current"] = s.active_blocks;
  d["allocation.all.allocated"] = s.allocations;
  d["allocation.all.freed"] = s.frees;
  d["segment.all.allocated"] = s.buffer_allocations;
  d["segment.all.freed"] = s.buffer_frees;
  d["pending_free_bytes"] = s.pending_free_bytes;
  d["cache_hits"] = s.cache_hits;
  d["num_alloc_retries"] = s.oom_retries;
  d["num_ooms"] = s.ooms;
  return d;
}

// A device's name and limits as the runtime reports them (python -m metalx).
py::dict deviceInfo(c10::DeviceIndex index) {
  using namespace py::literals;
  checkDeviceIndex(index);
  const rt::DeviceInfo& info = runtimeDevice(index).info();
  const auto& dims = info.max_threads_per_threadgroup_dims;
  return py::dict("name"_a = info.name, "is_simulated"_a = info.is_simulated,
                  "has_unified_memory"_a = info.has_unified_memory,
                  "max_threads_per_threadgroup"_a = info.max_threads_per_threadgroup,
                  "max_threads_per_threadgroup_dims"_a = py::make_tuple(dims.width, dims.height, dims.depth),
                  "max_threadgroup_memory_length"_a = info.max_threadgroup_memory_length,
                  "simd_width"_a = info.simd_width,
                  "recommended_max_working_set_size"_a = info.recommended_max_working_set_size,
                  "max_buffer_length"_a = info.max_buffer_length);
}

}  // namespace
}  // namespace metalx

PYBIND11_MODULE(_C, m) {
  using namespace metalx;
  m.doc() = "metalx: the Apple GPU device for PyTorch (C++ part)";
  m.attr("built_for_torch") = METALX_BUILT_FOR_TORCH;
  python_main_thread.store(py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>());
  setHostWaitInterruptCheck(interruptHostWaitOnSignal);

  m.def("init", [] { translated([] { (void)rt::devices(); }); },
        "Starts the runtime and opens its devices; raises if it cannot.");
  m.def("device_count", [] { return static_cast<int>(deviceCount()); });
  m.def("driver_name", [] { return translated([] { return rt::driverName(); }); },
        "The runtime driver in use: 'metal' or 'sim'.");
  m.def("available_drivers", [] { return rt::availableDrivers(); });
  m.def("current_device", [] { return static_cast<int>(currentDevice()); });
  m.def("set_device", [](int64_t index) { translated([&] { setCurrentDevice(toIndex(index)); }); });
  m.def("exchange_device", [](int64_t index) {
    return translated([&] {
      const c10::DeviceIndex previous = currentDevice();
      setCurrentDevice(toIndex(index));
      return static_cast<int>(previous);
    });
  });
  // Waits without the GIL, in slices, taking it back between slices to run Python's
  // signal handlers: Ctrl-C during a long synchronize raises KeyboardInterrupt (the
  // device work keeps running; a later synchronize waits for it).
  m.def("_host_wait_count", [] { return hostWaitCount(); });
  m.def("synchronize", [](int64_t index) {
    translated([&] {
      const c10::DeviceIndex device = toIndex(index);
      bool done;
      {
        py::gil_scoped_release no_gil;
        done = synchronizeDevicePolling(device, pythonSignalsAllowWaiting);
      }
      if (!done) throw py::error_already_set();
    });
  });
  m.def("_stream_synchronize", [](int64_t stream_id, int64_t index) {
    translated([&] {
      const c10::Stream stream = c10::Stream::unpack3(stream_id, toIndex(index), c10::DeviceType::PrivateUse1);
      bool done;
      {
        py::gil_scoped_release no_gil;
        done = synchronizeStreamPolling(stream, pythonSignalsAllowWaiting);
      }
      if (!done) throw py::error_already_set();
    });
  });
  m.def("default_generator", [](int64_t index) {
    return translated([&] {
      const at::Generator& generator = defaultGenerator(toIndex(index));
      return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(generator));
    });
  });
  m.def("_memory_stats", [](int64_t index) { return translated([&] { return memoryStats(toIndex(index)); }); });
  m.def("_reset_peak_memory_stats",
        [](int64_t index) { translated([&] { resetPeakAllocatorStats(toIndex(index)); }); });
  m.def("_empty_cache", [] { translated([] { emptyAllocatorCache(); }); });
  m.def("_host_memory_stats", [] {  // pinned host memory (pinned_memory.h)
    using namespace py::literals;
    PinnedStats s = pinnedStats();
    return py::dict("allocated_bytes"_a = s.allocated_bytes, "reserved_bytes"_a = s.reserved_bytes,
                    "pending_free_bytes"_a = s.pending_free_bytes, "active_blocks"_a = s.active_blocks,
                    "allocations"_a = s.allocations, "cache_hits"_a = s.cache_hits,
                    "host_allocations"_a = s.host_allocations, "wrapped_buffers"_a = s.wrapped_buffers);
  });
  m.def("_fallback_counts", [] { return fallbackCounts(); });
  m.def("_reset_fallback_counts", [] { resetFallbackCounts(); });
  m.def("_fallback_result_copies", [] { return fallbackResultCopies(); });
  m.def("_set_fallback_mode", [](const std::string& mode) {
    translated([&] { setFallbackMode(parseFallbackMode(mode)); });
  });
  m.def("_fallback_mode", [] {
    switch (fallbackMode()) {
      case FallbackMode::Allow: return "allow";
      case FallbackMode::Warn: return "warn";
      case FallbackMode::Error: return "error";
    }
    return "allow";
  });
  m.def("_buffer_info", [](const at::Tensor& t) { return translated([&] { return bufferInfo(t); }); });
  // Device command tracing (core/command_trace.h), for torch.metalx.profiler.
  m.def("_command_trace_start", [] { command_trace::start(); });
  m.def("_command_trace_stop", [] { command_trace::stop(); });
  m.def("_command_trace_take", [] {
    using namespace py::literals;
    py::list out;
    for (const TracedCommand& c : command_trace::take()) {
      const char* kind = c.kind == CommandKind::Kernel ? "kernel" : c.kind == CommandKind::Copy ? "copy" : "fill";
      out.append(py::dict("name"_a = c.name, "kind"_a = kind, "device"_a = c.device, "stream"_a = c.stream,
                          "gpu_start_s"_a = c.gpu_start_s, "gpu_end_s"_a = c.gpu_end_s, "bytes"_a = c.bytes));
    }
    return out;
  });
  m.def("_device_info", [](int64_t index) { return translated([&] { return deviceInfo(toIndex(index)); }); });
  registerShaderBindings(m);
  registerMemoryBindings(m);
  registerSharingBindings(m);  // metalx tensors passed between processes (shared_storage.h)
  registerDistributedBindings(m);  // torch.distributed through Gloo (python/metalx/distributed/)
  registerExtensionApi(m);  // metalx/extension.h reaches metalx through it
}
