"""Native softmax / log_softmax and nll_loss / nll_loss2d (backend/ops/softmax.cpp,
backend/ops/nll_loss.cpp, kernels in kernels/softmax.metal and kernels/nll_loss.metal)
against CPU torch: every float dtype, any dim (last dim through the row kernels, other
dims read in place), non-contiguous inputs, 0-dim and empty tensors, out=, autograd, and
bad input raising CPU's errors. Native cases must not fall back; float64 does."""

import pytest
import torch
import torch.nn.functional as F

from device_checks import assert_native

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"
FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def tol(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-2, atol=1e-2)


def sample(shape, dtype=torch.float32, scale=4.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(dtype)


def assert_same(got, ref, **kw):
    assert got.device.type == DEV
    got = got.cpu()
    assert got.dtype == ref.dtype and got.shape == ref.shape
    torch.testing.assert_close(got, ref, equal_nan=True, **kw)


def grads_of(fn, *inputs, grad_seed=1):
    """fn's result and the gradients of its inputs for a random output gradient."""
    leaves = [x.detach().requires_grad_() for x in inputs]
    out = fn(*leaves)
    g = sample(out.shape, out.dtype, scale=1.0, seed=grad_seed).to(out.device)
    out.backward(g)
    return out.detach(), [x.grad for x in leaves]


def cpu_reference(fn, *inputs):
    """fn on CPU in the same dtype: CPU's half and bfloat16 kernels accumulate in float
    too, and the backward then sees the same rounded forward output."""
    return grads_of(fn, *inputs)


# ---- softmax / log_softmax ----

SHAPES_DIMS = [
    ((7, 33), -1),       # short rows
    ((3, 5000), 1),      # few long rows: the row kernel (a threadgroup per row)
    ((2, 9, 300), -1),
    ((4, 6, 5), 1),      # a middle dim, read in place
    ((6, 4, 5), 0),      # the outer dim
    ((17,), 0),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,dim", SHAPES_DIMS)
@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax])
def test_softmax_forward_backward_match_cpu(fn, shape, dim, dtype):
    x = sample(shape, dtype)
    ref, (ref_grad,) = cpu_reference(lambda t: fn(t, dim), x)
    got, (got_grad,) = grads_of(lambda t: fn(t, dim), x.to(DEV))
    assert_same(got, ref, **tol(dtype))
    assert_same(got_grad, ref_grad, **tol(dtype))
    assert_native()


@pytest.mark.parametrize("fn", [torch.softmax, torch.log_softmax])
def test_softmax_reads_non_contiguous_inputs(fn):
    x = sample((12, 40))
    d = x.to(DEV)
    assert_same(fn(d.t(), 1), fn(x.t(), 1))
    assert_same(fn(d[:, 1::3], -1), fn(x[:, 1::3], -1))
    assert_same(fn(d.t(), 0), fn(x.t(), 0))
    assert_native()


@pytest.mark.parametrize("fn", [torch.softmax, torch.log_softmax])
def test_softmax_special_values_match_cpu(fn):
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0], [-inf, -inf, -inf, -inf], [-inf, 0.0, 1.0, -inf],
                      [1.0, nan, 2.0, 3.0], [inf, 1.0, 2.0, 3.0], [1e30, -1e30, 0.0, 1e30]])
    for dim in (0, 1):
        assert_same(fn(x.to(DEV), dim), fn(x, dim))
    assert_native()


@pytest.mark.parametrize("fn", [torch.softmax, torch.log_softmax])
def test_softmax_zero_dim_and_empty(fn):
    s = torch.tensor(2.5)
    assert_same(fn(s.to(DEV), 0), fn(s, 0))
    assert_same(fn(s.to(DEV), -1), fn(s, -1))
    e = torch.empty(0, 5)
    assert_same(fn(e.to(DEV), 1), fn(e, 1))
    assert_same(fn(e.to(DEV), 0), fn(e, 0))
    assert_native()


def test_softmax_out_and_dtype_argument():
    x = sample((5, 8))
    out = torch.empty(0, device=DEV)
    torch._softmax(x.to(DEV), 1, False, out=out)
    assert_same(out, torch._softmax(x, 1, False))
    strided = torch.empty(8, 5, device=DEV).t()  # a non-contiguous out=
    torch._log_softmax(x.to(DEV), 1, False, out=strided)
    assert_same(strided, torch._log_softmax(x, 1, False))
    # dtype=float on a half input: a cast, then the float kernel
    h = x.half()
    assert_same(torch.softmax(h.to(DEV), 1, dtype=torch.float32), torch.softmax(h, 1, dtype=torch.float32))
    assert_native()


def test_softmax_half_to_float_runs_natively_as_on_cuda():
    x = sample((6, 70), torch.float16)
    d = x.to(DEV)
    got = torch._softmax(d, 1, True)
    assert got.dtype == torch.float32
    assert_same(got, torch._softmax(x.float(), 1, False))
    g = sample((6, 70), scale=1.0, seed=3)
    gi = torch._softmax_backward_data(g.to(DEV), got, 1, torch.float16)
    assert gi.dtype == torch.float16
    ref = torch._softmax_backward_data(g, torch._softmax(x.float(), 1, False), 1, torch.float32)
    assert_same(gi, ref.half(), rtol=1e-2, atol=1e-3)
    assert_native()


def test_softmax_float64_runs_on_the_cpu_fallback():
    x = sample((4, 9)).double()
    assert_same(torch.log_softmax(x.to(DEV), 1), torch.log_softmax(x, 1))
    assert "aten::_log_softmax.out" in torch.metalx.fallback_stats()


def test_softmax_bad_input_raises_as_on_cpu():
    x = sample((3, 4))
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.softmax(x.to(DEV), 2)
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
        torch._softmax(torch.ones(3, 4, dtype=torch.long, device=DEV), 1, False)


# ---- nll_loss / cross_entropy ----


def targets(shape, classes, seed=0, ignore=None):
    g = torch.Generator().manual_seed(seed)
    t = torch.randint(0, classes, shape, generator=g)
    if ignore is not None:
        t[torch.rand(shape, generator=g) < 0.3] = ignore
    return t


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [-100, 2])
def test_nll_loss_matches_cpu(dtype, reduction, weighted, ignore_index):
    C = 7
    x = torch.log_softmax(sample((37, C)), 1).to(dtype)
    t = targets((37,), C, ignore=ignore_index if ignore_index != -100 else None)
    w = (torch.rand(C, generator=torch.Generator().manual_seed(5)) + 0.5).to(dtype) if weighted else None

    def loss(inp, tt, ww):
        return F.nll_loss(inp, tt, weight=ww, reduction=reduction, ignore_index=ignore_index)

    ref, (ref_grad,) = cpu_reference(lambda i: loss(i, t, w), x)
    got, (got_grad,) = grads_of(lambda i: loss(i, t.to(DEV), None if w is None else w.to(DEV)), x.to(DEV))
    assert_same(got, ref, **tol(dtype))
    assert_same(got_grad, ref_grad, **tol(dtype))
    assert_native()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_single_sample_and_empty_batch(reduction):
    x = torch.log_softmax(sample((5,)), 0)
    t = torch.tensor(3)
    assert_same(F.nll_loss(x.to(DEV), t.to(DEV), reduction=reduction), F.nll_loss(x, t, reduction=reduction))
    e = torch.empty(0, 4)
    te = torch.empty(0, dtype=torch.long)
    assert_same(F.nll_loss(e.to(DEV), te.to(DEV), reduction=reduction), F.nll_loss(e, te, reduction=reduction))
    assert_native()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss2d_matches_cpu(dtype, reduction):
    C = 5
    x = torch.log_softmax(sample((3, C, 6, 7)), 1).to(dtype)
    t = targets((3, 6, 7), C, ignore=-100)
    w = torch.rand(C, generator=torch.Generator().manual_seed(2)) + 0.5

    def loss(i, tt, ww):
        return F.nll_loss(i, tt, weight=ww, reduction=reduction)

    ref, (ref_grad,) = cpu_reference(lambda i: loss(i, t, w.to(dtype)), x)
    got, (got_grad,) = grads_of(lambda i: loss(i, t.to(DEV), w.to(dtype).to(DEV)), x.to(DEV))
    assert_same(got, ref, **tol(dtype))
    assert_same(got_grad, ref_grad, **tol(dtype))
    # channels_last input
    cl = x.to(DEV).contiguous(memory_format=torch.channels_last)
    assert_same(loss(cl, t.to(DEV), w.to(dtype).to(DEV)), ref, **tol(dtype))
    assert_native()


@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
def test_cross_entropy_runs_natively_with_autograd(label_smoothing):
    x = sample((16, 10))
    t = targets((16,), 10)
    ref, (ref_grad,) = grads_of(lambda i: F.cross_entropy(i, t, label_smoothing=label_smoothing), x)
    got, (got_grad,) = grads_of(lambda i: F.cross_entropy(i, t.to(DEV), label_smoothing=label_smoothing), x.to(DEV))
    assert_same(got, ref)
    assert_same(got_grad, ref_grad)
    assert_native()


def test_nll_loss_bad_targets_raise_as_on_cpu():
    # CPU raises at the op; metalx's device-side check raises CPU's IndexError and
    # message at the next synchronisation (tests/python/test_index_checks.py has more).
    x = torch.log_softmax(sample((4, 3)), 1)
    bad = torch.tensor([0, 1, 3, 2])
    with pytest.raises(IndexError, match="Target 3 is out of bounds"):
        F.nll_loss(x, bad)
    with pytest.raises(IndexError, match="nll_loss: Target 3 is out of bounds"):
        F.nll_loss(x.to(DEV), bad.to(DEV))
        torch.metalx.synchronize()
    with pytest.raises(IndexError, match="Target -1 is out of bounds"):
        F.nll_loss(x.to(DEV), torch.tensor([0, -1, 1, 1], device=DEV), reduction="none").cpu()
    x4 = torch.log_softmax(sample((2, 3, 2, 2)), 1).to(DEV)
    with pytest.raises(IndexError, match="Target 5 is out of bounds"):
        F.nll_loss(x4, torch.full((2, 2, 2), 5, device=DEV)).item()
    # the device stays usable, and the ignored class may be out of range
    assert_same(F.nll_loss(x.to(DEV), torch.tensor([0, 7, 1, 2], device=DEV), ignore_index=7),
                F.nll_loss(x, torch.tensor([0, 7, 1, 2]), ignore_index=7))


def test_nll_loss_shape_errors_match_cpu():
    x = torch.log_softmax(sample((4, 3)), 1)
    for inp, tgt in [(x, torch.tensor([0, 1])), (x[None], torch.tensor([0, 1, 2, 0]))]:
        with pytest.raises(Exception) as cpu_err:
            F.nll_loss(inp, tgt)
        with pytest.raises(type(cpu_err.value), match=str(cpu_err.value).split("(")[0][:30]):
            F.nll_loss(inp.to(DEV), tgt.to(DEV))
    with pytest.raises(RuntimeError, match="weight tensor should be defined either for all"):
        F.nll_loss(x.to(DEV), torch.tensor([0, 1, 2, 0], device=DEV), weight=torch.ones(5, device=DEV))
    x4 = torch.log_softmax(sample((2, 3, 2, 2)), 1).to(DEV)
    with pytest.raises(RuntimeError, match="size"):
        F.nll_loss(x4, torch.zeros(2, 3, 2, dtype=torch.long, device=DEV))


def test_nll_loss_float64_runs_on_the_cpu_fallback():
    x = torch.log_softmax(sample((4, 3)), 1).double()
    t = torch.tensor([0, 1, 2, 1])
    assert_same(F.nll_loss(x.to(DEV), t.to(DEV)), F.nll_loss(x, t))
    assert "aten::nll_loss_forward.output" in torch.metalx.fallback_stats()
