// Binary ops on metalx: arithmetic, comparisons, logical and bitwise ops, as
// kernels/binary.metal through the elementwise launcher, with torch's meta functions
// deciding broadcasting, type promotion and out= rules (backend/launch/structured.h).
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/add_meta.h>
#include <ATen/ops/atan2_meta.h>
#include <ATen/ops/bitwise_and_meta.h>
#include <ATen/ops/bitwise_left_shift_meta.h>
#include <ATen/ops/bitwise_or_meta.h>
#include <ATen/ops/bitwise_right_shift_meta.h>
#include <ATen/ops/bitwise_xor_meta.h>
#include <ATen/ops/copysign_meta.h>
#include <ATen/ops/div_meta.h>
#include <ATen/ops/eq_meta.h>
#include <ATen/ops/fmax_meta.h>
#include <ATen/ops/fmin_meta.h>
#include <ATen/ops/fmod_meta.h>
#include <ATen/ops/ge_meta.h>
#include <ATen/ops/gt_meta.h>
#include <ATen/ops/hypot_meta.h>
#include <ATen/ops/le_meta.h>
#include <ATen/ops/lt_meta.h>
#include <ATen/ops/maximum_meta.h>
#include <ATen/ops/minimum_meta.h>
#include <ATen/ops/mul_meta.h>
#include <ATen/ops/ne_meta.h>
#include <ATen/ops/pow_meta.h>
#include <ATen/ops/remainder_meta.h>
#include <ATen/ops/sub_meta.h>
#include <ATen/ops/xlogy_meta.h>
#include <torch/library.h>

#include <string_view>

#include "launch/structured.h"

namespace metalx {
namespace {

using launch::DTypeSet;
using launch::ElementwiseOp;
using launch::ElementwiseOptions;
using launch::kAllTypes;
using launch::kFloatTypes;
using launch::kIntTypes;
using launch::kNumberTypes;

constexpr DTypeSet kIntAndBool = kIntTypes | DTypeSet{launch::DType::Bool};
// complex64: add, sub, mul, true division, eq and ne (kernels/complex_math.metal).
constexpr DTypeSet kComplex64{launch::DType::Complex64};

// A structured binary op with meta at::meta::structured_<META>(self, other[, extra]):
// functional FUNC, in-place INPLACE ("" for none), out OUT. FAMILY is its
// ElementwiseOp; the extra meta argument, if any, is passed to the kernel as scalars.
#define METALX_BINARY_VARIANTS(ID, META, FAMILY)                                                         \
  at::Tensor ID##_functional(const at::Tensor& self, const at::Tensor& other) {                          \
    return launch::elementwiseFunctional<at::meta::structured_##META>(FAMILY, {}, self, other);          \
  }                                                                                                      \
  at::Tensor& ID##_inplace(at::Tensor& self, const at::Tensor& other) {                                  \
    launch::elementwiseInplace<at::meta::structured_##META>(self, FAMILY, {}, self, other);              \
    return self;                                                                                         \
  }                                                                                                      \
  at::Tensor& ID##_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {               \
    launch::elementwiseOut<at::meta::structured_##META>(out, FAMILY, {}, self, other);                   \
    return out;                                                                                          \
  }

#define METALX_BINARY(ID, KERNEL, DTYPES, OUT_OVERLOAD, ...)                                    \
  ElementwiseOp ID##_def(#KERNEL, DTYPES, "aten::" #ID, OUT_OVERLOAD, ##__VA_ARGS__);           \
  METALX_BINARY_VARIANTS(ID, ID, ID##_def)

#define METALX_BINARY_META(ID, META, KERNEL, DTYPES, OUT_NAME, OUT_OVERLOAD, ...)               \
  ElementwiseOp ID##_def(#KERNEL, DTYPES, OUT_NAME, OUT_OVERLOAD, ##__VA_ARGS__);               \
  METALX_BINARY_VARIANTS(ID, META, ID##_def)

METALX_BINARY_META(mul, mul_Tensor, mul, kAllTypes | kComplex64, "aten::mul", "out", launch::kOpmathScalarB)
METALX_BINARY_META(div_true, div_Tensor, div_true, kFloatTypes | kComplex64, "aten::div", "out", launch::kOpmathScalarB)
METALX_BINARY_META(remainder, remainder_Tensor, remainder, kNumberTypes, "aten::remainder", "Tensor_out",
                   launch::kIntegerDivision)
METALX_BINARY_META(fmod, fmod_Tensor, fmod, kNumberTypes, "aten::fmod", "Tensor_out", launch::kIntegerDivision)
METALX_BINARY_META(pow, pow_Tensor_Tensor, pow, kNumberTypes | kComplex64, "aten::pow", "Tensor_Tensor_out")
METALX_BINARY(atan2, atan2, kFloatTypes, "out")
METALX_BINARY(hypot, hypot, kFloatTypes, "out")
METALX_BINARY(maximum, maximum, kAllTypes, "out")
METALX_BINARY(minimum, minimum, kAllTypes, "out")
METALX_BINARY(fmax, fmax, kNumberTypes, "out")
METALX_BINARY(fmin, fmin, kNumberTypes, "out")
METALX_BINARY_META(copysign, copysign_Tensor, copysign, kFloatTypes, "aten::copysign", "out")
METALX_BINARY_META(xlogy, xlogy_Tensor, xlogy, kFloatTypes, "aten::xlogy", "OutTensor")
METALX_BINARY_META(bitwise_and, bitwise_and_Tensor, bitwise_and, kIntAndBool, "aten::bitwise_and", "Tensor_out")
METALX_BINARY_META(bitwise_or, bitwise_or_Tensor, bitwise_or, kIntAndBool, "aten::bitwise_or", "Tensor_out")
METALX_BINARY_META(bitwise_xor, bitwise_xor_Tensor, bitwise_xor, kIntAndBool, "aten::bitwise_xor", "Tensor_out")
METALX_BINARY_META(lshift, bitwise_left_shift_Tensor, lshift, kIntTypes, "aten::bitwise_left_shift", "Tensor_out")
METALX_BINARY_META(rshift, bitwise_right_shift_Tensor, rshift, kIntTypes, "aten::bitwise_right_shift", "Tensor_out")

// Comparisons: Tensor and Scalar forms, bool results.
#define METALX_COMPARISON(ID, DTYPES)                                                                    \
  ElementwiseOp ID##_tensor_def(#ID, DTYPES, "aten::" #ID, "Tensor_out", launch::kPredicate);            \
  ElementwiseOp ID##_scalar_def(#ID, DTYPES, "aten::" #ID, "Scalar_out", launch::kPredicate);            \
  METALX_BINARY_VARIANTS(ID##_tensor, ID##_Tensor, ID##_tensor_def)                                      \
  at::Tensor ID##_scalar_functional(const at::Tensor& self, const at::Scalar& other) {                   \
    return launch::elementwiseFunctional<at::meta::structured_##ID##_Scalar>(ID##_scalar_def, {}, self,  \
                                                                               other);                  \
  }                                                                                                      \
  at::Tensor& ID##_scalar_inplace(at::Tensor& self, const at::Scalar& other) {                           \
    launch::elementwiseInplace<at::meta::structured_##ID##_Scalar>(self, ID##_scalar_def, {}, self, other); \
    return self;                                                                                         \
  }                                                                                                      \
  at::Tensor& ID##_scalar_out(const at::Tensor& self, const at::Scalar& other, at::Tensor& out) {        \
    launch::elementwiseOut<at::meta::structured_##ID##_Scalar>(out, ID##_scalar_def, {}, self, other);   \
    return out;                                                                                          \
  }
#define METALX_EACH_COMPARISON(X) X(eq) X(ne) X(lt) X(le) X(gt) X(ge)
// Only equality is defined on complex numbers.
METALX_COMPARISON(eq, kAllTypes | kComplex64)
METALX_COMPARISON(ne, kAllTypes | kComplex64)
METALX_COMPARISON(lt, kAllTypes)
METALX_COMPARISON(le, kAllTypes)
METALX_COMPARISON(gt, kAllTypes)
METALX_COMPARISON(ge, kAllTypes)

// ---- add and sub: alpha ----

ElementwiseOp add_def("add", kAllTypes | kComplex64, "aten::add", "out");
ElementwiseOp sub_def("sub", kNumberTypes | kComplex64, "aten::sub", "out");

#define METALX_ALPHA_OP(ID, META)                                                                         \
  at::Tensor ID##_functional(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {  \
    const at::Scalar scalars[] = {alpha};                                                                 \
    return launch::elementwiseFunctional<at::meta::structured_##META>(ID##_def, ElementwiseOptions{scalars}, \
                                                                       self, other, alpha);              \
  }                                                                                                       \
  at::Tensor& ID##_inplace(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {          \
    const at::Scalar scalars[] = {alpha};                                                                 \
    launch::elementwiseInplace<at::meta::structured_##META>(self, ID##_def, ElementwiseOptions{scalars}, self, \
                                                             other, alpha);                              \
    return self;                                                                                          \
  }                                                                                                       \
  at::Tensor& ID##_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha,          \
                       at::Tensor& out) {                                                                 \
    const at::Scalar scalars[] = {alpha};                                                                 \
    launch::elementwiseOut<at::meta::structured_##META>(out, ID##_def, ElementwiseOptions{scalars}, self, \
                                                         other, alpha);                                  \
    return out;                                                                                           \
  }
METALX_ALPHA_OP(add, add_Tensor)
METALX_ALPHA_OP(sub, sub_Tensor)

at::Tensor rsub(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return sub_functional(other, self, alpha);
}

// ---- division with a rounding mode ----

ElementwiseOp div_trunc_def("div_trunc", kNumberTypes, "aten::div", "out_mode",
                            launch::kIntegerDivision | launch::kOpmathScalarB);
ElementwiseOp div_floor_def("div_floor", kNumberTypes, "aten::div", "out_mode",
                            launch::kIntegerDivision | launch::kOpmathScalarB);

template <class Op>
void runDivMode(Op& op, const at::Tensor& self, const at::Tensor& other, std::optional<std::string_view> mode) {
  if (!mode.has_value()) {
    launch::runNative(op, div_true_def, {}, self, other);
    return;
  }
  TORCH_INTERNAL_ASSERT(*mode == "trunc" || *mode == "floor");  // the meta function checked it
  auto& def = *mode == "trunc" ? div_trunc_def : div_floor_def;
  launch::runNative(op, def, {}, self, other, mode);
}

at::Tensor divMode(const at::Tensor& self, const at::Tensor& other, std::optional<std::string_view> mode) {
  launch::FunctionalOp<at::meta::structured_div_Tensor_mode> op;
  op.meta(self, other, mode);
  runDivMode(op, self, other, mode);
  return std::move(op.outputs[0]);
}
at::Tensor& divModeInplace(at::Tensor& self, const at::Tensor& other, std::optional<std::string_view> mode) {
  launch::InplaceOp<at::meta::structured_div_Tensor_mode> op(self);
  op.meta(self, other, mode);
  runDivMode(op, self, other, mode);
  op.finish();
  return self;
}
at::Tensor& divModeOut(const at::Tensor& self, const at::Tensor& other, std::optional<std::string_view> mode,
                       at::Tensor& out) {
  launch::OutOp<at::meta::structured_div_Tensor_mode> op(out);
  op.meta(self, other, mode);
  runDivMode(op, self, other, mode);
  op.finish();
  return out;
}

at::Tensor floorDivide(const at::Tensor& self, const at::Tensor& other) { return divMode(self, other, "floor"); }
at::Tensor& floorDivideInplace(at::Tensor& self, const at::Tensor& other) {
  return divModeInplace(self, other, "floor");
}
at::Tensor& floorDivideOut(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return divModeOut(self, other, "floor", out);
}

// ---- pow with a scalar exponent or base: the tensor-tensor kernel, the scalar inline ----

at::Tensor wrappedScalar(const at::Scalar& s) {
  at::Tensor t = at::scalar_tensor(s, at::TensorOptions().device(at::kCPU).dtype(s.type()));
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

// The one rule of pow(Tensor, Scalar) the tensor-tensor form does not have.
const at::Scalar& checkedExponent(const at::Tensor& self, const at::Scalar& exponent) {
  TORCH_CHECK(!(c10::isIntegralType(self.scalar_type(), true) && exponent.isIntegral(true) && exponent.toLong() < 0),
              "Integers to negative integer powers are not allowed.");
  return exponent;
}
// CPU answers pow(complex tensor, s) for these exponents with other kernels, not with its
// general complex pow, exp(s log z): so 1j ** 2 is exactly -1 there (not cos(pi) + i
// sin(pi)) and inf and NaN parts behave as in those kernels. metalx does the same.
enum class ComplexPow { General, Zero, One, Sqrt, Rsqrt, Reciprocal, Square, Cube, InverseSquare };

ComplexPow complexPowCase(const at::Tensor& self, const at::Scalar& e) {
  if (!self.is_complex()) return ComplexPow::General;
  if (e.equal(0.0) || e.equal(false)) return ComplexPow::Zero;
  if (e.equal(1.0) || e.equal(true)) return ComplexPow::One;
  if (e.equal(0.5)) return ComplexPow::Sqrt;
  if (e.equal(-0.5)) return ComplexPow::Rsqrt;
  if (e.equal(-1.0)) return ComplexPow::Reciprocal;
  if (e.equal(2.0)) return ComplexPow::Square;
  if (e.equal(3.0)) return ComplexPow::Cube;
  if (e.equal(-2.0)) return ComplexPow::InverseSquare;
  return ComplexPow::General;
}

at::Tensor complexPow(const at::Tensor& self, ComplexPow c) {
  switch (c) {
    case ComplexPow::Zero: return at::ones_like(self);
    case ComplexPow::One: return self.clone();
    case ComplexPow::Sqrt: return at::sqrt(self);
    case ComplexPow::Rsqrt: return at::rsqrt(self);
    case ComplexPow::Reciprocal: return at::reciprocal(self);
    case ComplexPow::Square: return at::mul(self, self);
    case ComplexPow::Cube: return at::mul(at::mul(self, self), self);
    case ComplexPow::InverseSquare: return at::reciprocal(at::mul(self, self));
    case ComplexPow::General: break;
  }
  TORCH_INTERNAL_ASSERT(false, "complexPow: no special case");
}

at::Tensor powTensorScalar(const at::Tensor& self, const at::Scalar& exponent) {
  const ComplexPow c = complexPowCase(self, exponent);
  if (c != ComplexPow::General) return complexPow(self, c);
  return pow_functional(self, wrappedScalar(checkedExponent(self, exponent)));
}
at::Tensor& powTensorScalarInplace(at::Tensor& self, const at::Scalar& exponent) {
  const ComplexPow c = complexPowCase(self, exponent);
  if (c != ComplexPow::General) return self.copy_(complexPow(self, c));
  return pow_inplace(self, wrappedScalar(checkedExponent(self, exponent)));
}
at::Tensor& powTensorScalarOut(const at::Tensor& self, const at::Scalar& exponent, at::Tensor& out) {
  const ComplexPow c = complexPowCase(self, exponent);
  if (c != ComplexPow::General && out.scalar_type() == self.scalar_type() && out.device() == self.device()) {
    const at::Tensor result = complexPow(self, c);
    at::native::resize_output(out, result.sizes());
    return out.copy_(result);
  }
  return pow_out(self, wrappedScalar(checkedExponent(self, exponent)), out);
}

// The shift operators (<<, >>) are the bitwise shifts.
at::Tensor lshiftScalar(const at::Tensor& self, const at::Scalar& other) { return lshift_functional(self, wrappedScalar(other)); }
at::Tensor& lshiftScalarInplace(at::Tensor& self, const at::Scalar& other) { return lshift_inplace(self, wrappedScalar(other)); }
at::Tensor rshiftScalar(const at::Tensor& self, const at::Scalar& other) { return rshift_functional(self, wrappedScalar(other)); }
at::Tensor& rshiftScalarInplace(at::Tensor& self, const at::Scalar& other) { return rshift_inplace(self, wrappedScalar(other)); }

// pow(Scalar, Tensor): the base inline. CPU's pow(1, x) is 1 for every x (a NaN or a
// complex infinity too, where exp(x log 1) is NaN): the result, checked and shaped by
// the kernel's call, is then filled with ones.
at::Tensor powScalarBase(const at::Scalar& base, const at::Tensor& exponent) {
  at::Tensor result = pow_functional(wrappedScalar(base), exponent);
  if (base.equal(1.0)) result.fill_(1);
  return result;
}
at::Tensor& powScalarBaseOut(const at::Scalar& base, const at::Tensor& exponent, at::Tensor& out) {
  pow_out(wrappedScalar(base), exponent, out);
  if (base.equal(1.0)) out.fill_(1);
  return out;
}

// ---- logical ops: bool results, inputs promoted to their common dtype ----

#define METALX_LOGICAL(ID)                                                                             \
  ElementwiseOp ID##_def(#ID, kAllTypes, "aten::" #ID, "out", launch::kPredicate);                     \
  at::Tensor& ID##_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {              \
    auto iter = at::TensorIterator::comparison_op(out, self, other);                                   \
    launch::runNative(iter, ID##_def, {}, self, other);                                                \
    return out;                                                                                        \
  }                                                                                                    \
  at::Tensor ID##_functional(const at::Tensor& self, const at::Tensor& other) {                         \
    at::Tensor out = at::empty({0}, self.options().dtype(at::kBool));                                  \
    return metalx::ID##_out(self, other, out);                                                               \
  }                                                                                                    \
  at::Tensor& ID##_inplace(at::Tensor& self, const at::Tensor& other) { return metalx::ID##_out(self, other, self); }
METALX_LOGICAL(logical_and)
METALX_LOGICAL(logical_or)
METALX_LOGICAL(logical_xor)

#define METALX_REGISTER(FUNC, INPLACE, OUT, ID)  \
  m.impl(FUNC, TORCH_FN(ID##_functional));       \
  m.impl(INPLACE, TORCH_FN(ID##_inplace));       \
  m.impl(OUT, TORCH_FN(ID##_out));

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  METALX_REGISTER("add.Tensor", "add_.Tensor", "add.out", add)
  METALX_REGISTER("sub.Tensor", "sub_.Tensor", "sub.out", sub)
  m.impl("rsub.Tensor", TORCH_FN(rsub));
  METALX_REGISTER("mul.Tensor", "mul_.Tensor", "mul.out", mul)
  METALX_REGISTER("div.Tensor", "div_.Tensor", "div.out", div_true)
  m.impl("div.Tensor_mode", TORCH_FN(divMode));
  m.impl("div_.Tensor_mode", TORCH_FN(divModeInplace));
  m.impl("div.out_mode", TORCH_FN(divModeOut));
  m.impl("floor_divide", TORCH_FN(floorDivide));
  m.impl("floor_divide_.Tensor", TORCH_FN(floorDivideInplace));
  m.impl("floor_divide.out", TORCH_FN(floorDivideOut));
  METALX_REGISTER("remainder.Tensor", "remainder_.Tensor", "remainder.Tensor_out", remainder)
  METALX_REGISTER("fmod.Tensor", "fmod_.Tensor", "fmod.Tensor_out", fmod)
  METALX_REGISTER("pow.Tensor_Tensor", "pow_.Tensor", "pow.Tensor_Tensor_out", pow)
  m.impl("pow.Tensor_Scalar", TORCH_FN(powTensorScalar));
  m.impl("pow_.Scalar", TORCH_FN(powTensorScalarInplace));
  m.impl("pow.Tensor_Scalar_out", TORCH_FN(powTensorScalarOut));
  m.impl("pow.Scalar", TORCH_FN(powScalarBase));
  m.impl("pow.Scalar_out", TORCH_FN(powScalarBaseOut));
  METALX_REGISTER("atan2", "atan2_", "atan2.out", atan2)
  METALX_REGISTER("hypot", "hypot_", "hypot.out", hypot)
  m.impl("maximum", TORCH_FN(maximum_functional));
  m.impl("maximum.out", TORCH_FN(maximum_out));
  m.impl("minimum", TORCH_FN(minimum_functional));
  m.impl("minimum.out", TORCH_FN(minimum_out));
  m.impl("fmax", TORCH_FN(fmax_functional));
  m.impl("fmax.out", TORCH_FN(fmax_out));
  m.impl("fmin", TORCH_FN(fmin_functional));
  m.impl("fmin.out", TORCH_FN(fmin_out));
  METALX_REGISTER("copysign.Tensor", "copysign_.Tensor", "copysign.out", copysign)
  METALX_REGISTER("xlogy.Tensor", "xlogy_.Tensor", "xlogy.OutTensor", xlogy)
  METALX_REGISTER("bitwise_and.Tensor", "bitwise_and_.Tensor", "bitwise_and.Tensor_out", bitwise_and)
  METALX_REGISTER("bitwise_or.Tensor", "bitwise_or_.Tensor", "bitwise_or.Tensor_out", bitwise_or)
  METALX_REGISTER("bitwise_xor.Tensor", "bitwise_xor_.Tensor", "bitwise_xor.Tensor_out", bitwise_xor)
  METALX_REGISTER("bitwise_left_shift.Tensor", "bitwise_left_shift_.Tensor", "bitwise_left_shift.Tensor_out",
                  lshift)
  m.impl("__lshift__.Tensor", TORCH_FN(lshift_functional));
  m.impl("__ilshift__.Tensor", TORCH_FN(lshift_inplace));
  m.impl("__rshift__.Tensor", TORCH_FN(rshift_functional));
  m.impl("__irshift__.Tensor", TORCH_FN(rshift_inplace));
  m.impl("__lshift__.Scalar", TORCH_FN(lshiftScalar));
  m.impl("__ilshift__.Scalar", TORCH_FN(lshiftScalarInplace));
  m.impl("__rshift__.Scalar", TORCH_FN(rshiftScalar));
  m.impl("__irshift__.Scalar", TORCH_FN(rshiftScalarInplace));
  METALX_REGISTER("bitwise_right_shift.Tensor", "bitwise_right_shift_.Tensor",
                  "bitwise_right_shift.Tensor_out", rshift)
#define METALX_REGISTER_COMPARISON(ID)                                               \
  METALX_REGISTER(#ID ".Tensor", #ID "_.Tensor", #ID ".Tensor_out", ID##_tensor)     \
  METALX_REGISTER(#ID ".Scalar", #ID "_.Scalar", #ID ".Scalar_out", ID##_scalar)
  METALX_EACH_COMPARISON(METALX_REGISTER_COMPARISON)
  METALX_REGISTER("logical_and", "logical_and_", "logical_and.out", logical_and)
  METALX_REGISTER("logical_or", "logical_or_", "logical_or.out", logical_or)
  METALX_REGISTER("logical_xor", "logical_xor_", "logical_xor.out", logical_xor)
}

}  // namespace
}  // namespace metalx
