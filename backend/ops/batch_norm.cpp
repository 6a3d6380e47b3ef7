// batch_norm on metalx: aten::native_batch_norm and native_batch_norm_backward (what
// F.batch_norm, nn.BatchNorm*d and nn.InstanceNorm*d run, in training and eval, and
// autograd's formula for them). Float32, float16 and bfloat16 inputs run
// kernels/batch_norm.metal, contiguous or channels_last read in place; the per-channel
// tensors may be of the input's dtype or float (autocast's mixed case), as on CPU.
// Anything else (float64, an empty input, a layout the kernels cannot walk as
// [N, C, spatial] with one spatial stride after a copy) runs CPU's kernels through the
// fallback.
#include <ATen/ATen.h>
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

constexpr uint64_t kGroup = 256;  // kernels/batch_norm.metal's METALX_BN_GROUP

// Mirrors kernels/batch_norm.metal's BatchNormShape and flags.
struct BatchNormShape {
  uint64_t batch = 0, channels = 0, spatial = 1;
  uint64_t stride_n = 0, stride_c = 0, stride_s = 1;
  uint64_t numel = 0;
  float eps = 0, momentum = 0;
  uint32_t flags = 0;
  uint32_t threads = 1;
  uint32_t per_thread = 1;
};
constexpr uint32_t kHasWeight = 1, kHasBias = 2, kUpdateRunning = 4, kStatsAreVar = 8, kTraining = 16;
constexpr uint32_t kRoundStats = 256;

KernelFamily stats_kernels("batch_norm_stats", launch::kFloatTypes);
KernelFamily apply_kernels("batch_norm_apply", launch::kFloatTypes);
KernelFamily backward_reduce_kernels("batch_norm_backward_reduce", launch::kFloatTypes);
KernelFamily backward_apply_kernels("batch_norm_backward_apply", launch::kFloatTypes);

bool defined(const std::optional<Tensor>& t) { return t.has_value() && t->defined(); }

std::optional<DType> inputType(c10::ScalarType t) {
  switch (t) {
    case at::kFloat: return DType::Float32;
    case at::kHalf: return DType::Float16;
    case at::kBFloat16: return DType::BFloat16;
    default: return std::nullopt;
  }
}

// The dtype of the per-channel tensors: float for a half input with float parameters
// (CPU's mixed type), else the input's; nullopt when they mix other dtypes.
std::optional<c10::ScalarType> paramType(const Tensor& input, std::initializer_list<const std::optional<Tensor>*> ps) {
  std::optional<c10::ScalarType> type;
  for (const std::optional<Tensor>* p : ps) {
    if (!defined(*p)) continue;
    const c10::ScalarType t = (*p)->scalar_type();
    if (t != input.scalar_type() && t != at::kFloat) return std::nullopt;
    if (type && *type != t) return std::nullopt;
    type = t;
  }
  return type.value_or(input.scalar_type());
}

// The input as the kernels walk it (itself when contiguous or channels_last) and its
// shape; the output gets the same strides.
Tensor layoutFor(const Tensor& input, BatchNormShape& s) {
  const int64_t dim = input.dim();
  const bool channels_last = !input.is_contiguous() &&
                             ((dim == 4 && input.is_contiguous(at::MemoryFormat::ChannelsLast)) ||
                              (dim == 5 && input.is_contiguous(at::MemoryFormat::ChannelsLast3d)));
  const Tensor x = channels_last ? input : input.contiguous();
  s.batch = x.size(0);
  s.channels = x.size(1);
  s.spatial = 1;
  for (int64_t d = 2; d < dim; ++d) s.spatial *= x.size(d);
  s.numel = x.numel();
  if (channels_last) {
    s.stride_n = s.channels * s.spatial, s.stride_c = 1, s.stride_s = s.channels;
  } else {
    s.stride_n = s.channels * s.spatial, s.stride_c = s.spatial, s.stride_s = 1;
  }
  return x;
}

Tensor asFloat(const std::optional<Tensor>& t) {
  return defined(t) ? t->to(at::kFloat).contiguous() : Tensor();
}

uint64_t ceilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Per-channel kernels are a threadgroup per channel; elementwise ones a thread per
// `per_thread` elements.
void encode(Stream& stream, const rt::ComputePipelinePtr& pipeline, std::initializer_list<const Tensor*> tensors,
            const BatchNormShape& s, bool per_channel) {
  launch::encodeKernel(stream, pipeline, tensors, s,
                       per_channel ? launch::Grid::groups(s.channels, s.threads)
                                   : launch::Grid::threads(ceilDiv(s.numel, s.per_thread), kGroup));
}

// A GPU takes a threadgroup per channel and an element per thread; the simulator, whose
// threads are loop iterations, a thread per channel and runs of elements.
void sizeWork(Stream& stream, BatchNormShape& s) {
  const bool simulated = stream.device().info().is_simulated;
  s.threads = simulated ? 1 : kGroup;
  s.per_thread = simulated ? 64 : 1;
}

std::tuple<Tensor, Tensor, Tensor> nativeBatchNorm(const Tensor& input, const std::optional<Tensor>& weight,
                                                   const std::optional<Tensor>& bias,
                                                   const std::optional<Tensor>& running_mean,
                                                   const std::optional<Tensor>& running_var, bool training,
                                                   double momentum, double eps) {
  const std::optional<DType> type = inputType(input.scalar_type());
  const std::optional<c10::ScalarType> ptype = paramType(input, {&weight, &bias, &running_mean, &running_var});
  const bool has_running = defined(running_mean) && defined(running_var);
  if (!type || !ptype || input.dim() < 2 || input.numel() == 0 || (!training && !has_running) ||
      defined(running_mean) != defined(running_var))
    return resultTensors<3>(cpuFallbackCall("aten::native_batch_norm", "", input, weight, bias, running_mean,
                                            running_var, training, momentum, eps));
  BatchNormShape s;
  const Tensor x = layoutFor(input, s);
  for (const std::optional<Tensor>* p : {&weight, &bias, &running_mean, &running_var})
    TORCH_CHECK(!defined(*p) || (*p)->numel() == static_cast<int64_t>(s.channels), "native_batch_norm: expected ",
                s.channels, " elements in each per-channel tensor, got ", (*p)->numel());
  s.eps = static_cast<float>(eps);
  s.momentum = static_cast<float>(momentum);
  Stream& stream = currentStream(input.device().index());
  sizeWork(stream, s);

  const at::TensorOptions float_options = input.options().dtype(at::kFloat);
  Tensor mean, stat;  // float: the batch's mean and invstd, or the running mean and var
  Tensor run_mean, run_var;
  if (training) {
    mean = at::empty({static_cast<int64_t>(s.channels)}, float_options);
    stat = at::empty_like(mean);
    if (has_running) {
      s.flags |= kUpdateRunning;
      // The kernel updates float running stats in place; others through float copies.
      const bool in_place = *ptype == at::kFloat && running_mean->is_contiguous() && running_var->is_contiguous();
      run_mean = in_place ? *running_mean : asFloat(running_mean);
      run_var = in_place ? *running_var : asFloat(running_var);
    } else {
      run_mean = mean, run_var = stat;  // not written
    }
    // Half parameters: CPU keeps the batch's stats (mean and sum of squared deviations)
    // in the input's dtype and normalises with those.
    if (*ptype != at::kFloat) s.flags |= kRoundStats;
    encode(stream, stats_kernels.pipeline(stream, Variant::Plain, *type), {&x, &mean, &stat, &run_mean, &run_var}, s,
           true);
    if (has_running && !run_mean.is_same(*running_mean)) {
      running_mean->copy_(run_mean);
      running_var->copy_(run_var);
    }
  } else {
    mean = asFloat(running_mean);
    stat = asFloat(running_var);
    s.flags |= kStatsAreVar;
  }
  const Tensor w = asFloat(weight), b = asFloat(bias);
  if (w.defined()) s.flags |= kHasWeight;
  if (b.defined()) s.flags |= kHasBias;
  Tensor out = at::empty_like(x);
  encode(stream, apply_kernels.pipeline(stream, Variant::Plain, *type),
         {&x, &mean, &stat, w.defined() ? &w : &mean, b.defined() ? &b : &mean, &out}, s, false);

  const at::TensorOptions param_options = input.options().dtype(*ptype);
  if (!training) return {out, at::empty({0}, param_options), at::empty({0}, param_options)};
  if (*ptype != at::kFloat) return {out, mean.to(*ptype), stat.to(*ptype)};
  return {out, mean, stat};
}

std::tuple<Tensor, Tensor, Tensor> nativeBatchNormBackward(
    const Tensor& grad_out, const Tensor& input, const std::optional<Tensor>& weight,
    const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
    const std::optional<Tensor>& save_mean, const std::optional<Tensor>& save_invstd, bool train, double eps,
    std::array<bool, 3> output_mask) {
  const std::optional<DType> type = inputType(input.scalar_type());
  const std::optional<c10::ScalarType> ptype =
      paramType(input, {&weight, &running_mean, &running_var, &save_mean, &save_invstd});
  const bool has_stats = train ? defined(save_mean) && defined(save_invstd) && save_mean->numel() > 0
                               : defined(running_mean) && defined(running_var);
  if (!type || !ptype || input.dim() < 2 || input.numel() == 0 || !has_stats ||
      grad_out.scalar_type() != input.scalar_type() || grad_out.sizes() != input.sizes())
    return resultTensors<3>(cpuFallbackCall("aten::native_batch_norm_backward", "", grad_out, input, weight,
                                            running_mean, running_var, save_mean, save_invstd, train, eps,
                                            output_mask));
  BatchNormShape s;
  const Tensor x = layoutFor(input, s);
  // grad_out walked with x's strides.
  const Tensor dyx = grad_out.strides() == x.strides() ? grad_out : at::empty_like(x).copy_(grad_out);
  s.eps = static_cast<float>(eps);
  Stream& stream = currentStream(input.device().index());
  sizeWork(stream, s);
  const Tensor mean = asFloat(train ? save_mean : running_mean);
  const Tensor stat = asFloat(train ? save_invstd : running_var);
  if (!train) s.flags |= kStatsAreVar;
  const Tensor w = asFloat(weight);
  if (w.defined()) s.flags |= kHasWeight;

  const int64_t C = static_cast<int64_t>(s.channels);
  const bool need_sums = output_mask[1] || output_mask[2] || (output_mask[0] && train);
  Tensor sums = need_sums ? at::empty({2 * C}, input.options().dtype(at::kFloat)) : Tensor();
  if (need_sums)
    encode(stream, backward_reduce_kernels.pipeline(stream, Variant::Plain, *type), {&dyx, &x, &mean, &stat, &sums},
           s, true);
  Tensor dx, dw, db;
  if (output_mask[0]) {
    if (train) s.flags |= kTraining;
    dx = at::empty_like(x);
    encode(stream, backward_apply_kernels.pipeline(stream, Variant::Plain, *type),
           {&dyx, &x, &mean, &stat, w.defined() ? &w : &mean, need_sums ? &sums : &mean, &dx}, s, false);
  }
  const at::TensorOptions param_options = input.options().dtype(*ptype);
  if (output_mask[1]) dw = sums.narrow(0, C, C).to(param_options, /*non_blocking=*/false, /*copy=*/true);
  if (output_mask[2]) db = sums.narrow(0, 0, C).to(param_options, /*non_blocking=*/false, /*copy=*/true);
  return {dx, dw, db};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", TORCH_FN(nativeBatchNorm));
  m.impl("native_batch_norm_backward", TORCH_FN(nativeBatchNormBackward));
}

}  // namespace
}  // namespace metalx
