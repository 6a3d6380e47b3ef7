// tril and triu on metalx (functional, out= and in-place): what causal attention masks
// (nn.Transformer.generate_square_subsequent_mask, scaled_dot_product_attention's
// is_causal) are built with. torch's structured meta functions check the arguments
// (at least 2 dims) and size the output, so errors are CPU's; kernels/triangular.metal
// moves the elements through every tensor's strides. Kernels exist per element size, so
// every dtype of 1, 2, 4 or 8 bytes (float64 and complex64 as 8-byte words) runs on the
// device; complex128 and tensors of more than 8 dims run CPU's kernel on the fallback.
#include <ATen/ATen.h>
#include <ATen/ops/tril_meta.h>
#include <ATen/ops/triu_meta.h>
#include <torch/library.h>

#include <algorithm>

#include "allocator.h"
#include "core/stream_pool.h"
#include "launch/kernel_table.h"
#include "launch/threads.h"
#include "launch/structured.h"
#include "launch/torch_dtype.h"

namespace metalx {
namespace {

using at::Tensor;
using kernels::DType;
using launch::KernelFamily;

constexpr int kMaxDims = 8;
// Threads per dispatch at most; each walks the elements grid-stride past that.
constexpr uint64_t kMaxThreads = uint64_t(1) << 24;

// Mirrors kernels/triangular.metal's TriangularParams.
struct TriangularParams {
  uint32_t ndim = 0;
  uint32_t upper = 0;
  int64_t diagonal = 0;
  uint64_t count = 0;
  uint64_t sizes[kMaxDims] = {};
  int64_t in_strides[kMaxDims] = {};
  int64_t out_strides[kMaxDims] = {};
};
static_assert(sizeof(TriangularParams) == 24 + 3 * 8 * kMaxDims, "TriangularParams must match the kernel");

KernelFamily kernels_by_size("triangular", {DType::UInt8, DType::Int16, DType::Int32, DType::Int64});

// The kernel that moves elements of `t`'s size, or nullopt.
std::optional<DType> moveType(const Tensor& t) {
  return launch::bitsDtype(t.element_size());
}

c10::OperatorHandle outOperator(bool upper) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(upper ? "aten::triu" : "aten::tril", "out");
}

// out = tril/triu(self, diagonal); `out` has self's sizes and dtype (the meta function's).
void triangularInto(const Tensor& self, int64_t diagonal, bool upper, const Tensor& out) {
  const std::optional<DType> type = moveType(self);
  if (!type || self.dim() > kMaxDims) {
    static const c10::OperatorHandle lower_op = outOperator(false), upper_op = outOperator(true);
    launch::cpuFallbackOut(upper ? upper_op : lower_op, {out}, self, diagonal);
    return;
  }
  if (self.numel() == 0) return;
  TriangularParams p;
  p.ndim = static_cast<uint32_t>(self.dim());
  p.upper = upper ? 1 : 0;
  p.diagonal = diagonal;
  p.count = static_cast<uint64_t>(self.numel());
  for (int64_t d = 0; d < self.dim(); ++d) {
    p.sizes[d] = static_cast<uint64_t>(self.size(d));
    p.in_strides[d] = self.stride(d);
    p.out_strides[d] = out.stride(d);
  }
  launch::encodeThreads(kernels_by_size, launch::Variant::Plain, *type, {&self, &out}, p,
                        std::min(p.count, kMaxThreads));
}

template <class Meta, bool kUpper>
Tensor functional(const Tensor& self, int64_t diagonal) {
  launch::FunctionalOp<Meta> op;
  op.meta(self, diagonal);
  triangularInto(self, diagonal, kUpper, op.outputs[0]);
  return std::move(op.outputs[0]);
}

template <class Meta, bool kUpper>
Tensor& out(const Tensor& self, int64_t diagonal, Tensor& result) {
  launch::OutOp<Meta> op(result);
  op.meta(self, diagonal);
  triangularInto(self, diagonal, kUpper, op.maybe_get_output(0));
  op.finish();
  return result;
}

template <class Meta, bool kUpper>
Tensor& inplace(Tensor& self, int64_t diagonal) {
  launch::InplaceOp<Meta> op(self);
  op.meta(self, diagonal);
  triangularInto(self, diagonal, kUpper, op.maybe_get_output(0));
  op.finish();
  return self;
}

using TrilMeta = at::meta::structured_tril;
using TriuMeta = at::meta::structured_triu;

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("tril", TORCH_FN((functional<TrilMeta, false>)));
  m.impl("tril.out", TORCH_FN((out<TrilMeta, false>)));
  m.impl("tril_", TORCH_FN((inplace<TrilMeta, false>)));
  m.impl("triu", TORCH_FN((functional<TriuMeta, true>)));
  m.impl("triu.out", TORCH_FN((out<TriuMeta, true>)));
  m.impl("triu_", TORCH_FN((inplace<TriuMeta, true>)));
}

}  // namespace
}  // namespace metalx
