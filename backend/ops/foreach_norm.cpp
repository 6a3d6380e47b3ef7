// _foreach_norm on metalx (clip_grad_norm_'s per-tensor norms): the 1-, 2- and
// inf-norms of float32, float16 and bfloat16 lists that meet torch's fast-path rules, as
// multi-tensor passes (kernels/foreach.metal): the first reduces each thread's elements
// to a float partial, later ones reduce the partials the same way until one is left per
// tensor, and a last pass writes the norms in the tensors' dtype. No synchronisation.
// Other orders, dtypes and layouts take torch's per-tensor path.
#include <ATen/ATen.h>
#include <ATen/native/ForeachUtils.h>
#include <ATen/ops/_foreach_norm_native.h>
#include <torch/library.h>

#include <cmath>
#include <vector>

#include "launch/multi_tensor.h"

namespace metalx {
namespace {

using at::Tensor;
using at::TensorList;
using launch::KernelFamily;
using launch::MultiTensorCall;

// Modes, as kernels/foreach.metal defines them.
constexpr uint32_t kL1 = 1, kL2 = 2, kInf = 3, kCombine = 4;

KernelFamily partial_kernels("foreach_norm_partial", launch::kFloatTypes);
KernelFamily finish_kernels("foreach_norm_finish", launch::kFloatTypes);

uint32_t modeOf(const at::Scalar& ord) {
  if (ord.isComplex() || ord.isBoolean()) return 0;
  const double p = ord.toDouble();
  return p == 1 ? kL1 : p == 2 ? kL2 : std::isinf(p) && p > 0 ? kInf : 0;
}

bool fastRoute(TensorList self, uint32_t mode, std::optional<at::ScalarType> dtype) {
  const Tensor& first = self[0];
  const c10::ScalarType t = first.scalar_type();
  if (mode == 0 || (dtype.has_value() && *dtype != t)) return false;
  if (first.device().type() != c10::DeviceType::PrivateUse1 || !(t == at::kFloat || t == at::kHalf || t == at::kBFloat16))
    return false;
  // CPU's inf-norm of an empty tensor is an error: its path raises it.
  if (mode == kInf)
    for (const Tensor& x : self)
      if (x.numel() == 0) return false;
  return at::native::can_use_fast_route({self});
}

void pass(KernelFamily& kernels, c10::ScalarType dtype, std::vector<TensorList> lists, uint32_t flags) {
  MultiTensorCall call;
  call.lists = std::move(lists);
  call.args.flags = flags;
  launch::runMultiTensor(kernels, dtype, call);
}

std::vector<Tensor> norm(TensorList self, const at::Scalar& ord, std::optional<at::ScalarType> dtype) {
  at::native::check_foreach_api_restrictions(self);
  const uint32_t mode = modeOf(ord);
  if (!fastRoute(self, mode, dtype)) return at::native::foreach_tensor_norm_slow(self, ord, dtype);
  const uint32_t per_thread = launch::multiTensorElementsPerThread(self[0].device().index());
  const at::TensorOptions partial_options = self[0].options().dtype(at::kFloat);

  std::vector<Tensor> out;
  std::vector<Tensor> inputs, results;  // tensors with elements, and their norms
  out.reserve(self.size());
  for (const Tensor& x : self) {
    out.push_back(x.numel() == 0 ? at::zeros({}, x.options()) : at::empty({}, x.options()));
    if (x.numel() > 0) {
      inputs.push_back(x);
      results.push_back(out.back());
    }
  }
  if (inputs.empty()) return out;

  std::vector<Tensor> last(inputs.size());  // each tensor's single final partial
  std::vector<size_t> active(inputs.size());
  for (size_t i = 0; i < active.size(); ++i) active[i] = i;
  std::vector<Tensor> current = inputs;
  bool first = true;
  while (!current.empty()) {
    std::vector<Tensor> partials;
    partials.reserve(current.size());
    for (const Tensor& t : current)
      partials.push_back(at::empty({(t.numel() + per_thread - 1) / per_thread}, partial_options));
    pass(partial_kernels, first ? self[0].scalar_type() : at::kFloat, {current, partials}, mode | (first ? 0 : kCombine));
    first = false;
    std::vector<Tensor> next;
    std::vector<size_t> still;
    for (size_t k = 0; k < partials.size(); ++k) {
      if (partials[k].numel() == 1) last[active[k]] = partials[k];
      else {
        next.push_back(partials[k]);
        still.push_back(active[k]);
      }
    }
    current = std::move(next);
    active = std::move(still);
  }
  pass(finish_kernels, self[0].scalar_type(), {last, results}, mode);
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("_foreach_norm.Scalar", TORCH_FN(norm)); }

}  // namespace
}  // namespace metalx
