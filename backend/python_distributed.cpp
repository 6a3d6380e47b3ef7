#include "python_distributed.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "distributed/gloo_backend.h"
#include "python_errors.h"

namespace py = pybind11;

namespace metalx {
namespace {

bool isMetalxGloo(const c10d::Backend& backend) {
  return dynamic_cast<const distributed::GlooBackend*>(&backend) != nullptr;
}

bool servesMetalx(c10d::ProcessGroup& pg) {
  if (!pg.hasBackendForDeviceType(c10::DeviceType::PrivateUse1)) return false;
  return isMetalxGloo(*pg.getBackend(c10::DeviceType::PrivateUse1));
}

// Registers `backend` (a GlooBackend, or torch's debug checker around one) for `pg`'s
// metalx device. As a CUSTOM backend type: a second GLOO registration would be ignored
// in favour of the first (ProcessGroup::setBackend reuses a backend per type).
void registerForMetalx(c10d::ProcessGroup& pg, c10::intrusive_ptr<c10d::Backend> backend) {
  bool custom_taken = true;
  try {
    pg.getBackend(c10d::ProcessGroup::BackendType::CUSTOM);
  } catch (const c10::Error&) {
    custom_taken = false;
  }
  TORCH_CHECK(!custom_taken,
              "metalx cannot run its collectives through Gloo in a process group that already has a custom "
              "backend; give the metalx device Gloo and the custom backend to other devices only");
  pg.setBackend(c10::DeviceType::PrivateUse1, c10d::ProcessGroup::BackendType::CUSTOM, std::move(backend));
}

// Makes `pg` run its metalx collectives through a GlooBackend over the Gloo backend it
// registered for `source`: the metalx device (the one torch made for "gloo"), or for a
// group split from one, the CPU device (whose Gloo split is the group's).
void attachGloo(c10d::ProcessGroup& pg, c10::DeviceType source) {
  TORCH_CHECK(pg.hasBackendForDeviceType(source), "this process group has no backend for the ",
              c10::DeviceTypeName(source, /*lower_case=*/true), " device");
  if (servesMetalx(pg)) return;
  registerForMetalx(pg, c10::make_intrusive<distributed::GlooBackend>(pg.getBackend(source)));
}

}  // namespace

void registerDistributedBindings(py::module_& m) {
  m.def(
      "_distributed_attach_gloo",
      [](c10d::ProcessGroup& pg, bool cpu_gloo) {
        translated([&] { attachGloo(pg, cpu_gloo ? c10::DeviceType::CPU : c10::DeviceType::PrivateUse1); });
      },
      py::arg("pg"), py::arg("cpu_gloo") = false);
  m.def("_distributed_serves_metalx", [](c10d::ProcessGroup& pg) { return servesMetalx(pg); });
  // For TORCH_DISTRIBUTED_DEBUG=DETAIL, where torch's checker must see the metalx
  // tensors (python/metalx/distributed/_process_groups.py): a GlooBackend over a Gloo
  // backend, registering a backend for the metalx device, and recognising one.
  m.def("_distributed_gloo_backend", [](const c10::intrusive_ptr<c10d::Backend>& gloo) {
    return c10::intrusive_ptr<c10d::Backend>(c10::make_intrusive<distributed::GlooBackend>(gloo));
  });
  m.def("_distributed_register_for_metalx", [](c10d::ProcessGroup& pg, const c10::intrusive_ptr<c10d::Backend>& b) {
    translated([&] { registerForMetalx(pg, b); });
  });
  m.def("_distributed_is_metalx_gloo", [](const c10d::Backend& backend) { return isMetalxGloo(backend); });
  // torch defines its c10d Python types when torch.distributed is first imported, after
  // this module loads; metalx's backend type, a subclass of torch's Backend, is defined
  // then (metalx.distributed.install(), which also gives it the `options` torch's
  // split_group copies: python/metalx/distributed/_split.py).
  m.def("_distributed_define_types", [m]() mutable {
    if (py::hasattr(m, "GlooBackend")) return;
    py::class_<distributed::GlooBackend, c10d::Backend, c10::intrusive_ptr<distributed::GlooBackend>>(
        m, "GlooBackend", "metalx's c10d backend: the process group's Gloo, on CPU views of metalx tensors")
        .def_property_readonly("_gloo_options", [](distributed::GlooBackend& b) { return b.getBackendOptions(); })
        .def_property_readonly("wrapped_pg", [](const distributed::GlooBackend& b) { return b.wrapped(); });
  });
}

}  // namespace metalx
