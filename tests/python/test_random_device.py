"""Random numbers drawn on the device (backend/ops/random.cpp, kernels/random.metal,
kernels/philox.h): distributions checked statistically with fixed seeds (moments and
Kolmogorov-Smirnov distance against the exact CDF: deterministic, since the seed fixes
every number), reproducibility from the generator's (seed, offset), and CPU's errors.
Native cases must not fall back."""

import math

import pytest
import torch
import torch.nn.functional as F

from device_checks import assert_native, assert_same_error

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"
FLOATS = [torch.float32, torch.float16, torch.bfloat16]
N = 1 << 16


def ks_distance(samples, cdf):
    """Largest gap between the empirical CDF of `samples` and `cdf` (float64, CPU)."""
    x, _ = torch.sort(samples.double().cpu().flatten())
    n = x.numel()
    f = cdf(x)
    upper = torch.arange(1, n + 1, dtype=torch.float64) / n - f
    lower = f - torch.arange(0, n, dtype=torch.float64) / n
    return max(upper.max().item(), lower.max().item())


# Kolmogorov's 99.9% critical value is 1.95 / sqrt(n); narrow types add their rounding
# (bfloat16 keeps 8 significant bits: steps of up to 2^-8 relative).
def ks_bound(dtype, n=N):
    return 1.95 / math.sqrt(n) + {torch.float32: 0.0, torch.float16: 2e-3, torch.bfloat16: 8e-3}[dtype]


@pytest.mark.parametrize("dtype", FLOATS)
def test_uniform_range_moments_and_distribution(dtype):
    torch.metalx.manual_seed(1)
    x = torch.empty(N, device=DEV, dtype=dtype).uniform_(-2, 3)
    assert_native()
    c = x.double().cpu()
    assert c.min() >= -2 and c.max() < 3
    assert abs(c.mean().item() - 0.5) < 5 * 5 / math.sqrt(12 * N)
    assert abs(c.var().item() - 25 / 12) < 0.05
    assert ks_distance(c, lambda v: ((v + 2) / 5).clamp(0, 1)) < ks_bound(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_normal_moments_and_distribution(dtype):
    torch.metalx.manual_seed(2)
    x = torch.empty(N, device=DEV, dtype=dtype).normal_(1.5, 2.0)
    assert_native()
    c = x.double().cpu()
    assert torch.isfinite(c).all()
    assert abs(c.mean().item() - 1.5) < 5 * 2 / math.sqrt(N)
    assert abs(c.std().item() - 2.0) < 0.03
    assert ks_distance(c, lambda v: torch.special.ndtr((v - 1.5) / 2.0)) < ks_bound(dtype)


def test_randn_rand_randint_factories_are_native():
    torch.metalx.manual_seed(3)
    a = torch.randn(1000, device=DEV)
    b = torch.rand(10, 10, device=DEV)
    c = torch.randint(-3, 4, (500,), device=DEV)
    d = torch.normal(torch.zeros(100, device=DEV), torch.ones(100, device=DEV))
    assert_native()
    assert a.device.type == DEV and b.min() >= 0 and b.max() < 1 and d.shape == (100,)
    assert set(c.cpu().tolist()) == set(range(-3, 4))


@pytest.mark.parametrize("dtype", FLOATS)
def test_exponential(dtype):
    torch.metalx.manual_seed(4)
    x = torch.empty(N, device=DEV, dtype=dtype).exponential_(2.0)
    assert_native()
    c = x.double().cpu()
    assert (c > 0).all() and torch.isfinite(c).all()
    assert abs(c.mean().item() - 0.5) < 5 * 0.5 / math.sqrt(N)
    assert ks_distance(c, lambda v: 1 - torch.exp(-2.0 * v)) < ks_bound(dtype)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32, torch.uint8, torch.bool])
def test_bernoulli_scalar(dtype):
    torch.metalx.manual_seed(5)
    x = torch.empty(N, device=DEV, dtype=dtype).bernoulli_(0.3)
    assert torch.equal(torch.empty(64, device=DEV, dtype=dtype).bernoulli_(0.0).cpu(), torch.zeros(64, dtype=dtype))
    assert torch.equal(torch.empty(64, device=DEV, dtype=dtype).bernoulli_(1.0).cpu(), torch.ones(64, dtype=dtype))
    assert_native()
    c = x.cpu().double()
    assert set(c.unique().tolist()) <= {0.0, 1.0}
    assert abs(c.mean().item() - 0.3) < 5 * math.sqrt(0.21 / N)


def test_bernoulli_tensor_p_and_functional():
    torch.metalx.manual_seed(6)
    p = torch.tensor([0.0, 1.0, 0.25, 0.75], device=DEV).expand(N // 4, 4).contiguous()
    x = torch.bernoulli(p)
    y = torch.empty(N // 4, 4, device=DEV, dtype=torch.float16).bernoulli_(p[0])  # p broadcast
    assert_native()
    c = x.cpu()
    assert (c[:, 0] == 0).all() and (c[:, 1] == 1).all()
    for col, q in ((2, 0.25), (3, 0.75)):
        assert abs(c[:, col].mean().item() - q) < 5 * math.sqrt(q * (1 - q) / (N // 4))
    assert (y.cpu()[:, 0] == 0).all() and (y.cpu()[:, 1] == 1).all()


@pytest.mark.parametrize(
    "dtype,low,high",
    [(torch.int64, -5, 5), (torch.int32, 0, 1000), (torch.int16, -300, 300), (torch.int8, -128, 127),
     (torch.uint8, 0, 256), (torch.float32, -10, 10), (torch.float16, 0, 7), (torch.bfloat16, 2, 9),
     (torch.int64, -(2**40), 2**40)])
def test_random_from_to(dtype, low, high):
    torch.metalx.manual_seed(7)
    x = torch.empty(N, device=DEV, dtype=dtype).random_(low, high)
    assert_native()
    c = x.cpu().double()
    assert c.min() >= low and c.max() < high and (c == c.round()).all()
    if high - low <= 1000:
        assert c.unique().numel() == high - low  # every value shows up
    mid = (low + high - 1) / 2
    assert abs(c.mean().item() - mid) < 5 * (high - low) / math.sqrt(12 * N)


@pytest.mark.parametrize("dtype,top", [(torch.int8, 127), (torch.uint8, 255), (torch.bool, 1),
                                       (torch.float16, 2**11), (torch.int64, 2**63 - 1)])
def test_random_full_range(dtype, top):
    torch.metalx.manual_seed(8)
    x = torch.empty(4096, device=DEV, dtype=dtype).random_()
    y = torch.empty(4096, device=DEV, dtype=dtype).random_(min(5, top + 1))
    assert_native()
    c = x.cpu()
    assert c.min() >= 0 and (c.max() <= top)
    assert c.double().mean() > top / 4  # spread over the range, not stuck low
    assert y.cpu().min() >= 0 and y.cpu().max() < min(5, top + 1)


def test_random_errors_match_cpu():
    for make in (lambda d: torch.empty(4, device=d).uniform_(2, 1),
                 lambda d: torch.empty(4, device=d).normal_(0, -1),
                 lambda d: torch.empty(4, device=d).bernoulli_(1.5),
                 lambda d: torch.empty(4, device=d).exponential_(-1),
                 lambda d: torch.empty(4, device=d, dtype=torch.int64).random_(5, 3),
                 lambda d: torch.empty(4, device=d, dtype=torch.uint8).random_(0, 300),
                 lambda d: F.dropout(torch.ones(3, device=d), p=1.5)):
        assert_same_error(make)


def draw():
    return torch.cat([torch.rand(37, device=DEV), torch.randn(37, device=DEV),
                      torch.randint(0, 1000, (37,), device=DEV).float()]).cpu()


def test_same_seed_same_numbers_and_successive_draws_differ():
    torch.metalx.manual_seed(1234)
    first = draw()
    second = draw()
    torch.metalx.manual_seed(1234)
    assert torch.equal(draw(), first)
    assert not torch.equal(first, second)
    torch.metalx.manual_seed(1235)
    assert not torch.equal(draw(), first)


def test_same_numbers_on_another_stream_and_in_a_fresh_process(torch):
    torch.metalx.manual_seed(99)
    here = draw()
    torch.metalx.manual_seed(99)
    with torch.metalx.stream(torch.metalx.Stream()):
        there = draw()
    assert torch.equal(here, there)
    from conftest import check_python
    out = check_python("""
        import torch, metalx
        torch.metalx.manual_seed(99)
        print(repr(torch.rand(37, device="metalx").cpu().tolist()))
    """)
    assert eval(out.stdout) == here[:37].tolist()


def test_rng_state_round_trip_and_fork_rng_replay_draws():
    torch.metalx.manual_seed(11)
    draw()
    state = torch.metalx.get_rng_state()
    a = draw()
    torch.metalx.set_rng_state(state)
    assert torch.equal(draw(), a)

    torch.metalx.set_rng_state(state)
    with torch.random.fork_rng(device_type="metalx"):
        inside = draw()
    assert torch.equal(inside, a)
    assert torch.equal(draw(), a)  # fork_rng restored the state


def test_generator_objects_are_independent_of_the_default():
    g = torch.Generator(device=DEV).manual_seed(5)
    a = torch.rand(100, device=DEV, generator=g)
    torch.metalx.manual_seed(0)
    torch.rand(100, device=DEV)
    g2 = torch.Generator(device=DEV).manual_seed(5)
    b = torch.rand(100, device=DEV, generator=g2)
    assert torch.equal(a.cpu(), b.cpu())
    assert g.get_offset() == 100


def test_non_contiguous_targets_get_the_numbers_of_their_logical_order():
    torch.metalx.manual_seed(21)
    base = torch.empty(6, 4, device=DEV).t()  # (4, 6), not contiguous
    base.uniform_()
    torch.metalx.manual_seed(21)
    dense = torch.empty(4, 6, device=DEV).uniform_()
    assert_native_or_copy()
    assert torch.equal(base.cpu(), dense.cpu())
    empty = torch.empty(0, 3, device=DEV).normal_()
    assert empty.shape == (0, 3)


def assert_native_or_copy():
    assert torch.metalx.fallback_stats() == {}


def test_float64_draws_on_the_device():
    torch.metalx.manual_seed(3)
    x = torch.empty(N, device=DEV, dtype=torch.float64).uniform_(0, 1)
    c = x.cpu()
    assert c.dtype == torch.float64 and c.min() >= 0 and c.max() < 1
    assert abs(c.mean().item() - 0.5) < 0.01
    assert "aten::uniform_" not in torch.metalx.fallback_stats()


@pytest.mark.parametrize("dtype", FLOATS)
def test_native_dropout_forward_backward(dtype):
    torch.metalx.manual_seed(31)
    x = (torch.rand(256, 64) + 0.5).to(dtype).to(DEV).requires_grad_()
    y = F.dropout(x, p=0.25, training=True)
    y.backward(torch.ones_like(y))
    assert_native()
    yc, xc, g = y.detach().cpu().float(), x.detach().cpu().float(), x.grad.cpu().float()
    kept = yc != 0
    frac = kept.float().mean().item()
    assert abs(frac - 0.75) < 5 * math.sqrt(0.1875 / yc.numel())
    tol = 1e-6 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(yc[kept], (xc / 0.75).to(dtype).float()[kept], rtol=tol, atol=tol)
    torch.testing.assert_close(g, kept.float() / 0.75, rtol=tol, atol=tol)


def test_native_dropout_eval_and_extremes():
    x = torch.randn(100, device=DEV)
    assert torch.equal(F.dropout(x, p=0.5, training=False).cpu(), x.cpu())
    out, mask = torch.native_dropout(x, 0.5, False)
    assert torch.equal(out.cpu(), x.cpu()) and mask.all()
    assert torch.equal(F.dropout(x, p=0.0, training=True).cpu(), x.cpu())
    assert (F.dropout(x, p=1.0, training=True).cpu() == 0).all()
    out, mask = torch.native_dropout(x, 0.3, True)
    assert mask.dtype == torch.bool and torch.equal(out.cpu(), (x.cpu() * mask.cpu() * (1 / 0.7)))
    back = torch.ops.aten.native_dropout_backward(torch.ones(100, device=DEV), mask, 2.0)
    assert torch.equal(back.cpu(), mask.float().cpu() * 2.0)
    assert_native()


def test_dropout_is_reproducible():
    x = torch.ones(1000, device=DEV)
    torch.metalx.manual_seed(8)
    a = F.dropout(x, 0.5).cpu()
    torch.metalx.manual_seed(8)
    assert torch.equal(F.dropout(x, 0.5).cpu(), a)
