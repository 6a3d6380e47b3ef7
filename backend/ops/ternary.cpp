// where, clamp (and clamp_min/clamp_max), lerp, addcmul and addcdiv on metalx:
// kernels/ternary.metal through the elementwise launcher.
#include <ATen/ATen.h>
#include <ATen/ops/addcdiv_meta.h>
#include <ATen/ops/addcmul_meta.h>
#include <ATen/ops/clamp_max_meta.h>
#include <ATen/ops/clamp_meta.h>
#include <ATen/ops/clamp_min_meta.h>
#include <ATen/ops/lerp_meta.h>
#include <torch/library.h>

#include <initializer_list>

#include "launch/structured.h"

namespace metalx {
namespace {

using launch::ElementwiseOp;
using launch::ElementwiseOptions;
using launch::kAllTypes;
using launch::kFloatTypes;
using launch::kNumberTypes;
using Scalars = std::initializer_list<at::Scalar>;

// ---- where ----

// complex64: where, lerp, addcmul and addcdiv (kernels/ternary.metal's complex section).
constexpr launch::DTypeSet kComplex64{launch::DType::Complex64};
ElementwiseOp where_def("where", kAllTypes | kComplex64, "aten::where", "self_out");

at::Tensor& whereOut(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  const c10::ScalarType result_type = at::result_type(self, other);
  TORCH_CHECK(out.scalar_type() == result_type, "Expected out type to be ", result_type, " but got ",
              out.scalar_type());
  at::Tensor cond = condition;
  if (cond.scalar_type() == at::kByte) {
    TORCH_WARN_ONCE("where received a uint8 condition tensor. This behavior is deprecated and will be removed "
                    "in a future version of PyTorch. Use a boolean condition instead.");
    cond = cond.to(at::kBool);
  }
  TORCH_CHECK(cond.scalar_type() == at::kBool, "where expected condition to be a boolean tensor, but got a "
              "tensor with dtype ", condition.scalar_type());
  const at::Tensor a = self.scalar_type() == result_type ? self : self.to(result_type);
  const at::Tensor b = other.scalar_type() == result_type ? other : other.to(result_type);
  at::TensorIteratorConfig config;
  config.check_all_same_dtype(false).allow_cpu_scalars(true).add_output(out).add_const_input(cond).add_const_input(a)
      .add_const_input(b);
  auto iter = config.build();
  ElementwiseOptions options;
  options.first_typed_input = 1;
  launch::runNative(iter, where_def, options, condition, self, other);
  return out;
}
at::Tensor where(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  const c10::Device device = self.device().is_cpu() && other.device().is_cpu() ? condition.device()
                             : self.device().is_cpu() ? other.device() : self.device();
  at::Tensor out = at::empty({0}, self.options().device(device).dtype(at::result_type(self, other)));
  return whereOut(condition, self, other, out);
}

// masked_fill_: self = mask ? value : self, as where into self (the value in self's dtype).
at::Tensor& maskedFillScalar(at::Tensor& self, const at::Tensor& mask, const at::Scalar& value) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  const at::Tensor v = at::scalar_tensor(value, at::TensorOptions().device(at::kCPU).dtype(self.scalar_type()));
  return whereOut(mask, v, self, self);
}
at::Tensor& maskedFillTensor(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  if (value.device().is_cpu()) return maskedFillScalar(self, mask, value.item());
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  return whereOut(mask, value.to(self.scalar_type()), self, self);
}

// ---- clamp with scalar bounds ----

ElementwiseOp clamp_scalar_def("clamp_scalar", kNumberTypes, "aten::clamp", "out");
ElementwiseOp clamp_min_scalar_def("clamp_scalar", kNumberTypes, "aten::clamp_min", "out");
ElementwiseOp clamp_max_scalar_def("clamp_scalar", kNumberTypes, "aten::clamp_max", "out");

at::OptionalScalarRef ref(const std::optional<at::Scalar>& s) {
  return s.has_value() ? at::OptionalScalarRef(&s.value()) : at::OptionalScalarRef();
}

// The kernel's scalars: min, max, has min, has max.
template <class Op, class... Args>
void runClampScalar(Op& op, ElementwiseOp& def, const std::optional<at::Scalar>& min,
                    const std::optional<at::Scalar>& max, const Args&... fallback_args) {
  const at::Scalar scalars[] = {min.value_or(0), max.value_or(0), min.has_value(), max.has_value()};
  launch::runNative(op, def, ElementwiseOptions{scalars}, fallback_args...);
}

at::Tensor clamp(const at::Tensor& self, const std::optional<at::Scalar>& min, const std::optional<at::Scalar>& max) {
  launch::FunctionalOp<at::meta::structured_clamp> op;
  op.meta(self, ref(min), ref(max));
  runClampScalar(op, clamp_scalar_def, min, max, self, min, max);
  return std::move(op.outputs[0]);
}
at::Tensor& clampInplace(at::Tensor& self, const std::optional<at::Scalar>& min, const std::optional<at::Scalar>& max) {
  launch::InplaceOp<at::meta::structured_clamp> op(self);
  op.meta(self, ref(min), ref(max));
  runClampScalar(op, clamp_scalar_def, min, max, self, min, max);
  op.finish();
  return self;
}
at::Tensor& clampOut(const at::Tensor& self, const std::optional<at::Scalar>& min, const std::optional<at::Scalar>& max,
                     at::Tensor& out) {
  launch::OutOp<at::meta::structured_clamp> op(out);
  op.meta(self, ref(min), ref(max));
  runClampScalar(op, clamp_scalar_def, min, max, self, min, max);
  op.finish();
  return out;
}

#define METALX_CLAMP_ONE_SIDE(ID, MIN, MAX)                                                              \
  at::Tensor ID(const at::Tensor& self, const at::Scalar& bound) {                                        \
    launch::FunctionalOp<at::meta::structured_##ID> op;                                                   \
    op.meta(self, bound);                                                                                 \
    runClampScalar(op, ID##_scalar_def, MIN, MAX, self, bound);                                           \
    return std::move(op.outputs[0]);                                                                      \
  }                                                                                                       \
  at::Tensor& ID##Inplace(at::Tensor& self, const at::Scalar& bound) {                                    \
    launch::InplaceOp<at::meta::structured_##ID> op(self);                                                \
    op.meta(self, bound);                                                                                 \
    runClampScalar(op, ID##_scalar_def, MIN, MAX, self, bound);                                           \
    op.finish();                                                                                          \
    return self;                                                                                          \
  }                                                                                                       \
  at::Tensor& ID##Out(const at::Tensor& self, const at::Scalar& bound, at::Tensor& out) {                 \
    launch::OutOp<at::meta::structured_##ID> op(out);                                                     \
    op.meta(self, bound);                                                                                 \
    runClampScalar(op, ID##_scalar_def, MIN, MAX, self, bound);                                           \
    op.finish();                                                                                          \
    return out;                                                                                           \
  }
METALX_CLAMP_ONE_SIDE(clamp_min, bound, std::nullopt)
METALX_CLAMP_ONE_SIDE(clamp_max, std::nullopt, bound)

// ---- clamp with tensor bounds: the iterator has the bounds given, in order ----

ElementwiseOp clamp_def("clamp", kNumberTypes, "aten::clamp", "Tensor_out");
ElementwiseOp clamp_min_def("clamp_min", kNumberTypes, "aten::clamp", "Tensor_out");
ElementwiseOp clamp_max_def("clamp_max", kNumberTypes, "aten::clamp", "Tensor_out");

at::OptionalTensorRef ref(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? at::OptionalTensorRef(*t) : at::OptionalTensorRef();
}

template <class Op>
void runClampTensor(Op& op, const at::Tensor& self, const std::optional<at::Tensor>& min,
                    const std::optional<at::Tensor>& max) {
  const bool has_min = min.has_value() && min->defined(), has_max = max.has_value() && max->defined();
  ElementwiseOp& def = has_min && has_max ? clamp_def : has_min ? clamp_min_def : clamp_max_def;
  launch::runNative(op, def, {}, self, min, max);
}

at::Tensor clampTensor(const at::Tensor& self, const std::optional<at::Tensor>& min,
                       const std::optional<at::Tensor>& max) {
  launch::FunctionalOp<at::meta::structured_clamp_Tensor> op;
  op.meta(self, ref(min), ref(max));
  runClampTensor(op, self, min, max);
  return std::move(op.outputs[0]);
}
at::Tensor& clampTensorInplace(at::Tensor& self, const std::optional<at::Tensor>& min,
                               const std::optional<at::Tensor>& max) {
  launch::InplaceOp<at::meta::structured_clamp_Tensor> op(self);
  op.meta(self, ref(min), ref(max));
  runClampTensor(op, self, min, max);
  op.finish();
  return self;
}
at::Tensor& clampTensorOut(const at::Tensor& self, const std::optional<at::Tensor>& min,
                           const std::optional<at::Tensor>& max, at::Tensor& out) {
  launch::OutOp<at::meta::structured_clamp_Tensor> op(out);
  op.meta(self, ref(min), ref(max));
  runClampTensor(op, self, min, max);
  op.finish();
  return out;
}

ElementwiseOp clamp_min_tensor_def("clamp_min", kNumberTypes, "aten::clamp_min", "Tensor_out");
ElementwiseOp clamp_max_tensor_def("clamp_max", kNumberTypes, "aten::clamp_max", "Tensor_out");

#define METALX_STRUCTURED_TERNARYISH(ID, META, DEF, SCALARS, PARAMS, OUT_PARAMS, ...)                      \
  at::Tensor ID##_functional PARAMS {                                                                      \
    return launch::elementwiseFunctional<at::meta::structured_##META>(DEF, ElementwiseOptions{SCALARS},     \
                                                                       __VA_ARGS__);                       \
  }                                                                                                        \
  at::Tensor& ID##_inplace PARAMS_INPLACE_##ID {                                                           \
    launch::elementwiseInplace<at::meta::structured_##META>(self, DEF, ElementwiseOptions{SCALARS},         \
                                                             __VA_ARGS__);                                 \
    return self;                                                                                           \
  }                                                                                                        \
  at::Tensor& ID##_out OUT_PARAMS {                                                                        \
    launch::elementwiseOut<at::meta::structured_##META>(out, DEF, ElementwiseOptions{SCALARS}, __VA_ARGS__); \
    return out;                                                                                            \
  }

#define PARAMS_INPLACE_clamp_min_tensor (at::Tensor & self, const at::Tensor& bound)
#define PARAMS_INPLACE_clamp_max_tensor (at::Tensor & self, const at::Tensor& bound)
METALX_STRUCTURED_TERNARYISH(clamp_min_tensor, clamp_min_Tensor, clamp_min_tensor_def, {},
                             (const at::Tensor& self, const at::Tensor& bound),
                             (const at::Tensor& self, const at::Tensor& bound, at::Tensor& out), self, bound)
METALX_STRUCTURED_TERNARYISH(clamp_max_tensor, clamp_max_Tensor, clamp_max_tensor_def, {},
                             (const at::Tensor& self, const at::Tensor& bound),
                             (const at::Tensor& self, const at::Tensor& bound, at::Tensor& out), self, bound)

// ---- lerp ----

ElementwiseOp lerp_scalar_def("lerp_scalar", kFloatTypes | kComplex64, "aten::lerp", "Scalar_out");
ElementwiseOp lerp_tensor_def("lerp", kFloatTypes | kComplex64, "aten::lerp", "Tensor_out");
#define PARAMS_INPLACE_lerp_scalar (at::Tensor & self, const at::Tensor& end, const at::Scalar& weight)
#define PARAMS_INPLACE_lerp_tensor (at::Tensor & self, const at::Tensor& end, const at::Tensor& weight)
METALX_STRUCTURED_TERNARYISH(lerp_scalar, lerp_Scalar, lerp_scalar_def, (Scalars{weight}),
                             (const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight),
                             (const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight, at::Tensor& out),
                             self, end, weight)
METALX_STRUCTURED_TERNARYISH(lerp_tensor, lerp_Tensor, lerp_tensor_def, {},
                             (const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight),
                             (const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight, at::Tensor& out),
                             self, end, weight)

// ---- addcmul / addcdiv ----

ElementwiseOp addcmul_def("addcmul", kNumberTypes | kComplex64, "aten::addcmul", "out");
ElementwiseOp addcdiv_def("addcdiv", kFloatTypes | kComplex64, "aten::addcdiv", "out");
#define METALX_ADDC_PARAMS const at::Tensor &tensor1, const at::Tensor &tensor2, const at::Scalar &value
#define PARAMS_INPLACE_addcmul (at::Tensor & self, METALX_ADDC_PARAMS)
#define PARAMS_INPLACE_addcdiv (at::Tensor & self, METALX_ADDC_PARAMS)
METALX_STRUCTURED_TERNARYISH(addcmul, addcmul, addcmul_def, (Scalars{value}), (const at::Tensor& self, METALX_ADDC_PARAMS),
                             (const at::Tensor& self, METALX_ADDC_PARAMS, at::Tensor& out), self, tensor1, tensor2, value)
METALX_STRUCTURED_TERNARYISH(addcdiv, addcdiv, addcdiv_def, (Scalars{value}), (const at::Tensor& self, METALX_ADDC_PARAMS),
                             (const at::Tensor& self, METALX_ADDC_PARAMS, at::Tensor& out), self, tensor1, tensor2, value)

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("where.self", TORCH_FN(where));
  m.impl("where.self_out", TORCH_FN(whereOut));
  m.impl("masked_fill_.Scalar", TORCH_FN(maskedFillScalar));
  m.impl("masked_fill_.Tensor", TORCH_FN(maskedFillTensor));
  m.impl("clamp", TORCH_FN(clamp));
  m.impl("clamp_", TORCH_FN(clampInplace));
  m.impl("clamp.out", TORCH_FN(clampOut));
  m.impl("clamp_min", TORCH_FN(clamp_min));
  m.impl("clamp_min_", TORCH_FN(clamp_minInplace));
  m.impl("clamp_min.out", TORCH_FN(clamp_minOut));
  m.impl("clamp_max", TORCH_FN(clamp_max));
  m.impl("clamp_max_", TORCH_FN(clamp_maxInplace));
  m.impl("clamp_max.out", TORCH_FN(clamp_maxOut));
  m.impl("clamp.Tensor", TORCH_FN(clampTensor));
  m.impl("clamp_.Tensor", TORCH_FN(clampTensorInplace));
  m.impl("clamp.Tensor_out", TORCH_FN(clampTensorOut));
#define METALX_REGISTER(FUNC, INPLACE, OUT, ID) \
  m.impl(FUNC, TORCH_FN(ID##_functional));      \
  m.impl(INPLACE, TORCH_FN(ID##_inplace));      \
  m.impl(OUT, TORCH_FN(ID##_out));
  METALX_REGISTER("clamp_min.Tensor", "clamp_min_.Tensor", "clamp_min.Tensor_out", clamp_min_tensor)
  METALX_REGISTER("clamp_max.Tensor", "clamp_max_.Tensor", "clamp_max.Tensor_out", clamp_max_tensor)
  METALX_REGISTER("lerp.Scalar", "lerp_.Scalar", "lerp.Scalar_out", lerp_scalar)
  METALX_REGISTER("lerp.Tensor", "lerp_.Tensor", "lerp.Tensor_out", lerp_tensor)
  METALX_REGISTER("addcmul", "addcmul_", "addcmul.out", addcmul)
  METALX_REGISTER("addcdiv", "addcdiv_", "addcdiv.out", addcdiv)
}

}  // namespace
}  // namespace metalx
