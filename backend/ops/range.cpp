// arange on the device (kernels/range.metal), so torch.arange(n, device=...) (positions,
// index vectors) needs no CPU fallback.
//
// The output's size and every argument error come from torch's meta kernel of
// arange.start_out, so they are CPU's. Ranges whose every value is exact in the dtype run
// on the device: integral start and step, or for floating dtypes dyadic ones (multiples
// of 2^-s, s <= 24, like mvlgamma's steps of 0.5), with values below 2^24 units of 2^-s
// for float32 (2^11 half, 2^8 bfloat16). CPU computes start + i * step in double and
// rounds once; for such ranges that is exact, and so is the kernel's integer arithmetic
// scaled by 2^-s. Other ranges (steps like 0.1, values that round) and dtypes without a
// kernel run CPU's own kernel through the fallback.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>

#include "cpu_fallback.h"
#include "launch/kernel_table.h"
#include "launch/threads.h"
#include "launch/torch_dtype.h"

namespace metalx {
namespace {

// Mirrors kernels/range.metal's RangeParams.
struct RangeParams {
  int64_t start;
  int64_t step;
  uint64_t count;
  float scale;  // 2^-s: start and step are in units of it
};

launch::KernelFamily arangeKernels("range_arange", launch::kNumberTypes);

// Integers up to this are exact in the dtype, so no rounding (whose order CPU's
// vectorised bfloat16/half paths decide) can happen.
double exactLimit(c10::ScalarType t) {
  switch (t) {
    case at::kFloat: return 16777216.0;  // 2^24
    case at::kHalf: return 2048.0;       // 2^11
    case at::kBFloat16: return 256.0;    // 2^8
    default: return 9007199254740992.0;  // 2^53: integer types, exact in int64
  }
}

bool exactInteger(double d, double limit) {
  return std::isfinite(d) && d == std::floor(d) && std::abs(d) <= limit;
}

// The fewest binary places s (0..24; 0 for integer dtypes) that make start and step
// integers, or -1 when there are none (a step like 0.1).
int binaryPlaces(const at::Scalar& start, const at::Scalar& step, bool floating) {
  if (start.isBoolean() || start.isComplex() || step.isBoolean() || step.isComplex()) return -1;
  const double a = start.toDouble(), b = step.toDouble();
  if (!std::isfinite(a) || !std::isfinite(b)) return -1;
  for (int s = 0; s <= (floating ? 24 : 0); ++s) {
    const double a_s = std::ldexp(a, s), b_s = std::ldexp(b, s);
    if (a_s == std::floor(a_s) && b_s == std::floor(b_s)) return s;
  }
  return -1;
}

at::Tensor& arangeOut(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step, at::Tensor& out) {
  // The size (and CPU's errors: zero step, inconsistent bounds, non-finite values).
  at::Tensor shape = at::empty({0}, out.options().device(at::kMeta));
  at::arange_out(shape, start, end, step);
  const auto dtype = launch::storageDtype(out.scalar_type());
  const double limit = exactLimit(out.scalar_type());
  const int places = binaryPlaces(start, step, at::isFloatingType(out.scalar_type()));
  const bool native = dtype && arangeKernels.supports(*dtype) && places >= 0 && !end.isComplex() &&
                      exactInteger(std::ldexp(start.toDouble(), places), limit) &&
                      exactInteger(std::ldexp(step.toDouble(), places), limit) &&
                      std::abs(std::ldexp(end.toDouble(), places)) <= limit;
  if (!native) {
    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::arange", "start_out");
    torch::jit::Stack stack{start, end, step, out};
    cpuFallback(op, &stack);
    return out;
  }
  at::native::resize_output(out, shape.sizes());
  const int64_t n = out.numel();
  if (n == 0) return out;
  at::Tensor dense = out.is_contiguous() ? out : at::empty(out.sizes(), out.options());
  RangeParams p{static_cast<int64_t>(std::ldexp(start.toDouble(), places)),
                static_cast<int64_t>(std::ldexp(step.toDouble(), places)), static_cast<uint64_t>(n),
                std::ldexp(1.0f, -places)};
  launch::encodeThreads(arangeKernels, launch::Variant::Plain, *dtype, {&dense}, p,
                        std::min<uint64_t>(static_cast<uint64_t>(n), launch::kGridStrideThreads));
  if (!dense.is_same(out)) out.copy_(dense);
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("arange.start_out", TORCH_FN(arangeOut)); }

}  // namespace
}  // namespace metalx
