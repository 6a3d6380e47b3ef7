// Selection ops on the device (kernels/selection.metal): nonzero (and so argwhere),
// nonzero_static, masked_select, masked_scatter_ (and so masked_scatter and the
// backward of masked_select), flip (and so fliplr/flipud/rot90) and roll.
//
// nonzero and masked_select have an output size that depends on the data: a count pass
// and a prefix sum over blocks run on the device, the host waits once (as CUDA and MPS
// do) to read the total and size the output, and a fill pass writes each block's rows
// in CPU's row-major order. The kernels only test or move bits, so every dtype of 1, 2,
// 4 or 8 bytes runs on them; complex128 and tensors of more than 8 dims run CPU's
// kernel on the fallback, counted in fallback_stats(). Errors are CPU's messages.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <algorithm>

#include "allocator.h"
#include "core/stream_pool.h"
#include "cpu_fallback.h"
#include "device.h"
#include "fallback_memory.h"
#include "launch/kernel_table.h"
#include "launch/threads.h"
#include "launch/torch_dtype.h"

namespace metalx {
namespace {

using at::Tensor;
using kernels::DType;
using launch::KernelFamily;
using launch::Variant;

constexpr int kMaxDims = 8;
constexpr uint64_t kMaxThreads = uint64_t(1) << 20;
// Blocks of the count/fill passes: at least this many elements each (a thread walks a
// block serially), and at most this many blocks (the prefix sum is one thread's loop).
constexpr uint64_t kMinBlock = 1024;
constexpr uint64_t kMaxBlocks = 16384;

// Mirrors kernels/selection.metal's SelectionParams.
struct SelectionParams {
  uint32_t ndim = 0;
  uint32_t out_cols = 0;
  uint64_t count = 0;
  uint64_t block = 0;
  uint64_t blocks = 0;
  uint64_t value_bits = ~uint64_t(0);
  uint64_t limit = ~uint64_t(0);
  int64_t out_row_stride = 0;
  int64_t out_col_stride = 0;
  uint64_t sizes[kMaxDims] = {};
  int64_t test_strides[kMaxDims] = {};
  int64_t data_strides[kMaxDims] = {};
};
static_assert(sizeof(SelectionParams) == 64 + 3 * 8 * kMaxDims, "SelectionParams must match the kernel");

// Mirrors kernels/selection.metal's MirrorParams.
struct MirrorParams {
  uint32_t ndim = 0;
  uint32_t flip_dims = 0;
  uint64_t count = 0;
  uint64_t sizes[kMaxDims] = {};
  uint64_t shifts[kMaxDims] = {};
  int64_t in_strides[kMaxDims] = {};
  int64_t out_strides[kMaxDims] = {};
};
static_assert(sizeof(MirrorParams) == 16 + 4 * 8 * kMaxDims, "MirrorParams must match the kernel");

constexpr launch::DTypeSet kSizes{DType::UInt8, DType::Int16, DType::Int32, DType::Int64};
KernelFamily countKernels("selection_count", kSizes);
KernelFamily scanKernel("selection_scan", {DType::Int64});
KernelFamily nonzeroKernels("selection_nonzero", kSizes);
KernelFamily maskedSelectKernels("selection_masked_select", kSizes);
KernelFamily maskedScatterKernels("selection_masked_scatter", kSizes);
KernelFamily mirrorKernels("selection_mirror", kSizes);

// The kernel type that moves (or tests) elements of `t`'s size, or nullopt.
std::optional<DType> sizeType(const Tensor& t) {
  return launch::bitsDtype(t.element_size());
}

bool onDevice(const Tensor& t) { return sizeType(t).has_value() && t.dim() <= kMaxDims; }

// The bits of an element that make it nonzero: all of them, but the sign bit(s) of a
// floating (or complex) type, so that -0.0 counts as zero.
uint64_t valueBits(const Tensor& t) {
  const auto type = t.scalar_type();
  if (at::isComplexType(type))  // two parts, each with its sign bit (complex128 falls back)
    return t.element_size() == 4 ? 0x7fff7fffull : 0x7fffffff7fffffffull;
  if (!at::isFloatingType(type)) return ~uint64_t(0);
  switch (t.element_size()) {
    case 1: return 0x7full;  // float8 types
    case 2: return 0x7fffull;
    case 4: return 0x7fffffffull;
    default: return 0x7fffffffffffffffull;
  }
}

// CPU's kernel of `name.overload` through the fallback (counted in fallback_stats()).
c10::IValue fallback(const char* name, const char* overload, torch::jit::Stack stack) {
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  cpuFallback(op, &stack);
  return stack.back();
}

// The walk over `shape` (0-dim: one element) cut into blocks, testing `test`.
SelectionParams walkParams(at::IntArrayRef shape, const Tensor& test, const Tensor& data) {
  SelectionParams p;
  p.ndim = static_cast<uint32_t>(shape.size());
  p.count = static_cast<uint64_t>(c10::multiply_integers(shape));
  for (uint32_t d = 0; d < p.ndim; ++d) {
    p.sizes[d] = static_cast<uint64_t>(shape[d]);
    p.test_strides[d] = test.stride(d);
    p.data_strides[d] = data.defined() ? data.stride(d) : 0;
  }
  p.block = std::max(kMinBlock, (p.count + kMaxBlocks - 1) / kMaxBlocks);
  p.blocks = (p.count + p.block - 1) / p.block;
  p.value_bits = valueBits(test);
  return p;
}

// Encodes the count pass and the prefix sum: afterwards firsts[b] is block b's first
// output row and firsts[blocks] the number of selected elements.
Tensor countSelected(const Tensor& test, const SelectionParams& p) {
  Tensor firsts = at::empty({static_cast<int64_t>(p.blocks) + 1}, test.options().dtype(at::kLong));
  launch::encodeThreads(countKernels, Variant::Plain, *sizeType(test), {&test, &firsts}, p,
                        std::min(p.blocks, kMaxThreads));
  launch::encodeThreads(scanKernel, Variant::Plain, DType::Int64, {&firsts}, p, 1);
  return firsts;
}

// The total the prefix sum left in firsts[blocks]: the one wait for the device.
int64_t selectedTotal(const Tensor& firsts) {
  synchronizeCurrentStream(firsts.device().index());
  return cpuAlias(firsts)[firsts.numel() - 1].item<int64_t>();
}

// Encodes a fill pass of `kernels` over p.blocks with buffers bound in order, then the
// params.
void encodeFill(KernelFamily& kernels, DType type, std::initializer_list<const Tensor*> buffers,
                const SelectionParams& p) {
  if (p.blocks == 0) return;
  launch::encodeThreads(kernels, Variant::Plain, type, buffers, p, std::min(p.blocks, kMaxThreads));
}

// ---- nonzero, nonzero_static ----

// Writes the coordinates of `self`'s nonzero elements into rows of `out` (already
// sized), at most `limit` rows.
void nonzeroInto(const Tensor& self, const Tensor& firsts, SelectionParams p, const Tensor& out, uint64_t limit) {
  if (out.numel() == 0) return;
  p.out_cols = static_cast<uint32_t>(self.dim());
  p.limit = limit;
  p.out_row_stride = out.stride(0);
  p.out_col_stride = out.stride(1);
  encodeFill(nonzeroKernels, *sizeType(self), {&self, &out, &firsts}, p);
}

void checkNonzeroOut(const Tensor& self, const Tensor& out, const char* op) {
  TORCH_CHECK(out.scalar_type() == at::kLong, op, ": Expected out tensor to have scalar type Long but got scalar type",
              out.scalar_type());
  TORCH_CHECK(self.device() == out.device(), op, ": Expected out tensor to be on the same device as input tensor");
}

Tensor& nonzeroOut(const Tensor& self, Tensor& out) {
  checkNonzeroOut(self, out, "nonzero");
  if (!onDevice(self)) {
    fallback("aten::nonzero", "out", {self, out});
    return out;
  }
  const SelectionParams p = walkParams(self.sizes(), self, Tensor());
  if (p.count == 0) {
    at::native::resize_output(out, {0, self.dim()});
    return out;
  }
  const Tensor firsts = countSelected(self, p);
  const int64_t total = selectedTotal(firsts);
  at::native::resize_output(out, {total, self.dim()});
  nonzeroInto(self, firsts, p, out, ~uint64_t(0));
  return out;
}

Tensor nonzero(const Tensor& self) {
  Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return nonzeroOut(self, out);
}

Tensor& nonzeroStaticOut(const Tensor& self, int64_t size, int64_t fill_value, Tensor& out) {
  TORCH_CHECK(size >= 0, "nonzero_static: 'size' must be an non-negative integer");
  checkNonzeroOut(self, out, "nonzero_static");
  if (!onDevice(self)) {
    fallback("aten::nonzero_static", "out", {self, size, fill_value, out});
    return out;
  }
  at::native::resize_output(out, {size, self.dim()});
  if (out.numel() == 0) return out;
  // Rows past the nonzero elements keep fill_value; no wait for the count is needed.
  out.fill_(fill_value);
  const SelectionParams p = walkParams(self.sizes(), self, Tensor());
  if (p.count == 0) return out;
  nonzeroInto(self, countSelected(self, p), p, out, static_cast<uint64_t>(size));
  return out;
}

Tensor nonzeroStatic(const Tensor& self, int64_t size, int64_t fill_value) {
  TORCH_CHECK(size >= 0, "nonzero_static: 'size' must be an non-negative integer");
  Tensor out = at::empty({size, self.dim()}, self.options().dtype(at::kLong));
  return nonzeroStaticOut(self, size, fill_value, out);
}

// ---- masked_select ----

Tensor& maskedSelectOut(const Tensor& self, const Tensor& mask, Tensor& out) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  TORCH_CHECK(self.scalar_type() == out.scalar_type(),
              "masked_select(): self and result must have the same scalar type");
  auto [b_self, b_mask] = at::expand_outplace(self, mask);
  if (!onDevice(*b_self) || !mask.device().is_privateuseone()) {
    fallback("aten::masked_select", "out", {self, mask, out});
    return out;
  }
  at::assert_no_internal_overlap(out);
  const Tensor data = *b_self, test = *b_mask;
  const SelectionParams p = walkParams(data.sizes(), test, data);
  if (p.count == 0) {
    at::native::resize_output(out, {0});
    return out;
  }
  const Tensor firsts = countSelected(test, p);
  const int64_t total = selectedTotal(firsts);
  at::native::resize_output(out, {total});
  if (total == 0) return out;
  at::assert_no_overlap(out, self);
  SelectionParams fill = p;
  fill.out_row_stride = out.stride(0);
  encodeFill(maskedSelectKernels, *sizeType(data), {&test, &data, &out, &firsts}, fill);
  return out;
}

Tensor maskedSelect(const Tensor& self, const Tensor& mask) {
  Tensor out = at::empty({0}, self.options());
  return maskedSelectOut(self, mask, out);
}

// ---- masked_scatter_ ----

Tensor& maskedScatterInplace(Tensor& self, const Tensor& mask, const Tensor& source) {
  at::assert_no_internal_overlap(self);
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "masked_scatter: expected self and source to have same dtypes but got", self.scalar_type(), " and ",
              source.scalar_type());
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_scatter_ only supports boolean masks, but got mask with dtype ", mask.scalar_type());
  c10::MaybeOwned<Tensor> b_mask = at::expand_inplace(self, mask, "masked_scatter_");
  if (self.numel() == 0) return self;
  if (!onDevice(self) || !mask.device().is_privateuseone() || !source.device().is_privateuseone()) {
    fallback("aten::masked_scatter_", "", {self, mask, source});
    return self;
  }
  const Tensor test = *b_mask;
  const SelectionParams p = walkParams(self.sizes(), test, self);
  const Tensor firsts = countSelected(test, p);
  // CPU stops at the first selected element the source lacks; the total tells up front.
  const int64_t total = selectedTotal(firsts);
  TORCH_CHECK(total <= source.numel(), "Number of elements of source < number of ones in mask");
  if (total == 0) return self;
  const Tensor src = source.contiguous();
  SelectionParams fill = p;
  fill.out_row_stride = 1;
  encodeFill(maskedScatterKernels, *sizeType(self), {&test, &self, &src, &firsts}, fill);
  return self;
}

// ---- flip, roll ----

// out[c] = self[c mirrored on `flip` dims, shifted by `shifts`]; out has self's sizes.
void mirrorInto(const Tensor& self, uint32_t flip, at::ArrayRef<uint64_t> shifts, const Tensor& out) {
  if (self.numel() == 0) return;
  MirrorParams p;
  p.ndim = static_cast<uint32_t>(self.dim());
  p.flip_dims = flip;
  p.count = static_cast<uint64_t>(self.numel());
  for (uint32_t d = 0; d < p.ndim; ++d) {
    p.sizes[d] = static_cast<uint64_t>(self.size(d));
    p.shifts[d] = shifts.empty() ? 0 : shifts[d];
    p.in_strides[d] = self.stride(d);
    p.out_strides[d] = out.stride(d);
  }
  launch::encodeThreads(mirrorKernels, Variant::Plain, *sizeType(self), {&self, &out}, p,
                        std::min<uint64_t>(p.count, uint64_t(1) << 24));
}

Tensor flipOp(const Tensor& self, at::IntArrayRef dims) {
  const int64_t ndim = self.dim();
  // CPU's checks: dims in range, no dim twice.
  const auto flipped = at::dim_list_to_bitset(dims, ndim);
  if (!onDevice(self)) return fallback("aten::flip", "", {self, dims}).toTensor();
  Tensor out = at::empty_like(self, at::MemoryFormat::Preserve);
  uint32_t bits = 0;
  for (int64_t d = 0; d < ndim; ++d)
    if (flipped[d] && self.size(d) > 1) bits |= 1u << d;
  mirrorInto(self, bits, {}, out);
  return out;
}

Tensor rollOp(const Tensor& self, at::IntArrayRef shifts, at::IntArrayRef dims) {
  TORCH_CHECK(!shifts.empty(), "`shifts` required");
  if (dims.empty() && shifts.size() == 1) {
    // No dims: roll the flattened tensor (CPU's rule), then give back self's shape.
    const int64_t first_dim = 0;
    return rollOp(self.flatten(), shifts, first_dim).view(self.sizes());
  }
  TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ", shifts.size(),
              ", dims:", dims.size());
  std::vector<int64_t> wrapped(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) wrapped[i] = at::maybe_wrap_dim(dims[i], self.dim());
  if (!onDevice(self)) return fallback("aten::roll", "", {self, shifts, dims}).toTensor();
  Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  if (self.numel() == 0) return out;
  // A dim named twice is rolled twice: the shifts add up.
  std::vector<uint64_t> total(static_cast<size_t>(self.dim()), 0);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t size = self.size(wrapped[i]);
    const int64_t s = ((shifts[i] % size) + size) % size;
    total[wrapped[i]] = (total[wrapped[i]] + static_cast<uint64_t>(s)) % static_cast<uint64_t>(size);
  }
  mirrorInto(self, 0, total, out);
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nonzero", TORCH_FN(nonzero));
  m.impl("nonzero.out", TORCH_FN(nonzeroOut));
  m.impl("nonzero_static", TORCH_FN(nonzeroStatic));
  m.impl("nonzero_static.out", TORCH_FN(nonzeroStaticOut));
  m.impl("masked_select", TORCH_FN(maskedSelect));
  m.impl("masked_select.out", TORCH_FN(maskedSelectOut));
  m.impl("masked_scatter_", TORCH_FN(maskedScatterInplace));
  m.impl("flip", TORCH_FN(flipOp));
  m.impl("roll", TORCH_FN(rollOp));
}

}  // namespace
}  // namespace metalx
