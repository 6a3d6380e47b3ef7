// eye (out= forms; the factory forms reach them through torch's composite) on the
// device, as CUDA builds it: the output is zeroed and its main diagonal (a strided
// view) filled with one, both by the native fill kernels (backend/ops/fill.cpp).
// Argument errors are CPU's. float8 outputs (no fill kernel) run CPU's eye on the fallback.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "cpu_fallback.h"

namespace metalx {
namespace {

at::Tensor& eyeOut(int64_t n, int64_t m, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  if (c10::isFloat8Type(out.scalar_type())) {
    // The fill kernels have no float8 types: CPU's eye on the fallback.
    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::eye", "m_out");
    torch::jit::Stack stack{n, m, out};
    cpuFallback(op, &stack);
    return out;
  }
  at::native::resize_output(out, {n, m});
  out.zero_();
  if (n > 0 && m > 0) out.diagonal().fill_(1);
  return out;
}

at::Tensor& eyeSquareOut(int64_t n, at::Tensor& out) { return eyeOut(n, n, out); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("eye.out", TORCH_FN(eyeSquareOut));
  m.impl("eye.m_out", TORCH_FN(eyeOut));
}

}  // namespace
}  // namespace metalx
