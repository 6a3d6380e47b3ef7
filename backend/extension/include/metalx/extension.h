// metalx's C++ API for extensions: custom Metal kernels on metalx tensors, encoded on
// metalx's own streams.
//
// An extension built with torch.utils.cpp_extension (metalx.cpp_extension adds this
// directory to its include path) includes this header and:
//   1. finds a tensor's memory:       BufferSlice s = metalx::ext::bufferOf(t);
//   2. compiles its Metal source once (cached per device by metalx, bounded):
//        auto lib = metalx::ext::compileLibrary(device, source, "my_ops.metal");
//        auto pso = metalx::ext::pipeline(device, lib, "my_kernel");
//   3. encodes on the CURRENT stream of the device, in metalx's open compute encoder:
//        metalx::ext::encodeCompute(device, [&](rt::ComputeEncoder& e) {
//          e.setComputePipeline(pso);
//          e.setBuffer(s.buffer, s.offset, 0);  ...
//          e.dispatchThreads(grid, group);
//        });
// metalx commits that work with everything else on the stream, in order: a native op,
// a .cpu() copy or another kernel that comes later sees the results, and a kernel
// encoded inside torch.metalx.stream(s) runs on s. There is deliberately no access to
// the command buffer: a second encoder on it would break metalx's open one (Metal
// allows one encoder at a time), so the encoder handed to `encode` is the only one.
// It is valid only during the call, may not be ended, metalx ops may not be called
// from inside the call (they would share the encoder), and it checks at dispatch that
// every [[buffer(n)]] / [[threadgroup(n)]] the kernel declares was bound in this call
// (bindings persist in a shared encoder: a forgotten one would read another kernel's).
//
// Errors are c10::Error (a RuntimeError in Python) naming the problem. The first call
// needs a Python interpreter with metalx loaded (`import torch` does it), because the
// implementation is reached through metalx._C (see metalx/extension_abi.h).
#pragma once

#include <Python.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <string>

#include "metalx/extension_abi.h"
#include "metalx/runtime/buffer.h"
#include "metalx/runtime/command.h"
#include "metalx/runtime/library.h"
#include "metalx/runtime/types.h"

namespace metalx::ext {

namespace detail {

// The pending Python exception as text, cleared. Needs the GIL.
inline std::string takePythonError() {
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  std::string text = "unknown error";
  if (PyObject* s = value ? PyObject_Str(value) : nullptr) {
    if (const char* utf8 = PyUnicode_AsUTF8(s)) text = utf8;
    Py_DECREF(s);
  }
  PyErr_Clear();
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  return text;
}

inline const ApiTable* loadApi() {
  TORCH_CHECK(Py_IsInitialized(),
              "metalx extension API: no Python interpreter; metalx's implementation lives in the "
              "Python module metalx._C, so extensions must run in a Python process that imported torch");
  PyGILState_STATE gil = PyGILState_Ensure();
  auto* table = static_cast<const ApiTable*>(PyCapsule_Import(kCapsuleName, 0));
  std::string error = table ? "" : takePythonError();
  PyGILState_Release(gil);
  TORCH_CHECK(table, "metalx extension API: cannot import ", kCapsuleName, " (", error,
              "); is metalx installed and loaded (`import torch` autoloads it)?");
  TORCH_CHECK(table->abi_version == kExtensionAbiVersion, "metalx extension API: this extension was built for ABI version ",
              kExtensionAbiVersion, " but the installed metalx provides version ", table->abi_version,
              "; rebuild the extension against the installed metalx");
  TORCH_CHECK(table->size >= sizeof(ApiTable), "metalx extension API: the installed metalx is older than the headers this "
              "extension was built with (its table has ", table->size, " bytes, expected ", sizeof(ApiTable),
              "); rebuild the extension against the installed metalx");
  return table;
}

// Fetched once per extension. An atomic rather than a function-local static: a static's
// initialisation guard, held while waiting for the GIL, could deadlock with a thread
// that holds the GIL and calls in here too.
inline const ApiTable& api() {
  static std::atomic<const ApiTable*> cached{nullptr};
  const ApiTable* table = cached.load(std::memory_order_acquire);
  if (!table) {
    table = loadApi();
    cached.store(table, std::memory_order_release);
  }
  return *table;
}

}  // namespace detail

// The buffer holding `tensor`'s first element and its byte offset there (the storage
// offset included). A kernel indexes the tensor from there with the tensor's own
// strides, or the caller passes tensor.contiguous(). Throws for an undefined tensor,
// a tensor on another device, or one without memory (numel() == 0).
inline BufferSlice bufferOf(const at::TensorBase& tensor) { return detail::api().buffer_of(tensor); }

// Metal Shading Language `source` compiled for `device`, through metalx's bounded
// per-device cache (the same source compiles once). `source_name` names the source in
// compile errors ("my_ops.metal:12:5: error: ..."), which are thrown as c10::Error.
// Hold the result: a held library stays valid even if the cache evicts it.
inline rt::LibraryPtr compileLibrary(c10::DeviceIndex device, const std::string& source,
                                     const std::string& source_name = "<source>") {
  return detail::api().compile_library(device, source, source_name);
}

// The compute pipeline of `kernel_name` in `library`, from metalx's pipeline cache. An
// unknown name throws, listing the library's kernels.
inline rt::ComputePipelinePtr pipeline(c10::DeviceIndex device, const rt::LibraryPtr& library,
                                       const std::string& kernel_name) {
  return detail::api().pipeline(device, library, kernel_name);
}

// Runs `encode` with the open compute encoder of `device`'s current stream (see the
// top of this file for its rules). Returns once encoded, not once run: use
// synchronize() (or let a .cpu() copy do it) before reading results on the host.
inline void encodeCompute(c10::DeviceIndex device, const ComputeEncodeFn& encode) {
  detail::api().encode_compute(device, encode);
}

// The id of `device`'s current stream on this thread (torch.metalx.current_stream().stream_id).
inline int64_t currentStreamId(c10::DeviceIndex device = -1) { return detail::api().current_stream_id(device); }

// Commits what the current stream has encoded so far, without waiting (metalx also
// commits on its own, in batches).
inline void flush(c10::DeviceIndex device = -1) { detail::api().flush(device); }

// Waits until everything encoded on `device`'s current stream has run; throws if any of
// it failed on the device.
inline void synchronize(c10::DeviceIndex device = -1) { detail::api().synchronize(device); }

// The device's limits (threads per threadgroup, threadgroup memory, SIMD width, ...).
inline const rt::DeviceInfo& deviceInfo(c10::DeviceIndex device = -1) { return detail::api().device_info(device); }

}  // namespace metalx::ext
