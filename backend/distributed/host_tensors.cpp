#include "distributed/host_tensors.h"

#include <ATen/ATen.h>

#include <set>

#include "device.h"
#include "distributed/gloo_dtypes.h"
#include "fallback_memory.h"

namespace metalx::distributed {

namespace {

bool isMetalx(const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; }

}  // namespace

void HostTensors::waitForDevices(const std::vector<at::Tensor>& tensors) {
  std::set<c10::DeviceIndex> devices;
  for (const at::Tensor& t : tensors) {
    if (isMetalx(t)) devices.insert(t.device().index());
  }
  for (c10::DeviceIndex d : devices) synchronizeCurrentStream(d);
}

at::Tensor HostTensors::host(const at::Tensor& t, bool copy_back) {
  if (!isMetalx(t)) return t;  // CPU tensors (and undefined ones) go to Gloo unchanged
  TORCH_CHECK(t.layout() == c10::kStrided,
              "metalx collectives take strided (dense) tensors, got a tensor with layout ", t.layout());
  keep_alive_.push_back(t);
  at::Tensor alias = cpuAlias(t);
  if (!glooHasDtype(alias.scalar_type())) {
    if (!reduce_op_) {
      alias = asGlooBytes(alias);
    } else {
      GlooReducible reducible = asGlooReducible(alias, *reduce_op_);
      if (reducible.write_back) {  // a new, contiguous tensor in a wider type
        if (copy_back) copy_backs_.push_back(std::move(reducible.write_back));
        return reducible.tensor;
      }
      alias = reducible.tensor;  // the same memory, reinterpreted
    }
  }
  // Gloo reads a tensor as numel() elements from its data pointer.
  if (alias.is_contiguous() && !alias.is_neg() && !alias.is_conj()) return alias;
  at::Tensor staged = alias.contiguous().resolve_neg().resolve_conj();  // a new tensor
  if (copy_back) {
    copy_backs_.push_back([alias, staged]() mutable { alias.copy_(staged); });
  }
  return staged;
}

at::Tensor HostTensors::input(const at::Tensor& t) { return host(t, /*copy_back=*/false); }

at::Tensor HostTensors::output(const at::Tensor& t) { return host(t, /*copy_back=*/true); }

std::vector<at::Tensor> HostTensors::inputs(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (const at::Tensor& t : ts) out.push_back(input(t));
  return out;
}

std::vector<at::Tensor> HostTensors::outputs(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (const at::Tensor& t : ts) out.push_back(output(t));
  return out;
}

std::vector<std::vector<at::Tensor>> HostTensors::outputs(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<std::vector<at::Tensor>> out;
  out.reserve(lists.size());
  for (const auto& ts : lists) out.push_back(outputs(ts));
  return out;
}

void HostTensors::finish() {
  for (auto& copy_back : copy_backs_) copy_back();
  copy_backs_.clear();
}

}  // namespace metalx::distributed
