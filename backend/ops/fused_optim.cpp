// The fused optimizer steps on metalx: _fused_adam_, _fused_adamw_, _fused_sgd_ and
// _fused_adagrad_ (lr as a float or a tensor), which torch.optim's Adam, AdamW, SGD and
// Adagrad call with fused=True. Float32, float16 and bfloat16 parameters with float32 steps and scalars on
// the device run kernels/fused_optim.metal, many tensors per dispatch; anything else
// (float64, tensors on several devices, a step on the CPU) runs CPU's fused kernel
// through the CPU fallback, counted in its report.
#include <ATen/ATen.h>
#include <ATen/native/ForeachUtils.h>
#include <torch/library.h>

#include <optional>

#include "launch/multi_tensor.h"
#include "launch/structured.h"

namespace metalx {
namespace {

using at::Tensor;
using at::TensorList;
using launch::KernelFamily;
using launch::kFloatTypes;
using launch::MultiTensorCall;

// Flag bits, as kernels/fused_optim.metal defines them.
constexpr uint32_t kLrTensor = 1, kGradScale = 2, kFoundInf = 4, kMaximize = 8;
constexpr uint32_t kAdamAmsgrad = 16, kAdamDecoupled = 32;
constexpr uint32_t kSgdNesterov = 16, kSgdFirstStep = 32, kSgdMomentum = 64;

KernelFamily adam_kernels("fused_adam", kFloatTypes);
KernelFamily sgd_kernels("fused_sgd", kFloatTypes);
KernelFamily adagrad_kernels("fused_adagrad", kFloatTypes);

// One float32 value on `device`: what the kernels read steps, lr, grad_scale and
// found_inf as.
bool isDeviceFloat(const Tensor& t, const c10::Device& device) {
  return t.device() == device && t.scalar_type() == at::kFloat && t.numel() == 1;
}

bool denseFloatLists(at::ArrayRef<TensorList> lists) {
  const Tensor& first = lists[0][0];
  const c10::ScalarType t = first.scalar_type();
  return first.device().type() == c10::DeviceType::PrivateUse1 &&
         (t == at::kFloat || t == at::kHalf || t == at::kBFloat16) && at::native::can_use_fast_route(lists);
}

// The optional device scalars, in the kernels' extra[] order: lr, grad_scale, found_inf.
// False when one is of a kind the kernels do not read (the CPU fallback runs instead).
// A Tensor lr on the CPU becomes the float `lr`; on the device it is returned, for the
// kernel to read there (no synchronisation).
std::optional<Tensor> takeLr(const std::optional<Tensor>& lr_tensor, double& lr) {
  if (!lr_tensor.has_value()) return std::nullopt;
  if (!lr_tensor->device().is_cpu()) return lr_tensor;
  lr = lr_tensor->item<double>();
  return std::nullopt;
}

bool addDeviceScalars(MultiTensorCall& call, const c10::Device& device, const std::optional<Tensor>& lr,
                      const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {
  const std::optional<Tensor>* scalars[] = {&lr, &grad_scale, &found_inf};
  const uint32_t bits[] = {kLrTensor, kGradScale, kFoundInf};
  for (int k = 0; k < 3; ++k) {
    const std::optional<Tensor>& t = *scalars[k];
    if (!t.has_value() || !t->defined()) {
      call.extras.emplace_back();
      continue;
    }
    if (!isDeviceFloat(*t, device)) return false;
    call.extras.push_back(*t);
    call.args.flags |= bits[k];
  }
  return true;
}

// The part of a fused step's call every optimizer shares: `lists` dense float lists on
// one metalx device, one float32 step per parameter there (SGD has none), lr (a CPU tensor lr read into
// `lr`) and the device scalars. False when the kernels cannot take these inputs.
bool prepareStepCall(MultiTensorCall& call, const std::vector<TensorList>& lists, TensorList steps, double& lr,
                     const std::optional<Tensor>& lr_tensor, const std::optional<Tensor>& grad_scale,
                     const std::optional<Tensor>& found_inf) {
  if (!denseFloatLists(lists)) return false;
  const c10::Device device = lists[0][0].device();
  for (const Tensor& s : steps)
    if (!isDeviceFloat(s, device)) return false;
  const std::optional<Tensor> device_lr = takeLr(lr_tensor, lr);
  if (!addDeviceScalars(call, device, device_lr, grad_scale, found_inf)) return false;
  call.lists = lists;
  return true;
}

c10::OperatorHandle op(const char* name, const char* overload) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
}

// ---- Adam / AdamW ----

// `lr_tensor`: the tensor_lr overload's lr (a CPU one is read here, as CPU's kernel does).
bool runAdam(TensorList params, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
             TensorList max_exp_avg_sqs, TensorList steps, double lr, const std::optional<Tensor>& lr_tensor,
             double beta1, double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
             const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf, bool decoupled) {
  const size_t n = params.size();
  TORCH_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n && steps.size() == n,
              "fused Adam: params, grads, exp_avgs, exp_avg_sqs and state_steps must have the same length");
  TORCH_CHECK(!amsgrad || max_exp_avg_sqs.size() == n,
              "fused Adam: amsgrad needs one max_exp_avg_sq per parameter");
  if (n == 0) return true;
  std::vector<TensorList> lists = {params, grads, exp_avgs, exp_avg_sqs};
  if (amsgrad) lists.push_back(max_exp_avg_sqs);
  MultiTensorCall call;
  if (!prepareStepCall(call, lists, steps, lr, lr_tensor, grad_scale, found_inf)) return false;
  if (!amsgrad) call.lists.push_back(exp_avg_sqs);  // the kernel reads max_exp_avg_sq only with amsgrad
  call.lists.push_back(steps);
  const double f[] = {lr, beta1, beta2, weight_decay, eps};
  for (int k = 0; k < 5; ++k) call.args.f[k] = static_cast<float>(f[k]);
  call.args.flags |= (amsgrad ? kAdamAmsgrad : 0) | (maximize ? kMaximize : 0) | (decoupled ? kAdamDecoupled : 0);
  call.per_thread_factor = 4;  // each thread starts with two pow()s and a sqrt
  launch::runMultiTensor(adam_kernels, params[0].scalar_type(), call);
  return true;
}

#define METALX_FUSED_ADAM(ID, NAME, DECOUPLED)                                                                  \
  void ID(TensorList self, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,                       \
          TensorList max_exp_avg_sqs, TensorList state_steps, double lr, double beta1, double beta2,            \
          double weight_decay, double eps, bool amsgrad, bool maximize, const std::optional<Tensor>& grad_scale, \
          const std::optional<Tensor>& found_inf) {                                                             \
    if (runAdam(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, std::nullopt, beta1, beta2, \
                weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, DECOUPLED))                        \
      return;                                                                                                   \
    static const c10::OperatorHandle handle = op(NAME, "");                                                    \
    launch::cpuFallbackOut(handle, {}, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr,    \
                           beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf);          \
  }                                                                                                             \
  void ID##_tensor_lr(TensorList self, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,           \
                      TensorList max_exp_avg_sqs, TensorList state_steps, const Tensor& lr, double beta1,       \
                      double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,               \
                      const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {        \
    if (runAdam(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, 0.0, lr, beta1, beta2,        \
                weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, DECOUPLED))                        \
      return;                                                                                                   \
    static const c10::OperatorHandle handle = op(NAME, "tensor_lr");                                           \
    launch::cpuFallbackOut(handle, {}, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr,    \
                           beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf);          \
  }
METALX_FUSED_ADAM(fusedAdam, "aten::_fused_adam_", false)
METALX_FUSED_ADAM(fusedAdamW, "aten::_fused_adamw_", true)

// ---- SGD ----

bool runSgd(TensorList params, TensorList grads, TensorList momentum_buffers, double weight_decay, double momentum,
            double lr, const std::optional<Tensor>& lr_tensor, double dampening, bool nesterov, bool maximize,
            bool is_first_step, const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {
  const size_t n = params.size();
  TORCH_CHECK(grads.size() == n, "fused SGD: params and grads must have the same length");
  const bool has_momentum = !momentum_buffers.empty();
  TORCH_CHECK(!has_momentum || momentum_buffers.size() == n,
              "fused SGD: momentum_buffer_list must be empty or have one buffer per parameter");
  if (n == 0) return true;
  std::vector<TensorList> lists = {params, grads};
  if (has_momentum) lists.push_back(momentum_buffers);
  MultiTensorCall call;
  if (!prepareStepCall(call, lists, /*steps=*/{}, lr, lr_tensor, grad_scale, found_inf)) return false;
  if (!has_momentum) call.lists.push_back(params);  // not read without momentum
  const double f[] = {weight_decay, momentum, lr, dampening};
  for (int k = 0; k < 4; ++k) call.args.f[k] = static_cast<float>(f[k]);
  call.args.flags |= (nesterov ? kSgdNesterov : 0) | (maximize ? kMaximize : 0) |
                     (is_first_step ? kSgdFirstStep : 0) | (has_momentum ? kSgdMomentum : 0);
  launch::runMultiTensor(sgd_kernels, params[0].scalar_type(), call);
  return true;
}

void fusedSgd(TensorList self, TensorList grads, TensorList momentum_buffer_list, double weight_decay,
              double momentum, double lr, double dampening, bool nesterov, bool maximize, bool is_first_step,
              const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {
  if (runSgd(self, grads, momentum_buffer_list, weight_decay, momentum, lr, std::nullopt, dampening, nesterov,
             maximize, is_first_step, grad_scale, found_inf))
    return;
  static const c10::OperatorHandle handle = op("aten::_fused_sgd_", "");
  launch::cpuFallbackOut(handle, {}, self, grads, momentum_buffer_list, weight_decay, momentum, lr, dampening,
                         nesterov, maximize, is_first_step, grad_scale, found_inf);
}
void fusedSgdTensorLr(TensorList self, TensorList grads, TensorList momentum_buffer_list, double weight_decay,
                      double momentum, const Tensor& lr, double dampening, bool nesterov, bool maximize,
                      bool is_first_step, const std::optional<Tensor>& grad_scale,
                      const std::optional<Tensor>& found_inf) {
  if (runSgd(self, grads, momentum_buffer_list, weight_decay, momentum, 0.0, lr, dampening, nesterov, maximize,
             is_first_step, grad_scale, found_inf))
    return;
  static const c10::OperatorHandle handle = op("aten::_fused_sgd_", "tensor_lr");
  launch::cpuFallbackOut(handle, {}, self, grads, momentum_buffer_list, weight_decay, momentum, lr, dampening,
                         nesterov, maximize, is_first_step, grad_scale, found_inf);
}

// ---- Adagrad ----

bool runAdagrad(TensorList params, TensorList grads, TensorList state_sums, TensorList steps, double lr,
                const std::optional<Tensor>& lr_tensor, double lr_decay, double weight_decay, double eps,
                bool maximize, const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {
  const size_t n = params.size();
  TORCH_CHECK(grads.size() == n && state_sums.size() == n && steps.size() == n,
              "fused Adagrad: params, grads, state_sums and state_steps must have the same length");
  if (n == 0) return true;
  MultiTensorCall call;
  if (!prepareStepCall(call, {params, grads, state_sums}, steps, lr, lr_tensor, grad_scale, found_inf)) return false;
  call.lists.push_back(steps);
  const double f[] = {lr, lr_decay, weight_decay, eps};
  for (int k = 0; k < 4; ++k) call.args.f[k] = static_cast<float>(f[k]);
  call.args.flags |= maximize ? kMaximize : 0;
  launch::runMultiTensor(adagrad_kernels, params[0].scalar_type(), call);
  return true;
}

void fusedAdagrad(TensorList self, TensorList grads, TensorList state_sums, TensorList state_steps, double lr,
                  double lr_decay, double weight_decay, double eps, bool maximize,
                  const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {
  if (runAdagrad(self, grads, state_sums, state_steps, lr, std::nullopt, lr_decay, weight_decay, eps, maximize,
                 grad_scale, found_inf))
    return;
  static const c10::OperatorHandle handle = op("aten::_fused_adagrad_", "");
  launch::cpuFallbackOut(handle, {}, self, grads, state_sums, state_steps, lr, lr_decay, weight_decay, eps,
                         maximize, grad_scale, found_inf);
}
void fusedAdagradTensorLr(TensorList self, TensorList grads, TensorList state_sums, TensorList state_steps,
                          const Tensor& lr, double lr_decay, double weight_decay, double eps, bool maximize,
                          const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {
  if (runAdagrad(self, grads, state_sums, state_steps, 0.0, lr, lr_decay, weight_decay, eps, maximize, grad_scale,
                 found_inf))
    return;
  static const c10::OperatorHandle handle = op("aten::_fused_adagrad_", "tensor_lr");
  launch::cpuFallbackOut(handle, {}, self, grads, state_sums, state_steps, lr, lr_decay, weight_decay, eps,
                         maximize, grad_scale, found_inf);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_adam_", TORCH_FN(fusedAdam));
  m.impl("_fused_adam_.tensor_lr", TORCH_FN(fusedAdam_tensor_lr));
  m.impl("_fused_adamw_", TORCH_FN(fusedAdamW));
  m.impl("_fused_adamw_.tensor_lr", TORCH_FN(fusedAdamW_tensor_lr));
  m.impl("_fused_sgd_", TORCH_FN(fusedSgd));
  m.impl("_fused_sgd_.tensor_lr", TORCH_FN(fusedSgdTensorLr));
  m.impl("_fused_adagrad_", TORCH_FN(fusedAdagrad));
  m.impl("_fused_adagrad_.tensor_lr", TORCH_FN(fusedAdagradTensorLr));
}

}  // namespace
}  // namespace metalx
