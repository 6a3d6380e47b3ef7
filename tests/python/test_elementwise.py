"""Native elementwise ops (backend/ops/{unary,binary,ternary,activation}.cpp, kernels in
kernels/*.metal) against CPU torch: every dtype the kernels have, every access pattern
the launcher picks (dense, one scalar operand, strided 32- and 64-bit), out=, in-place,
type promotion, and the CPU fallback for float64. Native cases must not fall back."""

import pytest
import torch
import torch.nn.functional as F

from device_checks import assert_native, kernels_run

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"
FLOATS = [torch.float32, torch.float16, torch.bfloat16]
INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]


def tol(dtype):
    return dict(rtol=2e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-2, atol=1e-2)


def sample(shape, dtype, low=-4, high=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g) * (high - low) + low).to(dtype)
    lo = 0 if dtype == torch.uint8 else low
    return torch.randint(lo, high, shape, generator=g).to(dtype)


def assert_same(got, ref, **kw):
    assert got.device.type == DEV
    got = got.cpu()
    assert got.dtype == ref.dtype and got.shape == ref.shape
    if ref.dtype == torch.bool or not ref.dtype.is_floating_point:
        assert torch.equal(got, ref)
    else:
        torch.testing.assert_close(got, ref, equal_nan=True, **kw)


UNARY_FLOAT = ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sin",
               "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf",
               "erfc", "erfinv", "sigmoid", "frac"]
UNARY_NUMBER = ["neg", "abs", "sign", "sgn", "ceil", "floor", "trunc", "round", "signbit"]


def unary_input(op, dtype):
    x = sample((33, 65), dtype, seed=1)
    if op in ("asin", "acos", "atanh", "erfinv"):
        x = x / 4
    if op == "acosh":
        x = x.abs() + 1
    return x


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", UNARY_FLOAT + UNARY_NUMBER)
def test_unary_float_ops_match_cpu_on_every_layout(op, dtype):
    x = unary_input(op, dtype)
    x[0, :6] = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-30]).to(dtype)
    f = getattr(torch, op)
    d = x.to(DEV)
    assert_same(f(d), f(x), **tol(dtype))
    assert_same(f(d.t()), f(x.t()), **tol(dtype))           # transposed
    assert_same(f(d[:, 1::3]), f(x[:, 1::3]), **tol(dtype))  # sliced with an offset
    assert_native()


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("op", ["neg", "abs", "sign", "ceil", "floor", "trunc", "round", "bitwise_not",
                                "logical_not", "exp", "sqrt", "sin", "sigmoid"])
def test_unary_ops_on_integers_follow_cpu_promotion(op, dtype):
    x = sample((40,), dtype, low=-9, high=9)
    f = getattr(torch, op)
    assert_same(f(x.to(DEV)), f(x), rtol=1e-6, atol=1e-6)
    assert_native()


def test_special_functions_match_cpu_closely():
    x = torch.linspace(-6, 6, 4001)
    d = x.to(DEV)
    for op in ["erf", "erfc", "expm1", "log1p"]:
        ref = getattr(torch, op)(x.double())
        got = getattr(torch, op)(d).cpu().double()
        torch.testing.assert_close(got, ref, rtol=2e-6, atol=2e-7, equal_nan=True, msg=op)
    p = torch.linspace(-0.999, 0.999, 2001)
    torch.testing.assert_close(torch.erfinv(p.to(DEV)).cpu().double(), torch.erfinv(p.double()), rtol=1e-5,
                               atol=1e-6)
    pos = torch.linspace(0.01, 30, 3000)
    torch.testing.assert_close(torch.lgamma(pos.to(DEV)).cpu().double(), torch.lgamma(pos.double()), rtol=1e-5,
                               atol=1e-5)
    torch.testing.assert_close(torch.digamma(pos.to(DEV)).cpu().double(), torch.digamma(pos.double()),
                               rtol=1e-5, atol=1e-5)
    # Negative x goes through the reflection formulas; near the poles of large |x| their
    # sin(pi x) / tan(pi x) need x's fraction exactly (lgamma(-22.0000x) was 0.09 off).
    g = torch.Generator().manual_seed(5)
    neg = torch.cat([-torch.rand(2000, generator=g) * 40, -torch.arange(1, 41) + 1e-3 * torch.rand(40, generator=g)])
    for op in ["lgamma", "digamma"]:
        torch.testing.assert_close(getattr(torch, op)(neg.to(DEV)).cpu().double(), getattr(torch, op)(neg.double()),
                                   rtol=2e-5, atol=2e-5, msg=op)


BINARY = {
    "add": lambda a, b: torch.add(a, b, alpha=2),
    "sub": lambda a, b: torch.sub(a, b, alpha=3),
    "mul": torch.mul,
    "div": torch.div,
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "floor_divide": torch.floor_divide,
    "remainder": torch.remainder,
    "fmod": torch.fmod,
    "pow": lambda a, b: torch.pow(a.abs() if a.dtype.is_floating_point else a, b.abs()),
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "fmax": torch.fmax,
    "fmin": torch.fmin,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or, "logical_xor": torch.logical_xor,
}
BINARY_FLOAT = {
    "atan2": torch.atan2, "hypot": torch.hypot, "copysign": torch.copysign,
    "xlogy": lambda a, b: torch.xlogy(a, b.abs()),
}
BINARY_INT = {
    "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or, "bitwise_xor": torch.bitwise_xor,
    "lshift": lambda a, b: a << b.abs(), "rshift": lambda a, b: a >> b.abs(),
}


def binary_inputs(dtype):
    a = sample((31, 17), dtype, seed=2)
    b = sample((17,), dtype, seed=3)
    if dtype != torch.bool and not dtype.is_floating_point:
        b = b.abs() + 1  # integer division by zero raises (tested below)
    return a, b


def test_expm1_and_log1p_stay_finite_near_floats_range():
    # Kahan's forms (u - 1) * x / log(u) and log(u) * x / (u - 1) overflowed in their
    # first product: expm1 gave inf for x in ~(83.8, 88.7), log1p inf for x past ~3.9e36.
    x = torch.tensor([83.0, 84.0, 85.0, 87.5, 88.0, 88.7, 88.8, -90.0, 1e-30, 0.25])
    y = torch.tensor([1e30, 3.9e36, 1e37, 1e38, 3.4e38, float("inf"), 0.5, 1e-30, -0.75])
    torch.metalx.reset_fallback_stats()
    for op, v in (("expm1", x), ("log1p", y)):
        ref = getattr(torch, op)(v)
        got = getattr(torch, op)(v.to(DEV)).cpu()
        assert torch.isfinite(got).eq(torch.isfinite(ref)).all(), op
        torch.testing.assert_close(got, ref, rtol=2e-6, atol=0, msg=op)
    assert_native()


@pytest.mark.parametrize("dtype", FLOATS + INTS)
@pytest.mark.parametrize("name", list(BINARY) + list(BINARY_FLOAT) + list(BINARY_INT))
def test_binary_ops_match_cpu_with_broadcasting_and_views(name, dtype):
    f = {**BINARY, **BINARY_FLOAT, **BINARY_INT}[name]
    if name in BINARY_FLOAT and not dtype.is_floating_point:
        pytest.skip("float-only op")
    if name in BINARY_INT and dtype.is_floating_point:
        pytest.skip("integer-only op")
    a, b = binary_inputs(dtype)
    t = tol(dtype)
    assert_same(f(a.to(DEV), b.to(DEV)), f(a, b), **t)                   # broadcast (strided kernel)
    c = a.flip(0)
    if dtype != torch.bool and not dtype.is_floating_point:
        c = torch.where(c == 0, torch.ones_like(c), c).abs()
    assert_same(f(a.to(DEV), c.to(DEV)), f(a, c), **t)  # dense
    assert_same(f(a.t().to(DEV), b[:, None].to(DEV)), f(a.t(), b[:, None]), **t)
    assert_same(f(a.to(DEV).t(), c.t().contiguous().to(DEV)), f(a.t(), c.t().contiguous()), **t)  # mixed orders
    assert_same(f(a.to(DEV), b[3].to(DEV)), f(a, b[3]), **t)            # a device 0-dim operand
    assert_native()


@pytest.mark.parametrize("dtype", [torch.bool])
@pytest.mark.parametrize("name", ["add", "mul", "maximum", "minimum", "eq", "ne", "lt", "logical_and",
                                  "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor"])
def test_binary_ops_on_bool(name, dtype):
    f = {**BINARY, **BINARY_INT}[name]
    a, b = binary_inputs(dtype)
    if name == "add":
        f = torch.add
    assert_same(f(a.to(DEV), b.to(DEV)), f(a, b))
    assert_native()


def test_python_scalars_are_passed_inline_and_promote_like_cpu():
    x = sample((100,), torch.float16)
    i = sample((100,), torch.int32)
    d, di = x.to(DEV), i.to(DEV)
    for got, ref in [(d + 2.5, x + 2.5), (3 - d, 3 - x), (d * 2, x * 2), (2 ** d, 2 ** x), (d ** 2, x ** 2),
                     (di + 1.5, i + 1.5), (di * 2, i * 2), (di / 2, i / 2), (di // 3, i // 3), (d > 0.5, x > 0.5),
                     (di == 3, i == 3), (torch.where(di > 0, di, 0), torch.where(i > 0, i, 0))]:
        assert_same(got, ref, rtol=1e-3, atol=1e-3)
    names = kernels_run(lambda: d * 2)  # mul keeps the value in float, as CPU does
    assert names == ["mul_dense_vm_half"], names
    names = kernels_run(lambda: 3 - di)
    assert names == ["sub_dense_sv_int"], names
    assert_native()


def test_the_launcher_picks_dense_strided_and_64_bit_kernels():
    a = torch.randn(64, 64, device=DEV)
    assert kernels_run(lambda: a + a) == ["add_dense_float"]
    assert kernels_run(lambda: a + a.t()) == ["add_strided_float"]
    cl = torch.randn(2, 3, 4, 5, device=DEV).to(memory_format=torch.channels_last)
    assert kernels_run(lambda: cl * cl) == ["mul_dense_float"]  # the same dense order
    assert kernels_run(lambda: torch.exp(a[:, ::2])) == ["exp_strided_float"]


def test_more_than_2_31_elements_use_64_bit_indexing():
    n = 2**31 + 96
    base = torch.zeros(2 * n, dtype=torch.int8, device=DEV)
    view = base[::2]  # 2^31 + 96 elements, 2^32 + 192 bytes apart at the end
    view[-3:] = torch.tensor([5, 6, 7], dtype=torch.int8, device=DEV)
    names = kernels_run(lambda: view.add_(1))
    assert names == ["add_strided64_char"], names
    tail = base[-8:].cpu()
    assert tail.tolist() == [1, 0, 6, 0, 7, 0, 8, 0]
    assert int(base[::2][:1000].sum()) == 1000 and int(base[1::2].sum()) == 0
    del base, view
    dense = torch.ones(n, dtype=torch.int8, device=DEV)
    dense.mul_(3)
    assert dense[-1].item() == 3 and dense[0].item() == 3 and dense[n // 2].item() == 3


@pytest.mark.parametrize("op", ["div_floor", "div_trunc", "remainder", "fmod", "floor_divide"])
def test_integer_division_by_zero_raises_like_cpu(op):
    f = BINARY[op]
    a = torch.tensor([4, 5, 6], device=DEV)
    for b in [torch.tensor([1, 0, 2], device=DEV), torch.tensor(0, device=DEV)]:
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            f(a, b)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        f(a, 0)
    fl = torch.tensor([1.0, -1.0, 0.0], device=DEV)
    assert_same(f(fl, torch.zeros(3, device=DEV)), f(fl.cpu(), torch.zeros(3)))  # floats: inf/nan as on CPU


def test_out_and_inplace_variants():
    x = sample((8, 9), torch.float32)
    y = sample((9,), torch.float32, seed=5)
    d, e = x.to(DEV), y.to(DEV)
    out = torch.empty(0, device=DEV)
    torch.add(d, e, alpha=0.5, out=out)
    assert_same(out, torch.add(x, y, alpha=0.5))
    out_half = torch.empty(8, 9, dtype=torch.float64, device=DEV)
    torch.mul(d, e, out=out_half)  # result cast into a wider out=
    assert_same(out_half, (x * y).double())
    strided_out = torch.empty(9, 8, device=DEV).t()
    torch.exp(d, out=strided_out)
    assert_same(strided_out, x.exp())
    c = d.clone()
    c.mul_(e).sub_(1).clamp_(-1, 1).tanh_()
    assert_same(c, x.mul(y).sub(1).clamp(-1, 1).tanh())
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        torch.add(d, e, out=torch.empty(8, 9, dtype=torch.long, device=DEV))
    with pytest.raises(RuntimeError):
        d[:1].add_(d)  # an in-place op cannot broadcast self
    assert_native()


def test_ternary_ops_match_cpu():
    for dtype in FLOATS:
        a, b, c = (sample((7, 11), dtype, seed=s) for s in (1, 2, 3))
        d = [t.to(DEV) for t in (a, b, c)]
        t = tol(dtype)
        assert_same(torch.where(d[0] > 0, d[1], d[2]), torch.where(a > 0, b, c))
        assert_same(torch.where(d[0] > 0, d[1], 0.5), torch.where(a > 0, b, 0.5))
        assert_same(torch.lerp(d[0], d[1], 0.3), torch.lerp(a, b, 0.3), **t)
        assert_same(torch.lerp(d[0], d[1], d[2]), torch.lerp(a, b, c), **t)
        assert_same(torch.addcmul(d[0], d[1], d[2], value=0.5), torch.addcmul(a, b, c, value=0.5), **t)
        assert_same(torch.addcdiv(d[0], d[1], d[2].abs() + 1, value=2), torch.addcdiv(a, b, c.abs() + 1, value=2), **t)
        assert_same(torch.clamp(d[0], d[1], d[2]), torch.clamp(a, b, c))
        assert_same(torch.clamp(d[0], min=d[1]), torch.clamp(a, min=b))
        assert_same(torch.clamp(d[0], max=-0.5), torch.clamp(a, max=-0.5))
    nan = torch.tensor([float("nan"), 1.0, 5.0], device=DEV)
    assert_same(nan.clamp(0, 2), nan.cpu().clamp(0, 2))
    assert_native()


# The scalar-bound clamp kernel turns a missing bound into infinity (or the integer
# type's extreme) and a NaN bound into a NaN factor: each case against CPU, with the
# sign of zero checked bit for bit (x * 1 must keep -0.0).
@pytest.mark.parametrize("dtype", FLOATS)
def test_scalar_clamp_edge_cases_match_cpu_bit_for_bit(dtype):
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([nan, inf, -inf, -0.0, 0.0, -2.5, 2.5, 1e30 if dtype != torch.float16 else 6e4], dtype=dtype)
    d = x.to(DEV)
    cases = [
        lambda t: t.clamp(min=0), lambda t: t.clamp(max=0), lambda t: t.clamp(-1, 1), lambda t: t.clamp(2, -2),
        lambda t: t.clamp(min=nan), lambda t: t.clamp(max=nan), lambda t: t.clamp(0, nan), lambda t: t.clamp(nan, 0),
        lambda t: t.clamp(min=-inf), lambda t: t.clamp(max=inf), lambda t: t.clamp(min=-0.0), torch.relu,
        lambda t: t.clamp_min(-3), lambda t: t.clamp_max(3), lambda t: F.relu6(t), lambda t: F.hardtanh(t, -0.5, 0.5),
    ]
    for f in cases:
        got, ref = f(d).cpu(), f(x)
        assert got.dtype == ref.dtype
        # Bit equality, NaN payloads aside: same NaN positions, same values and zero signs.
        assert torch.equal(got.isnan(), ref.isnan())
        keep = ~ref.isnan()
        assert torch.equal(got[keep], ref[keep]) and torch.equal(got[keep].signbit(), ref[keep].signbit())
    r = d.clone()
    r.relu_()
    assert torch.equal(r.cpu().signbit(), torch.relu(x).signbit())
    assert_native()


@pytest.mark.parametrize("dtype", INTS)
def test_scalar_clamp_of_integers_keeps_the_extremes(dtype):
    info = torch.iinfo(dtype)
    x = torch.tensor([info.min, info.min + 1, -1 if info.min < 0 else 0, 0, 1, info.max - 1, info.max], dtype=dtype)
    d = x.to(DEV)
    for f in (lambda t: t.clamp(min=0), lambda t: t.clamp(max=1), lambda t: t.clamp(-1 if info.min < 0 else 0, 1),
              lambda t: t.clamp(5, 2), torch.relu, lambda t: t.clamp_min(info.min), lambda t: t.clamp_max(info.max)):
        assert_same(f(d), f(x))
    assert_native()


ACTIVATIONS = {
    "relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
    "mish": F.mish, "elu": F.elu, "selu": F.selu, "celu": F.celu, "leaky_relu": lambda x: F.leaky_relu(x, 0.1),
    "hardtanh": F.hardtanh, "hardsigmoid": F.hardsigmoid, "hardswish": F.hardswish,
    "softplus": lambda x: F.softplus(x, beta=2.0, threshold=5.0), "softshrink": F.softshrink,
    "hardshrink": F.hardshrink, "logsigmoid": F.logsigmoid, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
    "threshold": lambda x: F.threshold(x, 0.2, -3.0), "relu6": F.relu6,
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activations_and_their_gradients_match_cpu(name, dtype):
    f = ACTIVATIONS[name]
    x = sample((13, 29), dtype, seed=7).requires_grad_()
    d = x.detach().to(DEV).requires_grad_()
    y, yd = f(x), f(d)
    assert_same(yd.detach(), y.detach(), **tol(dtype))
    g = sample((13, 29), dtype, seed=8)
    y.backward(g)
    yd.backward(g.to(DEV))
    assert_same(d.grad, x.grad, **tol(dtype))
    assert_native()


@pytest.mark.parametrize("name", sorted(set(ACTIVATIONS) - {"gelu"}))
def test_activations_of_nan_and_infinities_match_cpu(name):
    # gelu is left out: CPU's vectorised erf gives NaN at +inf, where the function is inf.
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), -3.0, 3.0, 0.0, -0.0])
    assert_same(ACTIVATIONS[name](x.to(DEV)), ACTIVATIONS[name](x))
    assert_native()


def test_float64_runs_on_the_cpu_fallback_and_is_reported():
    x = torch.randn(10, dtype=torch.float64)
    d = x.to(DEV)
    assert_same(torch.exp(d), torch.exp(x))
    assert_same(d + d, x + x)
    stats = torch.metalx.fallback_stats()
    assert stats.get("aten::exp.out") == 1 and stats.get("aten::add.out") == 1, stats


def test_empty_and_zero_dim_tensors():
    e = torch.empty(0, 3, device=DEV)
    assert (e + 1).shape == (0, 3) and torch.exp(e).shape == (0, 3)
    z = torch.tensor(2.0, device=DEV)
    assert_same(z * 3 + torch.tensor(1.0, device=DEV), torch.tensor(7.0))
    assert_native()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_xlogy_rounds_as_cpus_scalar_kernel(dtype):
    # CPU's half/bfloat16 xlogy is scalar code whose log returns the dtype: log(y) is
    # rounded before the product.
    g = torch.Generator().manual_seed(7)
    x = (torch.rand(40, generator=g) * 9).to(dtype)
    y = (torch.rand(40, generator=g) * 9 + 0.05).to(dtype)
    x[:3] = 0
    y[1] = float("nan")
    y[5] = float("inf")
    assert torch.equal(torch.xlogy(x.to(DEV), y.to(DEV)).cpu().nan_to_num(), torch.xlogy(x, y).nan_to_num())
    assert_native()
