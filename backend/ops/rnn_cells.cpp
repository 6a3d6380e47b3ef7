// The fused LSTM and GRU cell ops for metalx.
//
// ATen's RNN code sends device tensors (CUDA, XPU and PrivateUse1 alike) to the fused
// cell ops aten::_thnn_fused_{lstm,gru}_cell, which have GPU kernels only: without these
// registrations, nn.LSTM/LSTMCell/GRU/GRUCell fail on metalx, since the CPU fallback has
// no CPU kernel to run. Each op is written here from elementwise aten ops on metalx
// tensors (each runs natively or through the fallback), with the same inputs, outputs
// and workspace contract as the GPU kernels, so autograd's formulas for them apply.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

namespace metalx {
namespace {

at::Tensor plusBias(const at::Tensor& gates, const std::optional<at::Tensor>& bias) {
  return bias.has_value() && bias->defined() ? gates + *bias : gates;
}

// (hy, cy, workspace): gates are [input, forget, cell, output] along dim 1; the
// workspace keeps them after their activations, for the backward.
std::tuple<at::Tensor, at::Tensor, at::Tensor> fusedLstmCell(const at::Tensor& input_gates,
                                                             const at::Tensor& hidden_gates, const at::Tensor& cx,
                                                             const std::optional<at::Tensor>& input_bias,
                                                             const std::optional<at::Tensor>& hidden_bias) {
  TORCH_CHECK(input_gates.sizes() == hidden_gates.sizes(), "_thnn_fused_lstm_cell: input_gates ",
              input_gates.sizes(), " and hidden_gates ", hidden_gates.sizes(), " differ in size");
  const at::Tensor gates = plusBias(plusBias(input_gates + hidden_gates, input_bias), hidden_bias);
  auto chunks = gates.chunk(4, 1);
  const at::Tensor i = chunks[0].sigmoid(), f = chunks[1].sigmoid(), g = chunks[2].tanh(), o = chunks[3].sigmoid();
  at::Tensor cy = f * cx + i * g;
  at::Tensor hy = o * cy.tanh();
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

// (grad_gates, grad_cx, grad_bias); grad_bias only when the cell had biases.
std::tuple<at::Tensor, at::Tensor, at::Tensor> fusedLstmCellBackward(const std::optional<at::Tensor>& grad_hy,
                                                                     const std::optional<at::Tensor>& grad_cy,
                                                                     const at::Tensor& cx, const at::Tensor& cy,
                                                                     const at::Tensor& workspace, bool has_bias) {
  auto gates = workspace.chunk(4, 1);
  const at::Tensor &i = gates[0], &f = gates[1], &g = gates[2], &o = gates[3];
  const at::Tensor tanh_cy = cy.tanh();
  const bool has_ghy = grad_hy.has_value() && grad_hy->defined();
  const bool has_gcy = grad_cy.has_value() && grad_cy->defined();
  at::Tensor ghy = has_ghy ? *grad_hy : at::zeros_like(cy);
  at::Tensor gcy = has_gcy ? *grad_cy : at::zeros_like(cy);
  gcy = gcy + ghy * o * (1 - tanh_cy * tanh_cy);  // cy reaches hy through tanh
  const at::Tensor gi = gcy * g * i * (1 - i);
  const at::Tensor gf = gcy * cx * f * (1 - f);
  const at::Tensor gg = gcy * i * (1 - g * g);
  const at::Tensor go = ghy * tanh_cy * o * (1 - o);
  at::Tensor grad_gates = at::cat({gi, gf, gg, go}, 1);
  at::Tensor grad_cx = gcy * f;
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  return {grad_gates, grad_cx, grad_bias};
}

// (hy, workspace): gates are [reset, update, new] along dim 1; the workspace holds
// [r, z, n, hx, hidden new-gate term], what the backward needs.
std::tuple<at::Tensor, at::Tensor> fusedGruCell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                                const at::Tensor& hx, const std::optional<at::Tensor>& input_bias,
                                                const std::optional<at::Tensor>& hidden_bias) {
  TORCH_CHECK(input_gates.sizes() == hidden_gates.sizes(), "_thnn_fused_gru_cell: input_gates ",
              input_gates.sizes(), " and hidden_gates ", hidden_gates.sizes(), " differ in size");
  auto in = plusBias(input_gates, input_bias).chunk(3, 1);
  auto hid = plusBias(hidden_gates, hidden_bias).chunk(3, 1);
  const at::Tensor r = (in[0] + hid[0]).sigmoid();
  const at::Tensor z = (in[1] + hid[1]).sigmoid();
  const at::Tensor n = (in[2] + r * hid[2]).tanh();
  at::Tensor hy = n + z * (hx - n);
  return {hy, at::cat({r, z, n, hx, hid[2]}, 1)};
}

// (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> fusedGruCellBackward(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  auto w = workspace.chunk(5, 1);
  const at::Tensor &r = w[0], &z = w[1], &n = w[2], &hx = w[3], &hn = w[4];
  const at::Tensor gz = grad_hy * (hx - n) * z * (1 - z);
  const at::Tensor gn = grad_hy * (1 - z) * (1 - n * n);
  const at::Tensor gr = gn * hn * r * (1 - r);
  at::Tensor grad_hx = grad_hy * z;
  at::Tensor grad_input_gates = at::cat({gr, gz, gn}, 1);
  at::Tensor grad_hidden_gates = at::cat({gr, gz, gn * r}, 1);
  at::Tensor grad_input_bias = has_bias ? grad_input_gates.sum(0) : at::Tensor();
  at::Tensor grad_hidden_bias = has_bias ? grad_hidden_gates.sum(0) : at::Tensor();
  return {grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", fusedLstmCell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", fusedLstmCellBackward);
  m.impl("_thnn_fused_gru_cell", fusedGruCell);
  m.impl("_thnn_fused_gru_cell_backward", fusedGruCellBackward);
}

}  // namespace
}  // namespace metalx
