// The _foreach_* ops on metalx: multi-tensor kernels (kernels/foreach.metal through
// backend/launch/multi_tensor.h) for float32, float16 and bfloat16 lists that meet
// torch's fast-path rules (one device, one dtype, dense, matching sizes and strides,
// scalars that do not promote). Everything else takes torch's own per-tensor path
// (at::native::foreach_tensor_*_slow), as CUDA's foreach kernels do; its per-tensor ops
// run natively or on metalx's CPU fallback like any op.
#include <ATen/ATen.h>
#include <ATen/native/ForeachUtils.h>
#include <ATen/ops/_foreach_abs_native.h>
#include <ATen/ops/_foreach_add_native.h>
#include <ATen/ops/_foreach_addcdiv_native.h>
#include <ATen/ops/_foreach_addcmul_native.h>
#include <ATen/ops/_foreach_clamp_max_native.h>
#include <ATen/ops/_foreach_clamp_min_native.h>
#include <ATen/ops/_foreach_copy_native.h>
#include <ATen/ops/_foreach_div_native.h>
#include <ATen/ops/_foreach_exp_native.h>
#include <ATen/ops/_foreach_lerp_native.h>
#include <ATen/ops/_foreach_maximum_native.h>
#include <ATen/ops/_foreach_minimum_native.h>
#include <ATen/ops/_foreach_mul_native.h>
#include <ATen/ops/_foreach_neg_native.h>
#include <ATen/ops/_foreach_pow_native.h>
#include <ATen/ops/_foreach_reciprocal_native.h>
#include <ATen/ops/_foreach_sign_native.h>
#include <ATen/ops/_foreach_sqrt_native.h>
#include <ATen/ops/_foreach_sub_native.h>
#include <ATen/ops/_foreach_zero_native.h>
#include <torch/library.h>

#include <vector>

#include "launch/multi_tensor.h"

namespace metalx {
namespace {

using at::Scalar;
using at::Tensor;
using at::TensorList;
using launch::KernelFamily;
using launch::kFloatTypes;
using launch::MultiTensorCall;
using ScalarList = at::ArrayRef<Scalar>;
namespace native = at::native;

// Whether `lists` can take a multi-tensor kernel: torch's fast-path rules (call
// check_foreach_api_restrictions first), on a metalx device, in a dtype with kernels.
bool fastRoute(at::ArrayRef<TensorList> lists, ScalarList scalars = {}) {
  const Tensor& first = lists[0][0];
  const c10::ScalarType t = first.scalar_type();
  return first.device().type() == c10::DeviceType::PrivateUse1 &&
         (t == at::kFloat || t == at::kHalf || t == at::kBFloat16) && native::can_use_fast_route(lists, scalars);
}

// Outputs of the out-of-place forms: each like its input (dense inputs keep their strides).
std::vector<Tensor> emptyLike(TensorList self) {
  std::vector<Tensor> out;
  out.reserve(self.size());
  for (const Tensor& t : self) out.push_back(at::empty_like(t));
  return out;
}

std::vector<double> toDoubles(ScalarList scalars) {
  std::vector<double> d;
  d.reserve(scalars.size());
  for (const Scalar& s : scalars) d.push_back(s.toDouble());
  return d;
}

// Runs `kernels` over `lists` (operands in the kernel's order, the output last).
void launch(KernelFamily& kernels, std::vector<TensorList> lists, at::ArrayRef<double> scalars = {},
            double alpha = 1.0, const Tensor& device_scalar = Tensor()) {
  MultiTensorCall call;
  call.lists = std::move(lists);
  call.scalars = scalars;
  call.args.f[0] = static_cast<float>(alpha);
  if (device_scalar.defined()) call.extras.push_back(device_scalar);
  launch::runMultiTensor(kernels, call.lists[0][0].scalar_type(), call);
}

// ---- unary: sqrt, neg, abs, exp, sign, reciprocal ----

#define METALX_FOREACH_UNARY(OP)                                                \
  KernelFamily OP##_kernels("foreach_" #OP, kFloatTypes);                       \
  std::vector<Tensor> OP##_functional(TensorList self) {                        \
    native::check_foreach_api_restrictions(self);                               \
    if (!fastRoute({self})) return native::foreach_tensor_##OP##_slow(self);    \
    std::vector<Tensor> out = emptyLike(self);                                  \
    launch(OP##_kernels, {self, out});                                          \
    return out;                                                                 \
  }                                                                             \
  void OP##_inplace(TensorList self) {                                          \
    native::check_foreach_api_restrictions(self);                               \
    if (!fastRoute({self})) return native::foreach_tensor_##OP##_slow_(self);   \
    launch(OP##_kernels, {self, self});                                         \
  }
#define METALX_FOREACH_EACH_UNARY(X) X(sqrt) X(neg) X(abs) X(exp) X(sign) X(reciprocal)
METALX_FOREACH_EACH_UNARY(METALX_FOREACH_UNARY)

// ---- zero_ and copy_ ----

KernelFamily fill_kernels("foreach_fill", kFloatTypes);
KernelFamily copy_kernels("foreach_copy", kFloatTypes);

void zeroInplace(TensorList self) {
  native::check_foreach_api_restrictions(self);
  if (!fastRoute({self})) return native::foreach_tensor_zero_slow_(self);
  const double zero = 0.0;
  launch(fill_kernels, {self, self}, zero);
}

void copyInplace(TensorList self, TensorList src, bool non_blocking) {
  native::check_foreach_api_restrictions(self, src);
  if (!fastRoute({self, src})) return native::foreach_tensor_copy_list_kernel_slow_(self, src, non_blocking);
  launch(copy_kernels, {src, self});
}

// ---- binary: Scalar, ScalarList, List and Tensor forms ----
// OP is the op's name, KERNEL the kernels' ("maximum" for clamp_min: the same function
// with NaN from either side), SLOW the name part of torch's per-tensor path.

#define METALX_FOREACH_SCALAR(OP, KERNEL, SLOW)                                                         \
  std::vector<Tensor> OP##_scalar(TensorList self, const Scalar& scalar) {                              \
    native::check_foreach_api_restrictions(self);                                                       \
    if (!fastRoute({self}, scalar)) return native::foreach_tensor_##SLOW##_scalar_kernel_slow(self, scalar); \
    std::vector<Tensor> out = emptyLike(self);                                                          \
    launch(KERNEL##_scalar_kernels, {self, out}, scalar.toDouble());                                    \
    return out;                                                                                         \
  }                                                                                                     \
  void OP##_scalar_(TensorList self, const Scalar& scalar) {                                            \
    native::check_foreach_api_restrictions(self);                                                       \
    if (!fastRoute({self}, scalar)) return native::foreach_tensor_##SLOW##_scalar_kernel_slow_(self, scalar); \
    launch(KERNEL##_scalar_kernels, {self, self}, scalar.toDouble());                                   \
  }                                                                                                     \
  std::vector<Tensor> OP##_scalarlist(TensorList self, ScalarList scalars) {                            \
    native::check_foreach_api_restrictions(self, scalars);                                              \
    if (!fastRoute({self}, scalars)) return native::foreach_tensor_##SLOW##_scalarlist_kernel_slow(self, scalars); \
    std::vector<Tensor> out = emptyLike(self);                                                          \
    launch(KERNEL##_scalar_kernels, {self, out}, toDoubles(scalars));                                   \
    return out;                                                                                         \
  }                                                                                                     \
  void OP##_scalarlist_(TensorList self, ScalarList scalars) {                                          \
    native::check_foreach_api_restrictions(self, scalars);                                              \
    if (!fastRoute({self}, scalars)) return native::foreach_tensor_##SLOW##_scalarlist_kernel_slow_(self, scalars); \
    launch(KERNEL##_scalar_kernels, {self, self}, toDoubles(scalars));                                  \
  }

#define METALX_FOREACH_LIST(OP, KERNEL, SLOW)                                                           \
  std::vector<Tensor> OP##_list(TensorList self, TensorList other) {                                    \
    native::check_foreach_api_restrictions(self, other);                                                \
    if (!fastRoute({self, other})) return native::foreach_tensor_##SLOW##_list_kernel_slow(self, other); \
    std::vector<Tensor> out = emptyLike(self);                                                          \
    launch(KERNEL##_list_kernels, {self, other, out});                                                  \
    return out;                                                                                         \
  }                                                                                                     \
  void OP##_list_(TensorList self, TensorList other) {                                                  \
    native::check_foreach_api_restrictions(self, other);                                                \
    if (!fastRoute({self, other})) return native::foreach_tensor_##SLOW##_list_kernel_slow_(self, other); \
    launch(KERNEL##_list_kernels, {self, other, self});                                                 \
  }

#define METALX_FOREACH_KERNELS(KERNEL)                                              \
  KernelFamily KERNEL##_scalar_kernels("foreach_" #KERNEL "_scalar", kFloatTypes);  \
  KernelFamily KERNEL##_list_kernels("foreach_" #KERNEL "_list", kFloatTypes);
METALX_FOREACH_KERNELS(add)
METALX_FOREACH_KERNELS(sub)
METALX_FOREACH_KERNELS(mul)
METALX_FOREACH_KERNELS(div)
METALX_FOREACH_KERNELS(maximum)
METALX_FOREACH_KERNELS(minimum)
METALX_FOREACH_KERNELS(pow)
KernelFamily add_tensor_kernels("foreach_add_tensor", kFloatTypes);
KernelFamily mul_tensor_kernels("foreach_mul_tensor", kFloatTypes);
KernelFamily div_tensor_kernels("foreach_div_tensor", kFloatTypes);
KernelFamily rpow_scalar_kernels("foreach_rpow_scalar", kFloatTypes);

METALX_FOREACH_SCALAR(add, add, add)
METALX_FOREACH_SCALAR(sub, sub, sub)
METALX_FOREACH_SCALAR(mul, mul, mul)
METALX_FOREACH_SCALAR(div, div, div)
METALX_FOREACH_SCALAR(clamp_min, maximum, clamp_min)
METALX_FOREACH_SCALAR(clamp_max, minimum, clamp_max)
METALX_FOREACH_SCALAR(maximum, maximum, clamp_min)
METALX_FOREACH_SCALAR(minimum, minimum, clamp_max)
METALX_FOREACH_SCALAR(pow, pow, pow)
METALX_FOREACH_LIST(mul, mul, mul)
METALX_FOREACH_LIST(div, div, div)
METALX_FOREACH_LIST(clamp_min, maximum, clamp_min)
METALX_FOREACH_LIST(clamp_max, minimum, clamp_max)
METALX_FOREACH_LIST(maximum, maximum, clamp_min)
METALX_FOREACH_LIST(minimum, minimum, clamp_max)
METALX_FOREACH_LIST(pow, pow, pow)

// add and sub with alpha: self + alpha * other.
#define METALX_FOREACH_ALPHA_LIST(OP)                                                                   \
  std::vector<Tensor> OP##_list(TensorList self, TensorList other, const Scalar& alpha) {               \
    native::check_foreach_api_restrictions(self, other);                                                \
    if (!fastRoute({self, other}, alpha)) return native::foreach_tensor_##OP##_list_kernel_slow(self, other, alpha); \
    std::vector<Tensor> out = emptyLike(self);                                                          \
    launch(OP##_list_kernels, {self, other, out}, {}, alpha.toDouble());                                \
    return out;                                                                                         \
  }                                                                                                     \
  void OP##_list_(TensorList self, TensorList other, const Scalar& alpha) {                             \
    native::check_foreach_api_restrictions(self, other);                                                \
    if (!fastRoute({self, other}, alpha)) return native::foreach_tensor_##OP##_list_kernel_slow_(self, other, alpha); \
    launch(OP##_list_kernels, {self, other, self}, {}, alpha.toDouble());                               \
  }
METALX_FOREACH_ALPHA_LIST(add)
METALX_FOREACH_ALPHA_LIST(sub)

// The Tensor forms: `other` is one value. On the lists' device and dtype the kernel
// reads it there (no synchronisation); a CPU value is passed as a scalar.
bool deviceScalarRoute(TensorList self, const Tensor& other) {
  return other.dim() == 0 && other.device() == self[0].device() && other.scalar_type() == self[0].scalar_type();
}
bool cpuScalarRoute(TensorList self, const Tensor& other) {
  return other.dim() == 0 && other.device().is_cpu() && !other.is_complex() &&
         !(other.is_floating_point() && !self[0].is_floating_point());
}

#define METALX_FOREACH_TENSOR(OP, ALPHA_PARAM, ALPHA_ARG, ALPHA)                                        \
  std::vector<Tensor> OP##_tensor(TensorList self, const Tensor& other ALPHA_PARAM) {                    \
    native::check_foreach_api_restrictions(self);                                                       \
    if (fastRoute({self}) && deviceScalarRoute(self, other)) {                                          \
      std::vector<Tensor> out = emptyLike(self);                                                        \
      launch(OP##_tensor_kernels, {self, out}, {}, ALPHA, other);                                       \
      return out;                                                                                       \
    }                                                                                                   \
    if (fastRoute({self}) && cpuScalarRoute(self, other))                                               \
      return OP##_scalar(self, Scalar(other.item<double>() * (ALPHA)));                                 \
    return native::foreach_tensor_##OP##_tensor_kernel_slow(self, other ALPHA_ARG);                     \
  }                                                                                                     \
  void OP##_tensor_(TensorList self, const Tensor& other ALPHA_PARAM) {                                  \
    native::check_foreach_api_restrictions(self);                                                       \
    if (fastRoute({self}) && deviceScalarRoute(self, other))                                            \
      return launch(OP##_tensor_kernels, {self, self}, {}, ALPHA, other);                               \
    if (fastRoute({self}) && cpuScalarRoute(self, other))                                               \
      return OP##_scalar_(self, Scalar(other.item<double>() * (ALPHA)));                                \
    native::foreach_tensor_##OP##_tensor_kernel_slow_(self, other ALPHA_ARG);                           \
  }
#define METALX_COMMA ,
METALX_FOREACH_TENSOR(add, METALX_COMMA const Scalar& alpha, METALX_COMMA alpha, alpha.toDouble())
METALX_FOREACH_TENSOR(mul, , , 1.0)
METALX_FOREACH_TENSOR(div, , , 1.0)

// scalar ** exponent[i]
std::vector<Tensor> pow_scalar_and_tensor(const Scalar& self, TensorList exponent) {
  native::check_foreach_api_restrictions(exponent);
  if (!fastRoute({exponent}, self)) return native::foreach_scalar_pow_list_kernel_slow(self, exponent);
  std::vector<Tensor> out = emptyLike(exponent);
  launch(rpow_scalar_kernels, {exponent, out}, self.toDouble());
  return out;
}

// ---- addcmul, addcdiv: self + value * (t1 op t2), value one, per tensor, or a CPU tensor ----

KernelFamily addcmul_kernels("foreach_addcmul", kFloatTypes);
KernelFamily addcdiv_kernels("foreach_addcdiv", kFloatTypes);

#define METALX_FOREACH_POINTWISE(OP)                                                                         \
  std::vector<Tensor> OP##_scalar(TensorList self, TensorList t1, TensorList t2, const Scalar& value) {     \
    native::check_foreach_api_restrictions(self, t1, t2);                                                   \
    if (!fastRoute({self, t1, t2}, value)) return native::foreach_tensor_##OP##_scalar_slow(self, t1, t2, value); \
    std::vector<Tensor> out = emptyLike(self);                                                              \
    launch(OP##_kernels, {self, t1, t2, out}, value.toDouble());                                            \
    return out;                                                                                             \
  }                                                                                                         \
  void OP##_scalar_(TensorList self, TensorList t1, TensorList t2, const Scalar& value) {                    \
    native::check_foreach_api_restrictions(self, t1, t2);                                                   \
    if (!fastRoute({self, t1, t2}, value)) return native::foreach_tensor_##OP##_scalar_slow_(self, t1, t2, value); \
    launch(OP##_kernels, {self, t1, t2, self}, value.toDouble());                                           \
  }                                                                                                         \
  std::vector<Tensor> OP##_scalarlist(TensorList self, TensorList t1, TensorList t2, ScalarList scalars) {  \
    native::check_foreach_api_restrictions(self, t1, t2, scalars);                                          \
    if (!fastRoute({self, t1, t2}, scalars))                                                                \
      return native::foreach_tensor_##OP##_scalarlist_slow(self, t1, t2, scalars);                          \
    std::vector<Tensor> out = emptyLike(self);                                                              \
    launch(OP##_kernels, {self, t1, t2, out}, toDoubles(scalars));                                          \
    return out;                                                                                             \
  }                                                                                                         \
  void OP##_scalarlist_(TensorList self, TensorList t1, TensorList t2, ScalarList scalars) {                 \
    native::check_foreach_api_restrictions(self, t1, t2, scalars);                                          \
    if (!fastRoute({self, t1, t2}, scalars))                                                                \
      return native::foreach_tensor_##OP##_scalarlist_slow_(self, t1, t2, scalars);                         \
    launch(OP##_kernels, {self, t1, t2, self}, toDoubles(scalars));                                         \
  }                                                                                                         \
  std::vector<Tensor> OP##_tensor(TensorList self, TensorList t1, TensorList t2, const Tensor& scalars) {   \
    const std::vector<Scalar> list = native::convert_tensor_to_scalar_list(scalars, self.size());           \
    return OP##_scalarlist(self, t1, t2, list);                                                             \
  }                                                                                                         \
  void OP##_tensor_(TensorList self, TensorList t1, TensorList t2, const Tensor& scalars) {                  \
    const std::vector<Scalar> list = native::convert_tensor_to_scalar_list(scalars, self.size());           \
    OP##_scalarlist_(self, t1, t2, list);                                                                   \
  }
METALX_FOREACH_POINTWISE(addcmul)
METALX_FOREACH_POINTWISE(addcdiv)

// ---- lerp: weight one Scalar, one per tensor, or a list of tensors ----

KernelFamily lerp_scalar_kernels("foreach_lerp_scalar", kFloatTypes);
KernelFamily lerp_list_kernels("foreach_lerp_list", kFloatTypes);

std::vector<Tensor> lerp_scalar(TensorList self, TensorList end, const Scalar& weight) {
  native::check_foreach_api_restrictions(self, end);
  if (!fastRoute({self, end}, weight)) return native::foreach_tensor_lerp_list_kernel_slow(self, end, weight);
  std::vector<Tensor> out = emptyLike(self);
  launch(lerp_scalar_kernels, {self, end, out}, weight.toDouble());
  return out;
}
void lerp_scalar_(TensorList self, TensorList end, const Scalar& weight) {
  native::check_foreach_api_restrictions(self, end);
  if (!fastRoute({self, end}, weight)) return native::foreach_tensor_lerp_list_kernel_slow_(self, end, weight);
  launch(lerp_scalar_kernels, {self, end, self}, weight.toDouble());
}
std::vector<Tensor> lerp_scalarlist(TensorList self, TensorList end, ScalarList weights) {
  native::check_foreach_api_restrictions(self, end, weights);
  if (!fastRoute({self, end}, weights))
    return native::foreach_tensor_lerp_scalarlist_kernel_slow(self, end, weights);
  std::vector<Tensor> out = emptyLike(self);
  launch(lerp_scalar_kernels, {self, end, out}, toDoubles(weights));
  return out;
}
void lerp_scalarlist_(TensorList self, TensorList end, ScalarList weights) {
  native::check_foreach_api_restrictions(self, end, weights);
  if (!fastRoute({self, end}, weights)) return native::foreach_tensor_lerp_scalarlist_kernel_slow_(self, end, weights);
  launch(lerp_scalar_kernels, {self, end, self}, toDoubles(weights));
}
std::vector<Tensor> lerp_list(TensorList self, TensorList end, TensorList weights) {
  native::check_foreach_api_restrictions(self, end, weights);
  if (!fastRoute({self, end, weights})) return native::foreach_tensor_ternary_lerp_slow(self, end, weights);
  std::vector<Tensor> out = emptyLike(self);
  launch(lerp_list_kernels, {self, end, weights, out});
  return out;
}
void lerp_list_(TensorList self, TensorList end, TensorList weights) {
  native::check_foreach_api_restrictions(self, end, weights);
  if (!fastRoute({self, end, weights})) return native::foreach_tensor_ternary_lerp_slow_(self, end, weights);
  launch(lerp_list_kernels, {self, end, weights, self});
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define METALX_REGISTER_UNARY(OP)                          \
  m.impl("_foreach_" #OP, TORCH_FN(OP##_functional));      \
  m.impl("_foreach_" #OP "_", TORCH_FN(OP##_inplace));
  METALX_FOREACH_EACH_UNARY(METALX_REGISTER_UNARY)
  m.impl("_foreach_zero_", TORCH_FN(zeroInplace));
  m.impl("_foreach_copy_", TORCH_FN(copyInplace));

#define METALX_REGISTER_SCALAR(OP)                                           \
  m.impl("_foreach_" #OP ".Scalar", TORCH_FN(OP##_scalar));                  \
  m.impl("_foreach_" #OP "_.Scalar", TORCH_FN(OP##_scalar_));                \
  m.impl("_foreach_" #OP ".ScalarList", TORCH_FN(OP##_scalarlist));          \
  m.impl("_foreach_" #OP "_.ScalarList", TORCH_FN(OP##_scalarlist_));
#define METALX_REGISTER_LIST(OP)                                             \
  m.impl("_foreach_" #OP ".List", TORCH_FN(OP##_list));                      \
  m.impl("_foreach_" #OP "_.List", TORCH_FN(OP##_list_));
#define METALX_REGISTER_TENSOR(OP)                                           \
  m.impl("_foreach_" #OP ".Tensor", TORCH_FN(OP##_tensor));                  \
  m.impl("_foreach_" #OP "_.Tensor", TORCH_FN(OP##_tensor_));
#define METALX_REGISTER_BINARY(OP) METALX_REGISTER_SCALAR(OP) METALX_REGISTER_LIST(OP)
  METALX_REGISTER_BINARY(add)
  METALX_REGISTER_BINARY(sub)
  METALX_REGISTER_BINARY(mul)
  METALX_REGISTER_BINARY(div)
  METALX_REGISTER_BINARY(clamp_min)
  METALX_REGISTER_BINARY(clamp_max)
  METALX_REGISTER_BINARY(maximum)
  METALX_REGISTER_BINARY(minimum)
  METALX_REGISTER_BINARY(pow)
  METALX_REGISTER_TENSOR(add)
  METALX_REGISTER_TENSOR(mul)
  METALX_REGISTER_TENSOR(div)
  m.impl("_foreach_pow.ScalarAndTensor", TORCH_FN(pow_scalar_and_tensor));
  METALX_REGISTER_SCALAR(addcmul)
  METALX_REGISTER_TENSOR(addcmul)
  METALX_REGISTER_SCALAR(addcdiv)
  METALX_REGISTER_TENSOR(addcdiv)
  m.impl("_foreach_lerp.Scalar", TORCH_FN(lerp_scalar));
  m.impl("_foreach_lerp_.Scalar", TORCH_FN(lerp_scalar_));
  m.impl("_foreach_lerp.ScalarList", TORCH_FN(lerp_scalarlist));
  m.impl("_foreach_lerp_.ScalarList", TORCH_FN(lerp_scalarlist_));
  m.impl("_foreach_lerp.List", TORCH_FN(lerp_list));
  m.impl("_foreach_lerp_.List", TORCH_FN(lerp_list_));
}

}  // namespace
}  // namespace metalx
