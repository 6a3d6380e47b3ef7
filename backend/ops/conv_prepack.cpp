// Inference convolution with a prepacked weight, as custom ops in the `metalx` library
// (torch.ops.metalx.*; python/metalx/nn.py wraps them in PrepackedConv2d):
//
//   conv2d_weight_pack(Tensor weight, int groups) -> Tensor
//       the weight [Cy, Cx/groups, KH, KW] in the layout the tiled forward kernel reads
//       (float32, blocks of 8 output channels; kernels/conv2d_tiled.metal). Packing
//       once saves the packing pass every plain conv2d call makes.
//   conv2d_packed(Tensor input, Tensor packed_weight, int[] weight_shape, Tensor? bias,
//                 int[] stride, int[] padding, int[] dilation, int groups) -> Tensor
//       conv2d(input, weight, bias, stride, padding, dilation, groups) from it.
//
//   conv2d_uses_packed_weight(int[] weight_shape, int[] stride, int groups) -> bool
//       whether conv2d_packed runs such a convolution (not depthwise; a horizontal
//       stride only with a 1-wide kernel); other convolutions keep the plain weight.
//
// The first two validate their arguments with messages in CPU PyTorch's words where one exists.
// Inference only: conv2d_packed refuses inputs that require a gradient while grad mode
// is on (rather than PyTorch's default of silently giving no gradient).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <optional>
#include <vector>

#include "ops/convolution.h"

namespace metalx {
namespace {

bool isMetalx(const at::Tensor& t) { return t.device().type() == c10::DeviceType::PrivateUse1; }

bool convDTypeOk(c10::ScalarType t) { return t == at::kFloat || t == at::kHalf || t == at::kBFloat16; }

void checkWeightShape(at::IntArrayRef shape, int64_t groups, const char* op) {
  TORCH_CHECK(shape.size() == 4, op, ": expected a 4-D weight shape [out_channels, in_channels/groups, kH, kW], got ",
              shape);
  for (int64_t v : shape) TORCH_CHECK(v > 0, op, ": weight shape ", shape, " has a non-positive size");
  TORCH_CHECK(groups > 0, "non-positive groups is not supported");
  TORCH_CHECK(shape[0] % groups == 0, "Given groups=", groups, ", expected weight to be divisible by ", groups,
              " at dimension 0, but got weight of size ", shape, " instead");
}

std::vector<int64_t> pair(at::IntArrayRef v, const char* name, const char* op) {
  TORCH_CHECK(v.size() == 2 || v.size() == 1, op, ": expected ", name, " to have 1 or 2 values, got ", v);
  return v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : std::vector<int64_t>{v[0], v[1]};
}

at::Tensor weightPack(const at::Tensor& weight, int64_t groups) {
  constexpr const char* op = "metalx::conv2d_weight_pack";
  TORCH_CHECK(weight.defined() && isMetalx(weight), op, ": expected a metalx weight, got one on ", weight.device());
  TORCH_CHECK(convDTypeOk(weight.scalar_type()), op, ": expected a float32, float16 or bfloat16 weight, got ",
              weight.scalar_type());
  checkWeightShape(weight.sizes(), groups, op);
  return packConvolutionWeight(weight, groups);
}

at::Tensor convPacked(const at::Tensor& input, const at::Tensor& packed, at::IntArrayRef weight_shape,
                      const std::optional<at::Tensor>& bias, at::IntArrayRef stride_in, at::IntArrayRef padding_in,
                      at::IntArrayRef dilation_in, int64_t groups) {
  constexpr const char* op = "metalx::conv2d_packed";
  checkWeightShape(weight_shape, groups, op);
  const auto stride = pair(stride_in, "stride", op), padding = pair(padding_in, "padding", op),
             dilation = pair(dilation_in, "dilation", op);
  for (int d = 0; d < 2; ++d) {
    TORCH_CHECK(stride[d] > 0, "non-positive stride is not supported");
    TORCH_CHECK(padding[d] >= 0, "negative padding is not supported");
    TORCH_CHECK(dilation[d] > 0, "dilation should be greater than zero");
  }
  TORCH_CHECK(input.dim() == 4, op, ": expected a 4-D input (batch, channels, height, width), got ", input.dim(),
              "-D input of size ", input.sizes());
  const bool same_device = isMetalx(input) && isMetalx(packed) && input.device() == packed.device() &&
                           (!bias || !bias->defined() || bias->device() == input.device());
  TORCH_CHECK(same_device, "Expected all tensors to be on the same metalx device, but got input on ",
              input.device(), ", packed weight on ", packed.device(),
              bias && bias->defined() ? ", bias on " + bias->device().str() : std::string(), " (in ", op, ")");
  TORCH_CHECK(convDTypeOk(input.scalar_type()), op, ": expected a float32, float16 or bfloat16 input, got ",
              input.scalar_type());
  TORCH_CHECK(packed.scalar_type() == at::kFloat && packed.dim() == 1, op,
              ": packed_weight must be the 1-D float32 tensor metalx::conv2d_weight_pack returns");
  const int64_t cin = weight_shape[1] * groups;
  TORCH_CHECK(input.size(1) == cin, "Given groups=", groups, ", weight of size ", weight_shape,
              ", expected input", input.sizes(), " to have ", cin, " channels, but got ", input.size(1),
              " channels instead");
  TORCH_CHECK(convolutionUsesPackedWeight(weight_shape, stride, groups), op,
              ": this convolution does not run from a packed weight (depthwise, or a horizontal stride with a "
              "kernel wider than 1); use torch.nn.functional.conv2d");
  const int64_t expected = packedConvolutionWeightSize(weight_shape, groups);
  TORCH_CHECK(packed.numel() == expected, op, ": packed_weight has ", packed.numel(), " elements, but a weight of size ",
              weight_shape, " with groups=", groups, " packs into ", expected,
              " (was it packed for another weight shape or groups?)");
  for (int d = 0; d < 2; ++d) {
    const int64_t padded = input.size(2 + d) + 2 * padding[d];
    const int64_t extent = dilation[d] * (weight_shape[2 + d] - 1) + 1;
    TORCH_CHECK(padded >= extent, "Calculated padded input size per channel: (", input.size(2) + 2 * padding[0],
                " x ", input.size(3) + 2 * padding[1], "). Kernel size: (", dilation[0] * (weight_shape[2] - 1) + 1,
                " x ", dilation[1] * (weight_shape[3] - 1) + 1, "). Kernel size can't be greater than actual input size");
  }
  if (bias && bias->defined()) {
    TORCH_CHECK(bias->dim() == 1 && bias->numel() == weight_shape[0], "Given weight of size ", weight_shape,
                ", expected bias to be 1-dimensional with ", weight_shape[0], " elements, but got bias of size ",
                bias->sizes(), " instead");
    TORCH_CHECK(bias->scalar_type() == input.scalar_type(), op, ": bias has dtype ", bias->scalar_type(),
                ", expected the input's ", input.scalar_type());
  }
  return convolutionWithPackedWeight(input, packed, weight_shape, bias, stride, padding, dilation, groups);
}

bool usesPacked(at::IntArrayRef weight_shape, at::IntArrayRef stride, int64_t groups) {
  constexpr const char* op = "metalx::conv2d_uses_packed_weight";
  checkWeightShape(weight_shape, groups, op);
  return convolutionUsesPackedWeight(weight_shape, pair(stride, "stride", op), groups);
}

at::Tensor convPackedAutograd(const at::Tensor& input, const at::Tensor& packed, at::IntArrayRef weight_shape,
                              const std::optional<at::Tensor>& bias, at::IntArrayRef stride, at::IntArrayRef padding,
                              at::IntArrayRef dilation, int64_t groups) {
  const bool wants_grad = input.requires_grad() || packed.requires_grad() || (bias && bias->defined() && bias->requires_grad());
  TORCH_CHECK(!(wants_grad && at::GradMode::is_enabled()),
              "metalx::conv2d_packed is for inference and has no gradient; run it under torch.no_grad() or "
              "torch.inference_mode(), or use torch.nn.Conv2d to train");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("metalx::conv2d_packed", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, at::IntArrayRef, const std::optional<at::Tensor>&,
                            at::IntArrayRef, at::IntArrayRef, at::IntArrayRef, int64_t)>();
  return op.call(input, packed, weight_shape, bias, stride, padding, dilation, groups);
}

// Called with tensors of another device: the dispatcher would only say that no kernel
// exists for it.
at::Tensor weightPackWrongDevice(const at::Tensor& weight, int64_t) {
  TORCH_CHECK(false, "metalx::conv2d_weight_pack: expected a metalx weight, got one on ", weight.device());
}
at::Tensor convPackedWrongDevice(const at::Tensor& input, const at::Tensor& packed, at::IntArrayRef,
                                 const std::optional<at::Tensor>&, at::IntArrayRef, at::IntArrayRef, at::IntArrayRef,
                                 int64_t) {
  TORCH_CHECK(false, "metalx::conv2d_packed: expected metalx tensors, got input on ", input.device(),
              " and packed weight on ", packed.device());
}

TORCH_LIBRARY(metalx, m) {
  m.def("conv2d_uses_packed_weight(int[] weight_shape, int[] stride, int groups) -> bool", TORCH_FN(usesPacked));
  m.def("conv2d_weight_pack(Tensor weight, int groups) -> Tensor");
  m.def(
      "conv2d_packed(Tensor input, Tensor packed_weight, int[] weight_shape, Tensor? bias, int[] stride, "
      "int[] padding, int[] dilation, int groups) -> Tensor");
}

TORCH_LIBRARY_IMPL(metalx, PrivateUse1, m) {
  m.impl("conv2d_weight_pack", TORCH_FN(weightPack));
  m.impl("conv2d_packed", TORCH_FN(convPacked));
}

TORCH_LIBRARY_IMPL(metalx, Autograd, m) {
  m.impl("conv2d_packed", TORCH_FN(convPackedAutograd));
}

TORCH_LIBRARY_IMPL(metalx, CPU, m) {
  m.impl("conv2d_weight_pack", TORCH_FN(weightPackWrongDevice));
  m.impl("conv2d_packed", TORCH_FN(convPackedWrongDevice));
}

}  // namespace
}  // namespace metalx
