// 2-d pooling on metalx, forward and backward: max_pool2d_with_indices, avg_pool2d
// (count_include_pad, divisor_override, ceil_mode), adaptive_max_pool2d and
// _adaptive_avg_pool2d — what F.max_pool2d, F.avg_pool2d and the adaptive pools run,
// and autograd's formulas for them. torch's structured meta functions check the
// arguments and size the outputs (keeping channels_last), so errors are CPU's; the
// kernels (kernels/pooling.metal) read and write every tensor through its strides.
// Float32, float16 and bfloat16 run natively; other dtypes run CPU's kernels through the
// fallback.
#include <ATen/ATen.h>
#include <ATen/ops/adaptive_max_pool2d_backward_meta.h>
#include <ATen/ops/adaptive_max_pool2d_meta.h>
#include <ATen/ops/avg_pool2d_backward_meta.h>
#include <ATen/ops/avg_pool2d_meta.h>
#include <ATen/ops/max_pool2d_with_indices_backward_meta.h>
#include <ATen/ops/max_pool2d_with_indices_meta.h>
#include <torch/library.h>

#include <algorithm>

#include "allocator.h"
#include "core/stream_pool.h"
#include "cpu_fallback.h"
#include "launch/kernel_table.h"
#include "launch/threads.h"
#include "launch/structured.h"

namespace metalx {
namespace {

using at::IntArrayRef;
using at::Tensor;
using launch::KernelFamily;
using launch::Variant;
using kernels::DType;


// Mirrors kernels/pooling.metal's PoolShape.
struct PoolShape {
  int64_t batch = 1, channels = 1, in_h = 1, in_w = 1, out_h = 1, out_w = 1;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1,
          dilation_w = 1;
  int64_t in_s[4] = {}, out_s[4] = {}, idx_s[4] = {};
  int64_t divisor = 0;
  uint32_t adaptive = 0;
  uint32_t count_include_pad = 0;
  uint32_t fast_index = 0;
  struct Divider {
    uint32_t magic = 0, shift = 0;
  } grid_div[3];
};

// The kernels' PoolDivider for d in [1, 2^31]: n / d == (mulhi(n, magic) + n) >> shift
// for every n < 2^31 (round-up reciprocal; Granlund and Montgomery's method).
PoolShape::Divider dividerFor(uint64_t d) {
  PoolShape::Divider r;
  while ((uint64_t{1} << r.shift) < d) ++r.shift;
  r.magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << r.shift) - d)) / d + 1);
  return r;
}

KernelFamily max_kernels("pool2d_max", launch::kFloatTypes);
KernelFamily max_backward_kernels("pool2d_max_backward", launch::kFloatTypes);
KernelFamily max_backward_window_kernels("pool2d_max_backward_windows", launch::kFloatTypes);
KernelFamily avg_kernels("pool2d_avg", launch::kFloatTypes);
KernelFamily avg_backward_kernels("pool2d_avg_backward", launch::kFloatTypes);

std::optional<DType> floatKernelType(c10::ScalarType t) {
  switch (t) {
    case at::kFloat: return DType::Float32;
    case at::kHalf: return DType::Float16;
    case at::kBFloat16: return DType::BFloat16;
    default: return std::nullopt;
  }
}

// (n, c, h, w) strides of a 3-d (c, h, w) or 4-d tensor.
void stridesOf(const Tensor& t, int64_t* s) {
  const int64_t d = t.dim();
  s[0] = d == 4 ? t.stride(0) : 0;
  for (int k = 1; k < 4; ++k) s[k] = t.stride(d - 4 + k);
}

void sizesFrom(const Tensor& input, const Tensor& output, PoolShape& s) {
  const int64_t d = input.dim();
  s.batch = d == 4 ? input.size(0) : 1;
  s.channels = input.size(d - 3);
  s.in_h = input.size(d - 2), s.in_w = input.size(d - 1);
  s.out_h = output.size(d - 2), s.out_w = output.size(d - 1);
}

// kernel_size / stride / padding / dilation as the meta functions read them: one value
// for both dims, or two; an empty stride is the kernel size.
void windowFrom(IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, PoolShape& s) {
  s.kernel_h = kernel[0], s.kernel_w = kernel.size() == 1 ? kernel[0] : kernel[1];
  s.stride_h = stride.empty() ? s.kernel_h : stride[0];
  s.stride_w = stride.empty() ? s.kernel_w : stride.size() == 1 ? stride[0] : stride[1];
  s.pad_h = padding[0], s.pad_w = padding.size() == 1 ? padding[0] : padding[1];
  if (!dilation.empty()) s.dilation_h = dilation[0], s.dilation_w = dilation.size() == 1 ? dilation[0] : dilation[1];
}

// pool2d_max's and pool2d_max_backward_windows' outputs per thread (POOL_RUN).
constexpr int64_t kPoolRun = 8;

uint64_t elements(const PoolShape& s, bool output) {
  return static_cast<uint64_t>(s.batch * s.channels * (output ? s.out_h * s.out_w : s.in_h * s.in_w));
}

// A thread per element of the output (`output`) or the input grid, or per `run` of
// them along a row (POOL_RUN in kernels/pooling.metal); the kernels unravel thread
// indices below 2^31 with the grid's dividers.
void encode(KernelFamily& family, DType type, std::initializer_list<const Tensor*> tensors, PoolShape s,
            bool output, int64_t run = 1) {
  const int64_t row = output ? s.out_w : s.in_w;
  const int64_t runs = (row + run - 1) / run;
  const uint64_t threads = elements(s, output) / std::max<int64_t>(row, 1) * runs;
  s.fast_index = threads < (uint64_t{1} << 31);
  if (s.fast_index) {
    s.grid_div[0] = dividerFor(std::max<int64_t>(runs, 1));
    s.grid_div[1] = dividerFor(std::max<int64_t>(output ? s.out_h : s.in_h, 1));
    s.grid_div[2] = dividerFor(std::max<int64_t>(s.channels, 1));
  }
  launch::encodeThreads(family, Variant::Plain, type, tensors, s, threads);
}

c10::OperatorHandle op(const char* name, const char* overload) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
}

// ---- max ----

void maxForward(const Tensor& input, PoolShape s, const Tensor& out, const Tensor& indices) {
  sizesFrom(input, out, s);
  stridesOf(input, s.in_s);
  stridesOf(out, s.out_s);
  stridesOf(indices, s.idx_s);
  encode(max_kernels, *floatKernelType(input.scalar_type()), {&input, &out, &indices}, s, true, kPoolRun);
}

// Fixed windows that never share an input position: stride >= the dilated kernel in
// both dims. Then each output's window writes its own inputs (see kernels/pooling.metal).
bool windowsDisjoint(const PoolShape& s) {
  return !s.adaptive && s.stride_h >= (s.kernel_h - 1) * s.dilation_h + 1 &&
         s.stride_w >= (s.kernel_w - 1) * s.dilation_w + 1;
}

// Disjoint windows that also cover every input position (no gaps between them, no rows
// or columns left over, no padding): nothing to zero first.
bool windowsTile(const PoolShape& s) {
  const bool tile_h = (s.kernel_h == 1 || s.dilation_h == 1) && s.stride_h == s.kernel_h && s.pad_h == 0 &&
                      s.out_h * s.stride_h == s.in_h;
  const bool tile_w = (s.kernel_w == 1 || s.dilation_w == 1) && s.stride_w == s.kernel_w && s.pad_w == 0 &&
                      s.out_w * s.stride_w == s.in_w;
  return tile_h && tile_w;
}

// grad_input has `input`'s sizes; grad_output the output's.
void maxBackward(const Tensor& grad_output, const Tensor& input, const Tensor& indices, PoolShape s,
                 const Tensor& grad_input) {
  sizesFrom(input, grad_output, s);
  stridesOf(grad_input, s.in_s);
  stridesOf(grad_output, s.out_s);
  stridesOf(indices, s.idx_s);
  const DType type = *floatKernelType(input.scalar_type());
  if (windowsDisjoint(s)) {
    if (!windowsTile(s)) grad_input.zero_();
    encode(max_backward_window_kernels, type, {&grad_output, &indices, &grad_input}, s, true, kPoolRun);
    return;
  }
  encode(max_backward_kernels, type, {&grad_output, &indices, &grad_input}, s, false);
}

using MaxMeta = at::meta::structured_max_pool2d_with_indices;
using MaxBackwardMeta = at::meta::structured_max_pool2d_with_indices_backward;

void maxPoolInto(const Tensor& self, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                 IntArrayRef dilation, bool ceil_mode, const Tensor& out, const Tensor& indices) {
  if (!floatKernelType(self.scalar_type())) {
    static const c10::OperatorHandle h = op("aten::max_pool2d_with_indices", "out");
    launch::cpuFallbackOut(h, {out, indices}, self, kernel, stride, padding, dilation, ceil_mode);
    return;
  }
  PoolShape s;
  windowFrom(kernel, stride, padding, dilation, s);
  maxForward(self, s, out, indices);
}

std::tuple<Tensor, Tensor> maxPool(const Tensor& self, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                                   IntArrayRef dilation, bool ceil_mode) {
  launch::FunctionalOp<MaxMeta, 2> m;
  m.meta(self, kernel, stride, padding, dilation, ceil_mode);
  maxPoolInto(self, kernel, stride, padding, dilation, ceil_mode, m.outputs[0], m.outputs[1]);
  return {std::move(m.outputs[0]), std::move(m.outputs[1])};
}

std::tuple<Tensor&, Tensor&> maxPoolOut(const Tensor& self, IntArrayRef kernel, IntArrayRef stride,
                                        IntArrayRef padding, IntArrayRef dilation, bool ceil_mode, Tensor& out,
                                        Tensor& indices) {
  launch::OutOp<MaxMeta, 2> m(out, indices);
  m.meta(self, kernel, stride, padding, dilation, ceil_mode);
  maxPoolInto(self, kernel, stride, padding, dilation, ceil_mode, m.maybe_get_output(0), m.maybe_get_output(1));
  m.finish();
  return {out, indices};
}

void maxPoolBackwardInto(const Tensor& grad_output, const Tensor& self, IntArrayRef kernel, IntArrayRef stride,
                         IntArrayRef padding, IntArrayRef dilation, bool ceil_mode, const Tensor& indices,
                         const Tensor& grad_input) {
  if (!floatKernelType(self.scalar_type()) || grad_output.scalar_type() != self.scalar_type()) {
    static const c10::OperatorHandle h = op("aten::max_pool2d_with_indices_backward", "grad_input");
    launch::cpuFallbackOut(h, {grad_input}, grad_output, self, kernel, stride, padding, dilation, ceil_mode,
                           indices);
    return;
  }
  PoolShape s;
  windowFrom(kernel, stride, padding, dilation, s);
  maxBackward(grad_output, self, indices, s, grad_input);
}

Tensor maxPoolBackward(const Tensor& grad_output, const Tensor& self, IntArrayRef kernel, IntArrayRef stride,
                       IntArrayRef padding, IntArrayRef dilation, bool ceil_mode, const Tensor& indices) {
  launch::FunctionalOp<MaxBackwardMeta> m;
  m.meta(grad_output, self, kernel, stride, padding, dilation, ceil_mode, indices);
  maxPoolBackwardInto(grad_output, self, kernel, stride, padding, dilation, ceil_mode, indices, m.outputs[0]);
  return std::move(m.outputs[0]);
}

Tensor& maxPoolBackwardOut(const Tensor& grad_output, const Tensor& self, IntArrayRef kernel, IntArrayRef stride,
                           IntArrayRef padding, IntArrayRef dilation, bool ceil_mode, const Tensor& indices,
                           Tensor& grad_input) {
  launch::OutOp<MaxBackwardMeta> m(grad_input);
  m.meta(grad_output, self, kernel, stride, padding, dilation, ceil_mode, indices);
  maxPoolBackwardInto(grad_output, self, kernel, stride, padding, dilation, ceil_mode, indices,
                      m.maybe_get_output(0));
  m.finish();
  return grad_input;
}

// ---- adaptive max ----

using AdaptiveMaxMeta = at::meta::structured_adaptive_max_pool2d;
using AdaptiveMaxBackwardMeta = at::meta::structured_adaptive_max_pool2d_backward;

void adaptiveMaxInto(const Tensor& self, IntArrayRef output_size, const Tensor& out, const Tensor& indices) {
  if (!floatKernelType(self.scalar_type())) {
    static const c10::OperatorHandle h = op("aten::adaptive_max_pool2d", "out");
    launch::cpuFallbackOut(h, {out, indices}, self, output_size);
    return;
  }
  PoolShape s;
  s.adaptive = 1;
  maxForward(self, s, out, indices);
}

std::tuple<Tensor, Tensor> adaptiveMax(const Tensor& self, IntArrayRef output_size) {
  launch::FunctionalOp<AdaptiveMaxMeta, 2> m;
  m.meta(self, output_size);
  adaptiveMaxInto(self, output_size, m.outputs[0], m.outputs[1]);
  return {std::move(m.outputs[0]), std::move(m.outputs[1])};
}

std::tuple<Tensor&, Tensor&> adaptiveMaxOut(const Tensor& self, IntArrayRef output_size, Tensor& out,
                                            Tensor& indices) {
  launch::OutOp<AdaptiveMaxMeta, 2> m(out, indices);
  m.meta(self, output_size);
  adaptiveMaxInto(self, output_size, m.maybe_get_output(0), m.maybe_get_output(1));
  m.finish();
  return {out, indices};
}

void adaptiveMaxBackwardInto(const Tensor& grad_output, const Tensor& self, const Tensor& indices,
                             const Tensor& grad_input) {
  if (!floatKernelType(self.scalar_type()) || grad_output.scalar_type() != self.scalar_type()) {
    static const c10::OperatorHandle h = op("aten::adaptive_max_pool2d_backward", "grad_input");
    launch::cpuFallbackOut(h, {grad_input}, grad_output, self, indices);
    return;
  }
  PoolShape s;
  s.adaptive = 1;
  maxBackward(grad_output, self, indices, s, grad_input);
}

Tensor adaptiveMaxBackward(const Tensor& grad_output, const Tensor& self, const Tensor& indices) {
  launch::FunctionalOp<AdaptiveMaxBackwardMeta> m;
  m.meta(grad_output, self, indices);
  adaptiveMaxBackwardInto(grad_output, self, indices, m.outputs[0]);
  return std::move(m.outputs[0]);
}

Tensor& adaptiveMaxBackwardOut(const Tensor& grad_output, const Tensor& self, const Tensor& indices,
                               Tensor& grad_input) {
  launch::OutOp<AdaptiveMaxBackwardMeta> m(grad_input);
  m.meta(grad_output, self, indices);
  adaptiveMaxBackwardInto(grad_output, self, indices, m.maybe_get_output(0));
  m.finish();
  return grad_input;
}

// ---- avg ----

using AvgMeta = at::meta::structured_avg_pool2d;
using AvgBackwardMeta = at::meta::structured_avg_pool2d_backward;

void avgForward(const Tensor& input, PoolShape s, const Tensor& out) {
  sizesFrom(input, out, s);
  stridesOf(input, s.in_s);
  stridesOf(out, s.out_s);
  encode(avg_kernels, *floatKernelType(input.scalar_type()), {&input, &out}, s, true);
}

void avgBackward(const Tensor& grad_output, const Tensor& input, PoolShape s, const Tensor& grad_input) {
  sizesFrom(input, grad_output, s);
  stridesOf(grad_input, s.in_s);
  stridesOf(grad_output, s.out_s);
  encode(avg_backward_kernels, *floatKernelType(input.scalar_type()), {&grad_output, &grad_input}, s, false);
}

PoolShape avgWindow(IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding, bool count_include_pad,
                    std::optional<int64_t> divisor_override) {
  PoolShape s;
  windowFrom(kernel, stride, padding, {}, s);
  s.count_include_pad = count_include_pad;
  s.divisor = divisor_override.value_or(0);
  return s;
}

void avgPoolInto(const Tensor& self, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
                 bool count_include_pad, std::optional<int64_t> divisor_override, const Tensor& out) {
  if (!floatKernelType(self.scalar_type())) {
    static const c10::OperatorHandle h = op("aten::avg_pool2d", "out");
    launch::cpuFallbackOut(h, {out}, self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
    return;
  }
  avgForward(self, avgWindow(kernel, stride, padding, count_include_pad, divisor_override), out);
}

Tensor avgPool(const Tensor& self, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
               bool count_include_pad, std::optional<int64_t> divisor_override) {
  launch::FunctionalOp<AvgMeta> m;
  m.meta(self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
  avgPoolInto(self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override, m.outputs[0]);
  return std::move(m.outputs[0]);
}

Tensor& avgPoolOut(const Tensor& self, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
                   bool count_include_pad, std::optional<int64_t> divisor_override, Tensor& out) {
  launch::OutOp<AvgMeta> m(out);
  m.meta(self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
  avgPoolInto(self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override, m.maybe_get_output(0));
  m.finish();
  return out;
}

void avgPoolBackwardInto(const Tensor& grad_output, const Tensor& self, IntArrayRef kernel, IntArrayRef stride,
                         IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                         std::optional<int64_t> divisor_override, const Tensor& grad_input) {
  if (!floatKernelType(self.scalar_type()) || grad_output.scalar_type() != self.scalar_type()) {
    static const c10::OperatorHandle h = op("aten::avg_pool2d_backward", "grad_input");
    launch::cpuFallbackOut(h, {grad_input}, grad_output, self, kernel, stride, padding, ceil_mode, count_include_pad,
                           divisor_override);
    return;
  }
  avgBackward(grad_output, self, avgWindow(kernel, stride, padding, count_include_pad, divisor_override), grad_input);
}

Tensor avgPoolBackward(const Tensor& grad_output, const Tensor& self, IntArrayRef kernel, IntArrayRef stride,
                       IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                       std::optional<int64_t> divisor_override) {
  launch::FunctionalOp<AvgBackwardMeta> m;
  m.meta(grad_output, self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
  avgPoolBackwardInto(grad_output, self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override,
                      m.outputs[0]);
  return std::move(m.outputs[0]);
}

Tensor& avgPoolBackwardOut(const Tensor& grad_output, const Tensor& self, IntArrayRef kernel, IntArrayRef stride,
                           IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor_override, Tensor& grad_input) {
  launch::OutOp<AvgBackwardMeta> m(grad_input);
  m.meta(grad_output, self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
  avgPoolBackwardInto(grad_output, self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override,
                      m.maybe_get_output(0));
  m.finish();
  return grad_input;
}

// ---- adaptive avg (no meta function: CPU's checks, written here) ----

void checkAdaptiveAvg(const Tensor& input, IntArrayRef output_size) {
  TORCH_CHECK(output_size.size() == 2, "adaptive_avg_pool2d: output_size must be 2");
  TORCH_CHECK(output_size[0] >= 0 && output_size[1] >= 0,
              "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but received {",
              output_size[0], ", ", output_size[1], "}");
  const int64_t ndim = input.dim();
  TORCH_CHECK(ndim == 3 || ndim == 4,
              "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got ", input.sizes());
  for (int64_t i = 1; i < ndim; ++i)
    TORCH_CHECK(input.size(i) > 0, "adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch ",
                "dimensions, but input has sizes ", input.sizes(), " with dimension ", i, " being empty");
}

Tensor adaptiveAvg(const Tensor& self, IntArrayRef output_size) {
  if (!floatKernelType(self.scalar_type())) {
    static const c10::OperatorHandle h = op("aten::_adaptive_avg_pool2d", "");
    torch::jit::Stack stack{self, output_size};
    cpuFallback(h, &stack);
    return stack.back().toTensor();
  }
  checkAdaptiveAvg(self, output_size);
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  sizes[self.dim() - 2] = output_size[0];
  sizes[self.dim() - 1] = output_size[1];
  Tensor out = at::empty(sizes, self.options().memory_format(self.suggest_memory_format()));
  PoolShape s;
  s.adaptive = 1;
  avgForward(self, s, out);
  return out;
}

Tensor adaptiveAvgBackward(const Tensor& grad_output, const Tensor& self) {
  if (!floatKernelType(self.scalar_type()) || grad_output.scalar_type() != self.scalar_type()) {
    static const c10::OperatorHandle h = op("aten::_adaptive_avg_pool2d_backward", "");
    torch::jit::Stack stack{grad_output, self};
    cpuFallback(h, &stack);
    return stack.back().toTensor();
  }
  TORCH_CHECK(grad_output.dim() == self.dim(), "adaptive_avg_pool2d_backward(): grad_output and input must have ",
              "the same number of dimensions, got ", grad_output.dim(), " and ", self.dim());
  Tensor grad_input = at::empty(self.sizes(), self.options().memory_format(self.suggest_memory_format()));
  PoolShape s;
  s.adaptive = 1;
  avgBackward(grad_output, self, s, grad_input);
  return grad_input;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("max_pool2d_with_indices", TORCH_FN(maxPool));
  m.impl("max_pool2d_with_indices.out", TORCH_FN(maxPoolOut));
  m.impl("max_pool2d_with_indices_backward", TORCH_FN(maxPoolBackward));
  m.impl("max_pool2d_with_indices_backward.grad_input", TORCH_FN(maxPoolBackwardOut));
  m.impl("adaptive_max_pool2d", TORCH_FN(adaptiveMax));
  m.impl("adaptive_max_pool2d.out", TORCH_FN(adaptiveMaxOut));
  m.impl("adaptive_max_pool2d_backward", TORCH_FN(adaptiveMaxBackward));
  m.impl("adaptive_max_pool2d_backward.grad_input", TORCH_FN(adaptiveMaxBackwardOut));
  m.impl("avg_pool2d", TORCH_FN(avgPool));
  m.impl("avg_pool2d.out", TORCH_FN(avgPoolOut));
  m.impl("avg_pool2d_backward", TORCH_FN(avgPoolBackward));
  m.impl("avg_pool2d_backward.grad_input", TORCH_FN(avgPoolBackwardOut));
  m.impl("_adaptive_avg_pool2d", TORCH_FN(adaptiveAvg));
  m.impl("_adaptive_avg_pool2d_backward", TORCH_FN(adaptiveAvgBackward));
}

}  // namespace
}  // namespace metalx
