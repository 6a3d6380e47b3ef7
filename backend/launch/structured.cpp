// The structured-op wrappers' checks (see structured.h).
#include "launch/structured.h"

#include "cpu_fallback.h"

namespace metalx::launch {

void checkInplaceOutput(const at::Tensor& self, at::IntArrayRef sizes, const at::TensorOptions& options) {
  TORCH_CHECK(options.dtype() == self.dtype(), "Bad in-place call: input tensor dtype ", self.dtype(),
              " and output tensor dtype ", options.dtype(), " should match");
  TORCH_CHECK(options.device() == self.device(), "Bad in-place call: input tensor device ", self.device(),
              " and output tensor device ", options.device(), " should match");
  TORCH_CHECK(sizes == self.sizes(), "Bad in-place call: input tensor size ", self.sizes(),
              " and output tensor size ", sizes, " should match");
}

void resizeOutOutput(const at::Tensor& out, at::IntArrayRef sizes, at::IntArrayRef strides,
                     const at::TensorOptions& options) {
  TORCH_CHECK(options.dtype() == out.dtype(), "Expected out tensor to have dtype ", options.dtype(), ", but got ",
              out.dtype(), " instead");
  TORCH_CHECK(options.device() == out.device(), "Expected out tensor to have device ", options.device(),
              ", but got ", out.device(), " instead");
  if (!at::native::resize_output(out, sizes)) return;
  // A resized out= takes the layout the op asks for.
  if (!strides.empty()) out.as_strided_(sizes, strides);
  else if (options.memory_format_opt().has_value())
    out.unsafeGetTensorImpl()->empty_tensor_restride(*options.memory_format_opt());
}

at::Tensor proxyOutputIfNeeded(const at::Tensor& out, at::IntArrayRef sizes, at::IntArrayRef strides,
                               const at::TensorOptions& options) {
  if (strides.empty() || out.strides() == strides) return at::Tensor();
  return at::empty_strided(sizes, strides, options);
}

void runOutOnCpuFallback(const c10::OperatorHandle& op, torch::jit::Stack& stack) { cpuFallback(op, &stack); }

void checkIntegerDivisor(at::TensorIteratorBase& iter) {
  if (!c10::isIntegralType(elementwiseDtype(iter), /*includeBool=*/false)) return;
  const int arg = iter.noutputs() + 1;
  const bool zero = iter.is_cpu_scalar(arg) ? iter.scalar_value<int64_t>(arg) == 0
                                            : iter.input(1).eq(0).any().item<bool>();
  TORCH_CHECK(!zero, "ZeroDivisionError");
}

const c10::OperatorHandle& ElementwiseOp::outOperator() {
  std::call_once(once_, [&] {
    out_op_ = c10::Dispatcher::singleton().findSchemaOrThrow(out_name_, out_overload_);
  });
  return *out_op_;
}

}  // namespace metalx::launch
