// The implementation behind metalx/extension.h (see extension_api.h).
//
// Every entry turns runtime errors into c10::Error, whose type extensions share with
// torch: rt::Error's type information is private to metalx._C (hidden symbols), so an
// extension could not catch it by type. Exceptions an extension throws from its own
// encode callback pass through unchanged.
#include "extension_api.h"

#include <ATen/core/TensorBase.h>
#include <c10/util/Exception.h>

#include <stdexcept>
#include <string>

#include "allocator.h"
#include "core/stream_pool.h"
#include "device.h"
#include "extension_encoder.h"
#include "metalx/extension_abi.h"
#include "metalx/runtime/device.h"
#include "metalx/runtime/error.h"

namespace metalx {
namespace {

using ext::BufferSlice;

// Runs `f`, rethrowing a runtime error as c10::Error with `what` in front.
template <class F>
auto translatingRuntimeErrors(const char* what, F&& f) {
  try {
    return f();
  } catch (const rt::Error& e) {
    TORCH_CHECK(false, what, ": ", e.what());
  }
}

BufferSlice bufferOf(const at::TensorBase& tensor) {
  TORCH_CHECK(tensor.defined(), "metalx::ext::bufferOf: the tensor is undefined");
  TORCH_CHECK(tensor.device().type() == c10::DeviceType::PrivateUse1,
              "metalx::ext::bufferOf: expected a metalx tensor, got one on ", tensor.device());
  TORCH_CHECK(tensor.numel() > 0, "metalx::ext::bufferOf: the tensor is empty (shape ", tensor.sizes(),
              "): it has no memory to bind; skip the kernel for empty inputs");
  // data_ptr(), not the storage's start: it includes the storage offset of a view.
  auto [buffer, offset] = bufferFor(tensor.data_ptr());
  return {std::move(buffer), offset};
}

rt::LibraryPtr compileLibrary(c10::DeviceIndex device, const std::string& source,
                              const std::string& source_name) {
  const c10::DeviceIndex index = existingDeviceIndex(device);
  rt::CompileOptions options;
  options.source_name = source_name;
  return translatingRuntimeErrors("metalx::ext::compileLibrary", [&] {
    return devicePipelines(index).compile(source, options);
  });
}

rt::ComputePipelinePtr pipeline(c10::DeviceIndex device, const rt::LibraryPtr& library,
                                const std::string& kernel_name) {
  TORCH_CHECK(library, "metalx::ext::pipeline: the library is null");
  const c10::DeviceIndex index = existingDeviceIndex(device);
  if (!library->hasFunction(kernel_name)) {
    std::string known;
    for (const std::string& name : library->functionNames()) known += (known.empty() ? "" : ", ") + name;
    TORCH_CHECK(false, "metalx::ext::pipeline: the library has no kernel '", kernel_name,
                "'; its kernels: ", known.empty() ? "none" : known);
  }
  return translatingRuntimeErrors("metalx::ext::pipeline", [&] {
    return devicePipelines(index).get(library, kernel_name);
  });
}

void encodeCompute(c10::DeviceIndex device, const ext::ComputeEncodeFn& encode) {
  TORCH_CHECK(encode, "metalx::ext::encodeCompute: the encode function is empty");
  const c10::DeviceIndex index = existingDeviceIndex(device);
  translatingRuntimeErrors("metalx::ext::encodeCompute", [&] {
    // Exclusive: a metalx op called from inside `encode` would reuse (and re-bind) the
    // encoder `encode` is using; the stream refuses it with a clear error instead.
    currentStream(index).encodeComputeExclusive([&](rt::ComputeEncoder& shared) {
      ExtensionEncoder guarded(shared);
      encode(guarded);
    });
  });
}

int64_t currentStreamId(c10::DeviceIndex device) { return currentStream(existingDeviceIndex(device)).id(); }

void flush(c10::DeviceIndex device) {
  const c10::DeviceIndex index = existingDeviceIndex(device);
  translatingRuntimeErrors("metalx::ext::flush", [&] { currentStream(index).flush(); });
}

void synchronize(c10::DeviceIndex device) {
  // Throws c10::Error for work that failed on the device.
  synchronizeCurrentStream(existingDeviceIndex(device));
}

const rt::DeviceInfo& deviceInfo(c10::DeviceIndex device) { return runtimeDevice(existingDeviceIndex(device)).info(); }

const ext::detail::ApiTable kTable = {
    ext::kExtensionAbiVersion,
    sizeof(ext::detail::ApiTable),
    &bufferOf,
    &compileLibrary,
    &pipeline,
    &encodeCompute,
    &currentStreamId,
    &flush,
    &synchronize,
    &deviceInfo,
};

}  // namespace

void registerExtensionApi(pybind11::module_& m) {
  // The table is immutable and lives as long as the process: the capsule only points at it.
  PyObject* capsule = PyCapsule_New(const_cast<ext::detail::ApiTable*>(&kTable), ext::detail::kCapsuleName, nullptr);
  if (!capsule) throw pybind11::error_already_set();
  m.add_object("_extension_api", pybind11::reinterpret_steal<pybind11::object>(capsule));
}

}  // namespace metalx
