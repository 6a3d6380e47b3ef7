// Bindings for shared_storage.h. Storages cross as byte tensors over them (pybind
// knows tensors; Python turns them back into storages with untyped_storage()).
#include "python_sharing.h"

#include <ATen/ATen.h>
#include <torch/csrc/utils/pybind.h>

#include "device.h"
#include "shared_storage.h"

namespace py = pybind11;

namespace metalx {
namespace {

at::Tensor bytesOver(const c10::Storage& storage, c10::Device device) {
  at::Tensor t = at::empty({0}, at::TensorOptions().dtype(at::kByte).device(device));
  t.set_(storage, 0, {static_cast<int64_t>(storage.nbytes())}, {1});
  return t;
}

}  // namespace

void registerSharingBindings(py::module_& m) {
  // The CPU shared-memory storage behind a metalx storage, as a byte tensor; None for
  // ordinary device memory.
  m.def("_shared_host_bytes", [](const at::Tensor& device_bytes) -> py::object {
    c10::Storage host = sharedHostStorage(*device_bytes.storage().unsafeGetStorageImpl());
    if (!host) return py::none();
    return py::cast(bytesOver(host, c10::Device(c10::DeviceType::CPU)));
  });
  m.def("_move_to_shared_memory", [](const at::Tensor& device_bytes, const at::Tensor& host_bytes) {
    withTorchErrors([&] {
      moveStorageToSharedMemory(*device_bytes.storage().unsafeGetStorageImpl(), host_bytes.storage());
    });
  });
  m.def("_wrap_shared_memory", [](const at::Tensor& host_bytes, int64_t index) {
    const c10::DeviceIndex device = toDeviceIndex(index);
    return withTorchErrors([&] {
      return bytesOver(wrapSharedMemory(host_bytes.storage(), device),
                       c10::Device(c10::DeviceType::PrivateUse1, device));
    });
  });
}

}  // namespace metalx
