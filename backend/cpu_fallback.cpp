// Every aten op metalx has no kernel for runs on the CPU, without copying its inputs.
//
// Device memory is shared (unified) storage the CPU can address. So once the device
// has finished the work queued on it, each metalx tensor argument is handed to the CPU
// kernel as a CPU tensor aliasing the same memory (same storage bytes, offset, sizes,
// strides, neg/conj bits):
//   - in-place ops and out= arguments write straight into device memory; if the CPU
//     kernel resizes an out= argument beyond its memory, the alias moves to CPU memory
//     and the result is copied back into the (resized) metalx tensor;
//   - a result that is a view of an input becomes the same view of the metalx input;
//     an in-place op returns the very metalx tensor it was given;
//   - other results are new tensors: the CPU kernel allocated them in device memory
//     (fallback_memory.h), so they become metalx tensors in place; only memory that
//     is not (allocated on another thread, shared) is copied to the device.
// Sparse tensors (COO and compressed) take the same route through their member tensors:
// the CPU kernel gets a CPU sparse tensor over aliases of the metalx indices and values,
// and a sparse result becomes a metalx sparse tensor whose members are moved as above.
// Mixing devices is rejected as CPU/CUDA reject it (0-dim CPU tensors are scalars and
// allowed; indexing ops accept CPU indices). Every use is counted and governed by
// METALX_FALLBACK (fallback_report.h).
#include "cpu_fallback.h"

#include <ATen/ATen.h>
#include <ATen/SparseCsrTensorUtils.h>
#include <ATen/SparseTensorImpl.h>
#include <ATen/native/SparseTensorUtils.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <c10/core/CPUAllocator.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <vector>

#include "device.h"
#include "fallback_memory.h"
#include "fallback_report.h"

namespace metalx {
namespace {

bool isMetalx(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

// Ops whose CUDA kernels accept CPU index tensors beside device tensors.
bool acceptsCpuIndices(const c10::OperatorName& op) {
  return op.name == "aten::index" || op.name == "aten::index_put_" || op.name == "aten::index_put" ||
         op.name == "aten::_index_put_impl_";
}

// Calls fn(tensor) for every tensor inside an argument (tensor, list, optional list).
template <class Fn>
void forEachTensor(const c10::IValue& v, Fn&& fn) {
  if (v.isTensor()) {
    fn(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) fn(t);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef())
      if (e.isTensor()) fn(e.toTensor());
  }
}

// Whether the op writes into argument i (self of an in-place op, an out= argument).
bool writesArgument(const c10::FunctionSchema& schema, size_t i) {
  const auto& arguments = schema.arguments();
  return i < arguments.size() && arguments[i].alias_info() != nullptr && arguments[i].alias_info()->isWrite();
}

// The metalx device the op runs for, checking that tensors do not mix devices.
// A 0-dim CPU tensor is a scalar only when it is read: one the op writes into (an out=
// argument, self of an in-place op) must be on the device, as on CUDA.
std::optional<c10::Device> deviceOfArguments(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  std::optional<c10::Device> device;
  std::optional<c10::Device> cpu_tensor;
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& arg = args[i];
    const bool written = writesArgument(op.schema(), i);
    forEachTensor(arg, [&](const at::Tensor& t) {
      if (!t.defined()) return;
      if (isMetalx(t)) {
        TORCH_CHECK(!device || *device == t.device(),
                    "Expected all tensors to be on the same device, but found at least two devices, ",
                    *device, " and ", t.device(), "! (in ", op.operator_name().name, ")");
        device = t.device();
      } else if ((t.dim() > 0 || written) && !acceptsCpuIndices(op.operator_name())) {
        cpu_tensor = t.device();
      }
    });
    if (arg.isDevice() && arg.toDevice().type() == c10::DeviceType::PrivateUse1 && !device)
      device = arg.toDevice();
  }
  TORCH_CHECK(!device || !cpu_tensor, "Expected all tensors to be on the same device, but found at least two devices, ",
              *device, " and cpu! (in ", op.operator_name().name, ")");
  if (device && device->index() < 0) device = c10::Device(c10::DeviceType::PrivateUse1, currentDevice());
  return device;
}

struct Aliased {
  at::Tensor original;  // the metalx tensor
  at::Tensor alias;     // the CPU tensor given to the kernel
};

bool isSparse(const at::Tensor& t) { return t.layout() != c10::kStrided; }

at::Tensor aliasOnCpu(const at::Tensor& t, std::vector<Aliased>& aliased);

// A CPU sparse tensor over CPU aliases of the members of metalx sparse tensor `t`. The
// members are aliased first (and so written back first), then the sparse tensor.
at::Tensor sparseAliasOnCpu(const at::Tensor& t, std::vector<Aliased>& aliased) {
  if (t.layout() == c10::kSparse) {
    at::SparseTensorImpl* impl = at::sparse::get_sparse_impl(t);
    at::Tensor indices = aliasOnCpu(impl->indices(), aliased);
    at::Tensor values = aliasOnCpu(impl->values(), aliased);
    return at::_sparse_coo_tensor_with_dims_and_tensors(impl->sparse_dim(), impl->dense_dim(), t.sizes(), indices,
                                                        values, values.options().layout(c10::kSparse),
                                                        impl->coalesced());
  }
  at::SparseCsrTensorImpl* impl = at::sparse_csr::get_sparse_csr_impl(t);
  at::Tensor compressed = aliasOnCpu(impl->compressed_indices(), aliased);
  at::Tensor plain = aliasOnCpu(impl->plain_indices(), aliased);
  at::Tensor values = aliasOnCpu(impl->values(), aliased);
  return at::_sparse_compressed_tensor_unsafe(compressed, plain, values, t.sizes(), values.options().layout(t.layout()));
}

at::Tensor aliasOnCpu(const at::Tensor& t, std::vector<Aliased>& aliased) {
  if (!isMetalx(t)) return t;
  for (const Aliased& a : aliased)
    if (a.original.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return a.alias;
  at::Tensor alias = isSparse(t) ? sparseAliasOnCpu(t, aliased) : cpuAlias(t);
  aliased.push_back({t, alias});
  return alias;
}

c10::IValue toCpu(const c10::IValue& v, std::vector<Aliased>& aliased) {
  auto convert = [&](const at::Tensor& t) { return aliasOnCpu(t, aliased); };
  if (v.isTensor()) return convert(v.toTensor());
  if (v.isTensorList()) {
    std::vector<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(convert(t));
    return c10::IValue(out);
  }
  if (v.isList() && v.toList().elementType()->isSubtypeOf(*c10::OptionalType::ofTensor())) {
    c10::List<std::optional<at::Tensor>> out;
    for (const c10::IValue& e : v.toListRef())
      out.push_back(e.isTensor() ? std::optional<at::Tensor>(convert(e.toTensor())) : std::nullopt);
    return c10::IValue(out);
  }
  if (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1)
    return c10::IValue(c10::Device(c10::DeviceType::CPU));
  return v;
}

at::Tensor sparseFromCpu(const at::Tensor& r, const std::vector<Aliased>& aliased, c10::Device device);

// A returned CPU tensor as a metalx tensor: the input itself, a view of an input, or a
// new tensor moved to `device`.
at::Tensor fromCpu(const at::Tensor& r, const std::vector<Aliased>& aliased, c10::Device device) {
  if (!r.defined() || isMetalx(r)) return r;
  for (const Aliased& a : aliased)
    if (a.alias.unsafeGetTensorImpl() == r.unsafeGetTensorImpl()) return a.original;
  if (isSparse(r)) return sparseFromCpu(r, aliased, device);
  const void* data = r.storage().data();
  for (const Aliased& a : aliased)
    if (data != nullptr && !isSparse(a.alias) && data == a.alias.storage().data() &&
        a.alias.storage().data() == a.original.storage().data()) {
      // The view's own dtype: view_as_real/view_as_complex/view(dtype) change it.
      at::Tensor view = at::empty({0}, a.original.options().dtype(r.scalar_type()));
      view.set_(a.original.storage(), r.storage_offset(), r.sizes(), r.strides());
      view._set_neg(r.is_neg());
      view._set_conj(r.is_conj());
      return view;
    }
  if (auto adopted = adoptAsDeviceTensor(r); adopted && adopted->device() == device) return *adopted;
  countFallbackResultCopy();
  return r.to(device);
}

// A CPU sparse result as a metalx sparse tensor over its members, each carried over by
// fromCpu (an input's member, a view of one, adopted device memory or a copy).
at::Tensor sparseFromCpu(const at::Tensor& r, const std::vector<Aliased>& aliased, c10::Device device) {
  c10::DeviceGuard guard(device);
  if (r.layout() == c10::kSparse) {
    at::SparseTensorImpl* impl = at::sparse::get_sparse_impl(r);
    at::Tensor indices = fromCpu(impl->indices(), aliased, device);
    at::Tensor values = fromCpu(impl->values(), aliased, device);
    return at::_sparse_coo_tensor_with_dims_and_tensors(impl->sparse_dim(), impl->dense_dim(), r.sizes(), indices,
                                                        values, values.options().layout(c10::kSparse),
                                                        impl->coalesced());
  }
  at::SparseCsrTensorImpl* impl = at::sparse_csr::get_sparse_csr_impl(r);
  at::Tensor compressed = fromCpu(impl->compressed_indices(), aliased, device);
  at::Tensor plain = fromCpu(impl->plain_indices(), aliased, device);
  at::Tensor values = fromCpu(impl->values(), aliased, device);
  return at::_sparse_compressed_tensor_unsafe(compressed, plain, values, r.sizes(), values.options().layout(r.layout()));
}

// After the kernel, for a sparse argument: the CPU kernel may have given the sparse alias
// new members, sizes or a coalesced flag (sparse_resize_, in-place and out= ops); the
// metalx tensor takes them. Its members' own changes were written back before (they
// come earlier in `aliased`).
void writeBackSparse(const Aliased& a, const std::vector<Aliased>& aliased, c10::Device device) {
  const at::Tensor& o = a.original;
  const at::Tensor& c = a.alias;
  c10::DeviceGuard guard(device);
  if (o.layout() == c10::kSparse) {
    at::SparseTensorImpl* from = at::sparse::get_sparse_impl(c);
    at::SparseTensorImpl* to = at::sparse::get_sparse_impl(o);
    at::Tensor indices = fromCpu(from->indices(), aliased, device);
    at::Tensor values = fromCpu(from->values(), aliased, device);
    if (indices.unsafeGetTensorImpl() == to->indices().unsafeGetTensorImpl() &&
        values.unsafeGetTensorImpl() == to->values().unsafeGetTensorImpl() && c.sizes() == o.sizes() &&
        from->sparse_dim() == to->sparse_dim() && from->coalesced() == to->coalesced())
      return;
    to->raw_resize_(from->sparse_dim(), from->dense_dim(), c.sizes());
    to->set_indices_and_values_unsafe(indices, values);
    to->set_coalesced(from->coalesced());
    return;
  }
  at::SparseCsrTensorImpl* from = at::sparse_csr::get_sparse_csr_impl(c);
  at::SparseCsrTensorImpl* to = at::sparse_csr::get_sparse_csr_impl(o);
  at::Tensor compressed = fromCpu(from->compressed_indices(), aliased, device);
  at::Tensor plain = fromCpu(from->plain_indices(), aliased, device);
  at::Tensor values = fromCpu(from->values(), aliased, device);
  if (compressed.unsafeGetTensorImpl() == to->compressed_indices().unsafeGetTensorImpl() &&
      plain.unsafeGetTensorImpl() == to->plain_indices().unsafeGetTensorImpl() &&
      values.unsafeGetTensorImpl() == to->values().unsafeGetTensorImpl() && c.sizes() == o.sizes())
    return;
  to->set_member_tensors(compressed, plain, values, c.sizes());
}

// After the kernel: an alias the CPU kernel reshaped or moved (out= resized beyond its
// memory) is carried back to its metalx tensor.
void writeBack(const Aliased& a, const std::vector<Aliased>& aliased, c10::Device device) {
  if (isSparse(a.original)) return writeBackSparse(a, aliased, device);
  const at::Tensor& o = a.original;
  const at::Tensor& c = a.alias;
  const bool same_memory = c.storage().data() == o.storage().data();
  // The kernel may flip the conj/neg bit of an out= argument (linalg ops do): carry
  // the bits over with the data.
  if (c.is_conj() != o.is_conj()) at::Tensor(o)._set_conj(c.is_conj());
  if (c.is_neg() != o.is_neg()) at::Tensor(o)._set_neg(c.is_neg());
  if (same_memory && c.sizes() == o.sizes() && c.strides() == o.strides() &&
      c.storage_offset() == o.storage_offset())
    return;
  if (same_memory) {
    at::Tensor(o).set_(o.storage(), c.storage_offset(), c.sizes(), c.strides());
  } else {
    at::Tensor(o).resize_(c.sizes());
    at::Tensor(o).copy_(c);
  }
}

}  // namespace

// metalx has no quantized tensors. A CPU kernel that makes one (quantize_per_tensor
// of a metalx tensor) must not have its result adopted as a metalx tensor: the adopted
// tensor would keep the quint8/qint8 dtype but lose its quantizer, and fail later in
// an unrelated op with "cannot call qscheme on UnknownQuantizer".
void rejectQuantized(const c10::OperatorHandle& op, const at::Tensor& r) {
  TORCH_CHECK_NOT_IMPLEMENTED(!r.defined() || !r.is_quantized(), "metalx has no quantized tensors: ",
                              op.operator_name().name, " would return one (quantize on the CPU instead)");
}

void cpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  reportFallback(op.operator_name());
  // Profilers show the fallback as its own range inside the op.
  at::RecordFunction profiled(at::RecordScope::USER_SCOPE);
  if (profiled.isActive()) profiled.before("metalx::cpu_fallback(" + c10::toString(op.operator_name()) + ")");
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  const size_t first = stack->size() - num_args;

  std::optional<c10::Device> device =
      deviceOfArguments(op, c10::ArrayRef<c10::IValue>(stack->data() + first, num_args));
  // The CPU reads and writes device memory directly: queued kernels must be done.
  if (device) synchronizeCurrentStream(device->index());

  std::vector<Aliased> aliased;
  for (size_t i = first; i < stack->size(); ++i) (*stack)[i] = toCpu((*stack)[i], aliased);
  {
    // New results (and the kernel's scratch memory) come from the device, so they need
    // no copy afterwards. Not when no metalx tensor is involved.
    std::optional<FallbackOutputScope> in_device_memory;
    if (device) in_device_memory.emplace(device->index());
    op.callBoxed(stack);
  }
  // Metalx tensors were aliased only if some argument is on metalx: then `device` is set.
  for (const Aliased& a : aliased) writeBack(a, aliased, *device);

  if (!device) return;  // nothing on metalx went in (e.g. only CPU scalars): results stay
  const size_t num_returns = schema.returns().size();
  for (size_t i = stack->size() - num_returns; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      rejectQuantized(op, v.toTensor());
      v = fromCpu(v.toTensor(), aliased, *device);
    } else if (v.isTensorList()) {
      std::vector<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorVector()) {
        rejectQuantized(op, t);
        out.push_back(fromCpu(t, aliased, *device));
      }
      v = c10::IValue(out);
    }
  }
}

namespace {

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  installFallbackCpuAllocator();
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpuFallback>());
}

}  // namespace
}  // namespace metalx
