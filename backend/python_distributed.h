// The Python bindings of metalx's torch.distributed backend (distributed/), used by
// python/metalx/distributed/.
#pragma once

#include <pybind11/pybind11.h>

namespace metalx {

void registerDistributedBindings(pybind11::module_& m);

}  // namespace metalx
