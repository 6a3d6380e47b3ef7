// The implementation behind metalx/extension.h, published to C++ extensions as the
// PyCapsule metalx._C._extension_api (see metalx/extension_abi.h for why a table).
#pragma once

#include <pybind11/pybind11.h>

namespace metalx {

// Adds the capsule `_extension_api` to metalx._C.
void registerExtensionApi(pybind11::module_& m);

}  // namespace metalx
