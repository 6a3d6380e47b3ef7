// Unary math on metalx: kernels/unary.metal through the elementwise launcher
// (backend/launch/elementwise.h), with torch's own meta functions deciding shapes,
// dtypes and out= rules (backend/launch/structured.h). float64 (but reciprocal) and
// complex128 inputs run on the CPU fallback; complex64 has kernels for the ops in
// kernels/complex_math.metal, and abs/angle/nan_to_num of complex64 run on its (real, imag) view.
#include <ATen/ATen.h>
#include <ATen/ops/exp_meta.h>
#include <ATen/ops/exp2_meta.h>
#include <ATen/ops/expm1_meta.h>
#include <ATen/ops/log_meta.h>
#include <ATen/ops/log2_meta.h>
#include <ATen/ops/log10_meta.h>
#include <ATen/ops/log1p_meta.h>
#include <ATen/ops/sqrt_meta.h>
#include <ATen/ops/rsqrt_meta.h>
#include <ATen/ops/reciprocal_meta.h>
#include <ATen/ops/sin_meta.h>
#include <ATen/ops/cos_meta.h>
#include <ATen/ops/tan_meta.h>
#include <ATen/ops/asin_meta.h>
#include <ATen/ops/acos_meta.h>
#include <ATen/ops/atan_meta.h>
#include <ATen/ops/sinh_meta.h>
#include <ATen/ops/cosh_meta.h>
#include <ATen/ops/tanh_meta.h>
#include <ATen/ops/asinh_meta.h>
#include <ATen/ops/acosh_meta.h>
#include <ATen/ops/atanh_meta.h>
#include <ATen/ops/erf_meta.h>
#include <ATen/ops/erfc_meta.h>
#include <ATen/ops/erfinv_meta.h>
#include <ATen/ops/sigmoid_meta.h>
#include <ATen/ops/lgamma_meta.h>
#include <ATen/ops/digamma_meta.h>
#include <ATen/ops/frac_meta.h>
#include <ATen/ops/neg_meta.h>
#include <ATen/ops/sign_meta.h>
#include <ATen/ops/isneginf_meta.h>
#include <ATen/ops/isposinf_meta.h>
#include <ATen/ops/signbit_meta.h>
#include <ATen/ops/ceil_meta.h>
#include <ATen/ops/floor_meta.h>
#include <ATen/ops/trunc_meta.h>
#include <ATen/ops/round_meta.h>
#include <ATen/ops/sgn_meta.h>
#include <ATen/ops/bitwise_not_meta.h>
#include <ATen/ops/atan2.h>
#include <ATen/ops/hypot.h>
#include <ATen/ops/view_as_real.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "launch/structured.h"

namespace metalx {
namespace {

using launch::ElementwiseOp;
using launch::ElementwiseOptions;
using launch::elementwiseFunctional;
using launch::elementwiseInplace;
using launch::elementwiseOut;

// A structured unary op: NAME, NAME_ and NAME.out with meta at::meta::structured_NAME,
// on the kernels "<KERNEL>_*" for DTYPES.
#define METALX_STRUCTURED_UNARY(NAME, KERNEL, DTYPES, ...)                                             \
  ElementwiseOp NAME##_def(#KERNEL, launch::DTYPES, "aten::" #NAME, "out", ##__VA_ARGS__);             \
  at::Tensor NAME##_functional(const at::Tensor& self) {                                               \
    return elementwiseFunctional<at::meta::structured_##NAME>(NAME##_def, {}, self);                   \
  }                                                                                                    \
  at::Tensor& NAME##_inplace(at::Tensor& self) {                                                       \
    elementwiseInplace<at::meta::structured_##NAME>(self, NAME##_def, {}, self);                       \
    return self;                                                                                       \
  }                                                                                                    \
  at::Tensor& NAME##_out(const at::Tensor& self, at::Tensor& out) {                                    \
    elementwiseOut<at::meta::structured_##NAME>(out, NAME##_def, {}, self);                            \
    return out;                                                                                        \
  }

constexpr launch::DTypeSet kComplex64{launch::DType::Complex64};

#define METALX_FLOAT_UNARY(NAME) METALX_STRUCTURED_UNARY(NAME, NAME, kFloatTypes)
#define METALX_EACH_FLOAT_UNARY(X)                                                                   \
  X(erf) X(erfc) X(erfinv) X(lgamma) X(digamma) X(frac)
METALX_EACH_FLOAT_UNARY(METALX_FLOAT_UNARY)
// The floating ops with a complex64 kernel too.
#define METALX_FLOAT_COMPLEX_UNARY(NAME) METALX_STRUCTURED_UNARY(NAME, NAME, kFloatTypes | kComplex64)
#define METALX_EACH_FLOAT_COMPLEX_UNARY(X)                                                        \
  X(exp) X(exp2) X(expm1) X(log) X(log2) X(log10) X(log1p) X(sqrt) X(rsqrt) X(sin) X(cos) X(tan) \
  X(asin) X(acos) X(atan) X(sinh) X(cosh) X(tanh) X(asinh) X(acosh) X(atanh) X(sigmoid)
METALX_EACH_FLOAT_COMPLEX_UNARY(METALX_FLOAT_COMPLEX_UNARY)
// reciprocal also has a float64 kernel (integer arithmetic: kernels/float64_bits.h).
constexpr launch::DTypeSet kFloat64{launch::DType::Float64};
METALX_STRUCTURED_UNARY(reciprocal, reciprocal, kFloatTypes | kFloat64 | kComplex64)

// Ops defined on every number type (the identity for integer rounding).
#define METALX_NUMBER_UNARY(NAME) METALX_STRUCTURED_UNARY(NAME, NAME, kNumberTypes)
#define METALX_EACH_NUMBER_UNARY(X) X(sign) X(ceil) X(floor) X(trunc) X(round)
METALX_EACH_NUMBER_UNARY(METALX_NUMBER_UNARY)
METALX_STRUCTURED_UNARY(neg, neg, kNumberTypes | kComplex64)
METALX_STRUCTURED_UNARY(signbit, signbit, kNumberTypes, launch::kPredicate)
// No in-place forms. Integer and bool inputs (all false) take the CPU path.
METALX_STRUCTURED_UNARY(isposinf, isposinf, kFloatTypes, launch::kPredicate)
METALX_STRUCTURED_UNARY(isneginf, isneginf, kFloatTypes, launch::kPredicate)

// sgn is sign for real tensors; complex64's sgn (z / |z|) is the "sign" kernel of that dtype.
METALX_STRUCTURED_UNARY(sgn, sign, kNumberTypes | kComplex64)
METALX_STRUCTURED_UNARY(bitwise_not, bitwise_not, kIntTypes | launch::DTypeSet{launch::DType::Bool})

// ---- round(decimals) ----

ElementwiseOp round_decimals_def("round_decimals", launch::kFloatTypes, "aten::round", "decimals_out");

// decimals == 0 is plain rounding; otherwise the kernel scales by 10^|decimals|.
template <class Op>
void runRoundDecimals(Op& op, const at::Tensor& self, int64_t decimals) {
  if (decimals == 0) {
    launch::runNative(op, round_def, {}, self);
    return;
  }
  const at::Scalar scalars[] = {std::pow(10.0, static_cast<double>(std::abs(decimals))), decimals < 0 ? 1.0 : 0.0};
  launch::runNative(op, round_decimals_def, ElementwiseOptions{scalars}, self, decimals);
}

at::Tensor roundDecimals(const at::Tensor& self, int64_t decimals) {
  launch::FunctionalOp<at::meta::structured_round_decimals> op;
  op.meta(self, decimals);
  runRoundDecimals(op, self, decimals);
  return std::move(op.outputs[0]);
}
at::Tensor& roundDecimalsInplace(at::Tensor& self, int64_t decimals) {
  launch::InplaceOp<at::meta::structured_round_decimals> op(self);
  op.meta(self, decimals);
  runRoundDecimals(op, self, decimals);
  op.finish();
  return self;
}
at::Tensor& roundDecimalsOut(const at::Tensor& self, int64_t decimals, at::Tensor& out) {
  launch::OutOp<at::meta::structured_round_decimals> op(out);
  op.meta(self, decimals);
  runRoundDecimals(op, self, decimals);
  op.finish();
  return out;
}

// ---- ops torch does not make structured: their iterators are built as CPU builds them ----

ElementwiseOp abs_def("abs", launch::kNumberTypes, "aten::abs", "out");

bool isRealNative(const at::Tensor& t) {
  return !t.is_complex() && launch::kernelDtype(t.scalar_type()).has_value();
}

// complex64 tensors whose abs and angle run natively: a float32 result, computed from
// the (real, imag) view by the real hypot and atan2 kernels (CPU's complex abs is a
// hypot too). Other result dtypes (CPU casts its result to them) take the fallback.
bool isComplexNative(const at::Tensor& self, const at::Tensor& out) {
  return self.scalar_type() == at::kComplexFloat && (!out.defined() || out.scalar_type() == at::kFloat);
}
at::Tensor realView(const at::Tensor& self) { return at::view_as_real(self.resolve_conj()); }

at::Tensor& absOut(const at::Tensor& self, at::Tensor& out) {
  if (isComplexNative(self, out)) {
    const at::Tensor parts = realView(self);
    return at::hypot_out(out, parts.select(-1, 0), parts.select(-1, 1));
  }
  if (!isRealNative(self)) {
    launch::cpuFallbackOut(abs_def.outOperator(), {out}, self);
    return out;
  }
  auto iter = at::TensorIterator::unary_op(out, self);
  launch::runNative(iter, abs_def, {}, self);
  return out;
}
// Another op's CPU fallback with these arguments (abs of complex: a real result, and
// in-place refused, by CPU's own rules).
template <class... Args>
c10::IValue fallbackOp(const char* name, const char* overload, const Args&... args) {
  torch::jit::Stack stack{args...};
  launch::runOutOnCpuFallback(c10::Dispatcher::singleton().findSchemaOrThrow(name, overload), stack);
  return stack.back();
}
at::Tensor absFunctional(const at::Tensor& self) {
  if (isComplexNative(self, {})) {
    const at::Tensor parts = realView(self);
    return at::hypot(parts.select(-1, 0), parts.select(-1, 1));
  }
  if (!isRealNative(self)) return fallbackOp("aten::abs", "", self).toTensor();
  at::Tensor out = at::empty({0}, self.options());
  return absOut(self, out);
}
at::Tensor& absInplace(at::Tensor& self) {
  if (!isRealNative(self)) {
    fallbackOp("aten::abs_", "", self);
    return self;
  }
  return absOut(self, self);
}

// angle: atan2(imag, real) for complex64; real inputs (0 or pi) take the CPU path.
at::Tensor& angleOut(const at::Tensor& self, at::Tensor& out) {
  if (!isComplexNative(self, out)) {
    fallbackOp("aten::angle", "out", self, out);
    return out;
  }
  const at::Tensor parts = realView(self);
  return at::atan2_out(out, parts.select(-1, 1), parts.select(-1, 0));
}
at::Tensor angle(const at::Tensor& self) {
  if (!isComplexNative(self, {})) return fallbackOp("aten::angle", "", self).toTensor();
  const at::Tensor parts = realView(self);
  return at::atan2(parts.select(-1, 1), parts.select(-1, 0));
}

// conj_physical: the conjugate written out (complex64's kernel); for real dtypes CPU's
// kernel is a copy, which the fallback does. conj_physical_ is registered too: torch's
// composite for it calls a DispatchStub metalx has no entry in.
ElementwiseOp conj_physical_def("conj_physical", kComplex64, "aten::conj_physical", "out");

at::Tensor& conjPhysicalOut(const at::Tensor& self, at::Tensor& out) {
  auto iter = at::TensorIterator::unary_op(out, self);
  launch::runNative(iter, conj_physical_def, {}, self);
  return out;
}
at::Tensor& conjPhysicalInplace(at::Tensor& self) {
  if (!self.is_complex()) return self;  // as CPU: nothing to do for real tensors
  return conjPhysicalOut(self, self);
}

// isnan: x != x, as CPU defines it, on the native ne (real and complex64 kernels).
at::Tensor isnan(const at::Tensor& self) { return self.ne(self); }

ElementwiseOp logit_def("logit", launch::kFloatTypes, "aten::logit", "out");

at::Tensor& logitOut(const at::Tensor& self, std::optional<double> eps, at::Tensor& out) {
  auto iter = at::TensorIterator::unary_float_op(out, self);
  const at::Scalar scalars[] = {eps.value_or(0.0), eps.has_value() ? 1.0 : 0.0};
  launch::runNative(iter, logit_def, ElementwiseOptions{scalars}, self, eps);
  return out;
}
at::Tensor logitFunctional(const at::Tensor& self, std::optional<double> eps) {
  at::Tensor out;
  auto iter = at::TensorIterator::unary_float_op(out, self);
  const at::Scalar scalars[] = {eps.value_or(0.0), eps.has_value() ? 1.0 : 0.0};
  launch::runNative(iter, logit_def, ElementwiseOptions{scalars}, self, eps);
  return iter.output();
}
at::Tensor& logitInplace(at::Tensor& self, std::optional<double> eps) { return logitOut(self, eps, self); }

ElementwiseOp nan_to_num_def("nan_to_num", launch::kFloatTypes, "aten::nan_to_num", "out");

at::Tensor& nanToNumOut(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                        std::optional<double> neginf, at::Tensor& out) {
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "nan_to_num: dtype of out: ", out.scalar_type(),
              " should be same as input: ", self.scalar_type());
  if (c10::isIntegralType(self.scalar_type(), /*includeBool=*/true)) {
    at::native::resize_output(out, self.sizes());
    out.copy_(self);
    return out;
  }
  // complex64: CPU replaces NaN and infinities in each part alone, which is the float
  // op on the (real, imag) view.
  if (self.scalar_type() == at::kComplexFloat) {
    at::native::resize_output(out, self.sizes());
    at::Tensor out_parts = at::view_as_real(out);
    nanToNumOut(at::view_as_real(self.resolve_conj()), nan, posinf, neginf, out_parts);
    return out;
  }
  // The replacements, in the dtype's range (CPU's defaults: the dtype's largest and
  // lowest finite values).
  double hi = std::numeric_limits<float>::max(), lo = std::numeric_limits<float>::lowest();
  if (self.scalar_type() == at::kHalf) hi = 65504.0, lo = -65504.0;
  if (self.scalar_type() == at::kBFloat16) hi = 3.3895313892515355e38, lo = -hi;
  const at::Scalar scalars[] = {nan.value_or(0.0), posinf.value_or(hi), neginf.value_or(lo)};
  auto iter = at::TensorIterator::unary_op(out, self);
  launch::runNative(iter, nan_to_num_def, ElementwiseOptions{scalars}, self, nan, posinf, neginf);
  return out;
}
at::Tensor nanToNum(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                    std::optional<double> neginf) {
  at::Tensor out = at::empty_like(self);
  return nanToNumOut(self, nan, posinf, neginf, out);
}
at::Tensor& nanToNumInplace(at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                            std::optional<double> neginf) {
  return nanToNumOut(self, nan, posinf, neginf, self);
}

ElementwiseOp logical_not_def("logical_not", launch::kAllTypes, "aten::logical_not", "out", launch::kPredicate);

at::Tensor& logicalNotOut(const at::Tensor& self, at::Tensor& out) {
  at::TensorIteratorConfig config;
  config.check_all_same_dtype(false).add_output(out).add_const_input(self);
  auto iter = config.build();
  launch::runNative(iter, logical_not_def, {}, self);
  return out;
}
at::Tensor logicalNot(const at::Tensor& self) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kBool));
  return logicalNotOut(self, out);
}
at::Tensor& logicalNotInplace(at::Tensor& self) { return logicalNotOut(self, self); }

// mvlgamma.out: torch's mvlgamma (lgamma over a dyadic arange, summed, all native) into
// `out`, as CPU's out variant does; without this the out= form would run CPU's kernel.
at::Tensor& mvlgammaOut(const at::Tensor& self, int64_t p, at::Tensor& out) {
  at::Tensor result = at::mvlgamma(self, p);
  TORCH_CHECK(at::can_cast(result.scalar_type(), out.scalar_type()), "mvlgamma: result type ",
              result.scalar_type(), " can't be cast to the desired output type ", out.scalar_type());
  at::native::resize_output(out, result.sizes());
  return out.copy_(result);
}

#define METALX_REGISTER_UNARY(NAME)                  \
  m.impl(#NAME, TORCH_FN(NAME##_functional));        \
  m.impl(#NAME "_", TORCH_FN(NAME##_inplace));       \
  m.impl(#NAME ".out", TORCH_FN(NAME##_out));

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  METALX_EACH_FLOAT_UNARY(METALX_REGISTER_UNARY)
  METALX_EACH_FLOAT_COMPLEX_UNARY(METALX_REGISTER_UNARY)
  METALX_REGISTER_UNARY(neg)
  METALX_EACH_NUMBER_UNARY(METALX_REGISTER_UNARY)
  METALX_REGISTER_UNARY(signbit)
  METALX_REGISTER_UNARY(reciprocal)
  m.impl("isposinf", TORCH_FN(isposinf_functional));
  m.impl("isposinf.out", TORCH_FN(isposinf_out));
  m.impl("isneginf", TORCH_FN(isneginf_functional));
  m.impl("isneginf.out", TORCH_FN(isneginf_out));
  METALX_REGISTER_UNARY(sgn)
  METALX_REGISTER_UNARY(bitwise_not)
  m.impl("round.decimals", TORCH_FN(roundDecimals));
  m.impl("round_.decimals", TORCH_FN(roundDecimalsInplace));
  m.impl("round.decimals_out", TORCH_FN(roundDecimalsOut));
  m.impl("abs", TORCH_FN(absFunctional));
  m.impl("abs_", TORCH_FN(absInplace));
  m.impl("abs.out", TORCH_FN(absOut));
  m.impl("isnan", TORCH_FN(isnan));
  m.impl("angle", TORCH_FN(angle));
  m.impl("angle.out", TORCH_FN(angleOut));
  m.impl("conj_physical.out", TORCH_FN(conjPhysicalOut));
  m.impl("conj_physical_", TORCH_FN(conjPhysicalInplace));
  m.impl("logit", TORCH_FN(logitFunctional));
  m.impl("logit_", TORCH_FN(logitInplace));
  m.impl("logit.out", TORCH_FN(logitOut));
  m.impl("nan_to_num", TORCH_FN(nanToNum));
  m.impl("nan_to_num_", TORCH_FN(nanToNumInplace));
  m.impl("nan_to_num.out", TORCH_FN(nanToNumOut));
  m.impl("logical_not", TORCH_FN(logicalNot));
  m.impl("logical_not_", TORCH_FN(logicalNotInplace));
  m.impl("logical_not.out", TORCH_FN(logicalNotOut));
  m.impl("mvlgamma.out", TORCH_FN(mvlgammaOut));
}

}  // namespace
}  // namespace metalx
