// The AMP ops torch.amp.GradScaler calls each step, on metalx (kernels/amp.metal):
//   _amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
//   _amp_update_scale_(scale, growth_tracker, found_inf, growth, backoff, interval)
// Both read and write their one-element tensors on the device, so a scaled step needs
// no host synchronisation until GradScaler itself reads found_inf. Argument checks are
// CPU's and CUDA's, naming metalx. float32, float16 and bfloat16 grads run natively
// (a non-dense one through a dense copy); float64 grads run CPU's kernel on the fallback.
#include <ATen/ATen.h>
#include <ATen/native/ForeachUtils.h>
#include <torch/library.h>

#include <cmath>
#include <vector>

#include "allocator.h"
#include "core/stream_pool.h"
#include "launch/kernel_table.h"
#include "launch/threads.h"
#include "launch/multi_tensor.h"
#include "launch/structured.h"

namespace metalx {
namespace {

using at::Tensor;
using kernels::DType;
using launch::KernelFamily;

KernelFamily unscale_kernels("amp_unscale", launch::kFloatTypes);
KernelFamily update_scale_kernels("amp_update_scale", {DType::Float32});

bool onMetalx(const Tensor& t) { return t.device().type() == c10::DeviceType::PrivateUse1; }

void checkOneFloat(const Tensor& t, const char* name) {
  TORCH_CHECK(onMetalx(t), name, " must be a metalx tensor.");
  TORCH_CHECK(t.numel() == 1, name, " must be a 1-element tensor.");
  TORCH_CHECK(t.scalar_type() == at::kFloat, name, " must be a float tensor.");
}

bool hasKernel(c10::ScalarType t) { return t == at::kFloat || t == at::kHalf || t == at::kBFloat16; }

void unscaleOnDevice(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale) {
  launch::MultiTensorCall call;
  call.lists = {at::TensorList(grads)};
  call.extras = {inv_scale, found_inf};
  launch::runMultiTensor(unscale_kernels, grads[0].scalar_type(), call);
}

void nonFiniteCheckAndUnscale(at::TensorList grads, Tensor& found_inf, const Tensor& inv_scale) {
  if (grads.empty()) return;
  checkOneFloat(inv_scale, "inv_scale");
  checkOneFloat(found_inf, "found_inf");
  TORCH_CHECK(inv_scale.device() == found_inf.device(), "inv_scale and found_inf must be on the same device.");
  at::native::check_foreach_api_restrictions(grads);
  const c10::Device device = found_inf.device();
  for (const Tensor& t : grads) {
    TORCH_CHECK(onMetalx(t), "one of scaled_grads was not a metalx tensor.");
    TORCH_CHECK(t.device() == device, "scaled_grads must be on the same device.");
    TORCH_CHECK(t.layout() == at::kStrided, "one of scaled_grads was not a strided tensor.");
  }
  // GradScaler passes grads of one dtype; any mix is split by dtype here. Dense grads
  // are updated where they lie; others through a dense copy written back after.
  std::vector<Tensor> dense[3], copies_of, copies, cpu_only;
  for (const Tensor& t : grads) {
    if (t.numel() == 0) continue;
    if (!hasKernel(t.scalar_type())) {
      cpu_only.push_back(t);
      continue;
    }
    const int k = t.scalar_type() == at::kFloat ? 0 : t.scalar_type() == at::kHalf ? 1 : 2;
    if (t.is_non_overlapping_and_dense()) {
      dense[k].push_back(t);
    } else {
      copies_of.push_back(t);
      copies.push_back(t.contiguous());
      dense[k].push_back(copies.back());
    }
  }
  for (const auto& group : dense)
    if (!group.empty()) unscaleOnDevice(group, found_inf, inv_scale);
  for (size_t i = 0; i < copies.size(); ++i) copies_of[i].copy_(copies[i]);
  if (!cpu_only.empty()) {
    static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(
        "aten::_amp_foreach_non_finite_check_and_unscale_", "");
    torch::jit::Stack stack{c10::IValue(cpu_only), c10::IValue(found_inf), c10::IValue(inv_scale)};
    launch::runOutOnCpuFallback(op, stack);
  }
}

// Mirrors kernels/amp.metal's AmpScaleParams.
struct AmpScaleParams {
  float growth_hi, growth_lo;
  float backoff_hi, backoff_lo;
  int64_t growth_interval;
};
static_assert(sizeof(AmpScaleParams) == 24, "AmpScaleParams must match kernels/amp.metal");

// f as hi + lo, two floats whose sum is f to about 48 bits (the kernel multiplies by both).
void split(double f, float& hi, float& lo) {
  hi = static_cast<float>(f);
  lo = std::isfinite(hi) ? static_cast<float>(f - static_cast<double>(hi)) : 0.0f;
}

Tensor& updateScale(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                    double backoff_factor, int64_t growth_interval) {
  TORCH_CHECK(onMetalx(growth_tracker), "growth_tracker must be a metalx tensor.");
  TORCH_CHECK(onMetalx(scale), "current_scale must be a metalx tensor.");
  TORCH_CHECK(onMetalx(found_inf), "found_inf must be a metalx tensor.");
  TORCH_CHECK(growth_tracker.numel() == 1, "growth_tracker must be a 1-element tensor.");
  TORCH_CHECK(scale.numel() == 1, "current_scale must be a 1-element tensor.");
  TORCH_CHECK(found_inf.numel() == 1, "found_inf must be a 1-element tensor.");
  TORCH_CHECK(growth_tracker.scalar_type() == at::kInt, "growth_tracker must be an int tensor.");
  TORCH_CHECK(scale.scalar_type() == at::kFloat, "current_scale must be a float tensor.");
  TORCH_CHECK(found_inf.scalar_type() == at::kFloat, "found_inf must be a float tensor.");
  TORCH_CHECK(growth_tracker.device() == scale.device() && found_inf.device() == scale.device(),
              "current_scale, growth_tracker and found_inf must be on the same device.");
  AmpScaleParams p;
  split(growth_factor, p.growth_hi, p.growth_lo);
  split(backoff_factor, p.backoff_hi, p.backoff_lo);
  p.growth_interval = growth_interval;
  launch::encodeThreads(update_scale_kernels, launch::Variant::Plain, DType::Float32,
                        {&scale, &growth_tracker, &found_inf}, p, 1);
  return scale;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_", TORCH_FN(nonFiniteCheckAndUnscale));
  m.impl("_amp_update_scale_", TORCH_FN(updateScale));
}

}  // namespace
}  // namespace metalx
