"""Native elementwise ops whose half/bfloat16 results must be CPU's bit for bit: where
CPU keeps a scalar in float (mul and div by one value), where it rounds the scalar to
the tensor's dtype first (add, sub, rsub, the scalar as the first operand), hypot's
rounding, and hardtanh's integer bounds. One ulp of bfloat16 (2^-8 relative) is more
than PyTorch's OpInfo comparison allows, so these compare exactly."""

import pytest
import torch

from device_checks import kernels_run

pytestmark = pytest.mark.usefixtures("no_fallback")

DEV = "metalx"
REDUCED = [torch.bfloat16, torch.float16]
SCALARS = [0.1, 0.3, 1.7, -2.3, 3]


def sample(dtype, shape=(40, 37), seed=0, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(dtype)


def assert_bitwise(got, ref):
    assert got.device.type == DEV
    got = got.cpu()
    assert got.dtype == ref.dtype and got.shape == ref.shape
    same = (got == ref) | (got.isnan() & ref.isnan())
    assert bool(same.all()), f"{int((~same).sum())} of {ref.numel()} differ, e.g. got {got[~same][:4]} want {ref[~same][:4]}"


# CPU keeps the second operand in float when it is one value (mul and the three divisions).
BY_SCALAR = {
    "mul": lambda x, s: x * s,
    "div": lambda x, s: x / s,
    "div_trunc": lambda x, s: torch.div(x, s, rounding_mode="trunc"),
    "div_floor": lambda x, s: torch.div(x, s, rounding_mode="floor"),
}


@pytest.mark.parametrize("dtype", REDUCED)
@pytest.mark.parametrize("op", list(BY_SCALAR))
def test_scalar_stays_float(op, dtype):
    f = BY_SCALAR[op]
    x = sample(dtype)
    d = x.to(DEV)
    for s in SCALARS:
        assert_bitwise(f(d, s), f(x, s))
        assert_bitwise(f(d.t(), s), f(x.t(), s))  # strided
        assert_bitwise(f(d, torch.tensor(s)), f(x, torch.tensor(s)))  # CPU 0-dim tensor, its own dtype
        # a device value of the tensor's dtype and of float32, 0-dim and broadcast
        for v in (torch.tensor(s, dtype=dtype), torch.tensor([s], dtype=torch.float32)):
            assert_bitwise(f(d, v.to(DEV)), f(x, v))


@pytest.mark.parametrize("dtype", REDUCED)
def test_scalar_stays_float_variants(dtype):
    x = sample(dtype)
    ref = x.clone().mul_(0.1)
    got = x.to(DEV).mul_(0.1)
    assert_bitwise(got, ref)
    got = x.to(DEV).t().div_(0.3)
    assert_bitwise(got, x.t().div(0.3))
    out = torch.empty(x.shape, dtype=torch.float32, device=DEV)
    torch.mul(x.to(DEV), 0.1, out=out)
    assert_bitwise(out, torch.mul(x, 0.1, out=torch.empty(x.shape, dtype=torch.float32)))
    # a float32 tensor times a half/bfloat16 0-dim tensor: float32 math, nothing to keep
    y = sample(torch.float32)
    assert_bitwise(y.to(DEV) * torch.tensor(0.1, dtype=dtype).to(DEV), y * torch.tensor(0.1, dtype=dtype))
    # more dims than the kernels index (coalescing cannot merge a permuted view)
    big = sample(dtype, shape=(2,) * 10).permute(9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
    assert_bitwise(big.to(DEV) * 0.1, big * 0.1)


@pytest.mark.parametrize("dtype", REDUCED)
def test_scalar_kernels_are_the_float_ones(dtype):
    d = sample(dtype).to(DEV)
    names = kernels_run(lambda: d * 0.1)
    assert any("mul_dense_vm_" in n for n in names), names
    names = kernels_run(lambda: d[:, ::2] / 0.3)  # a strided view (a transpose stays dense)
    assert any("div_true_strided_vm_" in n for n in names), names


# CPU rounds the scalar to the tensor's dtype first for these (and for mul/div when the
# one value is the first operand).
ROUNDED_SCALAR = {
    "add": lambda x, s: x + s,
    "sub": lambda x, s: x - s,
    "rsub": lambda x, s: s - x,
    "torch.rsub": lambda x, s: torch.rsub(x, s),
    "scalar_mul": lambda x, s: torch.mul(torch.tensor(s), x),
    "scalar_div": lambda x, s: torch.div(torch.tensor(s), x),
}


@pytest.mark.parametrize("dtype", REDUCED)
@pytest.mark.parametrize("op", list(ROUNDED_SCALAR))
def test_scalar_rounded_first(op, dtype):
    f = ROUNDED_SCALAR[op]
    x = sample(dtype)
    for s in SCALARS:
        assert_bitwise(f(x.to(DEV), s), f(x, s))


@pytest.mark.parametrize("dtype", REDUCED)
@pytest.mark.parametrize("op", ["add", "sub", "rsub"])
def test_alpha_product_rounded(op, dtype):
    # CPU's scalar loop (non-contiguous operands, short tensors) rounds alpha * b to the
    # dtype before adding; its vectorised loop over long contiguous runs does not, so
    # only those two layouts are compared here.
    f = getattr(torch, op)
    for alpha in (-3.125, 0.3, 1.7):
        x, y = sample(dtype, (5, 5), seed=1), sample(dtype, (5, 5), seed=2)
        assert_bitwise(f(x.to(DEV), y.to(DEV), alpha=alpha), f(x, y, alpha=alpha))
        x, y = sample(dtype, (40, 37), seed=1).t(), sample(dtype, (37, 40), seed=2)
        assert_bitwise(f(x.to(DEV), y.to(DEV), alpha=alpha), f(x, y, alpha=alpha))


@pytest.mark.parametrize("dtype", REDUCED + [torch.float32])
def test_hypot_rounding(dtype):
    g = torch.Generator().manual_seed(1)
    a = (torch.randn(4000, generator=g) * 10).to(dtype)
    b = (torch.randn(4000, generator=g) * 10).to(dtype)
    specials = torch.tensor([0.0, -0.0, 3.0, 4.0, float("inf"), float("nan"), 1e-30, 6e4], dtype=dtype)
    a = torch.cat([a, specials, specials.flip(0)])
    b = torch.cat([b, specials.roll(1), specials])
    got = torch.hypot(a.to(DEV), b.to(DEV))
    if dtype == torch.float32:
        torch.testing.assert_close(got.cpu(), torch.hypot(a, b), rtol=2e-7, atol=0, equal_nan=True)
    else:
        assert_bitwise(got, torch.hypot(a, b))


def test_hypot_float32_range():
    a = torch.tensor([3e38, 1e-38, 1e-42, 2e19, 0.0, 1.0])
    b = torch.tensor([3e38, 1e-38, 1e-42, 2e19, 1e-45, 1e-10])
    torch.testing.assert_close(torch.hypot(a.to(DEV), b.to(DEV)).cpu(), torch.hypot(a, b), rtol=2e-7, atol=0)


INT_TYPES = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]


@pytest.mark.parametrize("dtype", INT_TYPES)
def test_hardtanh_integers(dtype):
    F = torch.nn.functional
    x = torch.arange(-6, 7).to(dtype) if dtype != torch.uint8 else torch.arange(0, 13, dtype=dtype)
    for lo, hi in [(-1.0, 1.0), (-2.5, 3.7), (0.5, 4.9), (2, 5)]:
        if dtype == torch.uint8 and lo < 0:
            continue
        ref = F.hardtanh(x, lo, hi)
        got = F.hardtanh(x.to(DEV), lo, hi)
        assert got.dtype == ref.dtype == dtype
        assert torch.equal(got.cpu(), ref)
        y = x.to(DEV)
        F.hardtanh(y, lo, hi, inplace=True)
        assert torch.equal(y.cpu(), ref)
        out = torch.empty_like(x, device=DEV)
        torch._C._nn.hardtanh(x.to(DEV), lo, hi, out=out)
        assert torch.equal(out.cpu(), ref)


def test_hardtanh_errors_as_cpu():
    F = torch.nn.functional
    with pytest.raises(RuntimeError, match="unsigned type with negative limits"):
        F.hardtanh(torch.arange(3, dtype=torch.uint8, device=DEV), -1.0, 1.0)
    with pytest.raises(RuntimeError, match="Bool inputs not supported for hardtanh"):
        F.hardtanh(torch.ones(3, dtype=torch.bool, device=DEV))
