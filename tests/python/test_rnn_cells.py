"""nn.LSTM / nn.GRU and their cells on metalx (the fused cell ops ATen sends device
tensors to: backend/ops/rnn_cells.cpp), forward and every gradient against CPU."""

import copy

import pytest
import torch


def run(module, *inputs):
    """Output(s) of module, then the gradients of a weighted sum of them w.r.t. the
    inputs and parameters, as CPU tensors."""
    out = module(*inputs)
    flat = [t for t in (out if isinstance(out, tuple) else (out,)) for t in (t if isinstance(t, tuple) else (t,))]
    loss = sum((t * torch.linspace(-1, 1, t.numel(), device=t.device).reshape(t.shape)).sum() for t in flat)
    tensors = [x for t in inputs for x in (t if isinstance(t, tuple) else (t,))]
    leaves = [t for t in tensors if t.requires_grad] + list(module.parameters())
    grads = torch.autograd.grad(loss, leaves)
    return [t.detach().cpu() for t in flat], [g.cpu() for g in grads]


def compare(module_cpu, inputs_cpu):
    module_dev = copy.deepcopy(module_cpu).to("metalx")

    def to_dev(t):
        return None if t is None else t.detach().to("metalx").requires_grad_(t.requires_grad)

    inputs_dev = [to_dev(t) if not isinstance(t, tuple) else tuple(to_dev(x) for x in t) for t in inputs_cpu]
    out_c, grad_c = run(module_cpu, *inputs_cpu)
    out_d, grad_d = run(module_dev, *inputs_dev)
    for a, b in zip(out_c + grad_c, out_d + grad_d):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU])
def test_recurrent_layers_match_cpu(cls, bias):
    torch.manual_seed(1)
    module = cls(6, 5, num_layers=2, bias=bias, batch_first=True)
    x = torch.randn(3, 4, 6, requires_grad=True)
    compare(module, [x])


def test_bidirectional_lstm_with_initial_state():
    torch.manual_seed(2)
    module = torch.nn.LSTM(4, 3, bidirectional=True)
    x = torch.randn(5, 2, 4, requires_grad=True)
    h0, c0 = torch.randn(2, 2, 3, requires_grad=True), torch.randn(2, 2, 3, requires_grad=True)
    compare(module, [x, (h0, c0)])


@pytest.mark.parametrize("bias", [True, False])
def test_lstm_cell_matches_cpu(bias):
    torch.manual_seed(3)
    cell = torch.nn.LSTMCell(6, 4, bias=bias)
    x = torch.randn(3, 6, requires_grad=True)
    h, c = torch.randn(3, 4, requires_grad=True), torch.randn(3, 4, requires_grad=True)
    compare(cell, [x, (h, c)])


@pytest.mark.parametrize("bias", [True, False])
def test_gru_cell_matches_cpu(bias):
    torch.manual_seed(4)
    cell = torch.nn.GRUCell(6, 4, bias=bias)
    x = torch.randn(3, 6, requires_grad=True)
    h = torch.randn(3, 4, requires_grad=True)
    compare(cell, [x, h])


def test_lstm_cell_gradient_through_the_cell_state_only():
    # Only cy is used: the backward gets no grad for hy.
    torch.manual_seed(5)
    cell = torch.nn.LSTMCell(3, 2)
    cell_dev = copy.deepcopy(cell).to("metalx")
    x = torch.randn(4, 3)
    _, c = cell(x)
    _, c_dev = cell_dev(x.to("metalx"))
    g = torch.autograd.grad(c.sum(), list(cell.parameters()))
    g_dev = torch.autograd.grad(c_dev.sum(), list(cell_dev.parameters()))
    for a, b in zip(g, g_dev):
        torch.testing.assert_close(b.cpu(), a, rtol=1e-5, atol=1e-5)


def test_mismatched_gate_sizes_are_rejected():
    a = torch.randn(2, 8, device="metalx")
    with pytest.raises(RuntimeError, match="differ in size"):
        torch.ops.aten._thnn_fused_lstm_cell(a, torch.randn(2, 4, device="metalx"), torch.randn(2, 2, device="metalx"))
