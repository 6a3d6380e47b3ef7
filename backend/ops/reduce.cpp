// Reductions on metalx: sum, mean, prod, amax/amin, argmax/argmin, max/min (values and
// indices), aminmax, any/all, count_nonzero, vector norms, var/std (and var_mean/
// std_mean), through kernels/reduce.metal (backend/launch/reduce.h). torch's meta
// functions give the output shapes and dtypes where the op is structured; float64,
// complex128 and layouts past the kernels' limits run on the CPU fallback. complex64
// sum and mean reduce the tensor's (real, imag) float view, its vector norms the float
// abs, var/std add the two parts' variances; its prod has kernels of its own.
// (logsumexp decomposes into amax, sub, exp, sum and log, all native.)
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/all_meta.h>
#include <ATen/ops/amax_meta.h>
#include <ATen/ops/amin_meta.h>
#include <ATen/ops/aminmax_meta.h>
#include <ATen/ops/any_meta.h>
#include <ATen/ops/argmax_meta.h>
#include <ATen/ops/argmin_meta.h>
#include <ATen/ops/linalg_vector_norm_meta.h>
#include <ATen/ops/max_meta.h>
#include <ATen/ops/mean_meta.h>
#include <ATen/ops/min_meta.h>
#include <ATen/ops/prod_meta.h>
#include <ATen/ops/sum_meta.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "launch/reduce.h"
#include "launch/structured.h"

namespace metalx {
namespace {

using launch::DTypeSet;
using launch::KernelFamily;
using launch::kAllTypes;
using launch::kFloatTypes;

// What the kernels write for an input dtype.
enum class Output { Same, LongForIntegers, Long, Bool };

c10::ScalarType naturalOutput(Output kind, c10::ScalarType in) {
  switch (kind) {
    case Output::Same: return in;
    case Output::LongForIntegers: return c10::isIntegralType(in, /*includeBool=*/true) ? at::kLong : in;
    case Output::Long: return at::kLong;
    case Output::Bool: return at::kBool;
  }
  return in;
}

struct ReduceOp {
  KernelFamily kernels;
  Output output;
  double empty_value;  // the result of reducing no elements
};

ReduceOp sum_op{{"sum", kAllTypes}, Output::LongForIntegers, 0.0};
ReduceOp mean_op{{"sum", kFloatTypes}, Output::Same, std::nan("")};
// complex64 products have kernels of their own (sums and means reduce the (real, imag) view).
ReduceOp prod_op{{"prod", kAllTypes | launch::DTypeSet{launch::DType::Complex64}}, Output::LongForIntegers, 1.0};
ReduceOp amax_op{{"amax", kAllTypes}, Output::Same, 0.0};
ReduceOp amin_op{{"amin", kAllTypes}, Output::Same, 0.0};
ReduceOp argmax_op{{"argmax", kAllTypes}, Output::Same, 0.0};
ReduceOp argmin_op{{"argmin", kAllTypes}, Output::Same, 0.0};
ReduceOp any_op{{"any", kAllTypes}, Output::Bool, 0.0};
ReduceOp all_op{{"all", kAllTypes}, Output::Bool, 1.0};
ReduceOp count_nonzero_op{{"count_nonzero", kAllTypes}, Output::Long, 0.0};
ReduceOp norm2_op{{"norm2", kFloatTypes}, Output::Same, 0.0};
ReduceOp norm1_op{{"norm1", kFloatTypes}, Output::Same, 0.0};
ReduceOp norm0_op{{"norm0", kFloatTypes}, Output::Same, 0.0};
ReduceOp normp_op{{"normp", kFloatTypes}, Output::Same, 0.0};
ReduceOp norminf_op{{"norminf", kFloatTypes}, Output::Same, 0.0};
ReduceOp normninf_op{{"normninf", kFloatTypes}, Output::Same, 0.0};
ReduceOp var_op{{"var", kFloatTypes}, Output::Same, std::nan("")};
ReduceOp var_mean_op{{"var_mean", kFloatTypes}, Output::Same, std::nan("")};

std::vector<int64_t> wrapDims(const at::Tensor& self, at::OptionalIntArrayRef dims) {
  std::vector<int64_t> wrapped;
  if (!dims.has_value()) return wrapped;
  for (int64_t d : *dims) wrapped.push_back(at::maybe_wrap_dim(d, self.dim()));
  std::sort(wrapped.begin(), wrapped.end());
  wrapped.erase(std::unique(wrapped.begin(), wrapped.end()), wrapped.end());
  return wrapped;
}

// Reduces `input` (cast to `compute` first, if given) over `dims` into `out` (and
// `indices`). Returns false, touching nothing, when no kernel has the dtype.
bool reduceInto(ReduceOp& op, const at::Tensor& self, const std::vector<int64_t>& dims, const at::Tensor& out,
                const at::Tensor* indices = nullptr, std::array<float, 4> scalars = {1.0f, 0, 0, 0},
                std::optional<c10::ScalarType> compute = std::nullopt) {
  const c10::ScalarType in_type = compute.value_or(self.scalar_type());
  const auto dtype = launch::kernelDtype(in_type);
  if (!dtype || !op.kernels.supports(*dtype) || !launch::kernelDtype(out.scalar_type())) return false;
  at::Tensor input = self.scalar_type() == in_type ? self : self.to(in_type);
  const c10::ScalarType natural = naturalOutput(op.output, in_type);
  at::Tensor target = out.scalar_type() == natural ? out : at::empty(out.sizes(), out.options().dtype(natural));
  if (out.numel() == 0) return true;
  if (launch::reducedSize(input, dims) == 0) {
    target.fill_(op.empty_value);
  } else {
    launch::ReductionRequest request{&input, dims, &target, indices, scalars};
    if (!launch::runReduction(op.kernels, request)) {
      input = input.contiguous();
      request.input = &input;
      TORCH_INTERNAL_ASSERT(launch::runReduction(op.kernels, request));
    }
  }
  if (!target.is_same(out)) const_cast<at::Tensor&>(out).copy_(target);
  return true;
}

// sum or mean (`op`) of a complex64 tensor into complex64 `out`: the same reduction of
// its float (real, imag) view, whose last dim is kept, into `out`'s view.
bool complexReduceInto(ReduceOp& op, const at::Tensor& self, const std::vector<int64_t>& dims, const at::Tensor& out,
                       std::array<float, 4> scalars, std::optional<c10::ScalarType> compute) {
  if (self.scalar_type() != at::kComplexFloat || out.scalar_type() != at::kComplexFloat ||
      compute.value_or(at::kComplexFloat) != at::kComplexFloat)
    return false;
  if (self.dim() == 0) {  // nothing to reduce; a mean of one element is itself too
    const_cast<at::Tensor&>(out).copy_(self);
    return true;
  }
  std::vector<int64_t> view_dims = dims;
  if (view_dims.empty())
    for (int64_t d = 0; d < self.dim(); ++d) view_dims.push_back(d);
  return reduceInto(op, at::view_as_real(self.resolve_conj()), view_dims, at::view_as_real(out), nullptr, scalars,
                    at::kFloat);
}

template <class... Args>
void fallbackOut(const char* name, const char* overload, std::initializer_list<at::Tensor> outs, const Args&... args) {
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  launch::cpuFallbackOut(op, at::ArrayRef<at::Tensor>(outs.begin(), outs.size()), args...);
}

std::optional<std::vector<int64_t>> boxed(at::OptionalIntArrayRef dims) {
  if (!dims.has_value()) return std::nullopt;
  return dims->vec();
}

// ---- sum, mean, prod ----

void sumImpl(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<c10::ScalarType> dtype,
             const at::Tensor& out) {
  // A float dtype= accumulates the input as that dtype, as CPU does.
  std::optional<c10::ScalarType> compute;
  if (dtype && c10::isFloatingType(*dtype)) compute = dtype;
  const auto dims = wrapDims(self, dim);
  if (!complexReduceInto(sum_op, self, dims, out, {0, 0, 0, 0}, dtype) &&
      !reduceInto(sum_op, self, dims, out, nullptr, {0, 0, 0, 0}, compute))
    fallbackOut("aten::sum", "IntList_out", {out}, self, boxed(dim), keepdim, dtype);
}
at::Tensor sumDim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                  std::optional<c10::ScalarType> dtype) {
  launch::FunctionalOp<at::meta::structured_sum_dim_IntList> op;
  op.meta(self, dim, keepdim, dtype);
  sumImpl(self, dim, keepdim, dtype, op.outputs[0]);
  return std::move(op.outputs[0]);
}
at::Tensor& sumOut(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  launch::OutOp<at::meta::structured_sum_dim_IntList> op(out);
  op.meta(self, dim, keepdim, dtype);
  sumImpl(self, dim, keepdim, dtype, op.maybe_get_output(0));
  op.finish();
  return out;
}

// The mean kernels' scalars: the count of elements each output averages.
std::array<float, 4> meanScalars(const at::Tensor& self, const std::vector<int64_t>& dims) {
  return {0, static_cast<float>(launch::reducedSize(self, dims)), 0, 0};
}

void meanImpl(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<c10::ScalarType> dtype,
              const at::Tensor& out) {
  const auto dims = wrapDims(self, dim);
  const c10::ScalarType compute = dtype.value_or(self.scalar_type());
  const std::array<float, 4> scalars = meanScalars(self, dims);
  if (!complexReduceInto(mean_op, self, dims, out, scalars, compute) &&
      !reduceInto(mean_op, self, dims, out, nullptr, scalars, compute))
    fallbackOut("aten::mean", "out", {out}, self, boxed(dim), keepdim, dtype);
}
at::Tensor meanDim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<c10::ScalarType> dtype) {
  launch::FunctionalOp<at::meta::structured_mean_dim> op;
  op.meta(self, dim, keepdim, dtype);
  meanImpl(self, dim, keepdim, dtype, op.outputs[0]);
  return std::move(op.outputs[0]);
}
at::Tensor& meanOut(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  launch::OutOp<at::meta::structured_mean_dim> op(out);
  op.meta(self, dim, keepdim, dtype);
  meanImpl(self, dim, keepdim, dtype, op.maybe_get_output(0));
  op.finish();
  return out;
}

void prodImpl(const at::Tensor& self, std::vector<int64_t> dims, std::optional<c10::ScalarType> dtype,
              const at::Tensor& out, const std::function<void()>& fallback) {
  std::optional<c10::ScalarType> compute;
  if (dtype && c10::isFloatingType(*dtype)) compute = dtype;
  if (!reduceInto(prod_op, self, dims, out, nullptr, {1.0f, 0, 0, 0}, compute)) fallback();
}
at::Tensor prodDim(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<c10::ScalarType> dtype) {
  launch::FunctionalOp<at::meta::structured_prod_dim_int> op;
  op.meta(self, dim, keepdim, dtype);
  const at::Tensor& out = op.outputs[0];
  prodImpl(self, {at::maybe_wrap_dim(dim, self.dim())}, dtype, out,
           [&] { fallbackOut("aten::prod", "int_out", {out}, self, dim, keepdim, dtype); });
  return std::move(op.outputs[0]);
}
at::Tensor& prodDimOut(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<c10::ScalarType> dtype,
                       at::Tensor& out) {
  launch::OutOp<at::meta::structured_prod_dim_int> op(out);
  op.meta(self, dim, keepdim, dtype);
  const at::Tensor& target = op.maybe_get_output(0);
  prodImpl(self, {at::maybe_wrap_dim(dim, self.dim())}, dtype, target,
           [&] { fallbackOut("aten::prod", "int_out", {target}, self, dim, keepdim, dtype); });
  op.finish();
  return out;
}
at::Tensor prodAll(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  const c10::ScalarType out_type =
      dtype.value_or(c10::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type());
  at::Tensor out = at::empty({}, self.options().dtype(out_type));
  prodImpl(self, {}, dtype, out, [&] {
    torch::jit::Stack stack{self, dtype};
    launch::runOutOnCpuFallback(c10::Dispatcher::singleton().findSchemaOrThrow("aten::prod", ""), stack);
    out = stack.back().toTensor();
  });
  return out;
}

// ---- amax, amin, argmax, argmin, max/min with indices, aminmax ----

#define METALX_EXTREMUM(ID, OP)                                                                          \
  at::Tensor ID(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {                            \
    launch::FunctionalOp<at::meta::structured_##ID> op;                                                 \
    op.meta(self, dim, keepdim);                                                                        \
    if (!reduceInto(OP, self, wrapDims(self, dim), op.outputs[0]))                                      \
      fallbackOut("aten::" #ID, "out", {op.outputs[0]}, self, dim.vec(), keepdim);                      \
    return std::move(op.outputs[0]);                                                                    \
  }                                                                                                     \
  at::Tensor& ID##Out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {     \
    launch::OutOp<at::meta::structured_##ID> op(out);                                                   \
    op.meta(self, dim, keepdim);                                                                        \
    if (!reduceInto(OP, self, wrapDims(self, dim), op.maybe_get_output(0)))                             \
      fallbackOut("aten::" #ID, "out", {op.maybe_get_output(0)}, self, dim.vec(), keepdim);             \
    op.finish();                                                                                        \
    return out;                                                                                         \
  }
METALX_EXTREMUM(amax, amax_op)
METALX_EXTREMUM(amin, amin_op)

// The arg reductions write values and indices; argmax/argmin keep only the indices.
bool argReduce(ReduceOp& op, const at::Tensor& self, std::vector<int64_t> dims, const at::Tensor& values,
               const at::Tensor& indices) {
  return reduceInto(op, self, dims, values, &indices);
}

#define METALX_ARG(ID, OP)                                                                               \
  void ID##Impl(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, const at::Tensor& out) { \
    std::vector<int64_t> dims;                                                                          \
    if (dim) dims.push_back(at::maybe_wrap_dim(*dim, self.dim()));                                      \
    at::Tensor values = at::empty(out.sizes(), out.options().dtype(self.scalar_type()));               \
    if (!argReduce(OP, self, dims, values, out)) fallbackOut("aten::" #ID, "out", {out}, self, dim, keepdim); \
  }                                                                                                     \
  at::Tensor ID(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {                     \
    launch::FunctionalOp<at::meta::structured_##ID> op;                                                 \
    op.meta(self, dim, keepdim);                                                                        \
    ID##Impl(self, dim, keepdim, op.outputs[0]);                                                        \
    return std::move(op.outputs[0]);                                                                    \
  }                                                                                                     \
  at::Tensor& ID##Out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) { \
    launch::OutOp<at::meta::structured_##ID> op(out);                                                   \
    op.meta(self, dim, keepdim);                                                                        \
    ID##Impl(self, dim, keepdim, op.maybe_get_output(0));                                               \
    op.finish();                                                                                        \
    return out;                                                                                         \
  }
METALX_ARG(argmax, argmax_op)
METALX_ARG(argmin, argmin_op)

#define METALX_VALUES_INDICES(ID, META, OP)                                                              \
  std::tuple<at::Tensor, at::Tensor> ID##Dim(const at::Tensor& self, int64_t dim, bool keepdim) {        \
    launch::FunctionalOp<at::meta::structured_##META, 2> op;                                            \
    op.meta(self, dim, keepdim);                                                                        \
    if (!argReduce(OP, self, {at::maybe_wrap_dim(dim, self.dim())}, op.outputs[0], op.outputs[1]))      \
      fallbackOut("aten::" #ID, "dim_" #ID, {op.outputs[0], op.outputs[1]}, self, dim, keepdim);        \
    return {std::move(op.outputs[0]), std::move(op.outputs[1])};                                        \
  }                                                                                                     \
  std::tuple<at::Tensor&, at::Tensor&> ID##DimOut(const at::Tensor& self, int64_t dim, bool keepdim,     \
                                                  at::Tensor& values, at::Tensor& indices) {             \
    launch::OutOp<at::meta::structured_##META, 2> op(values, indices);                                  \
    op.meta(self, dim, keepdim);                                                                        \
    if (!argReduce(OP, self, {at::maybe_wrap_dim(dim, self.dim())}, op.maybe_get_output(0),             \
                   op.maybe_get_output(1)))                                                             \
      fallbackOut("aten::" #ID, "dim_" #ID, {op.maybe_get_output(0), op.maybe_get_output(1)}, self, dim, \
                  keepdim);                                                                             \
    op.finish();                                                                                        \
    return {values, indices};                                                                           \
  }                                                                                                     \
  at::Tensor ID##All(const at::Tensor& self) {                                                          \
    TORCH_CHECK(self.numel() > 0, #ID "(): Expected reduction dim to be specified for input.numel() == 0. " \
                "Specify the reduction dim with the 'dim' argument.");                                  \
    return at::a##ID(self, {}, false);                                                                  \
  }
METALX_VALUES_INDICES(max, max_dim, argmax_op)
METALX_VALUES_INDICES(min, min_dim, argmin_op)

void aminmaxImpl(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, const at::Tensor& min,
                 const at::Tensor& max) {
  std::vector<int64_t> dims;
  if (dim) dims.push_back(at::maybe_wrap_dim(*dim, self.dim()));
  // A 0-dim input reduced over dim 0 is itself.
  if (!reduceInto(amin_op, self, dims, min) || !reduceInto(amax_op, self, dims, max))
    fallbackOut("aten::aminmax", "out", {min, max}, self, dim, keepdim);
}
std::tuple<at::Tensor, at::Tensor> aminmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  launch::FunctionalOp<at::meta::structured_aminmax, 2> op;
  op.meta(self, dim, keepdim);
  aminmaxImpl(self, dim, keepdim, op.outputs[0], op.outputs[1]);
  return {std::move(op.outputs[0]), std::move(op.outputs[1])};
}
std::tuple<at::Tensor&, at::Tensor&> aminmaxOut(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                                                at::Tensor& min, at::Tensor& max) {
  launch::OutOp<at::meta::structured_aminmax, 2> op(min, max);
  op.meta(self, dim, keepdim);
  aminmaxImpl(self, dim, keepdim, op.maybe_get_output(0), op.maybe_get_output(1));
  op.finish();
  return {min, max};
}

// ---- any, all ----

#define METALX_ANY_ALL(ID, OP)                                                                           \
  at::Tensor ID##Dims(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {               \
    launch::FunctionalOp<at::meta::structured_##ID##_dims> op;                                          \
    op.meta(self, dim, keepdim);                                                                        \
    if (!reduceInto(OP, self, wrapDims(self, dim), op.outputs[0]))                                      \
      fallbackOut("aten::" #ID, "dims_out", {op.outputs[0]}, self, boxed(dim), keepdim);                \
    return std::move(op.outputs[0]);                                                                    \
  }                                                                                                     \
  at::Tensor& ID##DimsOut(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, at::Tensor& out) { \
    launch::OutOp<at::meta::structured_##ID##_dims> op(out);                                            \
    op.meta(self, dim, keepdim);                                                                        \
    if (!reduceInto(OP, self, wrapDims(self, dim), op.maybe_get_output(0)))                             \
      fallbackOut("aten::" #ID, "dims_out", {op.maybe_get_output(0)}, self, boxed(dim), keepdim);       \
    op.finish();                                                                                        \
    return out;                                                                                         \
  }                                                                                                     \
  at::Tensor ID##Dim(const at::Tensor& self, int64_t dim, bool keepdim) {                               \
    const int64_t dims[] = {dim};                                                                       \
    return ID##Dims(self, dims, keepdim);                                                               \
  }                                                                                                     \
  at::Tensor& ID##DimOut(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {          \
    const int64_t dims[] = {dim};                                                                       \
    return ID##DimsOut(self, dims, keepdim, out);                                                       \
  }                                                                                                     \
  at::Tensor ID##All(const at::Tensor& self) { return ID##Dims(self, std::nullopt, false); }            \
  at::Tensor& ID##AllOut(const at::Tensor& self, at::Tensor& out) {                                     \
    return ID##DimsOut(self, std::nullopt, false, out);                                                 \
  }
METALX_ANY_ALL(any, any_op)
METALX_ANY_ALL(all, all_op)

// ---- count_nonzero ----

std::vector<int64_t> reducedShape(const at::Tensor& self, const std::vector<int64_t>& dims, bool keepdim) {
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < self.dim(); ++d) {
    const bool reduced = dims.empty() || std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) shape.push_back(self.size(d));
    else if (keepdim) shape.push_back(1);
  }
  return shape;
}

at::Tensor countNonzero(const at::Tensor& self, at::IntArrayRef dim) {
  const auto dims = wrapDims(self, dim);
  at::Tensor out = at::empty(reducedShape(self, dims, false), self.options().dtype(at::kLong));
  if (!reduceInto(count_nonzero_op, self, dims, out)) {
    torch::jit::Stack stack{self, dim.vec()};
    launch::runOutOnCpuFallback(
        c10::Dispatcher::singleton().findSchemaOrThrow("aten::count_nonzero", "dim_IntList"), stack);
    return stack.back().toTensor();
  }
  return out;
}

// ---- vector norms ----

ReduceOp& normOp(double ord, std::array<float, 4>& scalars) {
  if (ord == 2.0) return norm2_op;
  if (ord == 1.0) return norm1_op;
  if (ord == 0.0) return norm0_op;
  if (std::isinf(ord)) return ord > 0 ? norminf_op : normninf_op;
  scalars[0] = static_cast<float>(ord);
  return normp_op;
}
void vectorNormImpl(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<c10::ScalarType> dtype, const at::Tensor& out) {
  std::array<float, 4> scalars = {1.0f, 0, 0, 0};
  ReduceOp& op = normOp(ord.toDouble(), scalars);
  // An empty input's inf-norm is an error CPU raises; leave such inputs to it.
  const auto dims = wrapDims(self, dim);
  const bool empty_extremum = std::isinf(ord.toDouble()) && launch::reducedSize(self, dims) == 0;
  const c10::ScalarType compute = dtype.value_or(self.scalar_type());
  // complex64: the norm of |z| (a float32 tensor, computed natively), as CPU does.
  if (!empty_extremum && self.scalar_type() == at::kComplexFloat && compute == at::kComplexFloat &&
      reduceInto(op, at::abs(self), dims, out, nullptr, scalars, at::kFloat))
    return;
  if (empty_extremum || self.is_complex() || !reduceInto(op, self, dims, out, nullptr, scalars, compute))
    fallbackOut("aten::linalg_vector_norm", "out", {out}, self, ord, boxed(dim), keepdim, dtype);
}
at::Tensor vectorNorm(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                      std::optional<c10::ScalarType> dtype) {
  launch::FunctionalOp<at::meta::structured_linalg_vector_norm> op;
  op.meta(self, ord, dim, keepdim, dtype);
  vectorNormImpl(self, ord, dim, keepdim, dtype, op.outputs[0]);
  return std::move(op.outputs[0]);
}
at::Tensor& vectorNormOut(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                          std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  launch::OutOp<at::meta::structured_linalg_vector_norm> op(out);
  op.meta(self, ord, dim, keepdim, dtype);
  vectorNormImpl(self, ord, dim, keepdim, dtype, op.maybe_get_output(0));
  op.finish();
  return out;
}

// ---- var, std, var_mean, std_mean ----

// The kernel's scalars: correction, 1 for std.
bool varInto(const at::Tensor& self, const std::vector<int64_t>& dims, double correction, bool std_dev,
             const at::Tensor& out, const at::Tensor* mean) {
  // complex64 (a float result): CPU's variance of the real parts plus that of the
  // imaginary parts, then the square root for std; var_mean's mean is the complex
  // mean (mean's own kernel on the (real, imag) view).
  if (self.scalar_type() == at::kComplexFloat && out.scalar_type() == at::kFloat &&
      (!mean || mean->scalar_type() == at::kComplexFloat)) {
    const at::Tensor parts = at::view_as_real(self.resolve_conj());
    const at::Tensor imag_var = at::empty_like(out);
    if (!varInto(parts.select(-1, 0), dims, correction, false, out, nullptr) ||
        !varInto(parts.select(-1, 1), dims, correction, false, imag_var, nullptr))
      return false;
    const_cast<at::Tensor&>(out).add_(imag_var);
    if (std_dev) const_cast<at::Tensor&>(out).sqrt_();
    if (mean)
      TORCH_INTERNAL_ASSERT(complexReduceInto(mean_op, self, dims, *mean, meanScalars(self, dims), at::kComplexFloat));
    return true;
  }
  if (!c10::isFloatingType(self.scalar_type()) || !launch::kernelDtype(self.scalar_type())) return false;
  const std::array<float, 4> scalars = {static_cast<float>(correction), std_dev ? 1.0f : 0.0f, 0, 0};
  if (!reduceInto(var_op, self, dims, out, nullptr, scalars)) return false;
  if (mean) TORCH_INTERNAL_ASSERT(reduceInto(var_mean_op, self, dims, *mean, nullptr, scalars));
  return true;
}

#define METALX_VAR(ID, STD)                                                                              \
  at::Tensor ID(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction, \
                bool keepdim) {                                                                         \
    const auto dims = wrapDims(self, dim);                                                              \
    at::Tensor out = at::empty(reducedShape(self, dims, keepdim),                                       \
                               self.options().dtype(c10::toRealValueType(self.scalar_type())));         \
    if (!varInto(self, dims, correction ? correction->toDouble() : 1.0, STD, out, nullptr)) {           \
      torch::jit::Stack stack{self, boxed(dim), correction, keepdim};                                   \
      launch::runOutOnCpuFallback(c10::Dispatcher::singleton().findSchemaOrThrow("aten::" #ID, "correction"), \
                                  stack);                                                               \
      return stack.back().toTensor();                                                                   \
    }                                                                                                   \
    return out;                                                                                         \
  }                                                                                                     \
  std::tuple<at::Tensor, at::Tensor> ID##Mean(const at::Tensor& self, at::OptionalIntArrayRef dim,       \
                                              const std::optional<at::Scalar>& correction, bool keepdim) { \
    const auto dims = wrapDims(self, dim);                                                              \
    at::Tensor mean = at::empty(reducedShape(self, dims, keepdim), self.options());                     \
    at::Tensor out = at::empty_like(mean, mean.options().dtype(c10::toRealValueType(self.scalar_type()))); \
    if (!varInto(self, dims, correction ? correction->toDouble() : 1.0, STD, out, &mean)) {             \
      torch::jit::Stack stack{self, boxed(dim), correction, keepdim};                                   \
      launch::runOutOnCpuFallback(                                                                      \
          c10::Dispatcher::singleton().findSchemaOrThrow("aten::" #ID "_mean", "correction"), stack);    \
      return {stack[stack.size() - 2].toTensor(), stack.back().toTensor()};                             \
    }                                                                                                   \
    return {out, mean};                                                                                 \
  }
METALX_VAR(var, false)
METALX_VAR(std, true)

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sum.dim_IntList", TORCH_FN(sumDim));
  m.impl("sum.IntList_out", TORCH_FN(sumOut));
  m.impl("mean.dim", TORCH_FN(meanDim));
  m.impl("mean.out", TORCH_FN(meanOut));
  m.impl("prod.dim_int", TORCH_FN(prodDim));
  m.impl("prod.int_out", TORCH_FN(prodDimOut));
  m.impl("prod", TORCH_FN(prodAll));
  m.impl("amax", TORCH_FN(amax));
  m.impl("amax.out", TORCH_FN(amaxOut));
  m.impl("amin", TORCH_FN(amin));
  m.impl("amin.out", TORCH_FN(aminOut));
  m.impl("argmax", TORCH_FN(argmax));
  m.impl("argmax.out", TORCH_FN(argmaxOut));
  m.impl("argmin", TORCH_FN(argmin));
  m.impl("argmin.out", TORCH_FN(argminOut));
  m.impl("max.dim", TORCH_FN(maxDim));
  m.impl("max.dim_max", TORCH_FN(maxDimOut));
  m.impl("max", TORCH_FN(maxAll));
  m.impl("min.dim", TORCH_FN(minDim));
  m.impl("min.dim_min", TORCH_FN(minDimOut));
  m.impl("min", TORCH_FN(minAll));
  m.impl("aminmax", TORCH_FN(aminmax));
  m.impl("aminmax.out", TORCH_FN(aminmaxOut));
  m.impl("any.dims", TORCH_FN(anyDims));
  m.impl("any.dims_out", TORCH_FN(anyDimsOut));
  m.impl("any.dim", TORCH_FN(anyDim));
  m.impl("any.out", TORCH_FN(anyDimOut));
  m.impl("any", TORCH_FN(anyAll));
  m.impl("any.all_out", TORCH_FN(anyAllOut));
  m.impl("all.dims", TORCH_FN(allDims));
  m.impl("all.dims_out", TORCH_FN(allDimsOut));
  m.impl("all.dim", TORCH_FN(allDim));
  m.impl("all.out", TORCH_FN(allDimOut));
  m.impl("all", TORCH_FN(allAll));
  m.impl("all.all_out", TORCH_FN(allAllOut));
  m.impl("count_nonzero.dim_IntList", TORCH_FN(countNonzero));
  m.impl("linalg_vector_norm", TORCH_FN(vectorNorm));
  m.impl("linalg_vector_norm.out", TORCH_FN(vectorNormOut));
  m.impl("var.correction", TORCH_FN(var));
  m.impl("std.correction", TORCH_FN(std));
  m.impl("var_mean.correction", TORCH_FN(varMean));
  m.impl("std_mean.correction", TORCH_FN(stdMean));
}

}  // namespace
}  // namespace metalx
