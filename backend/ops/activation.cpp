// Activations and their gradients on metalx: kernels/activation.metal through the
// elementwise launcher. Operand orders and shapes come from torch's meta functions
// (structured ops) or are built as CPU builds them (hardswish, hardtanh_backward,
// mish_backward, log_sigmoid): the kernels' comments name each op's operand order.
#include <ATen/ATen.h>
#include <ATen/ops/elu_backward_meta.h>
#include <ATen/ops/elu_meta.h>
#include <ATen/ops/gelu_backward_meta.h>
#include <ATen/ops/gelu_meta.h>
#include <ATen/ops/hardshrink_backward_meta.h>
#include <ATen/ops/hardshrink_meta.h>
#include <ATen/ops/hardsigmoid_backward_meta.h>
#include <ATen/ops/hardsigmoid_meta.h>
#include <ATen/ops/leaky_relu_backward_meta.h>
#include <ATen/ops/leaky_relu_meta.h>
#include <ATen/ops/mish_meta.h>
#include <ATen/ops/sigmoid_backward_meta.h>
#include <ATen/ops/silu_backward_meta.h>
#include <ATen/ops/silu_meta.h>
#include <ATen/ops/softplus_backward_meta.h>
#include <ATen/ops/softplus_meta.h>
#include <ATen/ops/softshrink_backward_meta.h>
#include <ATen/ops/softshrink_meta.h>
#include <ATen/ops/tanh_backward_meta.h>
#include <ATen/ops/threshold_backward_meta.h>
#include <ATen/ops/threshold_meta.h>
#include <torch/library.h>

#include <initializer_list>
#include <string_view>

#include "launch/structured.h"

namespace metalx {
namespace {

using launch::ElementwiseOp;
using launch::ElementwiseOptions;
using launch::kFloatTypes;
using launch::kNumberTypes;
using Scalars = std::initializer_list<at::Scalar>;

// A structured op's functional, in-place and out variants. PARAMS / OUT_PARAMS: the
// C++ parameter lists; the trailing arguments: the meta function's arguments.
#define METALX_STRUCTURED_FUNCTIONAL(ID, META, DEF, SCALARS, PARAMS, ...)                             \
  at::Tensor ID##_functional PARAMS {                                                                  \
    return launch::elementwiseFunctional<at::meta::structured_##META>(DEF, ElementwiseOptions{SCALARS}, \
                                                                       __VA_ARGS__);                   \
  }
#define METALX_STRUCTURED_INPLACE(ID, META, DEF, SCALARS, PARAMS, ...)                                \
  at::Tensor& ID##_inplace PARAMS {                                                                    \
    launch::elementwiseInplace<at::meta::structured_##META>(self, DEF, ElementwiseOptions{SCALARS},     \
                                                             __VA_ARGS__);                             \
    return self;                                                                                       \
  }
#define METALX_STRUCTURED_OUT(ID, META, DEF, SCALARS, OUT_PARAMS, ...)                                \
  at::Tensor& ID##_out OUT_PARAMS {                                                                    \
    launch::elementwiseOut<at::meta::structured_##META>(out, DEF, ElementwiseOptions{SCALARS},         \
                                                         __VA_ARGS__);                                 \
    return out;                                                                                        \
  }

// ---- forward ----

ElementwiseOp threshold_def("threshold", kNumberTypes, "aten::threshold", "out");
METALX_STRUCTURED_FUNCTIONAL(threshold, threshold, threshold_def, (Scalars{threshold, value}),
                             (const at::Tensor& self, const at::Scalar& threshold, const at::Scalar& value), self,
                             threshold, value)
METALX_STRUCTURED_INPLACE(threshold, threshold, threshold_def, (Scalars{threshold, value}),
                          (at::Tensor & self, const at::Scalar& threshold, const at::Scalar& value), self,
                          threshold, value)
METALX_STRUCTURED_OUT(threshold, threshold, threshold_def, (Scalars{threshold, value}),
                      (const at::Tensor& self, const at::Scalar& threshold, const at::Scalar& value, at::Tensor& out),
                      self, threshold, value)

ElementwiseOp leaky_relu_def("leaky_relu", kFloatTypes, "aten::leaky_relu", "out");
METALX_STRUCTURED_FUNCTIONAL(leaky_relu, leaky_relu, leaky_relu_def, (Scalars{slope}),
                             (const at::Tensor& self, const at::Scalar& slope), self, slope)
METALX_STRUCTURED_INPLACE(leaky_relu, leaky_relu, leaky_relu_def, (Scalars{slope}),
                          (at::Tensor & self, const at::Scalar& slope), self, slope)
METALX_STRUCTURED_OUT(leaky_relu, leaky_relu, leaky_relu_def, (Scalars{slope}),
                      (const at::Tensor& self, const at::Scalar& slope, at::Tensor& out), self, slope)

ElementwiseOp elu_def("elu", kFloatTypes, "aten::elu", "out");
#define METALX_ELU_PARAMS const at::Scalar &alpha, const at::Scalar &scale, const at::Scalar &input_scale
METALX_STRUCTURED_FUNCTIONAL(elu, elu, elu_def, (Scalars{alpha, scale, input_scale}),
                             (const at::Tensor& self, METALX_ELU_PARAMS), self, alpha, scale, input_scale)
METALX_STRUCTURED_INPLACE(elu, elu, elu_def, (Scalars{alpha, scale, input_scale}),
                          (at::Tensor & self, METALX_ELU_PARAMS), self, alpha, scale, input_scale)
METALX_STRUCTURED_OUT(elu, elu, elu_def, (Scalars{alpha, scale, input_scale}),
                      (const at::Tensor& self, METALX_ELU_PARAMS, at::Tensor& out), self, alpha, scale, input_scale)

// gelu: "none" or "tanh" picks the kernel (the meta function checked the string).
ElementwiseOp gelu_def("gelu", kFloatTypes, "aten::gelu", "out");
ElementwiseOp gelu_tanh_def("gelu_tanh", kFloatTypes, "aten::gelu", "out");
ElementwiseOp& geluDef(std::string_view approximate) { return approximate == "tanh" ? gelu_tanh_def : gelu_def; }
METALX_STRUCTURED_FUNCTIONAL(gelu, gelu, geluDef(approximate), {},
                             (const at::Tensor& self, std::string_view approximate), self, approximate)
METALX_STRUCTURED_INPLACE(gelu, gelu, geluDef(approximate), {}, (at::Tensor & self, std::string_view approximate),
                          self, approximate)
METALX_STRUCTURED_OUT(gelu, gelu, geluDef(approximate), {},
                      (const at::Tensor& self, std::string_view approximate, at::Tensor& out), self, approximate)

#define METALX_PLAIN_ACTIVATION(ID)                                                                        \
  ElementwiseOp ID##_def(#ID, kFloatTypes, "aten::" #ID, "out");                                           \
  METALX_STRUCTURED_FUNCTIONAL(ID, ID, ID##_def, {}, (const at::Tensor& self), self)                       \
  METALX_STRUCTURED_INPLACE(ID, ID, ID##_def, {}, (at::Tensor & self), self)                               \
  METALX_STRUCTURED_OUT(ID, ID, ID##_def, {}, (const at::Tensor& self, at::Tensor& out), self)
METALX_PLAIN_ACTIVATION(silu)
METALX_PLAIN_ACTIVATION(mish)
METALX_PLAIN_ACTIVATION(hardsigmoid)

ElementwiseOp softplus_def("softplus", kFloatTypes, "aten::softplus", "out");
METALX_STRUCTURED_FUNCTIONAL(softplus, softplus, softplus_def, (Scalars{beta, threshold}),
                             (const at::Tensor& self, const at::Scalar& beta, const at::Scalar& threshold), self,
                             beta, threshold)
METALX_STRUCTURED_OUT(softplus, softplus, softplus_def, (Scalars{beta, threshold}),
                      (const at::Tensor& self, const at::Scalar& beta, const at::Scalar& threshold, at::Tensor& out),
                      self, beta, threshold)

#define METALX_SHRINK(ID)                                                                                  \
  ElementwiseOp ID##_def(#ID, kFloatTypes, "aten::" #ID, "out");                                           \
  METALX_STRUCTURED_FUNCTIONAL(ID, ID, ID##_def, (Scalars{lambd}), (const at::Tensor& self, const at::Scalar& lambd), \
                               self, lambd)                                                                \
  METALX_STRUCTURED_OUT(ID, ID, ID##_def, (Scalars{lambd}),                                                \
                        (const at::Tensor& self, const at::Scalar& lambd, at::Tensor& out), self, lambd)
METALX_SHRINK(softshrink)
METALX_SHRINK(hardshrink)

// hardswish: not structured in torch; CPU's unary iterator.
ElementwiseOp hardswish_def("hardswish", kFloatTypes, "aten::hardswish", "out");
at::Tensor& hardswish_out(const at::Tensor& self, at::Tensor& out) {
  auto iter = at::TensorIterator::unary_op(out, self);
  launch::runNative(iter, hardswish_def, {}, self);
  return out;
}
at::Tensor hardswish_functional(const at::Tensor& self) {
  at::Tensor out;
  auto iter = at::TensorIterator::unary_op(out, self);
  launch::runNative(iter, hardswish_def, {}, self);
  return iter.output();
}
at::Tensor& hardswish_inplace(at::Tensor& self) { return metalx::hardswish_out(self, self); }

// relu is clamp_min(self, 0), as on CPU.
at::Tensor relu(const at::Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  return at::clamp_min(self, 0);
}
at::Tensor& reluInplace(at::Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  return at::clamp_min_(self, 0);
}
// hardtanh is clamp with CPU's one rule of its own: on integer tensors the bounds are
// truncated to integers first (clamp with a float bound would make a float result).
std::pair<at::Scalar, at::Scalar> hardtanhBounds(const at::Tensor& self, const at::Scalar& min,
                                                 const at::Scalar& max) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Bool inputs not supported for hardtanh");
  if (!at::isIntegralType(self.scalar_type(), /*includeBool=*/false)) return {min, max};
  const int64_t lo = min.toLong(), hi = max.toLong();
  TORCH_CHECK(self.scalar_type() != at::kByte || (lo >= 0 && hi >= 0),
              "cannot do hardtanh on an unsigned type with negative limits");
  return {at::Scalar(lo), at::Scalar(hi)};
}
at::Tensor& hardtanhOut(const at::Tensor& self, const at::Scalar& min, const at::Scalar& max, at::Tensor& out) {
  const auto [lo, hi] = hardtanhBounds(self, min, max);
  return at::clamp_out(out, self, lo, hi);
}
at::Tensor hardtanh(const at::Tensor& self, const at::Scalar& min, const at::Scalar& max) {
  at::Tensor out = at::empty_like(self);
  return metalx::hardtanhOut(self, min, max, out);
}
at::Tensor& hardtanhInplace(at::Tensor& self, const at::Scalar& min, const at::Scalar& max) {
  return metalx::hardtanhOut(self, min, max, self);
}

// log_sigmoid_forward returns (output, buffer); the buffer is CPU's scratch for the
// backward, which metalx's kernel does not need: an empty tensor, as on CUDA.
ElementwiseOp log_sigmoid_def("log_sigmoid", kFloatTypes, "aten::log_sigmoid_forward", "output");
std::tuple<at::Tensor&, at::Tensor&> logSigmoidForwardOut(const at::Tensor& self, at::Tensor& output,
                                                          at::Tensor& buffer) {
  auto iter = at::TensorIterator::unary_op(output, self);
  const auto dtype = launch::kernelDtype(launch::elementwiseDtype(iter));
  if (dtype && log_sigmoid_def.kernels.supports(*dtype)) launch::runElementwise(iter, log_sigmoid_def.kernels);
  else launch::cpuFallbackOut(log_sigmoid_def.outOperator(), {output, buffer}, self);
  return {output, buffer};
}
std::tuple<at::Tensor, at::Tensor> logSigmoidForward(const at::Tensor& self) {
  at::Tensor output = at::empty_like(self, at::MemoryFormat::Contiguous);
  at::Tensor buffer = at::empty({0}, self.options());
  logSigmoidForwardOut(self, output, buffer);
  return {output, buffer};
}

// ---- gradients ----

#define METALX_GRAD_PARAMS const at::Tensor &grad_output, const at::Tensor &self

ElementwiseOp threshold_backward_def("threshold", kNumberTypes, "aten::threshold_backward", "grad_input");
METALX_STRUCTURED_FUNCTIONAL(threshold_backward, threshold_backward, threshold_backward_def,
                             (Scalars{threshold, 0}), (METALX_GRAD_PARAMS, const at::Scalar& threshold),
                             grad_output, self, threshold)
METALX_STRUCTURED_OUT(threshold_backward, threshold_backward, threshold_backward_def, (Scalars{threshold, 0}),
                      (METALX_GRAD_PARAMS, const at::Scalar& threshold, at::Tensor& out), grad_output, self,
                      threshold)

ElementwiseOp leaky_relu_backward_def("leaky_relu_backward", kFloatTypes, "aten::leaky_relu_backward",
                                      "grad_input");
METALX_STRUCTURED_FUNCTIONAL(leaky_relu_backward, leaky_relu_backward, leaky_relu_backward_def, (Scalars{slope}),
                             (METALX_GRAD_PARAMS, const at::Scalar& slope, bool is_result), grad_output, self, slope,
                             is_result)
METALX_STRUCTURED_OUT(leaky_relu_backward, leaky_relu_backward, leaky_relu_backward_def, (Scalars{slope}),
                      (METALX_GRAD_PARAMS, const at::Scalar& slope, bool is_result, at::Tensor& out), grad_output,
                      self, slope, is_result)

ElementwiseOp elu_backward_def("elu_backward", kFloatTypes, "aten::elu_backward", "grad_input");
#define METALX_ELU_BACKWARD_PARAMS \
  const at::Tensor &grad_output, METALX_ELU_PARAMS, bool is_result, const at::Tensor &self_or_result
METALX_STRUCTURED_FUNCTIONAL(elu_backward, elu_backward, elu_backward_def,
                             (Scalars{alpha, scale, input_scale, is_result}), (METALX_ELU_BACKWARD_PARAMS),
                             grad_output, alpha, scale, input_scale, is_result, self_or_result)
METALX_STRUCTURED_OUT(elu_backward, elu_backward, elu_backward_def, (Scalars{alpha, scale, input_scale, is_result}),
                      (METALX_ELU_BACKWARD_PARAMS, at::Tensor& out), grad_output, alpha, scale, input_scale,
                      is_result, self_or_result)

ElementwiseOp gelu_backward_def("gelu_backward", kFloatTypes, "aten::gelu_backward", "grad_input");
ElementwiseOp gelu_tanh_backward_def("gelu_tanh_backward", kFloatTypes, "aten::gelu_backward", "grad_input");
ElementwiseOp& geluBackwardDef(std::string_view approximate) {
  return approximate == "tanh" ? gelu_tanh_backward_def : gelu_backward_def;
}
METALX_STRUCTURED_FUNCTIONAL(gelu_backward, gelu_backward, geluBackwardDef(approximate), {},
                             (METALX_GRAD_PARAMS, std::string_view approximate), grad_output, self, approximate)
METALX_STRUCTURED_OUT(gelu_backward, gelu_backward, geluBackwardDef(approximate), {},
                      (METALX_GRAD_PARAMS, std::string_view approximate, at::Tensor& out), grad_output, self,
                      approximate)

#define METALX_PLAIN_GRADIENT(ID, FIRST)                                                                  \
  ElementwiseOp ID##_def(#ID, kFloatTypes, "aten::" #ID, "grad_input");                                   \
  METALX_STRUCTURED_FUNCTIONAL(ID, ID, ID##_def, {}, (const at::Tensor& grad_output, const at::Tensor& FIRST), \
                               grad_output, FIRST)                                                        \
  METALX_STRUCTURED_OUT(ID, ID, ID##_def, {},                                                             \
                        (const at::Tensor& grad_output, const at::Tensor& FIRST, at::Tensor& out), grad_output, FIRST)
METALX_PLAIN_GRADIENT(silu_backward, self)
METALX_PLAIN_GRADIENT(hardsigmoid_backward, self)
METALX_PLAIN_GRADIENT(sigmoid_backward, output)
METALX_PLAIN_GRADIENT(tanh_backward, output)

ElementwiseOp softplus_backward_def("softplus_backward", kFloatTypes, "aten::softplus_backward", "grad_input");
METALX_STRUCTURED_FUNCTIONAL(softplus_backward, softplus_backward, softplus_backward_def, (Scalars{beta, threshold}),
                             (METALX_GRAD_PARAMS, const at::Scalar& beta, const at::Scalar& threshold), grad_output,
                             self, beta, threshold)
METALX_STRUCTURED_OUT(softplus_backward, softplus_backward, softplus_backward_def, (Scalars{beta, threshold}),
                      (METALX_GRAD_PARAMS, const at::Scalar& beta, const at::Scalar& threshold, at::Tensor& out),
                      grad_output, self, beta, threshold)

#define METALX_SHRINK_GRADIENT(ID)                                                                       \
  ElementwiseOp ID##_def("shrink_backward", kFloatTypes, "aten::" #ID, "grad_input");                    \
  METALX_STRUCTURED_FUNCTIONAL(ID, ID, ID##_def, (Scalars{lambd}), (METALX_GRAD_PARAMS, const at::Scalar& lambd), \
                               grad_output, self, lambd)                                                 \
  METALX_STRUCTURED_OUT(ID, ID, ID##_def, (Scalars{lambd}),                                              \
                        (METALX_GRAD_PARAMS, const at::Scalar& lambd, at::Tensor& out), grad_output, self, lambd)
METALX_SHRINK_GRADIENT(softshrink_backward)
METALX_SHRINK_GRADIENT(hardshrink_backward)

// Gradients torch does not make structured: CPU's binary iterator (grad, self).
#define METALX_ITERATOR_GRADIENT(ID, OUT_OVERLOAD, SCALARS, PARAMS, OUT_PARAMS, ...)                     \
  ElementwiseOp ID##_def(#ID, kFloatTypes, "aten::" #ID, OUT_OVERLOAD);                                  \
  at::Tensor& ID##_out OUT_PARAMS {                                                                      \
    auto iter = at::TensorIterator::borrowing_binary_op(out, grad_output, self);                         \
    launch::runNative(iter, ID##_def, ElementwiseOptions{SCALARS}, __VA_ARGS__);                          \
    return out;                                                                                          \
  }                                                                                                      \
  at::Tensor ID##_functional PARAMS {                                                                    \
    at::Tensor out;                                                                                      \
    auto iter = at::TensorIterator::borrowing_binary_op(out, grad_output, self);                         \
    launch::runNative(iter, ID##_def, ElementwiseOptions{SCALARS}, __VA_ARGS__);                          \
    return iter.output();                                                                                \
  }
METALX_ITERATOR_GRADIENT(hardswish_backward, "out", {}, (METALX_GRAD_PARAMS),
                         (METALX_GRAD_PARAMS, at::Tensor& out), grad_output, self)

// mish_backward has no out= overload: an unsupported dtype runs the functional op on
// the CPU fallback.
ElementwiseOp mish_backward_def("mish_backward", kFloatTypes, "aten::mish_backward", "");
at::Tensor mish_backward_functional(METALX_GRAD_PARAMS) {
  at::Tensor out;
  auto iter = at::TensorIterator::borrowing_binary_op(out, grad_output, self);
  const auto dtype = launch::kernelDtype(launch::elementwiseDtype(iter));
  if (!dtype || !mish_backward_def.kernels.supports(*dtype)) {
    torch::jit::Stack stack{grad_output, self};
    launch::runOutOnCpuFallback(mish_backward_def.outOperator(), stack);
    return stack.back().toTensor();
  }
  launch::runElementwise(iter, mish_backward_def.kernels);
  return iter.output();
}
METALX_ITERATOR_GRADIENT(hardtanh_backward, "grad_input", (Scalars{min, max}),
                         (METALX_GRAD_PARAMS, const at::Scalar& min, const at::Scalar& max),
                         (METALX_GRAD_PARAMS, const at::Scalar& min, const at::Scalar& max, at::Tensor& out),
                         grad_output, self, min, max)
METALX_ITERATOR_GRADIENT(log_sigmoid_backward, "grad_input", {},
                         (METALX_GRAD_PARAMS, const at::Tensor& buffer),
                         (METALX_GRAD_PARAMS, const at::Tensor& buffer, at::Tensor& out), grad_output, self, buffer)

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define METALX_REGISTER3(NAME, ID)                  \
  m.impl(NAME, TORCH_FN(ID##_functional));          \
  m.impl(NAME "_", TORCH_FN(ID##_inplace));         \
  m.impl(NAME ".out", TORCH_FN(ID##_out));
#define METALX_REGISTER2(NAME, OUT, ID)    \
  m.impl(NAME, TORCH_FN(ID##_functional)); \
  m.impl(OUT, TORCH_FN(ID##_out));
  METALX_REGISTER3("threshold", threshold)
  METALX_REGISTER3("leaky_relu", leaky_relu)
  METALX_REGISTER3("elu", elu)
  METALX_REGISTER3("gelu", gelu)
  METALX_REGISTER3("silu", silu)
  METALX_REGISTER3("mish", mish)
  METALX_REGISTER3("hardsigmoid", hardsigmoid)
  METALX_REGISTER3("hardswish", hardswish)
  METALX_REGISTER2("softplus", "softplus.out", softplus)
  METALX_REGISTER2("softshrink", "softshrink.out", softshrink)
  METALX_REGISTER2("hardshrink", "hardshrink.out", hardshrink)
  m.impl("relu", TORCH_FN(relu));
  m.impl("relu_", TORCH_FN(reluInplace));
  m.impl("hardtanh", TORCH_FN(hardtanh));
  m.impl("hardtanh_", TORCH_FN(hardtanhInplace));
  m.impl("hardtanh.out", TORCH_FN(hardtanhOut));
  m.impl("log_sigmoid_forward", TORCH_FN(logSigmoidForward));
  m.impl("log_sigmoid_forward.output", TORCH_FN(logSigmoidForwardOut));
  METALX_REGISTER2("threshold_backward", "threshold_backward.grad_input", threshold_backward)
  METALX_REGISTER2("leaky_relu_backward", "leaky_relu_backward.grad_input", leaky_relu_backward)
  METALX_REGISTER2("elu_backward", "elu_backward.grad_input", elu_backward)
  METALX_REGISTER2("gelu_backward", "gelu_backward.grad_input", gelu_backward)
  METALX_REGISTER2("silu_backward", "silu_backward.grad_input", silu_backward)
  METALX_REGISTER2("hardsigmoid_backward", "hardsigmoid_backward.grad_input", hardsigmoid_backward)
  METALX_REGISTER2("sigmoid_backward", "sigmoid_backward.grad_input", sigmoid_backward)
  METALX_REGISTER2("tanh_backward", "tanh_backward.grad_input", tanh_backward)
  METALX_REGISTER2("softplus_backward", "softplus_backward.grad_input", softplus_backward)
  METALX_REGISTER2("softshrink_backward", "softshrink_backward.grad_input", softshrink_backward)
  METALX_REGISTER2("hardshrink_backward", "hardshrink_backward.grad_input", hardshrink_backward)
  METALX_REGISTER2("hardswish_backward", "hardswish_backward.out", hardswish_backward)
  m.impl("mish_backward", TORCH_FN(mish_backward_functional));
  METALX_REGISTER2("hardtanh_backward", "hardtanh_backward.grad_input", hardtanh_backward)
  METALX_REGISTER2("log_sigmoid_backward", "log_sigmoid_backward.grad_input", log_sigmoid_backward)
}

}  // namespace
}  // namespace metalx
