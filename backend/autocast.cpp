// Autocast on metalx: torch.autocast("metalx", dtype=torch.float16 | torch.bfloat16).
//
// torch 2.13 registers nothing for the AutocastPrivateUse1 key, neither kernels nor the
// fallthrough every other op needs, so without this file any op inside an enabled
// autocast region fails with "Could not run ... with arguments from the
// 'Autocastmetalx' backend". The op lists are the ones ATen/autocast_mode.h publishes
// for backends to share, which CUDA's autocast is built from, so metalx casts exactly
// the ops CUDA casts:
// - lower precision (the autocast dtype): convolutions, matmul family, linear, prelu,
//   RNN cells, attention;
// - float32: pointwise ops that lose accuracy in half (exp, log, pow, ...), norms,
//   losses, softmax family, reductions (the latter with their dtype argument set);
// - promote: ops with several floating inputs run in the widest of their dtypes.
// Everything else runs in the dtype it was given.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace metalx {
namespace {

// The shared op lists spell their signatures with ATen's unqualified type names.
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

// As on CUDA: binary_cross_entropy's backward is not safe to compute in half, and
// casting its inputs to float32 would hide a real precision bug from the user.
at::Tensor binaryCrossEntropyRejected(const at::Tensor&, const at::Tensor&,
                                      const std::optional<at::Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
              "autocast on metalx (as on CUDA). Use torch.nn.functional."
              "binary_cross_entropy_with_logits or torch.nn.BCEWithLogitsLoss, which combine "
              "a sigmoid and the loss and are safe to autocast; or disable autocast for the "
              "loss (torch.autocast(\"metalx\", enabled=False)) and pass float32 inputs.");
}

// Ops without an autocast rule pass through to the next dispatch key unchanged.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define METALX_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define METALX_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define METALX_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define METALX_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_LOWER_PRECISION_FP(METALX_LOWER_PRECISION)
  AT_FORALL_FP32(METALX_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(METALX_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(METALX_PROMOTE)
#undef METALX_LOWER_PRECISION
#undef METALX_FP32
#undef METALX_FP32_SET_OPT_DTYPE
#undef METALX_PROMOTE
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binaryCrossEntropyRejected));
}

}  // namespace
}  // namespace metalx
