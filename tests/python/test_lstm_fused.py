"""nn.LSTM's fused layers on metalx (aten::lstm.input: backend/ops/lstm.cpp,
kernels/lstm.metal): outputs, h_n, c_n and every gradient against CPU torch, the
configurations they leave to torch's composite path, and what a training step costs in
aten calls."""

import copy

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import metalx  # noqa: F401


def weighted_sum(tensors):
    """A loss that gives every element of every tensor its own gradient."""
    return sum((t.float() * torch.linspace(-1, 1, t.numel(), device=t.device).reshape(t.shape)).sum() for t in tensors)


def run(module, x, state, backward=True):
    out, (h, c) = module(x, state) if state is not None else module(x)
    results = [out, h, c]
    if not backward:
        return [t.detach().float().cpu() for t in results]
    leaves = [t for t in [x, *(state or ())] if t.requires_grad] + list(module.parameters())
    grads = torch.autograd.grad(weighted_sum(results), leaves)
    return [t.detach().float().cpu() for t in results] + [g.float().cpu() for g in grads]


def to_dev(t, dtype=None):
    d = t.detach().to("metalx")
    return (d.to(dtype) if dtype else d).requires_grad_(t.requires_grad)


def compare(module, x, state=None, dtype=torch.float32, rtol=1e-5, atol=1e-5, make_x=None):
    """Runs `module` on CPU in float32 and on metalx in `dtype` (weights and inputs
    rounded to `dtype` on both sides), asserting nothing fell back."""
    module = module.to(dtype).float()  # the same rounded weights on both devices
    x = x.detach().to(dtype).float().requires_grad_(x.requires_grad)
    state = None if state is None else tuple(s.detach().to(dtype).float().requires_grad_() for s in state)
    dev = copy.deepcopy(module).to("metalx", dtype)
    x_dev = to_dev(x, dtype) if make_x is None else make_x(to_dev(x, dtype))
    state_dev = None if state is None else tuple(to_dev(s, dtype) for s in state)
    expected = run(module, x, state)
    torch.metalx.synchronize()
    before = torch.metalx.fallback_stats()
    got = run(dev, x_dev, state_dev)
    torch.metalx.synchronize()
    assert torch.metalx.fallback_stats() == before, "an op of the LSTM ran on the CPU fallback"
    for i, (a, b) in enumerate(zip(expected, got)):
        torch.testing.assert_close(b, a, rtol=rtol, atol=atol, msg=lambda m: f"result {i}: {m}")


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("initial_state", [False, True])
@pytest.mark.parametrize("seq", [1, 7])
def test_fused_lstm_matches_cpu(layers, batch_first, bias, initial_state, seq):
    torch.manual_seed(seq * 16 + layers * 8 + batch_first * 4 + bias * 2 + initial_state)
    module = torch.nn.LSTM(5, 9, num_layers=layers, bias=bias, batch_first=batch_first)
    x = torch.randn(*((3, seq) if batch_first else (seq, 3)), 5, requires_grad=True)
    state = (torch.randn(layers, 3, 9), torch.randn(layers, 3, 9)) if initial_state else None
    compare(module, x, state)


@pytest.mark.parametrize("batch_first", [False, True])
def test_bidirectional_two_layers(batch_first):
    torch.manual_seed(5)
    module = torch.nn.LSTM(6, 7, num_layers=2, bidirectional=True, batch_first=batch_first)
    x = torch.randn(5, 5, 6, requires_grad=True)  # 5 steps of batch 5 either way
    compare(module, x, (torch.randn(4, 5, 7), torch.randn(4, 5, 7)))


def test_batch_over_one_threadgroup_and_hidden_over_one_panel():
    # 19 rows: three threadgroups of 8 (the last partial); hidden 70: two 64-wide panels.
    torch.manual_seed(6)
    module = torch.nn.LSTM(12, 70)
    compare(module, torch.randn(9, 19, 12, requires_grad=True), (torch.randn(1, 19, 70), torch.randn(1, 19, 70)),
            rtol=2e-5, atol=2e-5)


def test_non_contiguous_input():
    torch.manual_seed(7)
    module = torch.nn.LSTM(5, 8, batch_first=True)
    x = torch.randn(3, 6, 5, requires_grad=True)
    # The metalx input is a strided view (every other feature row of a wider tensor).
    def strided(t):
        view = torch.stack([t, t], 2)[:, :, 0]
        assert not view.is_contiguous()
        return view

    compare(module, x, make_x=strided)


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 1e-2), (torch.bfloat16, 6e-2)])
def test_half_and_bfloat(dtype, tol):
    torch.manual_seed(8)
    module = torch.nn.LSTM(6, 16, num_layers=2, batch_first=True)
    compare(module, torch.randn(3, 10, 6, requires_grad=True), (torch.randn(2, 3, 16), torch.randn(2, 3, 16)),
            dtype=dtype, rtol=tol, atol=tol)


def test_dropout_one_between_layers_matches_cpu():
    # With p = 1 the second layer sees zeros on both devices: the dropout wiring (and its
    # backward) is compared exactly, without depending on the random streams.
    torch.manual_seed(9)
    module = torch.nn.LSTM(4, 6, num_layers=2, dropout=1.0)
    compare(module, torch.randn(5, 2, 4, requires_grad=True))


def test_dropout_between_layers_is_random_in_training_only():
    torch.manual_seed(10)
    module = torch.nn.LSTM(4, 32, num_layers=2, dropout=0.5).to("metalx")
    x = torch.randn(6, 3, 4, device="metalx")
    module.eval()
    a, b = module(x)[0], module(x)[0]
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    module.train()
    c, d = module(x)[0], module(x)[0]
    assert not torch.equal(c, d)
    x.requires_grad_(True)
    out = module(x)[0]
    (g,) = torch.autograd.grad(out.sum(), x)
    assert torch.isfinite(g).all()


def test_inference_mode_matches_cpu():
    torch.manual_seed(11)
    module = torch.nn.LSTM(5, 9, num_layers=2, batch_first=True)
    x = torch.randn(2, 4, 5)
    with torch.inference_mode():
        expected = run(module, x, None, backward=False)
        got = run(copy.deepcopy(module).to("metalx"), x.to("metalx"), None, backward=False)
    for a, b in zip(expected, got):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)


def test_only_output_or_only_state_gradients():
    torch.manual_seed(12)
    module = torch.nn.LSTM(3, 5)
    x = torch.randn(4, 2, 3, requires_grad=True)
    dev = copy.deepcopy(module).to("metalx")
    for pick in (0, 1, 2):
        expected = torch.autograd.grad(weighted_sum([module(x)[0] if pick == 0 else module(x)[1][pick - 1]]), x)[0]
        xd = to_dev(x)
        out = dev(xd)
        got = torch.autograd.grad(weighted_sum([out[0] if pick == 0 else out[1][pick - 1]]), xd)[0]
        torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-5)


def test_double_backward_raises():
    module = torch.nn.LSTM(3, 4).to("metalx")
    x = torch.randn(2, 1, 3, device="metalx", requires_grad=True)
    (g,) = torch.autograd.grad(module(x)[0].sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="fused LSTM backward is not differentiable"):
        g.sum().backward()


def test_projections_take_the_composite_path():
    torch.manual_seed(13)
    compare(torch.nn.LSTM(4, 6, proj_size=3), torch.randn(5, 2, 4, requires_grad=True))


def test_bad_input_size_raises_as_on_cpu():
    module = torch.nn.LSTM(4, 6)
    x = torch.randn(5, 2, 3)
    with pytest.raises(RuntimeError) as cpu:
        module(x)
    with pytest.raises(RuntimeError) as dev:
        copy.deepcopy(module).to("metalx")(x.to("metalx"))
    assert str(dev.value) == str(cpu.value)


class OpLog(TorchDispatchMode):
    """The aten ops run below autograd, in order."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def test_training_step_dispatches_do_not_grow_with_sequence_length():
    module = torch.nn.LSTM(16, 32, num_layers=2, batch_first=True).to("metalx")

    def calls(seq):
        x = torch.randn(4, seq, 16, device="metalx", requires_grad=True)
        with OpLog() as log:
            out, _ = module(x)
            out.sum().backward()
        assert not [op for op in log.ops if "lstm_cell" in op], "a step took the per-time-step path"
        return len(log.ops)

    short, long = calls(4), calls(64)
    # The composite path makes ~27 aten calls per time step and layer (~3500 here); the
    # fused layers a fixed number per layer (views included), whatever the length.
    assert short == long, (short, long)
    assert long < 300, long


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_autocast_runs_natively(dtype):
    torch.manual_seed(14)
    module = torch.nn.LSTM(8, 16, batch_first=True)
    x = torch.randn(2, 5, 8)
    dev = copy.deepcopy(module).to("metalx")
    before = torch.metalx.fallback_stats()
    with torch.autocast("metalx", dtype=dtype):
        out, (h, c) = dev(x.to("metalx"))
        out.float().sum().backward()
    torch.metalx.synchronize()
    assert torch.metalx.fallback_stats() == before
    expected, _ = module(x)
    torch.testing.assert_close(out.float().cpu(), expected, rtol=2e-2, atol=2e-2)
