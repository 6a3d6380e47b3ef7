// Indexing along one dim on the device (kernels/indexing.metal): gather, index_select
// (and so embedding), scatter / scatter_add / scatter_reduce, index_add, index_copy,
// index_fill, embedding_dense_backward.
//
// Shapes, dtypes and argument errors come from torch's structured meta functions, so
// they are CPU's. Index values are checked on the device (ops/index_check.h): the first
// bad one raises CPU's message at the next host wait (at the op with
// METALX_SYNC_INDEX_CHECKS=1), and the kernels skip bad elements. Scatters reduce each
// line of the index in order in one thread, so they need no atomics and are
// deterministic (embedding's backward included) and round as CPU does. Types the
// kernels lack run on the CPU, counted as fallbacks: moves (gather, copy-scatter) of
// 8-byte types such as float64 reuse the int64 kernel.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorAdvancedIndexingUtils.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/gather_meta.h>
#include <ATen/ops/index_add_meta.h>
#include <ATen/ops/index_copy_meta.h>
#include <ATen/ops/scatter_add_meta.h>
#include <ATen/ops/scatter_meta.h>
#include <ATen/ops/scatter_reduce_meta.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>

#include "allocator.h"
#include "cpu_fallback.h"
#include "core/stream_pool.h"
#include "device.h"
#include "fallback_memory.h"
#include "fallback_report.h"
#include "launch/kernel_table.h"
#include "launch/structured.h"
#include "launch/threads.h"
#include "launch/torch_dtype.h"
#include "ops/index_check.h"

namespace metalx {
namespace {

using launch::KernelFamily;
using launch::Variant;
using kernels::DType;

constexpr int kMaxDims = 8;

// Mirrors kernels/indexing.metal's IndexParams.
struct IndexParams {
  uint32_t ndim = 0;
  uint32_t dim = 0;
  uint32_t mode = 0;
  uint32_t has_src = 0;
  uint32_t include_self = 1;
  uint32_t integral = 0;
  uint64_t lines = 0;
  uint64_t len = 0;
  float value_f = 0;
  uint32_t unused = 0;
  int64_t value_i = 0;
  int64_t bound = std::numeric_limits<int64_t>::max();  // indices outside [0, bound) are skipped
  uint64_t sizes[kMaxDims] = {};
  int64_t self_strides[kMaxDims] = {};
  int64_t index_strides[kMaxDims] = {};
  int64_t other_strides[kMaxDims] = {};
};
static_assert(sizeof(IndexParams) == 64 + 4 * 8 * kMaxDims, "IndexParams must match kernels/indexing.metal");

enum ScatterMode : uint32_t { kAssign = 0, kSum = 1, kProd = 2, kMean = 3, kMax = 4, kMin = 5 };

KernelFamily gatherKernels("index_gather", launch::kAllTypes);
KernelFamily scatterKernels("index_scatter", launch::kAllTypes);

// The kernel type for arithmetic on `t`, or nullopt.
std::optional<DType> arithmeticDtype(const at::Tensor& t) {
  auto d = launch::storageDtype(t.scalar_type());
  if (d && launch::kAllTypes.has(*d)) return d;
  return std::nullopt;
}

// The kernel type that moves `t`'s elements unchanged: its own, or an integer of its
// size (float64, complex64 move as int64 bits).
std::optional<DType> movementDtype(const at::Tensor& t) {
  if (auto d = arithmeticDtype(t)) return d;
  return launch::bitsDtype(t.element_size());
}

int64_t sizeOr1(const at::Tensor& t, int64_t d) { return t.dim() == 0 ? 1 : t.size(d); }
int64_t strideOr0(const at::Tensor& t, int64_t d) { return t.dim() == 0 ? 0 : t.stride(d); }

// Runs `cpu` on CPU aliases of device tensors, counted as a fallback of `op`.
template <class F>
void onCpu(const char* op, c10::DeviceIndex device, F&& cpu) {
  reportFallback(c10::OperatorName(op, ""));
  synchronizeCurrentStream(device);
  cpu();
}

// The boxed CPU fallback of `name.overload` on the stack's arguments.
void boxedFallback(const char* name, const char* overload, torch::jit::Stack& stack) {
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  cpuFallback(op, &stack);
}

c10::IValue asIValue(const at::Tensor& t) { return t; }
c10::IValue asIValue(int64_t v) { return v; }
c10::IValue asIValue(bool v) { return v; }
c10::IValue asIValue(const at::Scalar& v) { return v; }
c10::IValue asIValue(c10::string_view v) { return std::string(v); }

// The op `name.overload` on the CPU fallback, for dtypes the kernels cannot compute in
// (float64, complex): CPU's own kernel, counted in the fallback report.
template <class... Args>
c10::IValue onFallback(const char* name, const char* overload, const Args&... args) {
  torch::jit::Stack stack;
  (stack.push_back(asIValue(args)), ...);
  boxedFallback(name, overload, stack);
  return stack.back();
}

// Checks on the device that index values are in [0, size) ([-size, size) with
// `negative_ok`); the first bad one raises `kind`'s CPU message, naming `op`.
void checkIndexValues(const at::Tensor& index, int64_t size, int64_t dim, IndexMessage kind, const char* op,
                      bool negative_ok = false) {
  checkIndicesOnDevice(index, boundsCheck(size, dim, kind, negative_ok), op);
}

// The shape walk shared by gather and scatter: over `index`'s shape (0-dim as one
// element), with each tensor's own strides. The kernels' coordinate 0 varies fastest,
// so it is the last dim: neighbouring threads (on a GPU) and a simulated thread's
// consecutive elements touch neighbouring memory of contiguous tensors.
IndexParams walkOver(const at::Tensor& index, int64_t dim, const at::Tensor& self, const at::Tensor& other) {
  IndexParams p;
  p.ndim = static_cast<uint32_t>(std::max<int64_t>(index.dim(), 1));
  const int64_t walk_dim = index.dim() == 0 ? 0 : at::maybe_wrap_dim(dim, index.dim());
  p.dim = static_cast<uint32_t>(p.ndim - 1 - walk_dim);
  for (uint32_t k = 0; k < p.ndim; ++k) {
    const int64_t d = static_cast<int64_t>(p.ndim - 1 - k);
    p.sizes[k] = static_cast<uint64_t>(sizeOr1(index, d));
    p.self_strides[k] = self.dim() == 0 ? 0 : self.stride(d);
    p.index_strides[k] = strideOr0(index, d);
    p.other_strides[k] = other.defined() && other.dim() > 0 ? other.stride(d) : 0;
  }
  p.bound = self.dim() == 0 ? 1 : self.size(walk_dim);
  return p;
}

// Elements per simulated gather thread.
constexpr uint64_t kSimGatherRun = 64;

void dispatch(KernelFamily& kernels, DType dtype, const at::Tensor& first, const at::Tensor& second,
              const at::Tensor& index, const IndexParams& p, uint64_t work, bool scatter,
              const at::Tensor& counts = {}) {
  if (work == 0) return;
  Stream& stream = currentStream(first.device().index());
  const rt::ComputePipelinePtr& pipeline = kernels.pipeline(stream, Variant::Plain, dtype);
  // A gather thread on the simulator takes a block of consecutive elements (see the
  // kernel); a scatter thread walks whole lines already.
  const uint64_t threads = !scatter && stream.device().info().is_simulated ? (work + kSimGatherRun - 1) / kSimGatherRun
                                                                           : work;
  const launch::Grid grid = launch::Grid::threads(std::min<uint64_t>(threads, launch::kGridStrideThreads));
  if (scatter) {  // the scatter kernel's counts (read by scatter_reduce's mean only)
    launch::encodeKernel(stream, pipeline, {&first, &second, &index, counts.defined() ? &counts : &first}, p, grid);
  } else {
    launch::encodeKernel(stream, pipeline, {&first, &second, &index}, p, grid);
  }
}

at::Tensor longIndex(const at::Tensor& index, const at::Tensor& like) {
  at::Tensor i = index.to(like.device(), at::kLong);
  return i;
}

// out[e] = self[e with dim -> index[e]] over index's shape (out has it). Index values
// must have been checked.
void gatherInto(const at::Tensor& out, const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  if (index.numel() == 0) return;
  auto dtype = movementDtype(self);
  if (!dtype || index.dim() > kMaxDims || out.scalar_type() != self.scalar_type()) {
    at::Tensor idx = index.to(self.device(), at::kLong);
    onCpu("gather", out.device().index(), [&] {
      at::Tensor o = cpuAlias(out);
      at::gather_out(o, cpuAlias(self), dim, cpuAlias(idx));
    });
    return;
  }
  at::Tensor idx = longIndex(index, self);
  IndexParams p = walkOver(idx, dim, self, out);
  p.lines = static_cast<uint64_t>(idx.numel());
  dispatch(gatherKernels, *dtype, out, self, idx, p, p.lines, /*scatter=*/false);
}

// self[e with dim -> index[e]] (op)= src[e] (or value) over index's shape, line by line.
void scatterInto(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                 const std::optional<at::Scalar>& value, ScatterMode mode, bool include_self) {
  if (index.numel() == 0) return;
  auto dtype = mode == kAssign ? movementDtype(self) : arithmeticDtype(self);
  const bool converted_src = src.defined() && src.scalar_type() != self.scalar_type();
  if (!dtype || index.dim() > kMaxDims || (mode == kAssign && value && !arithmeticDtype(self))) {
    static const char* names[] = {"", "sum", "prod", "mean", "amax", "amin"};
    at::Tensor idx = index.to(self.device(), at::kLong);
    at::Tensor values = src.defined() ? src.to(self.scalar_type())
                        : mode == kAssign ? at::Tensor() : at::full(index.sizes(), *value, self.options());
    onCpu("scatter", self.device().index(), [&] {
      at::Tensor s = cpuAlias(self);
      if (mode == kAssign && value) s.scatter_(dim, cpuAlias(idx), *value);
      else if (mode == kAssign) s.scatter_(dim, cpuAlias(idx), cpuAlias(values));
      else s.scatter_reduce_(dim, cpuAlias(idx), cpuAlias(values), names[mode], include_self);
    });
    return;
  }
  at::Tensor idx = longIndex(index, self);
  at::Tensor source = converted_src ? src.to(self.scalar_type()) : src;
  IndexParams p = walkOver(idx, dim, self, source);
  p.mode = mode;
  p.include_self = include_self ? 1 : 0;
  p.has_src = source.defined() ? 1 : 0;
  p.integral = at::isIntegralType(self.scalar_type(), true) ? 1 : 0;
  if (value) {
    if (at::isFloatingType(self.scalar_type())) p.value_f = value->to<float>();
    else p.value_i = value->to<int64_t>();
  }
  p.len = p.sizes[p.dim];
  p.lines = p.len == 0 ? 0 : static_cast<uint64_t>(idx.numel()) / p.len;
  at::Tensor counts;
  if (mode == kMean) counts = at::zeros_like(self, self.options().dtype(at::kInt));
  if (counts.defined() && !(counts.strides() == self.strides())) {
    // The counts must share self's strides: the kernel indexes both with self's offsets.
    counts = at::empty_strided(self.sizes(), self.strides(), self.options().dtype(at::kInt)).zero_();
  }
  dispatch(scatterKernels, *dtype, self, source.defined() ? source : self, idx, p, p.lines, /*scatter=*/true, counts);
}

// An index of `like`'s shape that is `index` (a vector) along dim and repeats it
// elsewhere (stride 0): index_select, index_add and friends as gather/scatter.
at::Tensor expandAlong(const at::Tensor& index, int64_t dim, at::IntArrayRef shape) {
  at::Tensor idx = index.reshape({-1});
  std::vector<int64_t> strides(shape.size(), 0);
  if (!shape.empty()) strides[dim] = idx.stride(0);
  return idx.as_strided(shape, strides);
}

// ---- gather ----

void gatherChecked(const at::Tensor& out, const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  checkIndexValues(index, sizeOr1(self, d), d, IndexMessage::Bounds, "gather");
  gatherInto(out, self, d, index);
}

at::Tensor gatherFunctional(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad) {
  launch::FunctionalOp<at::meta::structured_gather> op;
  op.meta(self, dim, index, sparse_grad);
  gatherChecked(op.outputs[0], self, dim, index);
  return std::move(op.outputs[0]);
}

at::Tensor& gatherOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad,
                      at::Tensor& out) {
  launch::OutOp<at::meta::structured_gather> op(out);
  op.meta(self, dim, index, sparse_grad);
  gatherChecked(op.maybe_get_output(0), self, dim, index);
  op.finish();
  return out;
}

// ---- index_select ----

at::Tensor& indexSelectOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out) {
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "index_select(): self and result must have the same scalar type");
  TORCH_CHECK(!(index.numel() > 0 && self.dim() > 0 && self.size(at::maybe_wrap_dim(dim, self.dim())) == 0) ||
                  index.numel() == 0,
              "index_select(): self indexing axis dim should be positive");
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_overlap(out, index);
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.dim() > 0) shape[d] = index.numel();
  at::native::resize_output(out, shape);
  checkIndexValues(index, sizeOr1(self, d), d, IndexMessage::OutOfRangeInSelf, "index_select");
  if (out.numel() == 0) return out;
  gatherInto(out, self, d, expandAlong(index, d, out.sizes()));
  return out;
}

at::Tensor indexSelect(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  at::Tensor out = at::empty({0}, self.options());
  return indexSelectOut(self, dim, index, out);
}

// ---- scatter family ----

ScatterMode modeOf(c10::string_view reduce) {
  if (reduce == "sum" || reduce == "add") return kSum;
  if (reduce == "prod" || reduce == "multiply") return kProd;
  if (reduce == "mean") return kMean;
  if (reduce == "amax") return kMax;
  if (reduce == "amin") return kMin;
  TORCH_CHECK(false, "reduce argument must be either sum, prod, mean, amax or amin, got ", reduce);
}

// The body every scatter variant shares: out starts as a copy of self (not in place).
void scatterImpl(const at::Tensor& out, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                 const at::Tensor& src, const std::optional<at::Scalar>& value, ScatterMode mode, bool include_self) {
  if (!out.is_same(self)) out.copy_(self);
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  checkIndexValues(index, sizeOr1(self, d), d, IndexMessage::Bounds,
                   mode == kAssign ? "scatter" : mode == kSum ? "scatter_add" : "scatter_reduce");
  const bool narrow_float = out.scalar_type() == at::kHalf || out.scalar_type() == at::kBFloat16;
  if (narrow_float && (mode == kSum || mode == kMean) && index.numel() > 0) {
    // CPU's scatter_add/scatter_reduce sum half and bfloat16 in float and round once.
    at::Tensor wide = out.to(at::kFloat);
    scatterInto(wide, d, index, src.defined() ? src.to(at::kFloat) : src, value, mode, include_self);
    out.copy_(wide);
    return;
  }
  scatterInto(out, d, index, src, value, mode, include_self);
}

#define METALX_UNPACK(...) __VA_ARGS__
// The functional and in-place variants of a scatter overload whose arguments are
// (self, dim, index, REST...).
#define METALX_SCATTER_VARIANTS(NAME, OP, OVERLOAD, META, REST_PARAMS, REST_ARGS, MODE_EXPR, SRC, VALUE, INCLUDE)     \
  at::Tensor NAME##Functional(const at::Tensor& self, int64_t dim, const at::Tensor& index,                 \
                              METALX_UNPACK REST_PARAMS) {                                                  \
    if (!arithmeticDtype(self))                                                                             \
      return onFallback(OP, OVERLOAD, self, dim, index, METALX_UNPACK REST_ARGS).toTensor(); \
    launch::FunctionalOp<at::meta::META> op;                                                                \
    op.meta(self, dim, index, METALX_UNPACK REST_ARGS);                                                     \
    scatterImpl(op.outputs[0], self, dim, index, SRC, VALUE, MODE_EXPR, INCLUDE);                           \
    return std::move(op.outputs[0]);                                                                        \
  }                                                                                                         \
  at::Tensor& NAME##Inplace(at::Tensor& self, int64_t dim, const at::Tensor& index, METALX_UNPACK REST_PARAMS) { \
    if (!arithmeticDtype(self)) {                                                                           \
      onFallback(OP "_", OVERLOAD, self, dim, index, METALX_UNPACK REST_ARGS); \
      return self;                                                                                          \
    }                                                                                                       \
    launch::InplaceOp<at::meta::META> op(self);                                                             \
    op.meta(self, dim, index, METALX_UNPACK REST_ARGS);                                                     \
    scatterImpl(op.maybe_get_output(0), self, dim, index, SRC, VALUE, MODE_EXPR, INCLUDE);                  \
    op.finish();                                                                                            \
    return self;                                                                                            \
  }

const at::Tensor kNoSrc;

METALX_SCATTER_VARIANTS(scatterSrc, "aten::scatter", "src", structured_scatter_src, (const at::Tensor& src), (src), kAssign, src,
                        std::nullopt, true)
METALX_SCATTER_VARIANTS(scatterValue, "aten::scatter", "value", structured_scatter_value, (const at::Scalar& value), (value), kAssign, kNoSrc,
                        value, true)
METALX_SCATTER_VARIANTS(scatterReduce, "aten::scatter", "reduce", structured_scatter_reduce, (const at::Tensor& src, c10::string_view reduce),
                        (src, reduce), modeOf(reduce), src, std::nullopt, true)
METALX_SCATTER_VARIANTS(scatterValueReduce, "aten::scatter", "value_reduce", structured_scatter_value_reduce,
                        (const at::Scalar& value, c10::string_view reduce), (value, reduce), modeOf(reduce), kNoSrc,
                        value, true)
METALX_SCATTER_VARIANTS(scatterAdd, "aten::scatter_add", "", structured_scatter_add, (const at::Tensor& src), (src), kSum, src, std::nullopt,
                        true)
METALX_SCATTER_VARIANTS(scatterReduceTwo, "aten::scatter_reduce", "two", structured_scatter_reduce_two,
                        (const at::Tensor& src, c10::string_view reduce, bool include_self),
                        (src, reduce, include_self), modeOf(reduce), src, std::nullopt, include_self)

// ---- index_add / index_copy / index_fill ----

void indexAddImpl(const at::Tensor& out, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                  const at::Tensor& source, const at::Scalar& alpha) {
  if (!out.is_same(self)) out.copy_(self);
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  // CPU words it as index_select does for a vector self, as gather does otherwise.
  checkIndexValues(index, sizeOr1(self, d), d, self.dim() <= 1 ? IndexMessage::OutOfRangeInSelf : IndexMessage::Bounds,
                   "index_add_");
  if (index.numel() == 0) return;
  at::Tensor src = source.dim() == 0 ? source.reshape({1}) : source;
  if (!(alpha.isIntegral(true) && alpha.to<int64_t>() == 1)) src = src * alpha;
  at::Tensor target = out.dim() == 0 ? out.view({1}) : out;
  scatterInto(target, d, expandAlong(index, d, src.sizes()), src, std::nullopt, kSum, true);
}

at::Tensor indexAdd(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                    const at::Scalar& alpha) {
  if (!arithmeticDtype(self)) return onFallback("aten::index_add", "", self, dim, index, source, alpha).toTensor();
  launch::FunctionalOp<at::meta::structured_index_add> op;
  auto pre = op.meta(self, dim, index, source, alpha);
  indexAddImpl(op.outputs[0], self, pre.dim, index, source, alpha);
  return std::move(op.outputs[0]);
}
at::Tensor& indexAddInplace(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                            const at::Scalar& alpha) {
  if (!arithmeticDtype(self)) {
    onFallback("aten::index_add_", "", self, dim, index, source, alpha);
    return self;
  }
  launch::InplaceOp<at::meta::structured_index_add> op(self);
  auto pre = op.meta(self, dim, index, source, alpha);
  indexAddImpl(op.maybe_get_output(0), self, pre.dim, index, source, alpha);
  op.finish();
  return self;
}
at::Tensor& indexAddOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                        const at::Scalar& alpha, at::Tensor& out) {
  if (!arithmeticDtype(self)) {
    onFallback("aten::index_add", "out", self, dim, index, source, alpha, out);
    return out;
  }
  launch::OutOp<at::meta::structured_index_add> op(out);
  auto pre = op.meta(self, dim, index, source, alpha);
  indexAddImpl(op.maybe_get_output(0), self, pre.dim, index, source, alpha);
  op.finish();
  return out;
}

void indexCopyImpl(const at::Tensor& out, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                   const at::Tensor& source) {
  if (!out.is_same(self)) out.copy_(self);
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  checkIndexValues(index, sizeOr1(self, d), d, IndexMessage::IndexCopy, "index_copy_");
  if (index.numel() == 0) return;
  at::Tensor src = source.dim() == 0 ? source.reshape({1}) : source;
  at::Tensor target = out.dim() == 0 ? out.view({1}) : out;
  scatterInto(target, d, expandAlong(index, d, src.sizes()), src, std::nullopt, kAssign, true);
}

at::Tensor indexCopy(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source) {
  if (!arithmeticDtype(self)) return onFallback("aten::index_copy", "", self, dim, index, source).toTensor();
  launch::FunctionalOp<at::meta::structured_index_copy> op;
  auto pre = op.meta(self, dim, index, source);
  indexCopyImpl(op.outputs[0], self, pre.dim, index, source);
  return std::move(op.outputs[0]);
}
at::Tensor& indexCopyInplace(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source) {
  if (!arithmeticDtype(self)) {
    onFallback("aten::index_copy_", "", self, dim, index, source);
    return self;
  }
  launch::InplaceOp<at::meta::structured_index_copy> op(self);
  auto pre = op.meta(self, dim, index, source);
  indexCopyImpl(op.maybe_get_output(0), self, pre.dim, index, source);
  op.finish();
  return self;
}
at::Tensor& indexCopyOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                         at::Tensor& out) {
  if (!arithmeticDtype(self)) {
    onFallback("aten::index_copy", "out", self, dim, index, source, out);
    return out;
  }
  launch::OutOp<at::meta::structured_index_copy> op(out);
  auto pre = op.meta(self, dim, index, source);
  indexCopyImpl(op.maybe_get_output(0), self, pre.dim, index, source);
  op.finish();
  return out;
}

at::Tensor& indexFillScalar(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value) {
  if (!arithmeticDtype(self)) {
    onFallback("aten::index_fill_", "int_Scalar", self, dim, index, value);
    return self;
  }
  TORCH_CHECK_INDEX(index.scalar_type() == at::kLong, "index_fill_(): Expected dtype int64 for index.");
  TORCH_CHECK(!self.is_complex() || !value.isComplex() || self.is_complex(), "index_fill_(): bad value");
  at::assert_no_internal_overlap(self);
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_fill_(): Index is supposed to be a vector");
  checkIndexValues(index, sizeOr1(self, d), d, IndexMessage::BoundsIndexError, "index_fill_", /*negative_ok=*/true);
  if (index.numel() == 0 || self.numel() == 0) return self;
  at::Tensor idx = index.to(self.device(), at::kLong);
  idx = at::where(idx.lt(0), idx + sizeOr1(self, d), idx);  // negative indices count from the end
  at::Tensor target = self.dim() == 0 ? self.view({1}) : self;
  std::vector<int64_t> shape = target.sizes().vec();
  shape[d] = idx.numel();
  scatterInto(target, d, expandAlong(idx, d, shape), at::Tensor(), value, kAssign, true);
  return self;
}
at::Tensor& indexFillTensor(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0,
              "index_fill_ only supports a 0-dimensional value tensor, but got tensor with ", value.dim(),
              " dimension(s).");
  if (!arithmeticDtype(self)) {
    onFallback("aten::index_fill_", "int_Tensor", self, dim, index, value);
    return self;
  }
  return indexFillScalar(self, dim, index, value.item());
}

// ---- embedding backward ----

// grad_weight[i] = sum of the grad rows whose index is i (scaled by 1 / count(i) with
// scale_grad_by_freq; the padding_idx row stays zero), as index_add's scatter: each
// column is summed by one thread in the order of the indices, so the result is
// deterministic (no float atomics) and CPU's.
at::Tensor embeddingDenseBackward(const at::Tensor& grad_output, const at::Tensor& indices, int64_t num_weights,
                                  int64_t padding_idx, bool scale_grad_by_freq) {
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "embedding_backward: Expected indices to have type int32 or int64");
  const int64_t width = grad_output.size(-1);
  at::Tensor idx = indices.reshape({-1}).to(at::kLong);
  at::Tensor grad = grad_output.reshape({idx.numel(), width});
  at::Tensor grad_weight = at::zeros({num_weights, width}, grad_output.options());
  if (idx.numel() == 0) return grad_weight;
  checkIndexValues(idx, num_weights, 0, IndexMessage::OutOfRangeInSelf, "embedding_dense_backward");
  if (scale_grad_by_freq) {
    at::Tensor counts = at::zeros({num_weights}, grad_output.options().dtype(at::kLong));
    scatterInto(counts, 0, idx, at::ones_like(idx), std::nullopt, kSum, true);
    grad = grad / counts.index_select(0, idx).unsqueeze(1).to(grad.scalar_type());
  }
  scatterInto(grad_weight, 0, expandAlong(idx, 0, grad.sizes()), grad, std::nullopt, kSum, true);
  if (padding_idx >= 0 && padding_idx < num_weights) grad_weight.select(0, padding_idx).zero_();
  return grad_weight;
}


// ---- advanced indexing: index.Tensor and _index_put_impl_ ----
//
// x[i0, i1, ...] with index tensors: torch's own helpers turn masks into indices (through
// nonzero), broadcast the indices and move non-adjacent indexed dims to the front, as
// CPU/CUDA's make_info. The indexed dims then collapse into one: the element offset
// sum_k index_k * stride_k, computed on the device, flattened to a vector of R entries.
// The op walks (dims before, R, dims after): a gather for index, a scatter along R for
// index_put_ (one thread per position of the other dims, in order: accumulate is
// deterministic and repeated indices keep the last value, as on CPU).

struct AdvancedPlan {
  at::Tensor self;     // self, or a permutation of it with the indexed dims in front
  at::Tensor offsets;  // int64 [R]
  int64_t before = 0;  // dims before the indexed ones
  int64_t indexed_end = 0;  // first dim after them
  std::vector<int64_t> result_shape;  // before + broadcast index shape + after
  std::vector<int64_t> walk_shape;    // before + [R] + after
};


// `op` names the op in index errors.
std::optional<AdvancedPlan> planAdvanced(const at::Tensor& self_in, const c10::List<std::optional<at::Tensor>>& orig,
                                         const char* op) {
  TORCH_CHECK_INDEX(orig.size() <= static_cast<size_t>(self_in.dim()), "too many indices for tensor of dimension ",
                    self_in.dim(), " (got ", orig.size(), ")");
  at::native::checkIndexTensorTypes(orig, /*allow_int=*/true);
  std::vector<at::Tensor> indices = at::native::expandTensors(self_in, orig, /*ensure_same_device=*/true);
  try {
    indices = at::expand_outplace(indices);
  } catch (std::exception&) {
    TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together with shapes ",
                      at::native::shapes_as_str(indices));
  }
  while (indices.size() < static_cast<size_t>(self_in.dim())) indices.emplace_back();
  AdvancedPlan plan;
  plan.self = self_in;
  if (!at::native::hasContiguousSubspace(indices))
    std::tie(plan.self, indices) = at::native::transposeToFront(plan.self, indices);
  const int64_t ndim = plan.self.dim();
  while (plan.before < ndim && !indices[plan.before].defined()) ++plan.before;
  if (plan.before == ndim || ndim > kMaxDims) return std::nullopt;  // nothing indexed (0-dim masks): the CPU
  plan.indexed_end = plan.before;
  while (plan.indexed_end < ndim && indices[plan.indexed_end].defined()) ++plan.indexed_end;
  at::Tensor offsets, invalid;
  for (int64_t d = plan.before; d < plan.indexed_end; ++d) {
    at::Tensor idx = indices[d].to(at::kLong);
    const int64_t size = plan.self.size(d);
    // CPU names the position among the indexed dims.
    checkIndexValues(idx, size, d - plan.before, IndexMessage::BoundsIndexError, op, /*negative_ok=*/true);
    idx = at::where(idx.lt(0), idx + size, idx);  // negative indices count from the end
    // A value still outside [0, size) was recorded by the check: its offset becomes -1,
    // which the kernels skip, rather than an address past the dim.
    at::Tensor outside = idx.lt(0).logical_or_(idx.ge(size));
    invalid = invalid.defined() ? invalid.logical_or_(outside) : outside;
    at::Tensor term = idx * plan.self.stride(d);
    offsets = offsets.defined() ? offsets + term : term;
  }
  offsets = offsets.masked_fill(invalid, -1);
  const at::IntArrayRef index_shape = indices[plan.before].sizes();
  for (int64_t d = 0; d < plan.before; ++d) plan.result_shape.push_back(plan.self.size(d));
  plan.walk_shape = plan.result_shape;
  plan.result_shape.insert(plan.result_shape.end(), index_shape.begin(), index_shape.end());
  plan.walk_shape.push_back(c10::multiply_integers(index_shape));
  for (int64_t d = plan.indexed_end; d < ndim; ++d) {
    plan.result_shape.push_back(plan.self.size(d));
    plan.walk_shape.push_back(plan.self.size(d));
  }
  plan.offsets = offsets.reshape({-1}).contiguous();
  return plan;
}

// The walk over (before, R, after): self's strides with 1 for R (offsets are in
// elements), the offsets along R, `other`'s own strides; last dim first, as walkOver.
IndexParams advancedWalk(const AdvancedPlan& plan, const at::Tensor& other) {
  IndexParams p;
  p.ndim = static_cast<uint32_t>(plan.walk_shape.size());
  const int64_t walk_dim = plan.before;
  p.dim = static_cast<uint32_t>(p.ndim - 1 - walk_dim);
  for (uint32_t k = 0; k < p.ndim; ++k) {
    const int64_t j = static_cast<int64_t>(p.ndim - 1 - k);
    p.sizes[k] = static_cast<uint64_t>(plan.walk_shape[j]);
    const int64_t d = j < plan.before ? j : plan.indexed_end + (j - plan.before - 1);
    p.self_strides[k] = j == walk_dim ? 1 : plan.self.stride(d);
    p.index_strides[k] = j == walk_dim ? 1 : 0;
    p.other_strides[k] = other.stride(j);
  }
  p.len = p.sizes[p.dim];
  return p;
}

at::Tensor indexTensor(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  auto plan = planAdvanced(self, indices, "index");
  auto dtype = movementDtype(self);
  if (!plan || !dtype) {
    torch::jit::Stack stack{self, indices};
    boxedFallback("aten::index", "Tensor", stack);
    return stack.back().toTensor();
  }
  at::Tensor out = at::empty(plan->walk_shape, self.options());
  if (out.numel() > 0) {
    IndexParams p = advancedWalk(*plan, out);
    p.lines = static_cast<uint64_t>(out.numel());
    dispatch(gatherKernels, *dtype, out, plan->self, plan->offsets, p, p.lines, /*scatter=*/false);
  }
  return out.view(plan->result_shape);
}

at::Tensor& indexPutImpl(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                         const at::Tensor& values, bool accumulate, bool unsafe) {
  TORCH_CHECK_INDEX(indices.size() <= static_cast<size_t>(self.dim()), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", indices.size(), ")");
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes) {
    TORCH_WARN("Use of index_put_ on expanded tensors is deprecated. Please clone() the tensor before performing "
               "this operation. This also applies to advanced indexing e.g. tensor[indices] = tensor");
  }
  if (!accumulate) {
    auto [use_fill, mask] = at::native::canDispatchToMaskedFill(self, indices, values);
    if (use_fill) return self.masked_fill_(mask, values.item());
  }
  at::Tensor value = values;
  if (value.device() != self.device() && value.numel() == 1 && value.dim() == 0) value = value.to(self.device());
  at::assert_no_overlap(self, value);
  for (const std::optional<at::Tensor> index : indices)
    if (index.has_value()) at::assert_no_overlap(self, *index);
  auto plan = planAdvanced(self, indices, "index_put_");
  auto dtype = accumulate ? arithmeticDtype(self) : movementDtype(self);
  if (!plan || !dtype) {
    torch::jit::Stack stack{self, indices, values, accumulate, unsafe};
    boxedFallback("aten::_index_put_impl_", "", stack);
    return self;
  }
  TORCH_CHECK(value.scalar_type() == self.scalar_type(),
                    "Index put requires the source and destination dtypes match, got ", self.scalar_type(),
                    " for the destination and ", value.scalar_type(), " for the source.");
  TORCH_CHECK(at::is_expandable_to(value.sizes(), plan->result_shape), "shape mismatch: value tensor of shape ",
                    value.sizes(), " cannot be broadcast to indexing result of shape ",
                    c10::IntArrayRef(plan->result_shape));
  const int64_t total = c10::multiply_integers(plan->walk_shape);
  if (total == 0) return self;
  at::Tensor walk_values = value.expand(plan->result_shape).reshape(plan->walk_shape);
  IndexParams p = advancedWalk(*plan, walk_values);
  p.mode = accumulate ? kSum : kAssign;
  p.has_src = 1;
  p.integral = at::isIntegralType(self.scalar_type(), true) ? 1 : 0;
  p.lines = p.len == 0 ? 0 : static_cast<uint64_t>(total) / p.len;
  dispatch(scatterKernels, *dtype, plan->self, walk_values, plan->offsets, p, p.lines, /*scatter=*/true);
  return self;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("gather", TORCH_FN(gatherFunctional));
  m.impl("gather.out", TORCH_FN(gatherOut));
  m.impl("index_select", TORCH_FN(indexSelect));
  m.impl("index_select.out", TORCH_FN(indexSelectOut));
  m.impl("scatter.src", TORCH_FN(scatterSrcFunctional));
  m.impl("scatter_.src", TORCH_FN(scatterSrcInplace));
  m.impl("scatter.value", TORCH_FN(scatterValueFunctional));
  m.impl("scatter_.value", TORCH_FN(scatterValueInplace));
  m.impl("scatter.reduce", TORCH_FN(scatterReduceFunctional));
  m.impl("scatter_.reduce", TORCH_FN(scatterReduceInplace));
  m.impl("scatter.value_reduce", TORCH_FN(scatterValueReduceFunctional));
  m.impl("scatter_.value_reduce", TORCH_FN(scatterValueReduceInplace));
  m.impl("scatter_add", TORCH_FN(scatterAddFunctional));
  m.impl("scatter_add_", TORCH_FN(scatterAddInplace));
  m.impl("scatter_reduce.two", TORCH_FN(scatterReduceTwoFunctional));
  m.impl("scatter_reduce_.two", TORCH_FN(scatterReduceTwoInplace));
  m.impl("index_add", TORCH_FN(indexAdd));
  m.impl("index_add_", TORCH_FN(indexAddInplace));
  m.impl("index_add.out", TORCH_FN(indexAddOut));
  m.impl("index_copy", TORCH_FN(indexCopy));
  m.impl("index_copy_", TORCH_FN(indexCopyInplace));
  m.impl("index_copy.out", TORCH_FN(indexCopyOut));
  m.impl("index_fill_.int_Scalar", TORCH_FN(indexFillScalar));
  m.impl("index_fill_.int_Tensor", TORCH_FN(indexFillTensor));
  m.impl("embedding_dense_backward", TORCH_FN(embeddingDenseBackward));
  m.impl("index.Tensor", TORCH_FN(indexTensor));
  m.impl("_index_put_impl_", TORCH_FN(indexPutImpl));
}

}  // namespace
}  // namespace metalx
