// linspace.out on the device for float32, float16 and bfloat16 (kernels/linspace.metal,
// which rounds as CPU's kernel does); the factory and Tensor-bound forms reach it
// through torch's composites. Integer outputs (CPU computes them in double, its vector
// width and thread chunks deciding where it truncates: see the README) and
// float64/complex run CPU's kernel on the fallback. Errors are CPU's.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <algorithm>

#include "cpu_fallback.h"
#include "launch/kernel_table.h"
#include "launch/threads.h"
#include "launch/torch_dtype.h"

namespace metalx {
namespace {

// Mirrors kernels/linspace.metal's LinspaceParams.
struct LinspaceParams {
  float start;
  float end;
  int64_t steps;
};
static_assert(sizeof(LinspaceParams) == 16, "LinspaceParams must match the kernel");

launch::KernelFamily linspaceKernels("linspace", launch::kFloatTypes);

// `v` rounded to the output dtype, as CPU's Scalar::to<scalar_t>() does, held in float.
float roundedTo(const at::Scalar& v, c10::ScalarType t) {
  switch (t) {
    case at::kHalf: return static_cast<float>(v.to<at::Half>());
    case at::kBFloat16: return static_cast<float>(v.to<at::BFloat16>());
    default: return v.to<float>();
  }
}

at::Tensor& linspaceOut(const at::Scalar& start, const at::Scalar& end, int64_t steps, at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  const auto dtype = launch::storageDtype(out.scalar_type());
  if (!dtype || !linspaceKernels.supports(*dtype) || start.isComplex() || end.isComplex()) {
    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::linspace", "out");
    torch::jit::Stack stack{start, end, steps, out};
    cpuFallback(op, &stack);
    return out;
  }
  if (out.numel() != steps) out.resize_({steps});
  if (steps == 0) return out;
  if (steps == 1) {
    out.fill_(start);
    return out;
  }
  at::Tensor dense = out.is_contiguous() ? out : out.contiguous();
  const LinspaceParams p{roundedTo(start, out.scalar_type()), roundedTo(end, out.scalar_type()), steps};
  launch::encodeThreads(linspaceKernels, launch::Variant::Plain, *dtype, {&dense}, p,
                        std::min<uint64_t>(static_cast<uint64_t>(steps), launch::kGridStrideThreads));
  if (!dense.is_same(out)) out.copy_(dense);
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("linspace.out", TORCH_FN(linspaceOut)); }

}  // namespace
}  // namespace metalx
