// fill_ and zero_ (and through them torch.zeros/ones/full) as metalx kernels.
//
// A fill writes one bit pattern to every element, so the kernel only needs the element
// size: kernels/fill.metal's 1, 2, 4 and 8-byte instantiations serve every dtype of
// those sizes, float64 and complex64 included, without any double arithmetic on the
// device. Tensors whose elements are not one dense range (gaps, overlaps) and 16-byte
// dtypes run on the CPU through the fallback until the strided kernels cover them.
#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <cstring>
#include <mutex>

#include "allocator.h"
#include "core/stream_pool.h"
#include "fallback_report.h"

namespace metalx {
namespace {

const char* fillKernelFor(size_t element_size) {
  switch (element_size) {
    case 1: return "fill_dense_uchar";
    case 2: return "fill_dense_short";
    case 4: return "fill_dense_int";
    case 8: return "fill_dense_long";
    default: return nullptr;
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

// The fill pipelines of a stream's device, looked up once: a fill is the most frequent
// small op, and its per-call cost is what a user's loop of small ops pays.
const rt::ComputePipelinePtr& fillPipeline(Stream& stream, size_t element_size) {
  struct Pipelines {
    std::once_flag once;
    rt::ComputePipelinePtr by_size[9];
  };
  static Pipelines per_device[64];
  TORCH_CHECK(stream.deviceIndex() < 64, "metalx supports at most 64 devices");
  Pipelines& p = per_device[stream.deviceIndex()];
  std::call_once(p.once, [&] {
    for (size_t size : {1, 2, 4, 8}) p.by_size[size] = stream.pipelines().builtin(fillKernelFor(size));
  });
  return p.by_size[element_size];
}

void fallbackFill(at::Tensor& self, const at::Scalar& value) {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::fill_", "Scalar");
  reportFallback(op.operator_name());
  torch::jit::Stack stack{self, value};
  at::native::cpu_fallback(op, &stack);
}

at::Tensor& fillScalar(at::Tensor& self, const at::Scalar& value) {
  if (self.numel() == 0) return self;
  const char* kernel = fillKernelFor(self.element_size());
  if (!kernel || !self.is_non_overlapping_and_dense()) {
    fallbackFill(self, value);
    return self;
  }
  const uint64_t pattern = valueBits(self, value);

  // A dense tensor's elements are one range starting at its lowest address: with
  // non-negative strides, that is the element at data_ptr().
  auto [buffer, offset] = bufferFor(self);
  const uint64_t count = static_cast<uint64_t>(self.numel());
  Stream& stream = currentStream(self.device().index());
  const rt::ComputePipelinePtr& pipeline = fillPipeline(stream, self.element_size());
  // Enough threads to fill the machine, each striding over the rest.
  const uint64_t threads = std::min<uint64_t>(count, 256ull * 4096);
  stream.encodeCompute([&](rt::ComputeEncoder& e) {
    e.setComputePipeline(pipeline);
    e.setBuffer(buffer, offset, 0);
    e.setBytes(&pattern, 8, 1);  // little-endian: the first element_size bytes are the value
    e.setBytes(&count, sizeof count, 2);
    e.dispatchThreads({threads, 1, 1}, {std::min<uint64_t>(threads, 256), 1, 1});
  });
  return self;
}

at::Tensor& zeroInPlace(at::Tensor& self) { return fillScalar(self, 0); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("fill_.Scalar", TORCH_FN(fillScalar));
  m.impl("zero_", TORCH_FN(zeroInPlace));
}

}  // namespace
}  // namespace metalx
