// Fused optimizer steps (_fused_adam_, _fused_adamw_, _fused_sgd_, _fused_adagrad_): each tensor's whole
// update in one pass over its elements, many tensors per dispatch (kernels/multi_tensor.h).
// The math is CPU's fused kernels', in float. Host side: backend/ops/fused_optim.cpp.
#include <metal_stdlib>
#include "multi_tensor.h"
using namespace metal;

// Switches (MultiTensorArgs::flags) shared by the optimizers.
#define METALX_OPT_LR_TENSOR 1u    // lr is a device float (extra[0]), not f[lr]
#define METALX_OPT_GRAD_SCALE 2u   // grads are divided by a device float (extra[1]), written back
#define METALX_OPT_FOUND_INF 4u    // skip the step when a device float (extra[2]) is 1
#define METALX_OPT_MAXIMIZE 8u

inline bool opt_skip(constant MultiTensorArgs &args, device uchar *const *slots) {
  return (args.flags & METALX_OPT_FOUND_INF) && *mt_ptr<float>(slots, args.extra[2]) == 1.0f;
}
inline float opt_lr(constant MultiTensorArgs &args, device uchar *const *slots, float lr) {
  return (args.flags & METALX_OPT_LR_TENSOR) ? *mt_ptr<float>(slots, args.extra[0]) : lr;
}

// ---- Adam and AdamW ----
// Operands: param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq (amsgrad; else exp_avg_sq
// again), step (one float). f: lr, beta1, beta2, weight_decay, eps.
#define METALX_ADAM_AMSGRAD 16u
#define METALX_ADAM_DECOUPLED 32u  // AdamW: decay the parameter, not the gradient

template <typename T>
kernel void fused_adam(METALX_MT_SLOT_PARAMS) {
  METALX_MT_PROLOGUE
  if (begin >= end || opt_skip(args, slots)) return;
  const uint flags = args.flags;
  const float lr = opt_lr(args, slots, args.f[0]);
  const float beta1 = args.f[1], beta2 = args.f[2], weight_decay = args.f[3], eps = args.f[4];
  const float step = *mt_ptr<float>(slots, e.loc[5]);
  const float bias_correction1 = 1.0f - pow(beta1, step);
  const float bias_correction2_sqrt = sqrt(1.0f - pow(beta2, step));
  const float step_size = lr / bias_correction1;
  const bool scale = flags & METALX_OPT_GRAD_SCALE;
  const float grad_scale = scale ? *mt_ptr<float>(slots, args.extra[1]) : 1.0f;
  const bool maximize = flags & METALX_OPT_MAXIMIZE, amsgrad = flags & METALX_ADAM_AMSGRAD;
  const bool decoupled = flags & METALX_ADAM_DECOUPLED;

  device T *param = mt_ptr<T>(slots, e.loc[0]);
  device T *grad = mt_ptr<T>(slots, e.loc[1]);
  device T *exp_avg = mt_ptr<T>(slots, e.loc[2]);
  device T *exp_avg_sq = mt_ptr<T>(slots, e.loc[3]);
  device T *max_exp_avg_sq = mt_ptr<T>(slots, e.loc[4]);
  for (ulong i = begin; i < end; ++i) {
    float g = float(grad[i]);
    if (scale) {
      g = g / grad_scale;
      grad[i] = T(g);
    }
    if (maximize) g = -g;
    float p = float(param[i]);
    if (weight_decay != 0.0f) {
      if (decoupled) p = p - lr * weight_decay * p;
      else g = g + p * weight_decay;
    }
    const float m = float(exp_avg[i]);
    const float m_new = m + (1.0f - beta1) * (g - m);
    const float v_new = beta2 * float(exp_avg_sq[i]) + (1.0f - beta2) * g * g;
    exp_avg[i] = T(m_new);
    exp_avg_sq[i] = T(v_new);
    float v_hat = v_new;
    if (amsgrad) {
      v_hat = max(float(max_exp_avg_sq[i]), v_new);
      max_exp_avg_sq[i] = T(v_hat);
    }
    const float denom = sqrt(v_hat) / bias_correction2_sqrt + eps;
    param[i] = T(p - step_size * m_new / denom);
  }
}

template [[host_name("fused_adam_float")]] kernel decltype(fused_adam<float>) fused_adam<float>;
template [[host_name("fused_adam_half")]] kernel decltype(fused_adam<half>) fused_adam<half>;
template [[host_name("fused_adam_bfloat")]] kernel decltype(fused_adam<bfloat>) fused_adam<bfloat>;

// ---- SGD ----
// Operands: param, grad, momentum_buffer (or param again without momentum).
// f: weight_decay, momentum, lr, dampening.
#define METALX_SGD_NESTEROV 16u
#define METALX_SGD_FIRST_STEP 32u  // the momentum buffer starts as the gradient
#define METALX_SGD_MOMENTUM 64u    // momentum != 0: there are buffers

template <typename T>
kernel void fused_sgd(METALX_MT_SLOT_PARAMS) {
  METALX_MT_PROLOGUE
  if (begin >= end || opt_skip(args, slots)) return;
  const uint flags = args.flags;
  const float weight_decay = args.f[0], momentum = args.f[1], dampening = args.f[3];
  const float lr = opt_lr(args, slots, args.f[2]);
  const bool scale = flags & METALX_OPT_GRAD_SCALE;
  const float grad_scale = scale ? *mt_ptr<float>(slots, args.extra[1]) : 1.0f;
  const bool maximize = flags & METALX_OPT_MAXIMIZE, nesterov = flags & METALX_SGD_NESTEROV;
  const bool first = flags & METALX_SGD_FIRST_STEP, has_momentum = flags & METALX_SGD_MOMENTUM;

  device T *param = mt_ptr<T>(slots, e.loc[0]);
  device T *grad = mt_ptr<T>(slots, e.loc[1]);
  device T *buf = mt_ptr<T>(slots, e.loc[2]);
  for (ulong i = begin; i < end; ++i) {
    float g = float(grad[i]);
    if (scale) {
      g = g / grad_scale;
      grad[i] = T(g);
    }
    if (maximize) g = -g;
    const float p = float(param[i]);
    if (weight_decay != 0.0f) g = g + weight_decay * p;
    if (has_momentum) {
      const float b = first ? g : momentum * float(buf[i]) + (1.0f - dampening) * g;
      buf[i] = T(b);
      g = nesterov ? g + momentum * b : b;
    }
    param[i] = T(p - lr * g);
  }
}

template [[host_name("fused_sgd_float")]] kernel decltype(fused_sgd<float>) fused_sgd<float>;
template [[host_name("fused_sgd_half")]] kernel decltype(fused_sgd<half>) fused_sgd<half>;
template [[host_name("fused_sgd_bfloat")]] kernel decltype(fused_sgd<bfloat>) fused_sgd<bfloat>;

// ---- Adagrad ----
// Operands: param, grad, state_sum, step (one float, already advanced by torch.optim).
// f: lr, lr_decay, weight_decay, eps. CPU's vectorised kernel rounds clr, weight_decay
// and eps to the parameter's dtype before using them in float; so does this one.
template <typename T>
kernel void fused_adagrad(METALX_MT_SLOT_PARAMS) {
  METALX_MT_PROLOGUE
  if (begin >= end || opt_skip(args, slots)) return;
  const uint flags = args.flags;
  const float lr = opt_lr(args, slots, args.f[0]);
  const float step = *mt_ptr<float>(slots, e.loc[3]);
  const float clr = float(T(lr / (1.0f + (step - 1.0f) * args.f[1])));
  const float weight_decay = float(T(args.f[2])), eps = float(T(args.f[3]));
  const bool decay = args.f[2] != 0.0f;
  const bool scale = flags & METALX_OPT_GRAD_SCALE;
  const float grad_scale = scale ? *mt_ptr<float>(slots, args.extra[1]) : 1.0f;
  const bool maximize = flags & METALX_OPT_MAXIMIZE;

  device T *param = mt_ptr<T>(slots, e.loc[0]);
  device T *grad = mt_ptr<T>(slots, e.loc[1]);
  device T *state_sum = mt_ptr<T>(slots, e.loc[2]);
  for (ulong i = begin; i < end; ++i) {
    float g = float(grad[i]);
    if (scale) {
      g = g / grad_scale;
      grad[i] = T(g);
    }
    if (maximize) g = -g;
    const float p = float(param[i]);
    if (decay) g = g + p * weight_decay;
    const float sum = float(state_sum[i]) + g * g;
    state_sum[i] = T(sum);
    const float std_dev = sqrt(sum) + eps;
    param[i] = T(p - clr * g / std_dev);
  }
}

template [[host_name("fused_adagrad_float")]] kernel decltype(fused_adagrad<float>) fused_adagrad<float>;
template [[host_name("fused_adagrad_half")]] kernel decltype(fused_adagrad<half>) fused_adagrad<half>;
template [[host_name("fused_adagrad_bfloat")]] kernel decltype(fused_adagrad<bfloat>) fused_adagrad<bfloat>;
