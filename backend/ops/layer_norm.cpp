// layer_norm on metalx: aten::native_layer_norm and native_layer_norm_backward (what
// F.layer_norm and nn.LayerNorm run, and autograd's formula for it). Inputs of float32,
// float16 or bfloat16 with weight and bias of the same dtype run
// kernels/layer_norm.metal, computing in float as CPU does; anything else (float64, a
// float weight on a half input, nothing to normalise over) runs CPU's kernels through
// the fallback. torch's own input checks run first, so errors are CPU's.
#include <ATen/ATen.h>
#include <ATen/native/layer_norm.h>
#include <torch/library.h>

#include <algorithm>

#include "allocator.h"
#include "core/stream_pool.h"
#include "cpu_fallback.h"
#include "launch/kernel_table.h"
#include "launch/threads.h"

namespace metalx {
namespace {

using at::Tensor;
using launch::KernelFamily;
using launch::Variant;
using kernels::DType;

constexpr uint64_t kGroup = 256;

// Mirrors kernels/layer_norm.metal's LayerNormShape.
struct LayerNormShape {
  uint64_t rows = 0, cols = 0;
  float eps = 0;
  uint32_t has_weight = 0, has_bias = 0, flags = 0;
};

KernelFamily forward_kernels("layer_norm", launch::kFloatTypes);
KernelFamily backward_kernels("layer_norm_backward", launch::kFloatTypes);
KernelFamily param_grad_kernels("layer_norm_param_grad", launch::kFloatTypes);

bool defined(const std::optional<Tensor>& t) { return t.has_value() && t->defined(); }

std::optional<DType> nativeType(const Tensor& input, const std::optional<Tensor>& weight,
                                const std::optional<Tensor>& bias) {
  std::optional<DType> t;
  switch (input.scalar_type()) {
    case at::kFloat: t = DType::Float32; break;
    case at::kHalf: t = DType::Float16; break;
    case at::kBFloat16: t = DType::BFloat16; break;
    default: return std::nullopt;
  }
  for (const std::optional<Tensor>* p : {&weight, &bias})
    if (defined(*p) && (*p)->scalar_type() != input.scalar_type()) return std::nullopt;
  return t;
}

// Threads per row: one on the simulator (its loops vectorise), a SIMD group on a GPU and
// for the few long rows that would leave the simulator's cores idle.
Variant chooseVariant(Stream& stream, uint64_t rows, uint64_t cols) {
  const bool simulated = stream.device().info().is_simulated;
  return simulated && !(rows < 8 && cols >= 4096) ? Variant::Plain : Variant::Rows;
}

void encode(Stream& stream, const rt::ComputePipelinePtr& pipeline, std::initializer_list<const Tensor*> tensors,
            const LayerNormShape& s, uint64_t threads) {
  launch::encodeKernel(stream, pipeline, tensors, s, launch::Grid::threads(threads, kGroup));
}

std::tuple<Tensor, Tensor, Tensor> nativeLayerNorm(const Tensor& input, at::IntArrayRef normalized_shape,
                                                   const std::optional<Tensor>& weight,
                                                   const std::optional<Tensor>& bias, double eps) {
  const Tensor w = defined(weight) ? *weight : Tensor();
  const Tensor b = defined(bias) ? *bias : Tensor();
  const auto [M, N] = at::native::_check_layer_norm_inputs(input, normalized_shape, w, b);
  const std::optional<DType> type = nativeType(input, weight, bias);
  if (!type || (M > 0 && N == 0))
    return resultTensors<3>(cpuFallbackCall("aten::native_layer_norm", "", input, normalized_shape, weight, bias, eps));

  const Tensor x = input.contiguous();
  Tensor y = at::empty(x.sizes(), x.options());
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  std::vector<int64_t> stat_shape(input.sizes().begin(), input.sizes().begin() + axis);
  stat_shape.resize(input.dim(), 1);
  Tensor mean = at::empty(stat_shape, x.options());
  Tensor rstd = at::empty(stat_shape, x.options());
  if (M == 0) return {y, mean, rstd};

  LayerNormShape s;
  s.rows = M;
  s.cols = N;
  s.eps = static_cast<float>(eps);
  s.has_weight = w.defined();
  s.has_bias = b.defined();
  const Tensor wc = w.defined() ? w.contiguous() : x;
  const Tensor bc = b.defined() ? b.contiguous() : x;
  Stream& stream = currentStream(input.device().index());
  const Variant variant = chooseVariant(stream, s.rows, s.cols);
  encode(stream, forward_kernels.pipeline(stream, variant, *type), {&x, &wc, &bc, &y, &mean, &rstd}, s,
         variant == Variant::Rows ? s.rows * 32 : s.rows);
  return {y, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> nativeLayerNormBackward(const Tensor& grad_out, const Tensor& input,
                                                           at::IntArrayRef normalized_shape, const Tensor& mean,
                                                           const Tensor& rstd, const std::optional<Tensor>& weight,
                                                           const std::optional<Tensor>& bias,
                                                           std::array<bool, 3> output_mask) {
  const Tensor w = defined(weight) ? *weight : Tensor();
  const Tensor b = defined(bias) ? *bias : Tensor();
  const auto [M, N] = at::native::_check_layer_norm_inputs(input, normalized_shape, w, b);
  const std::optional<DType> type = nativeType(input, weight, bias);
  const bool same_types = grad_out.scalar_type() == input.scalar_type() &&
                          mean.scalar_type() == input.scalar_type() && rstd.scalar_type() == input.scalar_type();
  if (!type || !same_types || (M > 0 && N == 0) || ((output_mask[1] || output_mask[2]) && !w.defined() && M > 0))
    return resultTensors<3>(cpuFallbackCall("aten::native_layer_norm_backward", "", grad_out, input,
                                            normalized_shape, mean, rstd, weight, bias, output_mask));

  const Tensor x = input.contiguous(), dy = grad_out.contiguous();
  const Tensor mc = mean.contiguous(), rc = rstd.contiguous();
  Tensor dx, dw, db;
  if (output_mask[0]) dx = at::empty(x.sizes(), x.options());
  // Parameter gradients of an empty batch are zeros, as on CPU.
  if (output_mask[1] && w.defined()) dw = M > 0 ? at::empty(w.sizes(), w.options()) : at::zeros_like(w);
  if (output_mask[2] && w.defined()) db = M > 0 ? at::empty(w.sizes(), w.options()) : at::zeros_like(w);
  if (M == 0) return {dx, dw, db};

  LayerNormShape s;
  s.rows = M;
  s.cols = N;
  s.has_weight = w.defined();
  const Tensor wc = w.defined() ? w.contiguous() : x;
  Stream& stream = currentStream(input.device().index());
  if (dx.defined()) {
    const Variant variant = chooseVariant(stream, s.rows, s.cols);
    encode(stream, backward_kernels.pipeline(stream, variant, *type), {&dy, &x, &mc, &rc, &wc, &dx}, s,
           variant == Variant::Rows ? s.rows * 32 : s.rows);
  }
  if (dw.defined() || db.defined()) {
    s.flags = (dw.defined() ? 1 : 0) | (db.defined() ? 2 : 0);
    const Tensor& dw_arg = dw.defined() ? dw : db;
    const Tensor& db_arg = db.defined() ? db : dw;
    encode(stream, param_grad_kernels.pipeline(stream, Variant::Plain, *type), {&dy, &x, &mc, &rc, &dw_arg, &db_arg},
           s, s.cols);
  }
  return {dx, dw, db};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_layer_norm", TORCH_FN(nativeLayerNorm));
  m.impl("native_layer_norm_backward", TORCH_FN(nativeLayerNormBackward));
}

}  // namespace
}  // namespace metalx
