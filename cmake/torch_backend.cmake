# The PyTorch backend: the Python extension module metalx._C, built from backend/*.cpp
# against the torch installed in the Python that runs the build, and installed into
# the metalx package (with the simulator's prelude, for run-time shader compiles).
#
# Included by the top-level CMakeLists.txt when METALX_BUILD_TORCH is ON.

find_package(Python 3.9 REQUIRED COMPONENTS Interpreter Development.Module)

# Ask the build's Python for its torch. Autoload is off so that an installed (maybe
# stale) metalx is not loaded while we build its successor.
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env TORCH_DEVICE_BACKEND_AUTOLOAD=0
          ${Python_EXECUTABLE} -c
          "import torch, torch.utils; print(torch.__version__); print(torch.utils.cmake_prefix_path)"
  RESULT_VARIABLE _metalx_torch_rc
  OUTPUT_VARIABLE _metalx_torch_out
  ERROR_VARIABLE _metalx_torch_err
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _metalx_torch_rc EQUAL 0)
  message(FATAL_ERROR
    "metalx: cannot import torch with ${Python_EXECUTABLE}:\n${_metalx_torch_err}\n"
    "The torch backend is built against the installed torch: `pip install torch==2.13.0`, "
    "then build with `pip install --no-build-isolation .` (or configure with "
    "-DMETALX_BUILD_TORCH=OFF to build only the runtime).")
endif()
string(REPLACE "\n" ";" _metalx_torch_out "${_metalx_torch_out}")
list(GET _metalx_torch_out 0 METALX_TORCH_VERSION)
list(GET _metalx_torch_out 1 _metalx_torch_cmake_prefix)
if(NOT METALX_TORCH_VERSION MATCHES "^2\\.13\\.")
  message(WARNING "metalx is developed against torch 2.13; building against torch ${METALX_TORCH_VERSION}")
endif()
message(STATUS "metalx: building the torch backend against torch ${METALX_TORCH_VERSION}")

set(Torch_DIR "${_metalx_torch_cmake_prefix}/Torch")
find_package(Torch REQUIRED)

# TorchConfig exports no target for libtorch_python, which the extension needs (the
# Python bindings of tensors, generators and errors).
if(NOT TARGET metalx::torch_python)
  add_library(metalx::torch_python SHARED IMPORTED)
  set_target_properties(metalx::torch_python PROPERTIES
    IMPORTED_LOCATION "${TORCH_INSTALL_PREFIX}/lib/${CMAKE_SHARED_LIBRARY_PREFIX}torch_python${CMAKE_SHARED_LIBRARY_SUFFIX}"
    INTERFACE_INCLUDE_DIRECTORIES "${TORCH_INCLUDE_DIRS}")
endif()

if(APPLE)
  set(_metalx_origin "@loader_path")
else()
  set(_metalx_origin "$ORIGIN")
endif()
file(GLOB METALX_TORCH_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/backend/*.cpp
     ${CMAKE_SOURCE_DIR}/backend/ops/*.cpp ${CMAKE_SOURCE_DIR}/backend/launch/*.cpp
     ${CMAKE_SOURCE_DIR}/backend/distributed/*.cpp)
Python_add_library(metalx_torch_extension MODULE WITH_SOABI ${METALX_TORCH_SOURCES})
set_target_properties(metalx_torch_extension PROPERTIES
  OUTPUT_NAME _C
  # torch's headers need C++20 (TorchConfig sets it only on its own imported target).
  CXX_STANDARD 20
  CXX_STANDARD_REQUIRED ON
  # Export only the module's init function: the runtime and simulator symbols linked
  # in statically must not clash with other extensions in the same process.
  CXX_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON
  # libtorch*.so are loaded by `import torch` before metalx._C; the RPATH covers a
  # direct load of the module too (site-packages/metalx/ -> site-packages/torch/lib).
  INSTALL_RPATH "${_metalx_origin}/../torch/lib")
target_include_directories(metalx_torch_extension PRIVATE ${CMAKE_SOURCE_DIR}/backend
  ${CMAKE_SOURCE_DIR}/backend/extension/include)
target_compile_definitions(metalx_torch_extension PRIVATE
  METALX_BUILT_FOR_TORCH="${METALX_TORCH_VERSION}")
# torch.profiler integration (backend/profiler.cpp) implements a Kineto interface, whose
# headers torch ships in a folder of their own.
find_path(METALX_KINETO_INCLUDE IActivityProfiler.h PATHS ${TORCH_INCLUDE_DIRS}
          PATH_SUFFIXES kineto NO_DEFAULT_PATH NO_CACHE)
if(METALX_KINETO_INCLUDE)
  target_include_directories(metalx_torch_extension PRIVATE ${METALX_KINETO_INCLUDE})
else()
  message(WARNING "metalx: this torch has no Kineto headers; torch.profiler will not show metalx kernels")
  set_source_files_properties(${CMAKE_SOURCE_DIR}/backend/profiler.cpp PROPERTIES HEADER_FILE_ONLY ON)
endif()
target_link_libraries(metalx_torch_extension PRIVATE
  metalx_kernels_host metalx_core metalx_runtime ${TORCH_LIBRARIES} metalx::torch_python)
if(NOT APPLE)
  target_link_options(metalx_torch_extension PRIVATE "LINKER:--exclude-libs,ALL")
endif()

# The torch version recorded for the import-time check (python/metalx/_loader.py).
configure_file(${CMAKE_CURRENT_LIST_DIR}/build_info.py.in
               ${CMAKE_CURRENT_BINARY_DIR}/metalx/_build_info.py @ONLY)

install(TARGETS metalx_torch_extension LIBRARY DESTINATION metalx)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/metalx/_build_info.py DESTINATION metalx)
# Headers for C++ extensions (metalx/extension.h and the runtime interface it hands
# out), found by metalx.cpp_extension.include_paths().
install(DIRECTORY ${CMAKE_SOURCE_DIR}/backend/extension/include/ DESTINATION metalx/include)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/backend/runtime/include/ DESTINATION metalx/include)
if(METALX_WITH_SIM)
  # The simulator finds its prelude next to the library it is linked into
  # (<dir of _C>/metalsim/...) to compile shaders at run time.
  install(DIRECTORY ${METALSIM_DIR}/prelude/ DESTINATION metalx/metalsim/prelude
          PATTERN "*.py" EXCLUDE PATTERN "*.md" EXCLUDE PATTERN "__pycache__" EXCLUDE)
  install(DIRECTORY ${METALSIM_DIR}/include/ DESTINATION metalx/metalsim/include)
  # The built-in kernels' sources, which METALSIM_SHADER_VALIDATION=all compiles again
  # with the checks (metalsim's library.cpp looks for them here).
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/kernels/ DESTINATION metalx/metalsim/builtin
          FILES_MATCHING PATTERN "*.metal" PATTERN "*.h")
endif()
