// torch.metalx.compile_shader: Metal Shading Language compiled at run time and its
// kernels called from Python with metalx tensors and scalars (see shader_library.cpp
// and python/metalx/shaders.py).
#pragma once

#include <pybind11/pybind11.h>

namespace metalx {

// Defines metalx._C._ShaderLibrary, _ShaderKernel, _ShaderValue and ShaderCompileError.
void registerShaderBindings(pybind11::module_& m);

}  // namespace metalx
