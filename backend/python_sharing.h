// The Python bindings behind passing metalx tensors between processes
// (python/metalx/multiprocessing.py, over shared_storage.h).
#pragma once

#include <pybind11/pybind11.h>

namespace metalx {

void registerSharingBindings(pybind11::module_& m);

}  // namespace metalx
