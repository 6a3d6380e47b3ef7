// embedding_bag on the device (kernels/embedding_bag.metal): _embedding_bag and
// _embedding_bag_forward_only (what F.embedding_bag calls, with and without grad),
// _embedding_bag_backward (torch registers its generic implementation for CPU, CUDA
// and MPS only, so metalx registers it too), _embedding_bag_dense_backward and
// _embedding_bag_per_sample_weights_backward. float32/float16/bfloat16 weights, int32
// or int64 indices and offsets; float64 and sparse gradients run on the CPU fallback.
//
// Argument errors are CPU's, checked on the host. Values are checked on the device
// (ops/index_check.h) so that no host wait is needed: out-of-range indices, offsets[0]
// != 0 and offsets[-1] past the input raise CPU's messages at the next host wait (at
// the op with METALX_SYNC_INDEX_CHECKS=1).
//
// The auxiliary outputs follow CPU's: bag_size holds each bag's non-padding count for
// mean and max (zeros for sum), max_indices the winning index per (bag, column) for max
// (bag_size's copy otherwise). offset2bag is always computed (CPU leaves it empty on
// its fast sum path; its backward rebuilds it then), since the backward needs it.
#include <ATen/ATen.h>
#include <ATen/ops/_embedding_bag_backward_native.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <limits>

#include "cpu_fallback.h"
#include "launch/threads.h"
#include "launch/torch_dtype.h"
#include "ops/index_check.h"

namespace metalx {
namespace {

using at::Tensor;

enum BagMode : int64_t { kSum = 0, kMean = 1, kMax = 2 };

// Mirrors kernels/embedding_bag.metal's BagParams.
struct BagParams {
  uint64_t bags = 0;
  uint64_t width = 0;
  uint64_t num_indices = 0;
  uint64_t num_offsets = 0;
  int64_t num_weights = 0;
  int64_t padding_idx = -1;
  int64_t weight_stride0 = 0;
  int64_t weight_stride1 = 0;
  uint32_t mode = 0;
  uint32_t has_weights = 0;
  uint32_t round_to_even = 0;
  uint32_t unused = 0;
};
static_assert(sizeof(BagParams) == 80, "BagParams must match kernels/embedding_bag.metal");

launch::KernelFamily forwardLong("embedding_bag_forward_long", launch::kFloatTypes);
launch::KernelFamily forwardInt("embedding_bag_forward_int", launch::kFloatTypes);
launch::KernelFamily pswBackwardLong("embedding_bag_psw_backward_long", launch::kFloatTypes);
launch::KernelFamily pswBackwardInt("embedding_bag_psw_backward_int", launch::kFloatTypes);

bool defined(const std::optional<Tensor>& t) { return t.has_value() && t->defined(); }

// The kernel type of a float weight, or nullopt (float64: the fallback).
std::optional<kernels::DType> floatType(const Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return kernels::DType::Float32;
    case at::kHalf: return kernels::DType::Float16;
    case at::kBFloat16: return kernels::DType::BFloat16;
    default: return std::nullopt;
  }
}

// Indices and offsets in one index type (int64 when they differ), as CPU promotes them.
std::pair<Tensor, Tensor> promoted(const Tensor& indices, const Tensor& offsets) {
  if (indices.scalar_type() == offsets.scalar_type()) return {indices, offsets};
  return {indices.to(at::kLong), offsets.to(at::kLong)};
}

void checkIndexType(const Tensor& t, const char* name) {
  TORCH_CHECK(t.scalar_type() == at::kLong || t.scalar_type() == at::kInt, "embedding_bag(): Expected tensor for argument #1 '",
              name, "' to have one of the following scalar types: Long, Int; but got ", t.toString(),
              " instead (while checking arguments for embedding_bag)");
}

// CPU's argument checks, and the checks of offsets' values on the device.
void checkArguments(const Tensor& weight, const Tensor& indices, const Tensor& offsets, int64_t mode,
                    const std::optional<Tensor>& per_sample_weights, bool include_last_offset) {
  checkIndexType(indices, "indices");
  checkIndexType(offsets, "offsets");
  TORCH_CHECK(weight.dim() == 2, "embedding_bag: weight has to be a 2D Tensor, but got Tensor of dimension ",
              weight.dim());
  if (defined(per_sample_weights)) {
    TORCH_CHECK(mode == kSum, "embedding_bag: per_sample_weights only supported with mode='sum'");
    TORCH_CHECK(per_sample_weights->scalar_type() == weight.scalar_type(), "expected scalar type ",
                weight.scalar_type(), " but found ", per_sample_weights->scalar_type());
    TORCH_CHECK(per_sample_weights->dim() == 1);
    TORCH_CHECK(per_sample_weights->numel() == indices.numel());
  }
  if (include_last_offset)
    TORCH_CHECK(offsets.size(0) >= 1, "include_last_offset: number of offset should be at least 1");
  if (offsets.size(0) == 0) return;
  IndexCheck first;  // offsets[0] == 0
  first.high = 1;
  first.message = IndexMessage::OffsetsStart;
  checkIndicesOnDevice(offsets.narrow(0, 0, 1), first, "embedding_bag");
  IndexCheck last;  // offsets[-1] <= len(indices)
  last.low = std::numeric_limits<int64_t>::min();
  last.high = indices.size(0) + 1;
  last.size = indices.size(0);
  last.message = IndexMessage::OffsetsEnd;
  checkIndicesOnDevice(offsets.narrow(0, offsets.size(0) - 1, 1), last, "embedding_bag");
}

using BagOutputs = std::tuple<Tensor, Tensor, Tensor, Tensor>;

BagOutputs fallbackForward(const char* name, const Tensor& weight, const Tensor& indices, const Tensor& offsets,
                           bool scale_grad_by_freq, int64_t mode, bool sparse,
                           const std::optional<Tensor>& per_sample_weights, bool include_last_offset,
                           int64_t padding_idx) {
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
  torch::jit::Stack stack{weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
                          include_last_offset, padding_idx};
  cpuFallback(op, &stack);
  return {stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor(), stack[3].toTensor()};
}

BagOutputs forward(const char* name, const Tensor& weight, const Tensor& indices_in, const Tensor& offsets_in,
                   bool scale_grad_by_freq, int64_t mode, bool sparse, const std::optional<Tensor>& per_sample_weights,
                   bool include_last_offset, int64_t padding_idx, bool requires_grad) {
  TORCH_CHECK(indices_in.dim() == 1 || indices_in.dim() == 2,
              "input has to be a 1D or 2D Tensor, but got Tensor of dimension ", indices_in.dim());
  if (indices_in.dim() == 1)
    TORCH_CHECK(offsets_in.dim() == 1, "offsets has to be a 1D Tensor, but got Tensor of dimension ", offsets_in.dim());
  const std::optional<kernels::DType> type = floatType(weight);
  if (!type || weight.dim() != 2)
    return fallbackForward(name, weight, indices_in, offsets_in, scale_grad_by_freq, mode, sparse, per_sample_weights,
                           include_last_offset, padding_idx);
  auto [indices, offsets] = promoted(indices_in.contiguous(), offsets_in.contiguous());
  checkArguments(weight, indices, offsets, mode, per_sample_weights, include_last_offset);
  TORCH_CHECK(mode >= kSum && mode <= kMax, "embedding_bag: mode must be 0 (sum), 1 (mean) or 2 (max), got ", mode);
  const int64_t num_offsets = offsets.size(0);
  const int64_t bags = include_last_offset ? num_offsets - 1 : num_offsets;
  const int64_t width = weight.size(1);
  const at::TensorOptions index_options = indices.options();
  Tensor output = at::empty({bags, width}, weight.options());
  Tensor offset2bag = at::zeros({indices.size(0)}, index_options);
  Tensor bag_size = at::empty({bags}, index_options);
  Tensor max_indices = mode == kMax ? at::empty({bags, width}, index_options) : Tensor();
  checkIndicesOnDevice(indices, boundsCheck(weight.size(0), 0, IndexMessage::EmbeddingBagIndex), "embedding_bag");
  if (bags > 0 && width > 0 && indices.numel() > 0) {
    BagParams p;
    p.bags = bags;
    p.width = width;
    p.num_indices = indices.size(0);
    p.num_offsets = num_offsets;
    p.num_weights = weight.size(0);
    p.padding_idx = padding_idx;
    p.weight_stride0 = weight.stride(0);
    p.weight_stride1 = weight.stride(1);
    p.mode = static_cast<uint32_t>(mode);
    p.has_weights = defined(per_sample_weights) ? 1 : 0;
    // CPU rounds as its fast path only without padding_idx and with unit column strides.
    p.round_to_even = padding_idx >= 0 || weight.stride(1) != 1 ? 1 : 0;
    const Tensor samples = p.has_weights ? per_sample_weights->contiguous() : weight;
    const Tensor& maxes = mode == kMax ? max_indices : bag_size;  // bound, unwritten, outside max
    launch::KernelFamily& family = indices.scalar_type() == at::kLong ? forwardLong : forwardInt;
    launch::encodeThreads(family, launch::Variant::Plain, *type,
                          {&weight, &indices, &offsets, &samples, &output, &maxes, &bag_size, &offset2bag}, p,
                          std::min<uint64_t>(p.bags * p.width, launch::kGridStrideThreads));
  } else {
    output.zero_();
    bag_size.zero_();
    if (max_indices.defined()) max_indices.zero_();
  }
  if (mode == kSum && !requires_grad) bag_size = at::zeros(offsets.sizes(), index_options);  // CPU's shape there
  if (mode != kMax) max_indices = bag_size.clone();
  return {output, offset2bag, bag_size, max_indices};
}

BagOutputs embeddingBag(const Tensor& weight, const Tensor& indices, const Tensor& offsets, bool scale_grad_by_freq,
                        int64_t mode, bool sparse, const std::optional<Tensor>& per_sample_weights,
                        bool include_last_offset, int64_t padding_idx) {
  return forward("aten::_embedding_bag", weight, indices, offsets, scale_grad_by_freq, mode, sparse,
                 per_sample_weights, include_last_offset, padding_idx, /*requires_grad=*/true);
}

BagOutputs embeddingBagForwardOnly(const Tensor& weight, const Tensor& indices, const Tensor& offsets,
                                   bool scale_grad_by_freq, int64_t mode, bool sparse,
                                   const std::optional<Tensor>& per_sample_weights, bool include_last_offset,
                                   int64_t padding_idx) {
  return forward("aten::_embedding_bag_forward_only", weight, indices, offsets, scale_grad_by_freq, mode, sparse,
                 per_sample_weights, include_last_offset, padding_idx, /*requires_grad=*/false);
}

// Torch's own generic backward (argument checks, then the dense or sparse backward).
Tensor embeddingBagBackward(const Tensor& grad, const Tensor& indices, const Tensor& offsets, const Tensor& offset2bag,
                            const Tensor& bag_size, const Tensor& maximum_indices, c10::SymInt num_weights,
                            bool scale_grad_by_freq, int64_t mode, bool sparse,
                            const std::optional<Tensor>& per_sample_weights, int64_t padding_idx) {
  return at::native::_embedding_bag_backward_symint(grad, indices, offsets, offset2bag, bag_size, maximum_indices,
                                                    std::move(num_weights), scale_grad_by_freq, mode, sparse,
                                                    per_sample_weights, padding_idx);
}

// d weight: each position's share of its bag's gradient (scaled by its sample weight,
// or by 1 / the bag's count for mean), summed per index by embedding_dense_backward
// (padding_idx's row stays zero, scale_grad_by_freq divides by the index's count). For
// max, each (bag, column) gradient goes to the index that won it.
Tensor embeddingBagDenseBackward(const Tensor& grad_in, const Tensor& indices, const Tensor& offset2bag,
                                 const Tensor& bag_size, const Tensor& maximum_indices, c10::SymInt num_weights_sym,
                                 bool scale_grad_by_freq, int64_t mode, const std::optional<Tensor>& per_sample_weights,
                                 int64_t padding_idx) {
  const int64_t num_weights = num_weights_sym.guard_int(__FILE__, __LINE__);
  TORCH_CHECK(floatType(grad_in) || grad_in.scalar_type() == at::kDouble,
              "embedding_bag_backward: expected a floating grad, got ", grad_in.scalar_type());
  const Tensor grad = grad_in.contiguous();
  if (mode == kMax) {
    Tensor grad_weight = at::zeros({num_weights, grad.size(1)}, grad.options());
    if (grad.numel() == 0) return grad_weight;
    // Empty bags won nothing (their max_indices are 0): their gradient is dropped.
    const Tensor kept = at::where(bag_size.gt(0).unsqueeze(1), grad, at::zeros({}, grad.options()));
    return grad_weight.scatter_add_(0, maximum_indices.to(at::kLong), kept);
  }
  Tensor per_index = grad.index_select(0, offset2bag);
  if (mode == kMean) {
    const Tensor counts = bag_size.clamp_min(1).to(grad.scalar_type()).index_select(0, offset2bag);
    per_index = per_index / counts.unsqueeze(1);
  }
  if (defined(per_sample_weights)) per_index = per_index * per_sample_weights->unsqueeze(1);
  return at::embedding_dense_backward(per_index, indices, num_weights, padding_idx, scale_grad_by_freq);
}

Tensor embeddingBagPerSampleWeightsBackward(const Tensor& grad, const Tensor& weight, const Tensor& indices_in,
                                            const Tensor& offsets_in, const Tensor& offset2bag, int64_t mode,
                                            int64_t padding_idx) {
  TORCH_CHECK(mode == kSum, "embedding_bag_backward: per_sample_weights only supported for mode='sum'");
  auto [indices, offsets] = promoted(indices_in.contiguous(), offsets_in.contiguous());
  const std::optional<kernels::DType> type = floatType(grad);
  if (!type || grad.scalar_type() != weight.scalar_type() || indices.numel() != offset2bag.numel()) {
    const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::_embedding_bag_per_sample_weights_backward", "");
    torch::jit::Stack stack{grad, weight, indices_in, offsets_in, offset2bag, mode, padding_idx};
    cpuFallback(op, &stack);
    return stack[0].toTensor();
  }
  Tensor out = at::empty({indices.size(0)}, grad.options());
  if (out.numel() == 0) return out;
  const Tensor g = grad.contiguous();
  const Tensor bags = offset2bag.to(indices.scalar_type()).contiguous();
  BagParams p;
  p.width = grad.size(1);
  p.num_indices = indices.size(0);
  p.num_weights = weight.size(0);
  p.padding_idx = padding_idx;
  p.weight_stride0 = weight.stride(0);
  p.weight_stride1 = weight.stride(1);
  launch::KernelFamily& family = indices.scalar_type() == at::kLong ? pswBackwardLong : pswBackwardInt;
  launch::encodeThreads(family, launch::Variant::Plain, *type, {&g, &weight, &indices, &bags, &out}, p,
                        std::min<uint64_t>(p.num_indices, launch::kGridStrideThreads));
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_embedding_bag", TORCH_FN(embeddingBag));
  m.impl("_embedding_bag_forward_only", TORCH_FN(embeddingBagForwardOnly));
  m.impl("_embedding_bag_backward", TORCH_FN(embeddingBagBackward));
  m.impl("_embedding_bag_dense_backward", TORCH_FN(embeddingBagDenseBackward));
  m.impl("_embedding_bag_per_sample_weights_backward", TORCH_FN(embeddingBagPerSampleWeightsBackward));
}

}  // namespace
}  // namespace metalx
