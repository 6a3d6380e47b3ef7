"""complex64 elementary functions, scans, products, var/std and the ternary ops
(kernels/complex_math.metal, reduce.metal, scan.metal, ternary.metal; registrations in
backend/ops/{unary,reduce,scan,ternary}.cpp) against CPU torch, which computes them
with c10::complex / std::complex (glibc's C99 functions): random values in every
layout, and the special values of C99's Annex G (infinities, NaN, signed zeros, huge
and tiny parts), where CPU's results are matched exactly but for the rounding of
finite values. Every case asserts that nothing ran on the CPU fallback."""

import itertools
import math

import pytest
import torch

from device_checks import assert_native, assert_same_error

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"
C64 = torch.complex64
INF, NAN = math.inf, math.nan


def csample(shape, seed=0, scale=1.5):
    g = torch.Generator().manual_seed(seed)
    return torch.complex(torch.randn(shape, generator=g), torch.randn(shape, generator=g)) * scale


def wide_sample(n, seed=0):
    """Magnitudes from 1e-20 to 1e20 at every angle, and points near +-1 and +-i."""
    g = torch.Generator().manual_seed(seed)
    mag = 10.0 ** (torch.rand(n, generator=g) * 40 - 20)
    angle = torch.rand(n, generator=g) * 2 * math.pi
    z = torch.polar(mag, angle)
    near = torch.tensor([1, -1, 1j, -1j] * (n // 16), dtype=C64)
    near = near + csample(near.shape, seed + 1, scale=1e-3)
    return torch.cat([z, near])


def assert_same(got, ref, rtol=2e-5, atol=1e-5):
    assert got.device.type == DEV
    got = got.cpu()
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, ref.dtype, got.shape, ref.shape)
    torch.testing.assert_close(got, ref, equal_nan=True, rtol=rtol, atol=atol)


def assert_same_parts(got, ref, rtol=1e-5, zero_signs=True):
    """Part by part: NaN where CPU has NaN, the same infinities and zeros (signs
    included unless zero_signs is False), finite values within rtol."""
    got = got.cpu()
    assert got.dtype == ref.dtype and got.shape == ref.shape
    for name, g, r in (("real", got.real, ref.real), ("imag", got.imag, ref.imag)):
        exact = ~torch.isfinite(r) | (r == 0)
        same_exact = (g.isnan() & r.isnan()) | ((g == r) & ((torch.signbit(g) == torch.signbit(r)) | (not zero_signs)))
        close = torch.isfinite(g) & ((g - r).abs() <= rtol * r.abs())
        ok = torch.where(exact, same_exact, close)
        bad = (~ok).nonzero().flatten()[:5].tolist()
        assert not bad, f"{name} parts differ at {bad}: metalx {got[bad].tolist()} cpu {ref[bad].tolist()}"


PARTS = [0.0, -0.0, 0.5, -1.0, 1.0, 1.5, -2.0, 50.0, 1e30, -1e30, 1e-30, INF, -INF, NAN]
# Every (real, imag) pair of PARTS.
SPECIAL = torch.tensor([complex(a, b) for a, b in itertools.product(PARTS, PARTS)], dtype=C64)

UNARY = ["exp2", "expm1", "log2", "log10", "log1p", "tan", "tanh", "asin", "acos", "atan", "asinh", "acosh",
         "atanh"]


@pytest.mark.parametrize("op", UNARY)
def test_unary_layouts_out_and_in_place(op):
    fn = getattr(torch, op)
    x = csample((9, 11), 3)
    for t in (x, x.t(), x[::2, 1::3], x[0, 0], x[:0]):
        assert_same(fn(t.to(DEV)), fn(t))
    out = torch.empty(0, dtype=C64, device=DEV)
    assert fn(x.to(DEV), out=out) is out
    assert_same(out, fn(x))
    got = x.to(DEV)
    assert getattr(got, op + "_")() is got
    assert_same(got, fn(x))
    assert_native()


@pytest.mark.parametrize("op", UNARY)
def test_unary_special_values(op):
    fn = getattr(torch, op)
    assert_same_parts(fn(SPECIAL.to(DEV)), fn(SPECIAL))
    # A strided view runs the strided kernel: the same values.
    doubled = torch.stack([SPECIAL, SPECIAL], 1)
    assert_same_parts(fn(doubled.to(DEV)[:, 1]), fn(doubled[:, 1]))
    assert_native()


@pytest.mark.parametrize("op", UNARY)
def test_unary_wide_magnitudes(op):
    # Huge, tiny, and near the branch points: no overflow or cancellation CPU avoids.
    fn = getattr(torch, op)
    z = wide_sample(4096)
    got, ref = fn(z.to(DEV)).cpu(), fn(z)
    assert torch.equal(torch.isfinite(got), torch.isfinite(ref))
    finite = torch.isfinite(ref)
    torch.testing.assert_close(got[finite], ref[finite], rtol=5e-5, atol=1e-30)
    assert_native()


def test_nan_to_num():
    x = SPECIAL.to(DEV)
    assert_same_parts(torch.nan_to_num(x), torch.nan_to_num(SPECIAL))
    assert_same_parts(torch.nan_to_num(x, nan=2.0, posinf=7.0, neginf=-3.5),
                      torch.nan_to_num(SPECIAL, nan=2.0, posinf=7.0, neginf=-3.5))
    doubled = torch.stack([SPECIAL, SPECIAL], 1)
    assert_same_parts(torch.nan_to_num(doubled.to(DEV)[:, 0]), torch.nan_to_num(doubled[:, 0]))
    out = torch.empty(0, dtype=C64, device=DEV)
    assert torch.nan_to_num(x, out=out) is out
    assert_same_parts(out, torch.nan_to_num(SPECIAL))
    got = SPECIAL.to(DEV)
    assert got.nan_to_num_(nan=1.0) is got
    assert_same_parts(got, SPECIAL.nan_to_num(nan=1.0))
    assert_native()
    assert_same_error(lambda d: torch.nan_to_num(SPECIAL.to(d), out=torch.empty(0, device=d)))


# ---- prod, cumsum, cumprod ----


def test_prod():
    x = csample((6, 5, 7), 2, scale=0.8)
    for t in (x, x.transpose(0, 2), x[:, ::2]):
        d = t.to(DEV)
        assert_same(torch.prod(d), torch.prod(t), rtol=1e-4)
        for dim in (0, 1, -1):
            assert_same(torch.prod(d, dim), torch.prod(t, dim), rtol=1e-4)
        assert_same(torch.prod(d, 1, keepdim=True), torch.prod(t, 1, keepdim=True), rtol=1e-4)
    out = torch.empty(0, dtype=C64, device=DEV)
    assert torch.prod(x.to(DEV), 2, out=out) is out
    assert_same(out, torch.prod(x, 2), rtol=1e-4)
    # one long product (split into parts on the device), near the unit circle
    long = torch.polar(1 + torch.rand(20000) * 1e-4, torch.rand(20000) * 0.01)
    assert_same(torch.prod(long.to(DEV)), torch.prod(long), rtol=1e-3)
    assert_same(torch.prod(x[:0].to(DEV), 0), torch.prod(x[:0], 0))
    assert_same(torch.prod(x[0, 0, 0].to(DEV)), torch.prod(x[0, 0, 0]))
    assert_same(torch.prod(x.real.to(DEV), dtype=C64), torch.prod(x.real, dtype=C64), rtol=1e-4)
    assert_native()


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_scans(op):
    fn = getattr(torch, op)
    x = csample((6, 5, 7), 4, scale=0.9)
    for t in (x, x.transpose(0, 2), x[:, ::2]):
        d = t.to(DEV)
        for dim in (0, 1, 2, -1, -3):
            assert_same(fn(d, dim), fn(t, dim), rtol=1e-4)
    out = torch.empty(0, dtype=C64, device=DEV)
    assert fn(x.to(DEV), 1, out=out) is out
    assert_same(out, fn(x, 1), rtol=1e-4)
    got = x.to(DEV)
    assert getattr(got, op + "_")(2) is got
    assert_same(got, fn(x, 2), rtol=1e-4)
    assert_same(fn(x[0, 0, 0].to(DEV), 0), fn(x[0, 0, 0], 0))
    assert_same(fn(x[:0].to(DEV), 1), fn(x[:0], 1))
    assert_same(fn(x.real.to(DEV), 1, dtype=C64), fn(x.real, 1, dtype=C64), rtol=1e-4)
    # A few long lines: each is split into parts.
    long = torch.polar(1 + torch.rand(3, 5000) * 1e-5, torch.rand(3, 5000) * 1e-3)
    assert_same(fn(long.to(DEV), 1), fn(long, 1), rtol=1e-3, atol=1e-3)
    assert_native()


def test_scans_of_special_values():
    # Short lines, so that CPU's and metalx's orders of the products agree.
    lines = SPECIAL[:64].reshape(16, 4)
    assert_same_parts(torch.cumsum(lines.to(DEV), 1), torch.cumsum(lines, 1))
    finite = SPECIAL[torch.isfinite(SPECIAL) & (SPECIAL.abs() < 1e20)][:40].reshape(10, 4)
    assert_same(torch.cumprod(finite.to(DEV), 1), torch.cumprod(finite, 1))
    assert_native()


# ---- var, std ----


@pytest.mark.parametrize("op", ["var", "std"])
def test_var_std(op):
    fn = getattr(torch, op)
    x = csample((6, 5, 7), 5)
    for t in (x, x.transpose(0, 2), x[:, ::2]):
        d = t.to(DEV)
        assert_same(fn(d), fn(t))
        assert_same(fn(d, 1), fn(t, 1))
        assert_same(fn(d, (0, 2), correction=0, keepdim=True), fn(t, (0, 2), correction=0, keepdim=True))
        assert_same(fn(d, -1, unbiased=False), fn(t, -1, unbiased=False))
    assert_same(fn(x.conj().to(DEV), 1), fn(x.conj(), 1))
    assert_same(fn(x[:, :1].to(DEV), 1), fn(x[:, :1], 1))  # one element: NaN, as CPU
    assert_native()


@pytest.mark.parametrize("op", ["var_mean", "std_mean"])
def test_var_std_mean(op):
    # A float variance (or deviation) and a complex64 mean, as CPU returns them.
    fn = getattr(torch, op)
    x = csample((6, 5, 7), 6)
    for t in (x, x.transpose(0, 2), x[:, ::2], x.conj()):
        d = t.to(DEV)
        for args, kwargs in (((), {}), ((1,), {}), (((0, 2),), {"correction": 0, "keepdim": True})):
            got, ref = fn(d, *args, **kwargs), fn(t, *args, **kwargs)
            assert [g.dtype for g in got] == [r.dtype for r in ref] == [torch.float32, C64]
            for g, r in zip(got, ref):
                assert_same(g, r)
    assert_native()


# ---- lerp, addcmul, addcdiv ----


def ternary_cases():
    a, b, c = csample((7, 9), 1), csample((7, 9), 2), csample((7, 9), 3)
    yield "contiguous", a, b, c
    yield "broadcast", a, csample((9,), 4), csample((7, 1), 5)
    yield "non_contiguous", csample((9, 7), 6).t(), csample((7, 18), 7)[:, ::2], c
    yield "zero_dim", csample((), 8), csample((), 9), csample((), 10)


TERNARY = {
    "lerp_tensor": lambda s, e, w: torch.lerp(s, e, w * 0.4),
    "lerp_scalar": lambda s, e, w: torch.lerp(s, e, 0.3),
    "lerp_complex_scalar": lambda s, e, w: torch.lerp(s, e, 0.75 - 0.5j),
    "addcmul": lambda s, a, b: torch.addcmul(s, a, b, value=0.5),
    "addcmul_complex_value": lambda s, a, b: torch.addcmul(s, a, b, value=2 - 1j),
    "addcdiv": lambda s, a, b: torch.addcdiv(s, a, b, value=-1.5),
    "addcdiv_complex_value": lambda s, a, b: torch.addcdiv(s, a, b, value=0.5 + 2j),
}


@pytest.mark.parametrize("op", TERNARY)
@pytest.mark.parametrize("case", [name for name, *_ in ternary_cases()])
def test_ternary(op, case):
    _, a, b, c = next(item for item in ternary_cases() if item[0] == case)
    fn = TERNARY[op]
    assert_same(fn(a.to(DEV), b.to(DEV), c.to(DEV)), fn(a, b, c))
    assert_native()


@pytest.mark.parametrize("name", ["lerp", "addcmul", "addcdiv"])
def test_ternary_out_and_in_place(name):
    a, b, c = csample((5, 6), 1), csample((6,), 2), csample((5, 6), 3)
    fn = getattr(torch, name)
    args = (a, b, c)
    ref = fn(*args)
    out = torch.empty(0, dtype=C64, device=DEV)
    assert fn(*[t.to(DEV) for t in args], out=out) is out
    assert_same(out, ref)
    got = a.to(DEV)
    assert getattr(got, name + "_")(b.to(DEV), c.to(DEV)) is got
    assert_same(got, ref)
    assert_native()


def test_ternary_special_values():
    values = SPECIAL[(SPECIAL.real.abs() < 1e20) & (SPECIAL.imag.abs() < 1e20)]
    s = values.repeat_interleave(len(values))
    e = values.repeat(len(values))
    # The signs of zero results are not matched: CPU's come from its vectorised
    # multiply-add, whose zero signs the kernel's complex arithmetic does not reproduce.
    for w in (0.25, 0.75, 0.2 + 0.1j):
        assert_same_parts(torch.lerp(s.to(DEV), e.to(DEV), w), torch.lerp(s, e, w), zero_signs=False)
    assert_native()


def test_complex128_stays_on_the_fallback():
    z = torch.randn(5, dtype=torch.complex128)
    assert_same(torch.tan(z.to(DEV)), torch.tan(z))
    assert "aten::tan.out" in torch.metalx.fallback_stats()


# ---- pow ----


def test_pow_special_values():
    # exp(y log x) as CPU's cpowf, whose product y * log x recovers infinities as C99's
    # Annex G multiplication does (0 ** 0 is NaN there).
    parts = [0.0, -0.0, 1.5, -2.0, 1.0, 1e30, 1e-30, INF, -INF, NAN]
    values = torch.tensor([complex(a, b) for a, b in itertools.product(parts, parts)], dtype=C64)
    x, y = values.repeat_interleave(len(values)), values.repeat(len(values))
    assert_same_parts(torch.pow(x.to(DEV), y.to(DEV)), torch.pow(x, y), rtol=1e-4)
    assert_native()


def test_pow_forms():
    a, b = csample((7, 9), 1, scale=2.0), csample((7, 9), 2, scale=0.7)
    assert_same(torch.pow(a.to(DEV), b.to(DEV)), torch.pow(a, b))
    assert_same(torch.pow(a.to(DEV).t(), b.to(DEV).t()), torch.pow(a.t(), b.t()))
    assert_same(torch.pow(a.to(DEV), b.to(DEV)[0]), torch.pow(a, b[0]))
    for exponent in (2.5, 1 - 2j, 4, -3, 0.25j):
        assert_same(torch.pow(a.to(DEV), exponent), torch.pow(a, exponent))
    for base in (2.0, 1 - 1j, 0.5j):
        assert_same(torch.pow(base, b.to(DEV)), torch.pow(base, b))
    assert_same(a.to(DEV) ** b.to(DEV), a ** b)
    out = torch.empty(0, dtype=C64, device=DEV)
    assert torch.pow(a.to(DEV), b.to(DEV), out=out) is out
    assert_same(out, torch.pow(a, b))
    got = a.to(DEV)
    assert got.pow_(b.to(DEV)) is got
    assert_same(got, torch.pow(a, b))
    # CPU's 1 ** x is 1 even for infinite and NaN exponents
    odd = torch.tensor([complex(INF, 0), complex(NAN, 1), 2 + 3j])
    assert_same(torch.pow(1.0, odd.to(DEV)), torch.pow(1.0, odd))
    out = torch.empty(0, dtype=C64, device=DEV)
    assert torch.pow(1, odd.to(DEV), out=out) is out
    assert_same(out, torch.pow(1, odd))
    # a real tensor to a complex power promotes
    assert_same(torch.pow(a.real.to(DEV), b.to(DEV)), torch.pow(a.real, b))
    assert_native()
