// The pointwise losses on metalx, forward and backward: mse_loss, smooth_l1_loss,
// huber_loss and binary_cross_entropy. Each is CPU's formula written with native
// elementwise ops and reductions on the device, in float for half and bfloat16 inputs
// (CPU's kernels compute in float too) and rounded once at the end. l1_loss,
// binary_cross_entropy_with_logits and kl_div need nothing here: torch composes them
// from ops that have kernels. Float64 and other dtypes run CPU's kernels through the
// fallback, as one op.
#include <ATen/ATen.h>
#include <ATen/core/Reduction.h>
#include <torch/library.h>

#include "cpu_fallback.h"

namespace metalx {
namespace {

using at::Tensor;

bool nativeFloat(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts) {
    const c10::ScalarType s = t->scalar_type();
    if (s != at::kFloat && s != at::kHalf && s != at::kBFloat16) return false;
  }
  return true;
}

// The boxed CPU fallback of `name` over `args`: its one result.
template <class... Args>
Tensor onCpuFallback(const char* name, const Args&... args) {
  return cpuFallbackCall(name, "", args...).back().toTensor();
}

Tensor opmath(const Tensor& t) { return t.scalar_type() == at::kFloat ? t : t.to(at::kFloat); }

c10::ScalarType resultType(const Tensor& a, const Tensor& b) { return at::result_type(a, b); }

Tensor reduce(const Tensor& loss, int64_t reduction, c10::ScalarType dtype) {
  if (reduction == at::Reduction::Mean) return loss.mean().to(dtype);
  if (reduction == at::Reduction::Sum) return loss.sum().to(dtype);
  return loss.to(dtype);
}

// d(reduced loss)/d(loss element) times grad_output: 1 / numel for 'mean'.
Tensor scaledGrad(const Tensor& grad_output, int64_t reduction, int64_t numel) {
  const Tensor g = opmath(grad_output);
  return reduction == at::Reduction::Mean ? g / static_cast<double>(numel) : g;
}

// The gradient with self's shape and dtype.
Tensor asGradOf(const Tensor& grad, const Tensor& self) {
  return grad.sizes() == self.sizes() ? grad.to(self.scalar_type()) : grad.expand(self.sizes()).to(self.scalar_type(),
                                                                                                    false, true);
}

// ---- mse ----

Tensor mseLoss(const Tensor& self, const Tensor& target, int64_t reduction) {
  if (!nativeFloat({&self, &target})) return onCpuFallback("aten::mse_loss", self, target, reduction);
  // CPU's kernel squares the difference in the dtype: both rounded to it (bfloat16 in
  // float would be an ulp off CPU's).
  const c10::ScalarType dtype = resultType(self, target);
  const Tensor diff = self.to(dtype) - target.to(dtype);
  return reduce(diff * diff, reduction, dtype);
}

Tensor mseLossBackward(const Tensor& grad_output, const Tensor& self, const Tensor& target, int64_t reduction) {
  if (!nativeFloat({&grad_output, &self, &target}))
    return onCpuFallback("aten::mse_loss_backward", grad_output, self, target, reduction);
  const Tensor diff = opmath(self) - opmath(target);
  return asGradOf(diff * (scaledGrad(grad_output, reduction, diff.numel()) * 2.0), self);
}

// ---- smooth l1 / huber ----

Tensor smoothL1Loss(const Tensor& self, const Tensor& target, int64_t reduction, double beta) {
  if (!nativeFloat({&self, &target})) return onCpuFallback("aten::smooth_l1_loss", self, target, reduction, beta);
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  const Tensor z = (opmath(self) - opmath(target)).abs();
  // beta 0 is the l1 loss (CPU takes l1_loss then: no division by 0).
  const Tensor loss = beta == 0 ? z : at::where(z < beta, z.square() * (0.5 / beta), z - 0.5 * beta);
  return reduce(loss, reduction, resultType(self, target));
}

Tensor smoothL1LossBackward(const Tensor& grad_output, const Tensor& self, const Tensor& target, int64_t reduction,
                            double beta) {
  if (!nativeFloat({&grad_output, &self, &target}))
    return onCpuFallback("aten::smooth_l1_loss_backward", grad_output, self, target, reduction, beta);
  const Tensor d = opmath(self) - opmath(target);
  // CPU's piecewise slope: -1 at and below -beta, 1 at and above beta, d / beta between
  // (at beta 0, d == 0 takes -1).
  Tensor slope = at::where(d <= -beta, -1.0, at::where(d >= beta, 1.0, beta == 0 ? d * 0 : d / beta));
  return asGradOf(slope * scaledGrad(grad_output, reduction, d.numel()), self);
}

Tensor huberLoss(const Tensor& self, const Tensor& target, int64_t reduction, double delta) {
  if (!nativeFloat({&self, &target})) return onCpuFallback("aten::huber_loss", self, target, reduction, delta);
  TORCH_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
  const c10::ScalarType dtype = resultType(self, target);
  if (dtype == at::kBFloat16) {
    // CPU's bfloat16 kernel works in bfloat16: delta rounded to it, each op rounded.
    const double d = static_cast<double>(static_cast<float>(c10::BFloat16(static_cast<float>(delta))));
    const Tensor z = (self.to(dtype) - target.to(dtype)).abs();
    const Tensor loss = at::where(z < d, z * z * 0.5, (z - 0.5 * d) * d);
    return reduce(loss, reduction, dtype);
  }
  // float32, and half, which CPU computes in float.
  const Tensor z = (opmath(self) - opmath(target)).abs();
  const Tensor loss = at::where(z < delta, z.square() * 0.5, (z - 0.5 * delta) * delta);
  return reduce(loss, reduction, dtype);
}

Tensor huberLossBackward(const Tensor& grad_output, const Tensor& self, const Tensor& target, int64_t reduction,
                         double delta) {
  if (!nativeFloat({&grad_output, &self, &target}))
    return onCpuFallback("aten::huber_loss_backward", grad_output, self, target, reduction, delta);
  const Tensor d = opmath(self) - opmath(target);
  const Tensor slope = at::where(d <= -delta, -delta, at::where(d >= delta, delta, d));
  return asGradOf(slope * scaledGrad(grad_output, reduction, d.numel()), self);
}

// ---- binary cross entropy ----

void checkProbabilities(const Tensor& self) {
  // One synchronisation: CPU raises on values outside [0, 1], and so must the device.
  const bool ok = self.numel() == 0 || ((self >= 0) & (self <= 1)).all().item<bool>();
  TORCH_CHECK(ok, "all elements of input should be between 0 and 1");
}

Tensor binaryCrossEntropy(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight,
                          int64_t reduction) {
  const bool weighted = weight.has_value() && weight->defined();
  if (!nativeFloat({&self, &target}) || (weighted && !nativeFloat({&*weight})))
    return onCpuFallback("aten::binary_cross_entropy", self, target, weight, reduction);
  checkProbabilities(self);
  // CPU's formula in CPU's order and in the input's dtype, each op rounded to it as
  // CPU's scalar_t arithmetic rounds (a float16/bfloat16 loss computed in float is an
  // ulp off); the logs clamped at -100 so that 0 and 1 give finite losses.
  const Tensor log_x = self.log().clamp_min(-100), log_1mx = self.neg().log1p().clamp_min(-100);
  Tensor loss = (target - 1) * log_1mx - target * log_x;
  if (weighted) loss = loss * *weight;
  return reduce(loss, reduction, self.scalar_type());
}

Tensor binaryCrossEntropyBackward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                                  const std::optional<Tensor>& weight, int64_t reduction) {
  const bool weighted = weight.has_value() && weight->defined();
  if (!nativeFloat({&grad_output, &self, &target}) || (weighted && !nativeFloat({&*weight})))
    return onCpuFallback("aten::binary_cross_entropy_backward", grad_output, self, target, weight, reduction);
  // CPU's order of operations, each rounded to self's dtype as CPU's scalar code does
  // (1e-12 is 0 in half: the floor only guards float32).
  constexpr double kEpsilon = 1e-12;
  Tensor grad = grad_output * (self - target) / ((1 - self) * self).clamp_min(kEpsilon);
  if (weighted) grad = grad * *weight;
  if (reduction == at::Reduction::Mean) grad = grad / static_cast<double>(self.numel());
  return asGradOf(grad, self);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mse_loss", TORCH_FN(mseLoss));
  m.impl("mse_loss_backward", TORCH_FN(mseLossBackward));
  m.impl("smooth_l1_loss", TORCH_FN(smoothL1Loss));
  m.impl("smooth_l1_loss_backward", TORCH_FN(smoothL1LossBackward));
  m.impl("huber_loss", TORCH_FN(huberLoss));
  m.impl("huber_loss_backward", TORCH_FN(huberLossBackward));
  m.impl("binary_cross_entropy", TORCH_FN(binaryCrossEntropy));
  m.impl("binary_cross_entropy_backward", TORCH_FN(binaryCrossEntropyBackward));
}

}  // namespace
}  // namespace metalx
