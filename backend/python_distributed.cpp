#include "python_distributed.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "distributed/gloo_backend.h"
#include "python_errors.h"

namespace py = pybind11;

namespace metalx {
namespace {

bool servesMetalx(c10d::ProcessGroup& pg) {
  if (!pg.hasBackendForDeviceType(c10::DeviceType::PrivateUse1)) return false;
  return dynamic_cast<distributed::GlooBackend*>(pg.getBackend(c10::DeviceType::PrivateUse1).get()) != nullptr;
}

// Makes `pg` run its metalx collectives through a GlooBackend over the Gloo backend it
// registered for the metalx device (the one torch made for "gloo"). Registered as a
// CUSTOM backend type: a second GLOO registration would be ignored in favour of the
// first (ProcessGroup::setBackend reuses a backend per type).
void attachGloo(c10d::ProcessGroup& pg) {
  TORCH_CHECK(pg.hasBackendForDeviceType(c10::DeviceType::PrivateUse1),
              "this process group has no backend for the metalx device");
  if (servesMetalx(pg)) return;
  c10::intrusive_ptr<c10d::Backend> gloo = pg.getBackend(c10::DeviceType::PrivateUse1);
  bool custom_taken = true;
  try {
    pg.getBackend(c10d::ProcessGroup::BackendType::CUSTOM);
  } catch (const c10::Error&) {
    custom_taken = false;
  }
  TORCH_CHECK(!custom_taken,
              "metalx cannot run its collectives through Gloo in a process group that already has a custom "
              "backend; give the metalx device Gloo and the custom backend to other devices only");
  pg.setBackend(c10::DeviceType::PrivateUse1, c10d::ProcessGroup::BackendType::CUSTOM,
                c10::make_intrusive<distributed::GlooBackend>(std::move(gloo)));
}

}  // namespace

void registerDistributedBindings(py::module_& m) {
  m.def("_distributed_attach_gloo", [](c10d::ProcessGroup& pg) { translated([&] { attachGloo(pg); }); });
  m.def("_distributed_serves_metalx", [](c10d::ProcessGroup& pg) { return servesMetalx(pg); });
}

}  // namespace metalx
