// Convolution: aten::convolution_overrideable and convolution_backward_overrideable,
// the two ops PyTorch's convolution composites (conv1d/2d/3d, conv_transpose*,
// convolution, convolution_backward) end in for an out-of-tree device. They are not
// covered by the boxed CPU fallback, so they are registered here; autograd (including
// double backward, through the composite's _convolution_double_backward) needs nothing
// more.
//
// Native kernels (backend/ops/conv2d/conv2d.h) run 1-D and 2-D convolutions, plain and
// transposed, in float32, float16 and bfloat16, on any strides (NCHW, channels_last,
// views, storage offsets): every case is one "regular" convolution X -> Y:
//   conv forward            Y = fwd(X=input, W) + b
//   conv backward           dX = bwd_x(dY, W), dW = bwd_w(dY, X), db = sum(dY)
//   transposed forward      X = bwd_x(Y=input, W) + b
//   transposed backward     dY(=d input) = fwd(dX(=grad_output), W), dW = bwd_w(input, dX),
//                           db = sum(grad_output)
// Each of fwd and bwd_x runs on the fastest kernels that apply (planForward): 3x3
// depthwise (conv2d_depthwise.h), register-tiled over a packed weight (conv2d_tiled.h;
// bwd_x as a forward with the flipped weight when strides are 1, and a strided 1x1's
// bwd_x as that on the stride's grid), else the direct kernels; bwd_w on the 3x3
// depthwise kernel, the tiled one, or with few channels per group (a stem's 3 inputs)
// on conv2d_taps_bwd_w (conv2d_tiled.h).
// Everything else (3-D convolutions, float64, other dtypes) runs on the CPU over the same
// memory, as the fallback does, and is counted in torch.metalx.fallback_stats().
// The prepacked-weight entry points at the end serve ops_conv_prepack.cpp.
//
// Output memory format: channels_last when the input or the weight suggests it (as
// CPU's mkldnn path decides), contiguous otherwise.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <vector>

#include "allocator.h"
#include "core/stream_pool.h"
#include "device.h"
#include "fallback_memory.h"
#include "fallback_report.h"
#include "ops/conv2d/conv2d.h"
#include "ops/conv2d/conv2d_depthwise.h"
#include "ops/conv2d/conv2d_tiled.h"
#include "ops/convolution.h"

namespace metalx {
namespace {

using kernels::ConvOperand;
using kernels::Conv2dGeometry;
using kernels::DType;

bool isMetalx(const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; }

std::optional<DType> convDType(c10::ScalarType t) {
  switch (t) {
    case at::kFloat: return DType::Float32;
    case at::kHalf: return DType::Float16;
    case at::kBFloat16: return DType::BFloat16;
    default: return std::nullopt;
  }
}

// Tensors of one op must be on one metalx device (the composite checks dtypes and
// shapes, not always devices).
c10::Device commonDevice(std::initializer_list<const at::Tensor*> tensors, const char* op) {
  std::optional<c10::Device> device;
  std::optional<c10::Device> other;
  for (const at::Tensor* t : tensors) {
    if (!t->defined()) continue;
    if (isMetalx(*t)) {
      TORCH_CHECK(!device || *device == t->device(),
                  "Expected all tensors to be on the same device, but found at least two devices, ", *device,
                  " and ", t->device(), "! (in ", op, ")");
      device = t->device();
    } else {
      other = t->device();
    }
  }
  TORCH_CHECK(device, op, ": expected a metalx tensor");
  TORCH_CHECK(!other, "Expected all tensors to be on the same device, but found at least two devices, ", *device,
              " and ", *other, "! (in ", op, ")");
  return *device;
}

// ---- the CPU route (3-D, float64, other dtypes) ----

// An operand for the CPU kernel: metalx tensors as CPU aliases of their memory (the
// device must be idle: synchronize first).
at::Tensor cpuOperand(const at::Tensor& t) { return t.defined() && isMetalx(t) ? cpuAlias(t) : t; }

at::Tensor toDevice(const at::Tensor& r, c10::Device device) {
  if (!r.defined()) return r;
  if (auto adopted = adoptAsDeviceTensor(r); adopted && adopted->device() == device) return *adopted;
  countFallbackResultCopy();
  return r.to(device);
}

// ---- the native route ----

ConvOperand operandOf(const at::Tensor& t) {
  ConvOperand o;
  for (int64_t d = 0; d < t.dim() && d < 4; ++d) o.strides[d] = t.stride(d);
  if (t.numel() == 0) return o;
  auto [buffer, offset] = bufferFor(t.data_ptr());
  o.buffer = buffer;
  o.byte_offset = offset;
  return o;
}

at::Tensor deviceBytes(size_t bytes, const at::TensorOptions& options) {
  return at::empty({static_cast<int64_t>(bytes)}, options.dtype(at::kByte).memory_format(at::MemoryFormat::Contiguous));
}

// A 1x1 kernel with a stride above 1 and no padding: its input gradient lives on the
// stride's grid only.
bool isStridedPointwise(const Conv2dGeometry& g) {
  return g.KH == 1 && g.KW == 1 && (g.stride[0] > 1 || g.stride[1] > 1) && g.pad[0] == 0 && g.pad[1] == 0 &&
         g.OH == (g.H - 1) / g.stride[0] + 1 && g.OW == (g.W - 1) / g.stride[1] + 1;
}

// One "regular" convolution Y = conv(X, W) (+ bias) to encode: on the 3x3 depthwise or
// the tiled kernels when they apply (with the packed weight and scratch they need,
// allocated here, before encoding), else on the direct ones. `input_grad` says that
// `g` is a convolution whose input gradient is wanted (Y := dX from X := dY): the fast
// kernels run it as a forward with the transposed, flipped weight when `g` has unit
// strides, the direct route runs the input-gradient kernel.
struct ForwardRun {
  Conv2dGeometry g;             // of the computation Y = conv(X, W)
  Conv2dGeometry direct;        // what the direct kernel is given
  bool input_grad = false;
  bool depthwise = false;
  bool tiled = false;
  at::Tensor packed;            // tiled only
  at::Tensor scratch;
};

ForwardRun planForward(const Conv2dGeometry& g, bool input_grad, const at::Tensor& x, const at::TensorOptions& options,
                       const at::Tensor* prepacked = nullptr) {
  ForwardRun r;
  r.direct = g;
  r.input_grad = input_grad;
  if (input_grad) {
    auto as_forward = kernels::conv2dInputGradAsForward(g);
    if (!as_forward) {
      r.g = g;
      return r;
    }
    r.g = *as_forward;
  } else {
    r.g = g;
  }
  if (g.N == 0) return r;  // nothing to compute: the direct kernels encode nothing
  const DType dtype = *convDType(x.scalar_type());
  if (!prepacked && kernels::conv2dDepthwise3Applies(r.g)) {
    r.depthwise = true;
    return r;
  }
  if (!kernels::conv2dTiledForwardApplies(r.g)) return r;
  r.tiled = true;
  r.packed = prepacked ? *prepacked
                       : at::empty({kernels::conv2dPackedWeightFloats(r.g)}, options.dtype(at::kFloat));
  const size_t bytes = kernels::conv2dTiledForwardScratchBytes(dtype, r.g, operandOf(x));
  if (bytes) r.scratch = deviceBytes(bytes, options);
  return r;
}

void encodeForward(rt::ComputeEncoder& e, rt::PipelineCache& pipelines, DType dtype, const ForwardRun& r,
                   const at::Tensor& y, const at::Tensor& x, const at::Tensor& w, const ConvOperand* bias,
                   bool weight_prepacked = false) {
  if (r.depthwise) {
    kernels::encodeConv2dDepthwise3Forward(e, pipelines, dtype, r.g, operandOf(y), operandOf(x), operandOf(w), bias,
                                           r.input_grad);
    return;
  }
  if (!r.tiled) {
    if (r.input_grad)
      kernels::encodeConv2dBackwardInput(e, pipelines, dtype, r.direct, operandOf(y), operandOf(x), operandOf(w), bias);
    else
      kernels::encodeConv2dForward(e, pipelines, dtype, r.direct, operandOf(y), operandOf(x), operandOf(w), bias);
    return;
  }
  const ConvOperand packed = operandOf(r.packed);
  if (!weight_prepacked) kernels::encodeConv2dPackWeight(e, pipelines, dtype, r.g, packed, operandOf(w), r.input_grad);
  const ConvOperand scratch = r.scratch.defined() ? operandOf(r.scratch) : ConvOperand{};
  kernels::encodeConv2dTiledForward(e, pipelines, dtype, r.g, operandOf(y), operandOf(x), packed, bias, scratch);
}

bool nativeSupported(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  if (input.dim() != 3 && input.dim() != 4) return false;
  if (weight.dim() != input.dim()) return false;
  if (!convDType(input.scalar_type()) || weight.scalar_type() != input.scalar_type()) return false;
  if (bias.defined() && bias.scalar_type() != input.scalar_type()) return false;
  return true;
}

// 1-D convolutions as 2-D ones with a unit height.
at::Tensor as2d(const at::Tensor& t) { return t.defined() && t.dim() == 3 ? t.unsqueeze(2) : t; }
std::vector<int64_t> param2d(at::IntArrayRef v, int64_t unit, bool one_d) {
  if (one_d) return {unit, v[0]};
  TORCH_CHECK(v.size() == 2, "convolution: expected 2 values per spatial parameter, got ", v.size());
  return {v[0], v[1]};
}

at::MemoryFormat outputFormat(const at::Tensor& input, const at::Tensor& weight) {
  if (input.dim() != 4) return at::MemoryFormat::Contiguous;
  if (input.suggest_memory_format() == at::MemoryFormat::ChannelsLast ||
      weight.suggest_memory_format() == at::MemoryFormat::ChannelsLast)
    return at::MemoryFormat::ChannelsLast;
  return at::MemoryFormat::Contiguous;
}

// The regular convolution X -> Y of a (possibly transposed) convolution of 4-d tensors.
Conv2dGeometry geometryOf(const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
                          at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                          at::IntArrayRef output_padding, int64_t groups) {
  Conv2dGeometry g;
  g.N = input.size(0);
  g.KH = weight.size(2);
  g.KW = weight.size(3);
  g.groups = groups;
  for (int d = 0; d < 2; ++d) {
    g.stride[d] = stride[d];
    g.pad[d] = padding[d];
    g.dilation[d] = dilation[d];
  }
  if (!transposed) {
    g.Cx = input.size(1);
    g.H = input.size(2);
    g.W = input.size(3);
    g.Cy = weight.size(0);
    g.OH = (g.H + 2 * g.pad[0] - g.dilation[0] * (g.KH - 1) - 1) / g.stride[0] + 1;
    g.OW = (g.W + 2 * g.pad[1] - g.dilation[1] * (g.KW - 1) - 1) / g.stride[1] + 1;
  } else {
    g.Cy = input.size(1);
    g.OH = input.size(2);
    g.OW = input.size(3);
    g.Cx = weight.size(1) * groups;
    g.H = (g.OH - 1) * g.stride[0] - 2 * g.pad[0] + g.dilation[0] * (g.KH - 1) + output_padding[0] + 1;
    g.W = (g.OW - 1) * g.stride[1] - 2 * g.pad[1] + g.dilation[1] * (g.KW - 1) + output_padding[1] + 1;
  }
  TORCH_CHECK(g.OH > 0 && g.OW > 0 && g.H > 0 && g.W > 0, "convolution: computed output size is too small");
  TORCH_CHECK(groups > 0 && g.Cx % groups == 0 && g.Cy % groups == 0,
              "convolution: groups must divide the input and output channels");
  TORCH_CHECK(weight.size(0) == g.Cy, "convolution: weight has ", weight.size(0), " output channels, expected ", g.Cy);
  return g;
}

at::Tensor convolutionOverrideable(const at::Tensor& input, const at::Tensor& weight,
                                   const std::optional<at::Tensor>& bias_opt, at::IntArrayRef stride,
                                   at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                                   at::IntArrayRef output_padding, int64_t groups) {
  const at::Tensor bias = bias_opt.value_or(at::Tensor());
  const c10::Device device = commonDevice({&input, &weight, &bias}, "convolution_overrideable");

  if (!nativeSupported(input, weight, bias)) {
    static const c10::OperatorName name("aten::convolution_overrideable", "");
    reportFallback(name);
    synchronizeCurrentStream(device.index());
    at::Tensor result;
    {
      FallbackOutputScope in_device_memory(device.index());
      result = at::convolution(cpuOperand(input), cpuOperand(weight),
                               bias.defined() ? std::optional<at::Tensor>(cpuOperand(bias)) : std::nullopt, stride,
                               padding, dilation, transposed, output_padding, groups);
    }
    return toDevice(result, device);
  }

  const bool one_d = input.dim() == 3;
  const at::Tensor x_in = as2d(input.resolve_neg());
  const at::Tensor w = as2d(weight.resolve_neg());
  const at::Tensor b = bias.defined() ? bias.resolve_neg() : bias;
  const auto s = param2d(stride, 1, one_d), p = param2d(padding, 0, one_d), d = param2d(dilation, 1, one_d);
  const auto op = param2d(output_padding.empty() ? at::IntArrayRef({0, 0}).slice(0, one_d ? 1 : 2) : output_padding,
                          0, one_d);
  const Conv2dGeometry g = geometryOf(x_in, w, s, p, d, transposed, op, groups);
  TORCH_CHECK(!b.defined() || b.numel() == (transposed ? g.Cx : g.Cy), "convolution: bias has ", b.numel(),
              " elements, expected ", transposed ? g.Cx : g.Cy);

  const at::MemoryFormat fmt = one_d ? at::MemoryFormat::Contiguous : outputFormat(x_in, w);
  const int64_t out_c = transposed ? g.Cx : g.Cy;
  const int64_t out_h = transposed ? g.H : g.OH, out_w = transposed ? g.W : g.OW;
  at::Tensor out = one_d ? at::empty({g.N, out_c, out_w}, input.options())
                         : at::empty({g.N, out_c, out_h, out_w}, input.options().memory_format(fmt));
  at::Tensor out4 = as2d(out);
  if (out.numel() == 0) return out;

  const DType dtype = *convDType(input.scalar_type());
  Stream& stream = currentStream(device.index());
  const ConvOperand ob = b.defined() ? operandOf(b) : ConvOperand{};
  // A transposed convolution's forward is the input gradient of the regular one.
  const ForwardRun run = planForward(g, transposed, x_in, input.options());
  stream.encodeCompute([&](rt::ComputeEncoder& e) {
    encodeForward(e, stream.pipelines(), dtype, run, out4, x_in, w, b.defined() ? &ob : nullptr);
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolutionBackwardOverrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  const c10::Device device =
      commonDevice({&grad_output, &input, &weight}, "convolution_backward_overrideable");

  if (!nativeSupported(input, weight, at::Tensor()) || grad_output.scalar_type() != input.scalar_type()) {
    static const c10::OperatorName name("aten::convolution_backward_overrideable", "");
    reportFallback(name);
    synchronizeCurrentStream(device.index());
    std::tuple<at::Tensor, at::Tensor, at::Tensor> r;
    {
      FallbackOutputScope in_device_memory(device.index());
      const std::vector<int64_t> bias_sizes{transposed ? weight.size(1) * groups : weight.size(0)};
      r = at::convolution_backward(cpuOperand(grad_output), cpuOperand(input), cpuOperand(weight), at::IntArrayRef(bias_sizes),
                                   stride, padding, dilation, transposed, output_padding, groups, output_mask);
    }
    return {toDevice(std::get<0>(r), device), toDevice(std::get<1>(r), device), toDevice(std::get<2>(r), device)};
  }

  const bool one_d = input.dim() == 3;
  const at::Tensor go = as2d(grad_output.resolve_neg());
  const at::Tensor x_in = as2d(input.resolve_neg());
  const at::Tensor w = as2d(weight.resolve_neg());
  const auto s = param2d(stride, 1, one_d), p = param2d(padding, 0, one_d), d = param2d(dilation, 1, one_d);
  const auto op = param2d(output_padding.empty() ? at::IntArrayRef({0, 0}).slice(0, one_d ? 1 : 2) : output_padding,
                          0, one_d);
  const Conv2dGeometry g = geometryOf(x_in, w, s, p, d, transposed, op, groups);
  const at::MemoryFormat fmt = one_d ? at::MemoryFormat::Contiguous : outputFormat(x_in, w);

  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) grad_input = at::empty(input.sizes(), input.options().memory_format(fmt));
  if (output_mask[1]) grad_weight = at::empty(weight.sizes(), weight.options().memory_format(fmt));
  if (output_mask[2]) grad_bias = at::empty({grad_output.size(1)}, grad_output.options());

  const DType dtype = *convDType(input.scalar_type());
  Stream& stream = currentStream(device.index());
  // X and Y of the regular convolution: for a transposed one, grad_output is dX and the
  // input is Y.
  const at::Tensor& x_role = transposed ? go : x_in;  // X (or dX)
  const at::Tensor& y_role = transposed ? x_in : go;  // dY (or Y)
  const bool want_input = grad_input.defined() && grad_input.numel() > 0;
  const bool want_weight = grad_weight.defined() && grad_weight.numel() > 0;
  // grad_input: the input gradient of the regular convolution (from dY), or for a
  // transposed one its forward (from dX = grad_output).
  ForwardRun input_run;
  at::Tensor input_target = want_input ? as2d(grad_input) : at::Tensor();
  if (want_input && !transposed && isStridedPointwise(g)) {
    // The input gradient of a strided 1x1 convolution without padding (a ResNet
    // projection) is zero except on the stride's grid, where it is the stride-1
    // input gradient: zero it, then run that on the grid's view.
    Conv2dGeometry on_grid = g;
    on_grid.stride[0] = on_grid.stride[1] = 1;
    on_grid.H = g.OH;
    on_grid.W = g.OW;
    grad_input.zero_();
    input_target = input_target.slice(2, 0, g.H, g.stride[0]).slice(3, 0, g.W, g.stride[1]);
    input_run = planForward(on_grid, true, go, input.options());
  } else if (want_input) {
    input_run = planForward(g, !transposed, go, input.options());
  }
  const bool depthwise_weight =
      want_weight && g.N > 0 && kernels::conv2dDepthwise3BackwardWeightApplies(g, operandOf(y_role));
  const bool tiled_weight =
      want_weight && g.N > 0 && !depthwise_weight && kernels::conv2dTiledBackwardWeightApplies(g);
  const bool taps_weight = want_weight && g.N > 0 && !depthwise_weight && !tiled_weight &&
                           kernels::conv2dTapsBackwardWeightApplies(g);
  at::Tensor weight_scratch;
  if (depthwise_weight)
    weight_scratch = deviceBytes(kernels::conv2dDepthwise3BackwardWeightScratchBytes(dtype, g), input.options());
  if (tiled_weight)
    weight_scratch = deviceBytes(kernels::conv2dTiledBackwardWeightScratchBytes(dtype, g), input.options());
  if (taps_weight)
    weight_scratch = deviceBytes(kernels::conv2dTapsBackwardWeightScratchBytes(dtype, g), input.options());
  if (want_weight && !depthwise_weight && !tiled_weight && !taps_weight) {
    // One of the three applies to every convolution with a batch, channels and taps;
    // without one of those the weight gradient's sums are empty.
    TORCH_INTERNAL_ASSERT(g.N == 0 || grad_weight.numel() == 0, "metalx conv2d: no weight-gradient kernel for ",
                          "this geometry");
    grad_weight.zero_();
  }
  stream.encodeCompute([&](rt::ComputeEncoder& e) {
    if (want_input) encodeForward(e, stream.pipelines(), dtype, input_run, input_target, go, w, nullptr);
    if (depthwise_weight)
      kernels::encodeConv2dDepthwise3BackwardWeight(e, stream.pipelines(), dtype, g, operandOf(as2d(grad_weight)),
                                                    operandOf(y_role), operandOf(x_role), operandOf(weight_scratch));
    else if (tiled_weight)
      kernels::encodeConv2dTiledBackwardWeight(e, stream.pipelines(), dtype, g, operandOf(as2d(grad_weight)),
                                               operandOf(y_role), operandOf(x_role), operandOf(weight_scratch));
    else if (taps_weight)
      kernels::encodeConv2dTapsBackwardWeight(e, stream.pipelines(), dtype, g, operandOf(as2d(grad_weight)),
                                              operandOf(y_role), operandOf(x_role), operandOf(weight_scratch));
    if (grad_bias.defined() && grad_bias.numel() > 0) {
      // db sums grad_output over everything but its channels.
      Conv2dGeometry gb;
      gb.N = go.size(0);
      gb.Cx = gb.Cy = go.size(1);
      gb.OH = go.size(2);
      gb.OW = go.size(3);
      kernels::encodeConv2dBackwardBias(e, stream.pipelines(), dtype, gb, operandOf(grad_bias), operandOf(go));
    }
  });
  return {grad_input, grad_weight, grad_bias};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(convolutionOverrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolutionBackwardOverrideable));
}

}  // namespace

// ---- convolution from a prepacked weight (ops/convolution.h) ----

namespace {

Conv2dGeometry packedGeometry(const at::Tensor* input, at::IntArrayRef weight_shape, at::IntArrayRef stride,
                              at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  Conv2dGeometry g;
  g.Cy = weight_shape[0];
  g.Cx = weight_shape[1] * groups;
  g.KH = weight_shape[2];
  g.KW = weight_shape[3];
  g.groups = groups;
  for (int d = 0; d < 2; ++d) {
    g.stride[d] = stride[d];
    g.pad[d] = padding[d];
    g.dilation[d] = dilation[d];
  }
  if (input) {
    g.N = input->size(0);
    g.H = input->size(2);
    g.W = input->size(3);
    g.OH = (g.H + 2 * g.pad[0] - g.dilation[0] * (g.KH - 1) - 1) / g.stride[0] + 1;
    g.OW = (g.W + 2 * g.pad[1] - g.dilation[1] * (g.KW - 1) - 1) / g.stride[1] + 1;
  }
  return g;
}

}  // namespace

bool convolutionUsesPackedWeight(at::IntArrayRef weight_shape, at::IntArrayRef stride, int64_t groups) {
  const int64_t one[2] = {1, 1};
  const int64_t zero[2] = {0, 0};
  return kernels::conv2dTiledForwardApplies(packedGeometry(nullptr, weight_shape, stride, zero, one, groups));
}

int64_t packedConvolutionWeightSize(at::IntArrayRef weight_shape, int64_t groups) {
  const int64_t one[2] = {1, 1};
  const int64_t zero[2] = {0, 0};
  return kernels::conv2dPackedWeightFloats(packedGeometry(nullptr, weight_shape, one, zero, one, groups));
}

at::Tensor packConvolutionWeight(const at::Tensor& weight, int64_t groups) {
  const int64_t one[2] = {1, 1};
  const int64_t zero[2] = {0, 0};
  const Conv2dGeometry g = packedGeometry(nullptr, weight.sizes(), one, zero, one, groups);
  at::Tensor packed = at::empty({kernels::conv2dPackedWeightFloats(g)}, weight.options().dtype(at::kFloat));
  if (packed.numel() == 0) return packed;
  const at::Tensor w = weight.resolve_neg();
  const DType dtype = *convDType(w.scalar_type());
  Stream& stream = currentStream(weight.device().index());
  stream.encodeCompute([&](rt::ComputeEncoder& e) {
    kernels::encodeConv2dPackWeight(e, stream.pipelines(), dtype, g, operandOf(packed), operandOf(w), false);
  });
  return packed;
}

at::Tensor convolutionWithPackedWeight(const at::Tensor& input, const at::Tensor& packed,
                                       at::IntArrayRef weight_shape, const std::optional<at::Tensor>& bias,
                                       at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                       int64_t groups) {
  const at::Tensor x = input.resolve_neg();
  const at::Tensor b = bias && bias->defined() ? bias->resolve_neg() : at::Tensor();
  const Conv2dGeometry g = packedGeometry(&x, weight_shape, stride, padding, dilation, groups);
  at::Tensor out = at::empty({g.N, g.Cy, g.OH, g.OW}, x.options().memory_format(x.suggest_memory_format()));
  if (out.numel() == 0) return out;
  const DType dtype = *convDType(x.scalar_type());
  const ForwardRun run = planForward(g, false, x, x.options(), &packed);
  TORCH_INTERNAL_ASSERT(run.tiled, "a packed weight needs the tiled kernel");
  const ConvOperand ob = b.defined() ? operandOf(b) : ConvOperand{};
  Stream& stream = currentStream(x.device().index());
  stream.encodeCompute([&](rt::ComputeEncoder& e) {
    encodeForward(e, stream.pipelines(), dtype, run, out, x, at::Tensor(), b.defined() ? &ob : nullptr,
                  /*weight_prepacked=*/true);
  });
  return out;
}

}  // namespace metalx
