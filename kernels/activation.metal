// Activations and their gradients, one functor each (kernels/elementwise.h has the
// kernel templates). Torch registrations: backend/ops/activation.cpp, which documents
// the order of each op's scalars and operands (those of torch's meta functions).
// Floating dtypes only; half and bfloat compute in float, as CPU PyTorch does.
#include <metal_stdlib>
#include "elementwise.h"
#include "special_math.h"
using namespace metal;

#define METALX_SQRT1_2_F 0.70710678118654752440f
#define METALX_2_SQRTPI_F 1.12837916709551257390f

// ---- forward (unary) ----

// threshold / threshold_backward: binary (x, other): x <= threshold ? value : other.
template <typename M> struct threshold_op : elementwise_fn {
  M threshold, value;
  void load(constant OpScalars& k) {
    threshold = scalar_arg<M>(k, 0);
    value = scalar_arg<M>(k, 1);
  }
  METAL_FUNC M operator()(M x, M other) const { return x <= threshold ? value : other; }
};
METALX_FOR_NUMBERS(METALX_BINARY_KERNELS, threshold, threshold_op)

template <typename M> struct leaky_relu_op : elementwise_fn {
  M slope;
  void load(constant OpScalars& k) { slope = scalar_arg<M>(k, 0); }
  METAL_FUNC M operator()(M x) const { return x > M(0) ? x : x * slope; }
};

// elu(x; alpha, scale, input_scale)
template <typename M> struct elu_op : elementwise_fn {
  M alpha, scale, input_scale;
  void load(constant OpScalars& k) {
    alpha = k.f[0];
    scale = k.f[1];
    input_scale = k.f[2];
  }
  METAL_FUNC M operator()(M x) const { return x > 0.0f ? x * scale : metalx_expm1(x * input_scale) * alpha * scale; }
};

// The standard normal CDF for gelu (x * Phi(x)), in one straight-line formula rather than
// through erf: Phi(x) = 0.5 erfc(z) for x < 0 and 1 - 0.5 erfc(z) otherwise, z = |x| / sqrt2,
// with erfc(z) = exp(-z P(z)) for z <= 4, P a degree-9 least-squares fit of
// -log(erfc(z)) / z on Chebyshev nodes of [0, 4] (fitted for metalx). No division, one
// exp and no second branch (metalx_erf computes a series and a rational-exponential tail
// and picks one): about half the instructions per element, and no divider on the
// simulator's vector path. Beyond z = 4 erfc is below 1.6e-8: Phi is 0 or 1 in float.
// Against float64 the result is within 2.3e-7 relative for x > 0 and within 4e-7 absolute
// everywhere (torch's float32 tolerance: 1e-5 + 1.3e-6 relative). METAL_FUNC (always
// inline) so that the simulator's compiler inlines it into the element loop and
// vectorises that: the big kernel file exhausts GCC's inlining budget otherwise.
METAL_FUNC float metalx_gelu_cdf(float x) {
  const float z_full = fabs(x) * METALX_SQRT1_2_F;
  const float z = z_full < 4.0f ? z_full : 4.0f;
  const float p =
      1.12837934f +
      z * (0.636609316f +
           z * (0.102857895f +
                z * (-0.0193912294f +
                     z * (0.000179512455f +
                          z * (0.00141516805f +
                               z * (-0.000540429086f +
                                    z * (0.000106787724f + z * (-1.14816221e-05f + z * 5.29481383e-07f))))))));
  const float half_erfc = z_full > 4.0f ? 0.0f : 0.5f * exp(-z * p);
  return x < 0.0f ? half_erfc : 1.0f - half_erfc;
}

template <typename M> struct gelu_op : elementwise_fn {
  METAL_FUNC M operator()(M x) const { return x * metalx_gelu_cdf(x); }
};
template <typename M> struct gelu_tanh_op : elementwise_fn {
  METAL_FUNC M operator()(M x) const {
    const M inner = METALX_2_SQRTPI_F * METALX_SQRT1_2_F * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanh(inner));
  }
};

template <typename M> struct silu_op : elementwise_fn {
  METAL_FUNC M operator()(M x) const { return x / (1.0f + exp(-x)); }
};

// softplus(x; beta, threshold); also inside mish and log_sigmoid.
inline float metalx_softplus(float x) { return x > 20.0f ? x : metalx_log1p(exp(x)); }

template <typename M> struct mish_op : elementwise_fn {
  METAL_FUNC M operator()(M x) const { return x * tanh(metalx_softplus(x)); }
};

// Metal's min/max drop a NaN operand; CPU's hardsigmoid returns NaN for NaN.
template <typename M> struct hardsigmoid_op : elementwise_fn {
  METAL_FUNC M operator()(M x) const { return isnan(x) ? x : min(max(x + 3.0f, 0.0f), 6.0f) / 6.0f; }
};
template <typename M> struct hardswish_op : elementwise_fn {
  METAL_FUNC M operator()(M x) const { return x * min(max(x + 3.0f, 0.0f), 6.0f) / 6.0f; }
};

template <typename M> struct softplus_op : elementwise_fn {
  M beta, threshold;
  void load(constant OpScalars& k) {
    beta = k.f[0];
    threshold = k.f[1];
  }
  METAL_FUNC M operator()(M x) const { return x * beta > threshold ? x : metalx_log1p(exp(x * beta)) / beta; }
};

template <typename M> struct softshrink_op : elementwise_fn {
  M lambd;
  void load(constant OpScalars& k) { lambd = k.f[0]; }
  METAL_FUNC M operator()(M x) const { return x > lambd ? x - lambd : (x < -lambd ? x + lambd : x * 0.0f); }
};
template <typename M> struct hardshrink_op : elementwise_fn {
  M lambd;
  void load(constant OpScalars& k) { lambd = k.f[0]; }
  METAL_FUNC M operator()(M x) const { return (x >= -lambd && x <= lambd) ? 0.0f : x; }
};

// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), stable for both signs.
template <typename M> struct log_sigmoid_op : elementwise_fn {
  METAL_FUNC M operator()(M x) const { return min(x, 0.0f) - metalx_log1p(exp(-fabs(x))); }
};

#define METALX_ACTIVATION(NAME) METALX_FOR_FLOATS(METALX_UNARY_KERNELS, NAME, NAME##_op)
METALX_ACTIVATION(leaky_relu)
METALX_ACTIVATION(elu)
METALX_ACTIVATION(gelu)
METALX_ACTIVATION(gelu_tanh)
METALX_ACTIVATION(silu)
METALX_ACTIVATION(mish)
METALX_ACTIVATION(hardsigmoid)
METALX_ACTIVATION(hardswish)
METALX_ACTIVATION(softplus)
METALX_ACTIVATION(softshrink)
METALX_ACTIVATION(hardshrink)
METALX_ACTIVATION(log_sigmoid)

// ---- gradients (binary) ----
// Operand order is that of torch's meta function for each op (noted per functor).

// (self, grad): self > 0 ? grad : grad * slope
template <typename M> struct leaky_relu_backward_op : elementwise_fn {
  M slope;
  void load(constant OpScalars& k) { slope = scalar_arg<M>(k, 0); }
  METAL_FUNC M operator()(M x, M grad) const { return x > M(0) ? grad : grad * slope; }
};

// (grad, self_or_result); scalars alpha, scale, input_scale, is_result.
template <typename M> struct elu_backward_op : elementwise_fn {
  M negcoef, poscoef, input_scale;
  bool is_result;
  void load(constant OpScalars& k) {
    negcoef = k.f[0] * k.f[1];
    poscoef = k.f[1];
    input_scale = k.f[2];
    is_result = k.f[3] != 0.0f;
  }
  METAL_FUNC M operator()(M grad, M x) const {
    if (x > 0.0f) return grad * poscoef;
    return is_result ? grad * input_scale * (x + negcoef) : grad * input_scale * negcoef * exp(x * input_scale);
  }
};

// (grad, self)
// The CDF as gelu_op's (one exp, no division, and the same values).
template <typename M> struct gelu_backward_op : elementwise_fn {
  METAL_FUNC M operator()(M grad, M x) const {
    const M cdf = metalx_gelu_cdf(x);
    const M pdf = exp(-0.5f * x * x) * (METALX_2_SQRTPI_F * METALX_SQRT1_2_F * 0.5f);
    return grad * (cdf + x * pdf);
  }
};
template <typename M> struct gelu_tanh_backward_op : elementwise_fn {
  METAL_FUNC M operator()(M grad, M x) const {
    const M beta = METALX_2_SQRTPI_F * METALX_SQRT1_2_F, kappa = 0.044715f;
    const M x2 = x * x;
    const M t = tanh(beta * (x + kappa * x2 * x));
    const M left_derivative = 0.5f * (1.0f + t);
    const M right_derivative = 0.5f * x * (1.0f - t * t) * beta * (1.0f + 3.0f * kappa * x2);
    return grad * (left_derivative + right_derivative);
  }
};

// (grad, self)
template <typename M> struct silu_backward_op : elementwise_fn {
  METAL_FUNC M operator()(M grad, M x) const {
    const M s = 1.0f / (1.0f + exp(-x));
    return grad * s * (1.0f + x * (1.0f - s));
  }
};
template <typename M> struct mish_backward_op : elementwise_fn {
  METAL_FUNC M operator()(M grad, M x) const {
    const M s = 1.0f / (1.0f + exp(-x));
    const M t = tanh(metalx_softplus(x));
    return grad * (t + x * s * (1.0f - t * t));
  }
};

// (grad, self); hardtanh's scalars min, max.
template <typename M> struct hardtanh_backward_op : elementwise_fn {
  M lo, hi;
  void load(constant OpScalars& k) {
    lo = scalar_arg<M>(k, 0);
    hi = scalar_arg<M>(k, 1);
  }
  METAL_FUNC M operator()(M grad, M x) const { return (x <= lo || x >= hi) ? M(0) : grad; }
};
template <typename M> struct hardsigmoid_backward_op : elementwise_fn {
  METAL_FUNC M operator()(M grad, M x) const { return (x > -3.0f && x < 3.0f) ? grad / 6.0f : 0.0f; }
};
template <typename M> struct hardswish_backward_op : elementwise_fn {
  METAL_FUNC M operator()(M grad, M x) const {
    if (x <= -3.0f) return 0.0f;
    if (x < 3.0f) return grad * (x / 3.0f + 0.5f);
    return grad;
  }
};
// (grad, self); beta, threshold.
template <typename M> struct softplus_backward_op : elementwise_fn {
  M beta, threshold;
  void load(constant OpScalars& k) {
    beta = k.f[0];
    threshold = k.f[1];
  }
  METAL_FUNC M operator()(M grad, M x) const {
    const M z = exp(x * beta);
    return x * beta > threshold ? grad : grad * z / (z + 1.0f);
  }
};
// (grad, self); lambd. Both shrinks have the same gradient.
template <typename M> struct shrink_backward_op : elementwise_fn {
  M lambd;
  void load(constant OpScalars& k) { lambd = k.f[0]; }
  METAL_FUNC M operator()(M grad, M x) const { return (x >= -lambd && x <= lambd) ? 0.0f : grad; }
};
// (grad, self)
template <typename M> struct log_sigmoid_backward_op : elementwise_fn {
  METAL_FUNC M operator()(M grad, M x) const {
    const M z = exp(-fabs(x));
    return x < 0.0f ? grad * (1.0f - z / (1.0f + z)) : grad * (z / (1.0f + z));
  }
};
// (grad, output)
template <typename M> struct sigmoid_backward_op : elementwise_fn {
  METAL_FUNC M operator()(M grad, M y) const { return grad * (1.0f - y) * y; }
};
template <typename M> struct tanh_backward_op : elementwise_fn {
  METAL_FUNC M operator()(M grad, M y) const { return grad * (1.0f - y * y); }
};

#define METALX_GRADIENT(NAME) METALX_FOR_FLOATS(METALX_BINARY_KERNELS, NAME, NAME##_op)
METALX_GRADIENT(leaky_relu_backward)
METALX_GRADIENT(elu_backward)
METALX_GRADIENT(gelu_backward)
METALX_GRADIENT(gelu_tanh_backward)
METALX_GRADIENT(silu_backward)
METALX_GRADIENT(mish_backward)
METALX_GRADIENT(hardtanh_backward)
METALX_GRADIENT(hardsigmoid_backward)
METALX_GRADIENT(hardswish_backward)
METALX_GRADIENT(softplus_backward)
METALX_GRADIENT(shrink_backward)
METALX_GRADIENT(log_sigmoid_backward)
METALX_GRADIENT(sigmoid_backward)
METALX_GRADIENT(tanh_backward)
