// fill_ and zero_ (and through them torch.zeros/ones/full) as metalx kernels.
//
// A fill writes one bit pattern to every element, so the kernel only needs the element
// size: kernels/fill.metal's 1, 2, 4 and 8-byte instantiations serve every dtype of
// those sizes, float64 and complex64 included, without any double arithmetic on the
// device. A view with gaps fills one element and broadcasts it with the strided copy
// kernel; a broadcast (expanded) tensor fills the elements it has. Other overlapping
// views (as_strided) and 16-byte dtypes run on the CPU fallback.
#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>
#include <optional>

#include "fallback_report.h"
#include "launch/kernel_table.h"
#include "launch/threads.h"

namespace metalx {
namespace {

// A fill writes bit patterns: kernels/fill.metal has one kernel per element size, named
// as the launch layer names them (fill_dense_<uchar|short|int|long>).
launch::KernelFamily fill_kernels{"fill", {kernels::DType::UInt8, kernels::DType::Int16, kernels::DType::Int32,
                                           kernels::DType::Int64}};

// kernels/fill.metal's FillParams (same layout: keep the two in step).
struct FillParams {
  uint64_t bits;   // the value; an element is its low element_size bytes (little-endian)
  uint64_t count;  // elements
};
static_assert(sizeof(FillParams) == 16, "FillParams must match kernels/fill.metal");

std::optional<kernels::DType> patternDtype(size_t element_size) {
  switch (element_size) {
    case 1: return kernels::DType::UInt8;
    case 2: return kernels::DType::Int16;
    case 4: return kernels::DType::Int32;
    case 8: return kernels::DType::Int64;
    default: return std::nullopt;
  }
}

// The value as the tensor's dtype, in bytes (little-endian, low bytes used), with
// CPU torch's conversion: the checked conversion its fill_ kernel uses, and for a
// single element the unchecked one CPU's scalar path uses (CPU fills one element
// with inf where two raise an overflow error).
uint64_t valueBits(const at::Tensor& self, const at::Scalar& value) {
  uint64_t pattern = 0;
  if (self.numel() == 1) {
    at::Tensor one = at::empty({1}, self.options().device(at::kCPU)).fill_(value);
    std::memcpy(&pattern, one.data_ptr(), self.element_size());
    return pattern;
  }
  AT_DISPATCH_V2(self.scalar_type(), "metalx_fill", AT_WRAP([&] {
    const scalar_t v = value.to<scalar_t>();
    if constexpr (sizeof(v) <= sizeof(pattern)) std::memcpy(&pattern, &v, sizeof(v));  // 16-byte dtypes never get here
  }), AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kHalf, at::kBFloat16, at::kBool, at::kComplexHalf,
      AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES));
  return pattern;
}

void fallbackFill(at::Tensor& self, const at::Scalar& value) {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::fill_", "Scalar");
  reportFallback(op.operator_name());
  torch::jit::Stack stack{self, value};
  at::native::cpu_fallback(op, &stack);
}

// Whether no two elements share memory: with dims sorted by stride, each stride passes
// the furthest element of the smaller dims (sufficient, and exact for views made by
// slicing, transposing and stepping). torch's has_internal_overlap calls such views
// "too hard".
bool elementsAreDistinct(const at::Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) > 1) dims.emplace_back(t.stride(d), t.size(d));
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;  // furthest element offset of the dims so far
  for (const auto& [stride, size] : dims) {
    if (stride <= reach) return false;
    reach += stride * (size - 1);
  }
  return true;
}

at::Tensor& fillScalar(at::Tensor& self, const at::Scalar& value) {
  if (self.numel() == 0) return self;
  const std::optional<kernels::DType> pattern_dtype = patternDtype(self.element_size());
  if (!pattern_dtype) {  // 16-byte dtypes
    fallbackFill(self, value);
    return self;
  }
  if (!self.is_non_overlapping_and_dense()) {
    // Broadcast dims (stride 0) hold one element: fill that one.
    at::Tensor target = self;
    bool broadcast = false;
    for (int64_t d = 0; d < self.dim(); ++d) {
      if (self.stride(d) == 0 && self.size(d) > 1) {
        target = target.narrow(d, 0, 1);
        broadcast = true;
      }
    }
    if (broadcast) {
      fillScalar(target, value);
      return self;
    }
    // Elements that overlap otherwise (as_strided views) are rare enough for the CPU.
    if (!elementsAreDistinct(self)) {
      fallbackFill(self, value);
      return self;
    }
    // A view with gaps: fill one element, then the strided copy kernel broadcasts it.
    at::Tensor one = at::empty({}, self.options());
    fillScalar(one, value);
    self.copy_(one.expand(self.sizes()));
    return self;
  }
  // A dense tensor's elements are one range starting at its lowest address: with
  // non-negative strides, that is the element at data_ptr(). Enough threads to fill the
  // machine, each striding over the rest.
  const FillParams params{valueBits(self, value), static_cast<uint64_t>(self.numel())};
  launch::encodeThreads(fill_kernels, launch::Variant::Dense, *pattern_dtype, {&self}, params,
                        std::min<uint64_t>(params.count, 256ull * 4096));
  return self;
}

at::Tensor& zeroInPlace(at::Tensor& self) { return fillScalar(self, 0); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("fill_.Scalar", TORCH_FN(fillScalar));
  m.impl("zero_", TORCH_FN(zeroInPlace));
}

}  // namespace
}  // namespace metalx
