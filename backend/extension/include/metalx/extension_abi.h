// The table through which C++ extensions reach metalx (see metalx/extension.h).
//
// metalx's C++ is linked into the Python module metalx._C with hidden symbols, so an
// extension cannot link against it. Instead metalx._C publishes one instance of this
// table as the PyCapsule `metalx._C._extension_api`; extension.h fetches it once and
// calls through it. Extensions include extension.h, never this file.
//
// Compatibility rules, so that an extension built against an older metalx keeps
// working with a newer one:
// - entries are only ever appended; `size` tells how many a metalx provides;
// - changing or removing an entry bumps kExtensionAbiVersion, and extension.h refuses
//   a table whose version differs from the one it was compiled with.
// Entries use C++ types (at::Tensor, std::shared_ptr, std::function): extensions are
// built with torch.utils.cpp_extension against the same torch, compiler ABI and
// standard library as metalx, as every torch extension must be.
#pragma once

#include <c10/core/Device.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "metalx/runtime/buffer.h"
#include "metalx/runtime/command.h"
#include "metalx/runtime/library.h"
#include "metalx/runtime/types.h"

namespace at {
class TensorBase;
}

namespace metalx::ext {

constexpr uint32_t kExtensionAbiVersion = 1;

// Where a tensor's first element lives: `offset` bytes into `buffer`.
struct BufferSlice {
  rt::BufferPtr buffer;
  size_t offset = 0;
};

using ComputeEncodeFn = std::function<void(rt::ComputeEncoder&)>;

namespace detail {

// Every entry may throw c10::Error (torch turns it into a Python RuntimeError); a
// device index of -1 means the calling thread's current metalx device.
struct ApiTable {
  uint32_t abi_version;  // kExtensionAbiVersion of the metalx that filled the table
  uint32_t size;         // sizeof(ApiTable) in that metalx: which entries exist

  BufferSlice (*buffer_of)(const at::TensorBase& tensor);
  rt::LibraryPtr (*compile_library)(c10::DeviceIndex device, const std::string& source,
                                    const std::string& source_name);
  rt::ComputePipelinePtr (*pipeline)(c10::DeviceIndex device, const rt::LibraryPtr& library,
                                     const std::string& kernel_name);
  void (*encode_compute)(c10::DeviceIndex device, const ComputeEncodeFn& encode);
  int64_t (*current_stream_id)(c10::DeviceIndex device);
  void (*flush)(c10::DeviceIndex device);
  void (*synchronize)(c10::DeviceIndex device);
  const rt::DeviceInfo& (*device_info)(c10::DeviceIndex device);
};

// The capsule's name, as PyCapsule_Import expects it: "<module>.<attribute>".
constexpr const char* kCapsuleName = "metalx._C._extension_api";

}  // namespace detail
}  // namespace metalx::ext
