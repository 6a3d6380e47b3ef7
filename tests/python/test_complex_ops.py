"""complex64 on the native elementwise and reduction engine (kernels/complex_math.metal,
kernels/complex.h; registrations in backend/ops/{unary,binary,ternary,reduce}.cpp)
against CPU torch: contiguous, broadcast, non-contiguous, 0-dim and empty operands,
in-place and out= forms, and special values (inf, nan, signed zeros, huge and tiny
parts). Every case asserts that nothing ran on the CPU fallback."""

import itertools
import math

import pytest
import torch

from device_checks import assert_native

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"
C64 = torch.complex64
TOL = dict(rtol=2e-5, atol=2e-6)


def csample(shape, seed=0, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    return torch.complex(torch.randn(shape, generator=g), torch.randn(shape, generator=g)) * scale


def assert_same(got, ref, **kw):
    assert got.device.type == DEV
    got = got.cpu()
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, ref.dtype, got.shape, ref.shape)
    if ref.dtype == torch.bool:
        assert torch.equal(got, ref)
    else:
        torch.testing.assert_close(got, ref, equal_nan=True, **(kw or TOL))


INF, NAN = math.inf, math.nan
SPECIAL_PARTS = [0.0, -0.0, 1.5, -2.0, 1e30, 1e-30, INF, -INF, NAN]
# Every (real, imag) pair of SPECIAL_PARTS.
SPECIAL = torch.tensor([complex(a, b) for a, b in itertools.product(SPECIAL_PARTS, SPECIAL_PARTS)], dtype=C64)


def layouts(make):
    """(name, a, b) operand pairs on the CPU covering the launcher's access patterns."""
    a, b = make((7, 9), 1), make((7, 9), 2)
    yield "contiguous", a, b
    yield "broadcast", a, make((9,), 3)
    yield "non_contiguous", make((9, 7), 4).t(), make((7, 18), 5)[:, ::2]
    yield "zero_dim", make((), 6), make((), 7)
    yield "empty", make((0, 9), 8), make((0, 9), 9)
    yield "tensor_and_python_scalar", a, 0.5 - 1.25j


BINARY = {
    "add": lambda a, b: torch.add(a, b, alpha=2 - 1j),
    "add_real_alpha": lambda a, b: torch.add(a, b, alpha=3),
    "sub": lambda a, b: torch.sub(a, b, alpha=0.5 + 2j),
    "mul": torch.mul,
    "div": torch.div,
    "eq": torch.eq,
    "ne": torch.ne,
}


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("layout", [name for name, _, _ in layouts(csample)])
def test_binary_matches_cpu(op, layout):
    _, a, b = next(item for item in layouts(csample) if item[0] == layout)
    fn = BINARY[op]
    d = lambda t: t.to(DEV) if isinstance(t, torch.Tensor) else t
    assert_same(fn(d(a), d(b)), fn(a, b))
    assert_native()


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_binary_in_place_and_out(op):
    a, b = csample((5, 6), 1), csample((6,), 2)
    fn = getattr(torch, op)
    got = a.to(DEV)
    getattr(got, op + "_")(b.to(DEV))
    assert_same(got, fn(a, b))
    out = torch.empty(0, dtype=C64, device=DEV)
    assert fn(a.to(DEV), b.to(DEV), out=out) is out
    assert_same(out, fn(a, b))
    # out= through a non-contiguous view of a larger tensor
    base = torch.zeros(6, 10, dtype=C64, device=DEV)
    fn(a.to(DEV), b.to(DEV), out=base.t()[:5])
    ref = torch.zeros(6, 10, dtype=C64)
    fn(a, b, out=ref.t()[:5])
    assert_same(base, ref)
    assert_native()


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "eq", "ne"])
def test_binary_special_values(op):
    # Every pair of special values, as CPU's complex arithmetic treats them (division
    # by zero, inf * 0, huge divisors: c10::complex's scaled division).
    values = SPECIAL
    if op == "mul":
        # Products past float's range (1e30 * 1e30) depend on whether one product
        # is fused, which differs between CPU's loops and CPU capabilities.
        values = values[(values.real.abs() != 1e30) & (values.imag.abs() != 1e30)]
    a = values.repeat_interleave(len(values))
    b = values.repeat(len(values))
    fn = getattr(torch, op)
    got, ref = fn(a.to(DEV), b.to(DEV)), fn(a, b)
    if op == "div":
        # Where CPU's vectorised division and c10::complex's agree up to rounding: the
        # same finite values, and inf/nan in the same places.
        got = got.cpu()
        assert torch.equal(torch.isnan(got), torch.isnan(ref))
        assert torch.equal(torch.isinf(got.real), torch.isinf(ref.real))
        assert torch.equal(torch.isinf(got.imag), torch.isinf(ref.imag))
        finite = torch.isfinite(ref)
        torch.testing.assert_close(got[finite], ref[finite], rtol=1e-5, atol=1e-30)
    else:
        assert_same(got, ref)
    assert_native()


def test_mixed_dtypes_promote_to_complex():
    a, x = csample((4, 5), 1), torch.randn(4, 5)
    assert_same(a.to(DEV) * x.to(DEV), a * x)
    assert_same(x.to(DEV) + a.to(DEV), x + a)
    assert_same(a.to(DEV) / 3, a / 3)
    assert_same(torch.arange(5, device=DEV) * 1j, torch.arange(5) * 1j)
    assert_native()


def test_where_and_conj():
    a, b = csample((6, 7), 1), csample((7,), 2)
    cond = torch.randn(6, 7) > 0
    assert_same(torch.where(cond.to(DEV), a.to(DEV), b.to(DEV)), torch.where(cond, a, b))
    assert_same(torch.conj_physical(a.to(DEV).t()), torch.conj_physical(a.t()))
    # A lazily conjugated operand is written out before the arithmetic.
    assert_same(a.to(DEV).conj() * b.to(DEV), a.conj() * b)
    got = a.to(DEV)
    assert got.conj_physical_() is got
    assert_same(got, a.conj_physical())
    assert_native()


UNARY = ["neg", "conj_physical", "exp", "log", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "sinh", "cosh",
         "sigmoid", "sgn", "abs", "angle"]
HAS_INPLACE = {"neg", "exp", "log", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "sinh", "cosh", "sigmoid", "sgn"}


@pytest.mark.parametrize("op", UNARY)
def test_unary_matches_cpu(op):
    fn = getattr(torch, op)
    x = csample((9, 11), 3, scale=1.5)
    for t in (x, x.t(), x[::2, 1::3], x[0, 0], x[:0]):
        assert_same(fn(t.to(DEV)), fn(t), rtol=2e-5, atol=1e-5)
    out = torch.empty(0, dtype=fn(x).dtype, device=DEV)
    assert fn(x.to(DEV), out=out) is out
    assert_same(out, fn(x), rtol=2e-5, atol=1e-5)
    if op in HAS_INPLACE:
        got = x.to(DEV)
        assert getattr(got, op + "_")() is got
        assert_same(got, fn(x), rtol=2e-5, atol=1e-5)
    assert_native()


@pytest.mark.parametrize("op", ["neg", "conj_physical", "sgn", "abs", "angle", "reciprocal", "sqrt", "exp", "log"])
def test_unary_special_values(op):
    fn = getattr(torch, op)
    assert_same(fn(SPECIAL.to(DEV)), fn(SPECIAL), rtol=1e-5, atol=1e-30)
    assert_native()


@pytest.mark.parametrize("op", ["isnan", "isinf", "isfinite"])
def test_classification(op):
    fn = getattr(torch, op)
    assert_same(fn(SPECIAL.to(DEV)), fn(SPECIAL))
    assert_native()


def test_arithmetic_chain_from_the_issue():
    x = csample((8,), 1)
    assert_same((x.to(DEV) * x.to(DEV) + x.to(DEV)).abs(), (x * x + x).abs())
    assert_native()


@pytest.mark.parametrize("op", ["sum", "mean"])
def test_sum_and_mean(op):
    x = csample((6, 5, 4), 2)
    fn = getattr(torch, op)
    for t in (x, x.transpose(0, 2), x[:, ::2]):
        d = t.to(DEV)
        assert_same(fn(d), fn(t))
        assert_same(fn(d, dim=1), fn(t, dim=1))
        assert_same(fn(d, dim=(0, 2), keepdim=True), fn(t, dim=(0, 2), keepdim=True))
    assert_same(fn(x[0, 0, 0].to(DEV)), fn(x[0, 0, 0]))
    out = torch.empty(0, dtype=C64, device=DEV)
    assert fn(x.to(DEV), dim=2, out=out) is out
    assert_same(out, fn(x, dim=2))
    assert_same(torch.sum(x[:0].to(DEV), dim=0), torch.sum(x[:0], dim=0))
    assert_native()


@pytest.mark.parametrize("ord", [2, 1, math.inf, 3.0, 0])
def test_vector_norm(ord):
    x = csample((5, 8), 4)
    assert_same(torch.linalg.vector_norm(x.to(DEV), ord), torch.linalg.vector_norm(x, ord))
    assert_same(torch.linalg.vector_norm(x.to(DEV).t(), ord, dim=0), torch.linalg.vector_norm(x.t(), ord, dim=0))
    assert_native()


def test_products_that_nearly_cancel():
    # (a + bi)(c + di) with ad ~ -bc: whether one product is fused decides the result
    # (0 or the rounding error of a product). CPU's vectorised contiguous loop, its
    # scalar tail and its strided loop differ there (by CPU capability too); metalx
    # rounds as the first in dense kernels and fuses as the last in strided ones. Both
    # stay within a product's rounding error of CPU.
    a = torch.tensor([-501 - 1e20j, 3 + 7e19j, 1e-3 - 2e18j] * 16, dtype=C64)
    b = torch.tensor([-501 + 1e20j, 3 - 7e19j, 1e-3 + 2e18j] * 16, dtype=C64)
    for x, y in ((a, b), (a[::2], b[::2])):
        got, ref = (x.to(DEV) * y.to(DEV)).cpu(), x * y
        bound = 1e-6 * x.abs() * y.abs()
        assert ((got.real - ref.real).abs() <= bound).all() or torch.equal(got.real, ref.real)
        assert ((got.imag - ref.imag).abs() <= bound).all()
    assert_native()


def test_complex128_stays_on_the_fallback():
    # complex64's prod, tan and tanh are native now (test_complex_functions.py).
    z = torch.randn(5, dtype=torch.complex128)
    assert_same(z.to(DEV) * z.to(DEV), z * z)
    assert "aten::mul.out" in torch.metalx.fallback_stats()


@pytest.mark.parametrize("exponent", [0, 1, 0.5, -0.5, -1, 2, 3, -2, True])
def test_pow_with_the_exponents_cpu_answers_with_other_kernels(exponent):
    # CPU computes pow(complex, s) for these s with fill/copy/sqrt/rsqrt/reciprocal and
    # products, not exp(s log z): 1j ** 2 is exactly -1, and inf/nan parts follow those
    # kernels. torch.square is pow(x, 2).
    values = SPECIAL[(SPECIAL.real.abs() != 1e30) & (SPECIAL.imag.abs() != 1e30)]
    ref = torch.pow(values, exponent)
    got = torch.pow(values.to(DEV), exponent)
    assert_same(got, ref)
    in_place = values.to(DEV)
    in_place.pow_(exponent)
    assert_same(in_place, ref)
    out = torch.empty(0, dtype=C64, device=DEV)
    torch.pow(values.to(DEV), exponent, out=out)
    assert_same(out, ref)
    if exponent == 2:
        assert_same(torch.square(values.to(DEV)), torch.square(values))
        assert torch.equal(torch.pow(torch.tensor([1j], device=DEV), 2).cpu(), torch.tensor([-1 + 0j]))
    assert_native()
