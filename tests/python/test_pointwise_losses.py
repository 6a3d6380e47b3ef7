"""The pointwise losses on metalx (backend/ops/pointwise_loss.cpp, and the ones torch
composes from native ops): mse, l1, smooth_l1, huber, binary_cross_entropy (with and
without logits), kl_div, forward and backward against CPU torch, with no fallback."""

import pytest
import torch
import torch.nn.functional as F

from device_checks import assert_native

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"
FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def tol(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-2, atol=1e-2)


def sample(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def assert_same(got, ref, **kw):
    assert got.device.type == DEV
    got = got.cpu()
    assert got.dtype == ref.dtype and got.shape == ref.shape
    torch.testing.assert_close(got, ref, equal_nan=True, **kw)


def with_grad(fn, x, y):
    x = x.detach().requires_grad_()
    out = fn(x, y)
    g = torch.ones_like(out) * 0.5
    out.backward(g)
    return out.detach(), x.grad


LOSSES = {
    "mse": (lambda x, y, r: F.mse_loss(x, y, reduction=r), "randn"),
    "l1": (lambda x, y, r: F.l1_loss(x, y, reduction=r), "randn"),
    "smooth_l1": (lambda x, y, r: F.smooth_l1_loss(x, y, reduction=r, beta=0.5), "randn"),
    "smooth_l1_beta0": (lambda x, y, r: F.smooth_l1_loss(x, y, reduction=r, beta=0.0), "randn"),
    "huber": (lambda x, y, r: F.huber_loss(x, y, reduction=r, delta=0.7), "randn"),
    "bce": (lambda x, y, r: F.binary_cross_entropy(x, y, reduction=r), "prob"),
    "bce_weighted": (lambda x, y, r: F.binary_cross_entropy(x, y, weight=torch.full_like(y, 0.3), reduction=r),
                     "prob"),
    "bce_logits": (lambda x, y, r: F.binary_cross_entropy_with_logits(x, y, reduction=r), "target_prob"),
    "kl_div": (lambda x, y, r: F.kl_div(x.log_softmax(-1), y.softmax(-1), reduction="batchmean" if r == "mean" else r),
               "randn"),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", list(LOSSES))
def test_loss_forward_backward_match_cpu(name, reduction, dtype):
    fn, kind = LOSSES[name]
    x, y = sample((6, 7), seed=1), sample((6, 7), seed=2)
    x[0, :3] = y[0, :3]  # ties: where the piecewise losses switch
    if kind == "prob":
        x, y = x.sigmoid(), y.sigmoid()
    elif kind == "target_prob":
        y = y.sigmoid()
    x, y = x.to(dtype), y.to(dtype)
    ref, ref_grad = with_grad(lambda a, b: fn(a.float(), b.float(), reduction), x, y)
    got, got_grad = with_grad(lambda a, b: fn(a, b, reduction), x.to(DEV), y.to(DEV))
    assert_same(got, ref.to(dtype), **tol(dtype))
    assert_same(got_grad, ref_grad.to(dtype), **tol(dtype))
    assert_native()


def test_binary_cross_entropy_rejects_values_outside_zero_one_as_cpu():
    x, y = torch.tensor([0.5, 1.5]), torch.tensor([0.0, 1.0])
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(x, y)
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(x.to(DEV), y.to(DEV))
    # 0 and 1 are finite, through log clamped at -100
    e = torch.tensor([0.0, 1.0, 0.0]), torch.tensor([1.0, 0.0, 0.0])
    assert_same(F.binary_cross_entropy(e[0].to(DEV), e[1].to(DEV), reduction="none"),
                F.binary_cross_entropy(*e, reduction="none"))


def test_losses_float64_run_on_the_cpu_fallback():
    x, y = sample((3, 4)).double(), sample((3, 4), seed=3).double()
    assert_same(F.mse_loss(x.to(DEV), y.to(DEV)), F.mse_loss(x, y))
    assert "aten::mse_loss" in torch.metalx.fallback_stats()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", ["mse", "huber"])
def test_reduced_precision_losses_round_as_cpu(name, dtype):
    # CPU's kernels compute these in the dtype itself (half huber in float): each
    # operation rounded, the delta rounded to the dtype. Values of a few units make a
    # loss rounded once from float an ulp off; the results must be CPU's bit for bit.
    fns = {"mse": lambda a, b: F.mse_loss(a, b, reduction="none"),
           "huber": lambda a, b: F.huber_loss(a, b, reduction="none", delta=0.06528357637981927)}
    x, y = (sample((400,), seed=3) * 5).to(dtype), (sample((400,), seed=4) * 5).to(dtype)
    ref = fns[name](x, y)
    got = fns[name](x.to(DEV), y.to(DEV))
    assert_same(got, ref, rtol=0, atol=0)
    assert_native()
