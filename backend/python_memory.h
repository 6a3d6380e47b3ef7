// The Python bindings of memory introspection and the per-process memory limit
// (python/metalx/memory.py): allocator snapshots, the memory fraction, free/total.
#pragma once

#include <pybind11/pybind11.h>

namespace metalx {

void registerMemoryBindings(pybind11::module_& m);

}  // namespace metalx
