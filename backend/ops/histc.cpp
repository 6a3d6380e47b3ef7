// histc (functional and out=) on the device for float32, float16 and bfloat16
// (kernels/histc.metal): the outer edges are chosen as CPU chooses them (min/max, else
// the data's aminmax, which costs one synchronisation, widened by one each way when
// equal) and rounded to the input dtype; a kernel counts values per bin with atomic
// 32-bit counters, then the counts are cast to the output. Errors are CPU's messages;
// float64 and the dtypes CPU rejects run CPU's kernel on the fallback.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>

#include "allocator.h"
#include "core/stream_pool.h"
#include "cpu_fallback.h"
#include "launch/kernel_table.h"
#include "launch/threads.h"
#include "launch/torch_dtype.h"

namespace metalx {
namespace {

// Mirrors kernels/histc.metal's HistcParams.
struct HistcParams {
  uint64_t count;
  int64_t bins;
  float left;
  float right;
};
static_assert(sizeof(HistcParams) == 24, "HistcParams must match the kernel");

launch::KernelFamily histcKernels("histc", launch::kFloatTypes);

// `v` rounded to `t` as CPU's Scalar::to<scalar_t>() rounds it, held in float.
float roundedTo(double v, c10::ScalarType t) {
  switch (t) {
    case at::kHalf: return static_cast<float>(at::Scalar(v).to<at::Half>());
    case at::kBFloat16: return static_cast<float>(at::Scalar(v).to<at::BFloat16>());
    default: return static_cast<float>(v);
  }
}

at::Tensor& histcOut(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max,
                     at::Tensor& out) {
  const auto dtype = launch::storageDtype(self.scalar_type());
  if (!dtype || !histcKernels.supports(*dtype)) {
    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::histc", "out");
    torch::jit::Stack stack{self, bins, min, max, out};
    cpuFallback(op, &stack);
    return out;
  }
  TORCH_CHECK(self.scalar_type() == out.scalar_type(),
              "torch.histogram: input tensor and hist tensor should have the same dtype, but got input ",
              self.scalar_type(), " and hist ", out.scalar_type());
  TORCH_CHECK(bins > 0, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  at::native::resize_output(out, {bins});

  double left = min.to<double>(), right = max.to<double>();
  if (left == right && self.numel() > 0) {
    const auto [lo, hi] = at::aminmax(self);
    left = lo.item<double>();
    right = hi.item<double>();
  }
  if (left == right) {
    left -= 1;
    right += 1;
  }
  TORCH_CHECK(!(std::isinf(left) || std::isinf(right) || std::isnan(left) || std::isnan(right)),
              "torch.histc: range of [", left, ", ", right, "] is not finite");
  TORCH_CHECK(left < right, "torch.histc: max must be larger than min");

  at::Tensor counts = at::zeros({bins}, out.options().dtype(at::kInt));
  if (self.numel() > 0) {
    const at::Tensor values = self.contiguous();
    const HistcParams p{static_cast<uint64_t>(values.numel()), bins, roundedTo(left, self.scalar_type()),
                        roundedTo(right, self.scalar_type())};
    launch::encodeThreads(histcKernels, launch::Variant::Plain, *dtype, {&values, &counts}, p,
                          std::min<uint64_t>(p.count, launch::kGridStrideThreads));
  }
  out.copy_(counts);
  return out;
}

at::Tensor histcFunctional(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  at::Tensor out = at::empty({0}, self.options(), at::MemoryFormat::Contiguous);
  return histcOut(self, bins, min, max, out);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("histc", TORCH_FN(histcFunctional));
  m.impl("histc.out", TORCH_FN(histcOut));
}

}  // namespace
}  // namespace metalx
