// group_norm on metalx: aten::native_group_norm and native_group_norm_backward (what
// F.group_norm and nn.GroupNorm run). Float32, float16 and bfloat16 inputs with
// parameters of the same dtype run kernels/group_norm.metal, in float as CPU; others
// (float64, float parameters on a half input) run CPU's kernels through the fallback.
// Inputs are made contiguous first: the kernels walk [N, C, HxW].
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

constexpr uint64_t kGroup = 256;

// Mirrors kernels/group_norm.metal's GroupNormShape.
struct GroupNormShape {
  uint64_t batch = 0, channels = 0, hw = 0, groups = 1;
  float eps = 0;
  uint32_t has_weight = 0, has_bias = 0;
};

KernelFamily forward_kernels("group_norm", launch::kFloatTypes);
KernelFamily channel_sums_kernels("group_norm_channel_sums", launch::kFloatTypes);
KernelFamily backward_kernels("group_norm_backward", launch::kFloatTypes);

bool defined(const std::optional<Tensor>& t) { return t.has_value() && t->defined(); }

std::optional<DType> nativeType(const Tensor& input, std::initializer_list<const std::optional<Tensor>*> params) {
  std::optional<DType> t;
  switch (input.scalar_type()) {
    case at::kFloat: t = DType::Float32; break;
    case at::kHalf: t = DType::Float16; break;
    case at::kBFloat16: t = DType::BFloat16; break;
    default: return std::nullopt;
  }
  for (const std::optional<Tensor>* p : params)
    if (defined(*p) && (*p)->scalar_type() != input.scalar_type()) return std::nullopt;
  return t;
}

void encode(Stream& stream, const rt::ComputePipelinePtr& pipeline, std::initializer_list<const Tensor*> tensors,
            const GroupNormShape& s, uint64_t threads) {
  launch::encodeKernel(stream, pipeline, tensors, s, launch::Grid::threads(threads, kGroup));
}

GroupNormShape shapeOf(int64_t N, int64_t C, int64_t HxW, int64_t group) {
  GroupNormShape s;
  s.batch = N, s.channels = C, s.hw = HxW, s.groups = group;
  return s;
}

std::tuple<Tensor, Tensor, Tensor> nativeGroupNorm(const Tensor& input, const std::optional<Tensor>& weight,
                                                   const std::optional<Tensor>& bias, int64_t N, int64_t C,
                                                   int64_t HxW, int64_t group, double eps) {
  const std::optional<DType> type = nativeType(input, {&weight, &bias});
  const bool shapes_ok = group > 0 && C % group == 0 && input.numel() == N * C * HxW &&
                         (!defined(weight) || weight->numel() == C) && (!defined(bias) || bias->numel() == C);
  if (!type || !shapes_ok || (N * group > 0 && HxW * C == 0))
    return resultTensors<3>(cpuFallbackCall("aten::native_group_norm", "", input, weight, bias, N, C, HxW, group, eps));
  const Tensor x = input.contiguous();
  Tensor y = at::empty(x.sizes(), x.options());
  Tensor mean = at::empty({N, group}, x.options());
  Tensor rstd = at::empty({N, group}, x.options());
  GroupNormShape s = shapeOf(N, C, HxW, group);
  s.eps = static_cast<float>(eps);
  s.has_weight = defined(weight), s.has_bias = defined(bias);
  const Tensor w = s.has_weight ? weight->contiguous() : x;
  const Tensor b = s.has_bias ? bias->contiguous() : x;
  Stream& stream = currentStream(input.device().index());
  encode(stream, forward_kernels.pipeline(stream, Variant::Plain, *type), {&x, &w, &b, &y, &mean, &rstd}, s,
         N * group);
  return {y, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> nativeGroupNormBackward(const Tensor& grad_out, const Tensor& input,
                                                           const Tensor& mean, const Tensor& rstd,
                                                           const std::optional<Tensor>& weight, int64_t N, int64_t C,
                                                           int64_t HxW, int64_t group,
                                                           std::array<bool, 3> output_mask) {
  const std::optional<DType> type = nativeType(input, {&weight});
  const bool same = grad_out.scalar_type() == input.scalar_type() && mean.scalar_type() == input.scalar_type() &&
                    rstd.scalar_type() == input.scalar_type();
  const bool shapes_ok = group > 0 && C % group == 0 && input.numel() == N * C * HxW &&
                         grad_out.numel() == input.numel() && (!defined(weight) || weight->numel() == C);
  if (!type || !same || !shapes_ok || N * C * HxW == 0)
    return resultTensors<3>(cpuFallbackCall("aten::native_group_norm_backward", "", grad_out, input, mean, rstd,
                                            weight, N, C, HxW, group, output_mask));
  const Tensor x = input.contiguous(), dy = grad_out.contiguous();
  const Tensor mc = mean.contiguous(), rc = rstd.contiguous();
  GroupNormShape s = shapeOf(N, C, HxW, group);
  s.has_weight = defined(weight);
  const Tensor w = s.has_weight ? weight->contiguous() : x;
  Stream& stream = currentStream(input.device().index());
  Tensor sums = at::empty({N, C, 2}, x.options().dtype(at::kFloat));
  encode(stream, channel_sums_kernels.pipeline(stream, Variant::Plain, *type), {&dy, &x, &sums}, s, N * C);
  Tensor dx, dw, db;
  if (output_mask[0]) {
    dx = at::empty(x.sizes(), x.options());
    encode(stream, backward_kernels.pipeline(stream, Variant::Plain, *type), {&dy, &x, &mc, &rc, &w, &sums, &dx}, s,
           N * group);
  }
  // Per channel, over the batch: dW = sum((ds - db * mean) * rstd), dB = sum(db).
  const Tensor per_group = sums.view({N, group, C / group, 2});
  const Tensor ds = per_group.select(3, 0), dbs = per_group.select(3, 1);
  const Tensor m = mc.to(at::kFloat).view({N, group, 1}), r = rc.to(at::kFloat).view({N, group, 1});
  const c10::ScalarType ptype = s.has_weight ? weight->scalar_type() : input.scalar_type();
  if (output_mask[1]) dw = ((ds - dbs * m) * r).sum(0).reshape({C}).to(ptype);
  if (output_mask[2]) db = dbs.sum(0).reshape({C}).to(ptype);
  return {dx, dw, db};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_group_norm", TORCH_FN(nativeGroupNorm));
  m.impl("native_group_norm_backward", TORCH_FN(nativeGroupNormBackward));
}

}  // namespace
}  // namespace metalx
