// Scans on metalx: cumsum, cumprod (functional, out= and in-place, through torch's meta
// functions), cummax/cummin (their _helper ops, which torch's composites call with the
// outputs allocated) and logcumsumexp (_logcumsumexp), through kernels/scan.metal
// (backend/launch/scan.h). complex64 cumsum scans the (real, imag) float view and
// complex64 cumprod has kernels; float64, complex128, other complex64 scans and dtypes
// without kernels run on the CPU fallback.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/cumprod_meta.h>
#include <ATen/ops/cumsum_meta.h>
#include <torch/library.h>

#include "launch/elementwise.h"
#include "launch/scan.h"
#include "launch/structured.h"

namespace metalx {
namespace {

using launch::KernelFamily;

KernelFamily cumsum_kernels{"cumsum", launch::kNumberTypes};
KernelFamily cumprod_kernels{"cumprod", launch::kNumberTypes | launch::DTypeSet{launch::DType::Complex64}};
KernelFamily cummax_kernels{"cummax", launch::kAllTypes};
KernelFamily cummin_kernels{"cummin", launch::kAllTypes};
KernelFamily logcumsumexp_kernels{"logcumsumexp", launch::kFloatTypes};

// Scans `input` (of a dtype the kernels have) along `dim` into `out` (and `indices`).
void scanInto(KernelFamily& kernels, const at::Tensor& input, int64_t dim, const at::Tensor& out,
              const at::Tensor* indices = nullptr) {
  const int64_t wrapped = input.dim() == 0 ? 0 : at::maybe_wrap_dim(dim, input.dim());
  launch::ScanRequest request{&input, wrapped, &out, indices};
  if (launch::runScan(kernels, request)) return;
  const at::Tensor contiguous = input.contiguous();  // past the kernels' 8 line dims
  request.input = &contiguous;
  if (launch::runScan(kernels, request)) return;
  // The outputs' own layout can still be too scattered: scan into dense temporaries.
  const at::Tensor dense_out = at::empty(out.sizes(), out.options());
  const at::Tensor dense_idx = indices ? at::empty(indices->sizes(), indices->options()) : at::Tensor();
  request.out = &dense_out;
  request.indices = indices ? &dense_idx : nullptr;
  TORCH_INTERNAL_ASSERT(launch::runScan(kernels, request));
  const_cast<at::Tensor&>(out).copy_(dense_out);
  if (indices) const_cast<at::Tensor&>(*indices).copy_(dense_idx);
}

bool hasKernel(KernelFamily& kernels, c10::ScalarType t) {
  const auto dtype = launch::kernelDtype(t);
  return dtype && kernels.supports(*dtype);
}

// ---- cumsum, cumprod ----

// The structured ops' kernel: the input as the result's dtype, scanned into it (CPU's
// order of checks: a 0-dim input is copied, an empty one leaves nothing to do).
// `by_parts`: the scan of a complex64 tensor is the float scan of each part (sums), run on
// the (real, imag) views, whose added last dim is kept.
template <class Fallback>
void cumulative(KernelFamily& kernels, bool by_parts, const at::Tensor& self, int64_t dim, const at::Tensor& result,
                const Fallback& fallback) {
  const bool complex_parts = by_parts && result.scalar_type() == at::kComplexFloat && !result.is_conj();
  if (!complex_parts && !hasKernel(kernels, result.scalar_type())) return fallback();
  if (self.dim() == 0) {
    const_cast<at::Tensor&>(result).copy_(self);
    return;
  }
  if (self.numel() == 0) return;
  if (complex_parts) {
    const at::Tensor input = self.scalar_type() == at::kComplexFloat ? self.resolve_conj() : self.to(at::kComplexFloat);
    scanInto(kernels, at::view_as_real(input), at::maybe_wrap_dim(dim, self.dim()), at::view_as_real(result));
    return;
  }
  const at::Tensor input = self.scalar_type() == result.scalar_type() ? self : self.to(result.scalar_type());
  scanInto(kernels, input, dim, result);
}

#define METALX_CUMULATIVE(ID, KERNELS, BY_PARTS)                                                                     \
  void ID##Impl(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype,                  \
                const at::Tensor& result) {                                                                \
    cumulative(KERNELS, BY_PARTS, self, dim, result, [&] {                                                      \
      static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::" #ID, "out");          \
      launch::cpuFallbackOut(op, {result}, self, dim, dtype);                                              \
    });                                                                                                    \
  }                                                                                                        \
  at::Tensor ID(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {               \
    launch::FunctionalOp<at::meta::structured_##ID> op;                                                    \
    op.meta(self, dim, dtype);                                                                             \
    ID##Impl(self, dim, dtype, op.outputs[0]);                                                             \
    return std::move(op.outputs[0]);                                                                       \
  }                                                                                                        \
  at::Tensor& ID##Out(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype,           \
                      at::Tensor& out) {                                                                   \
    launch::OutOp<at::meta::structured_##ID> op(out);                                                      \
    op.meta(self, dim, dtype);                                                                             \
    ID##Impl(self, dim, dtype, op.maybe_get_output(0));                                                    \
    op.finish();                                                                                           \
    return out;                                                                                            \
  }                                                                                                        \
  at::Tensor& ID##Inplace(at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {           \
    launch::InplaceOp<at::meta::structured_##ID> op(self);                                                 \
    op.meta(self, dim, dtype);                                                                             \
    ID##Impl(self, dim, dtype, op.maybe_get_output(0));                                                    \
    op.finish();                                                                                           \
    return self;                                                                                           \
  }
METALX_CUMULATIVE(cumsum, cumsum_kernels, true)
METALX_CUMULATIVE(cumprod, cumprod_kernels, false)
#undef METALX_CUMULATIVE

// ---- cummax, cummin ----

// torch's cummax/cummin check the arguments, allocate values (self's dtype) and int64
// indices of self's sizes, handle 0-dim and empty inputs, then call these.
template <const char* kName>
void cumExtremumHelper(KernelFamily& kernels, const at::Tensor& self, at::Tensor& values, at::Tensor& indices,
                       int64_t dim) {
  if (!hasKernel(kernels, self.scalar_type()) || values.scalar_type() != self.scalar_type()) {
    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(kName, "");
    torch::jit::Stack stack{self, values, indices, dim};
    launch::runOutOnCpuFallback(op, stack);
    return;
  }
  if (self.numel() == 0) return;
  scanInto(kernels, self, dim, values, &indices);
}
constexpr char kCummaxHelper[] = "aten::_cummax_helper";
constexpr char kCumminHelper[] = "aten::_cummin_helper";
void cummaxHelper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  cumExtremumHelper<kCummaxHelper>(cummax_kernels, self, values, indices, dim);
}
void cumminHelper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  cumExtremumHelper<kCumminHelper>(cummin_kernels, self, values, indices, dim);
}

// ---- logcumsumexp ----

at::Tensor& logcumsumexpOut(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  if (!hasKernel(logcumsumexp_kernels, self.scalar_type()) || out.scalar_type() != self.scalar_type()) {
    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::_logcumsumexp", "out");
    launch::cpuFallbackOut(op, {out}, self, dim);
    return out;
  }
  at::native::resize_output(out, self.sizes());
  if (self.numel() == 0) return out;
  if (self.dim() == 0) {
    out.copy_(self);  // log(exp(x)) is x, infinities and NaN included
    return out;
  }
  scanInto(logcumsumexp_kernels, self, dim, out);
  return out;
}
at::Tensor logcumsumexp(const at::Tensor& self, int64_t dim) {
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  logcumsumexpOut(self, dim, out);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cumsum", TORCH_FN(cumsum));
  m.impl("cumsum.out", TORCH_FN(cumsumOut));
  m.impl("cumsum_", TORCH_FN(cumsumInplace));
  m.impl("cumprod", TORCH_FN(cumprod));
  m.impl("cumprod.out", TORCH_FN(cumprodOut));
  m.impl("cumprod_", TORCH_FN(cumprodInplace));
  m.impl("_cummax_helper", TORCH_FN(cummaxHelper));
  m.impl("_cummin_helper", TORCH_FN(cumminHelper));
  m.impl("_logcumsumexp", TORCH_FN(logcumsumexp));
  m.impl("_logcumsumexp.out", TORCH_FN(logcumsumexpOut));
}

}  // namespace metalx
