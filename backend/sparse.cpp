// Sparse tensors on metalx: COO (SparsePrivateUse1) and compressed layouts, CSR/CSC/BSR/BSC
// (SparseCsrPrivateUse1).
//
// torch 2.13 registers no kernel for either key, so without this file nothing sparse
// can be made on metalx (to_sparse fails in the fallback, `.to("metalx")` of a sparse
// tensor finds no _sparse_coo_tensor_with_dims_and_tensors). A metalx sparse tensor is
// torch's own SparseTensorImpl / SparseCsrTensorImpl whose member tensors (indices,
// values) are ordinary metalx tensors. Two kinds of registration:
// - structure: constructing, resizing, copying sparse tensors and reading their members.
//   ATen's implementations of these (the ones CPU, CUDA and Meta share) only move member
//   tensors around and dispatch on them, so they serve metalx unchanged;
// - compute: everything else runs on the CPU fallback (cpu_fallback.cpp), which hands
//   the CPU kernel a CPU sparse tensor over the members' memory and brings sparse results
//   back as metalx sparse tensors. fallback_stats() counts them like dense fallbacks.
#include <ATen/ATen.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/ccol_indices_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/col_indices_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/copy_sparse_to_sparse_native.h>
#include <ATen/ops/crow_indices_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/resize_as_sparse_native.h>
#include <ATen/ops/row_indices_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/zero_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

#include "cpu_fallback.h"

namespace metalx {
namespace {

// The sparse factories make their (empty) members on the current device: make it the
// one asked for. CUDA's generated wrappers do the same.
std::optional<c10::Device> guardedDevice(std::optional<c10::Device> device) {
  if (device && device->type() == c10::DeviceType::PrivateUse1 && device->has_index()) return device;
  return std::nullopt;
}

at::Tensor cooWithDims(int64_t sparse_dim, int64_t dense_dim, at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                       std::optional<at::Layout> layout, std::optional<at::Device> device,
                       std::optional<bool> pin_memory) {
  c10::OptionalDeviceGuard guard(guardedDevice(device));
  return at::native::new_with_dims_sparse(sparse_dim, dense_dim, size, dtype, layout, device, pin_memory);
}

at::Tensor cooWithDimsAndTensors(int64_t sparse_dim, int64_t dense_dim, c10::SymIntArrayRef size,
                                 const at::Tensor& indices, const at::Tensor& values,
                                 std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                                 std::optional<at::Device> device, std::optional<bool> pin_memory,
                                 std::optional<bool> is_coalesced) {
  // The members' device is the tensor's device (ATen checks that they agree).
  c10::OptionalDeviceGuard guard(guardedDevice(values.device()));
  return at::native::new_with_dims_and_tensor_sparse_symint(sparse_dim, dense_dim, size, indices, values, dtype,
                                                            layout, device, pin_memory, is_coalesced);
}

at::Tensor emptyCoo(c10::SymIntArrayRef size, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                    std::optional<at::Device> device, std::optional<bool> pin_memory,
                    std::optional<at::MemoryFormat> memory_format) {
  c10::OptionalDeviceGuard guard(guardedDevice(device));
  return at::native::empty_sparse_symint(size, dtype, layout, device, pin_memory, memory_format);
}

at::Tensor emptyCompressed(c10::SymIntArrayRef size, std::optional<at::ScalarType> dtype,
                           std::optional<at::Layout> layout, std::optional<at::Device> device,
                           std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format) {
  c10::OptionalDeviceGuard guard(guardedDevice(device));
  return at::native::empty_sparse_compressed_symint(size, dtype, layout, device, pin_memory, memory_format);
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpuFallback>()); }
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpuFallback>());
}

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  // Structure (ATen's device-independent sparse implementations).
  m.impl("_sparse_coo_tensor_with_dims", TORCH_FN(cooWithDims));
  m.impl("_sparse_coo_tensor_with_dims_and_tensors", TORCH_FN(cooWithDimsAndTensors));
  m.impl("empty.memory_format", TORCH_FN(emptyCoo));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_sparse_coo));
  m.impl("_indices", TORCH_FN(at::native::_indices_sparse));
  m.impl("_values", TORCH_FN(at::native::_values_sparse));
  m.impl("indices", TORCH_FN(at::native::indices_sparse));
  m.impl("values", TORCH_FN(at::native::values_sparse));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("_dimI", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("_dimV", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("is_coalesced", TORCH_FN(at::native::is_coalesced_sparse));
  m.impl("_coalesced_", TORCH_FN(at::native::_coalesced_sparse_));
  m.impl("sparse_resize_", TORCH_FN(at::native::sparse_resize_));
  m.impl("sparse_resize_and_clear_", TORCH_FN(at::native::sparse_resize_and_clear_));
  m.impl("resize_as_sparse_", TORCH_FN(at::native::resize_as_sparse_));
  m.impl("zero_", TORCH_FN(at::native::zero_sparse_));
  m.impl("copy_", TORCH_FN(at::native::copy_sparse_wrapper_));
  m.impl("copy_sparse_to_sparse_", TORCH_FN(at::native::copy_sparse_));
  m.impl("clone", TORCH_FN(at::native::clone_sparse));
}

TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(emptyCompressed));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_sparse_csr));
  m.impl("crow_indices", TORCH_FN(at::native::crow_indices_sparse_csr));
  m.impl("col_indices", TORCH_FN(at::native::col_indices_sparse_csr));
  m.impl("ccol_indices", TORCH_FN(at::native::ccol_indices_sparse_csr));
  m.impl("row_indices", TORCH_FN(at::native::row_indices_sparse_csr));
  m.impl("values", TORCH_FN(at::native::values_sparse_csr));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse_csr));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse_csr));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse_csr));
  m.impl("resize_", TORCH_FN(at::native::resize_sparse_csr_));
  m.impl("resize_as_sparse_", TORCH_FN(at::native::resize_as_sparse_compressed_));
  m.impl("zero_", TORCH_FN(at::native::zero_sparse_csr_));
  m.impl("copy_", TORCH_FN(at::native::copy_sparse_compressed_));
  m.impl("clone", TORCH_FN(at::native::clone_sparse_compressed));
}

// Every op with a sparse CPU kernel and none registered above gets the fallback as its
// own kernel, not only as the key's fallback: many of these ops also have a composite
// kernel (CompositeExplicitAutograd, or the functional wrapper of a structured op),
// which the dispatcher prefers to a backend fallback. Those composites are written for
// dense tensors: mm would allocate a sparse out= tensor and call mm.out with it, sum
// and abs would misread the layout. CPU never reaches them, so metalx must not either.
// Runs after the registrations above (same translation unit, later in it) and after
// libtorch's own (loaded before this library).
struct LikeCpuSparseKernels {
  LikeCpuSparseKernels() {
    c10::Dispatcher& dispatcher = c10::Dispatcher::singleton();
    for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
      if (name.name.rfind("aten::", 0) != 0) continue;
      std::optional<c10::OperatorHandle> op = dispatcher.findOp(name);
      if (!op) continue;
      for (auto [cpu_key, our_key, lib] : {std::tuple{c10::DispatchKey::SparseCPU, c10::DispatchKey::SparsePrivateUse1, &coo},
                                           std::tuple{c10::DispatchKey::SparseCsrCPU,
                                                      c10::DispatchKey::SparseCsrPrivateUse1, &compressed}})
        if (op->hasKernelForDispatchKey(cpu_key) && !op->hasKernelForDispatchKey(our_key))
          lib->impl(c10::toString(name).c_str(), torch::CppFunction::makeFromBoxedFunction<&cpuFallback>());
    }
  }
  torch::Library coo{torch::Library::IMPL, "aten", c10::DispatchKey::SparsePrivateUse1, __FILE__, __LINE__};
  torch::Library compressed{torch::Library::IMPL, "aten", c10::DispatchKey::SparseCsrPrivateUse1, __FILE__, __LINE__};
};
LikeCpuSparseKernels like_cpu_sparse_kernels;

}  // namespace
}  // namespace metalx
