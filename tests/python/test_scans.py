"""Native scans (backend/ops/scan.cpp, kernels/scan.metal) against CPU torch: cumsum,
cumprod, cummax, cummin and logcumsumexp along every dim, of views and channels_last
tensors, with dtype=, out= and in-place forms, NaN/inf, ties, 0-dim and empty inputs,
gradients, and long lines the launcher splits into parts."""

import pytest
import torch

from device_checks import assert_native, kernels_run

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"
FLOATS = [torch.float32, torch.float16, torch.bfloat16]
INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]


def sample(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g) * 4 - 2).to(dtype)
    return torch.randint(0 if dtype == torch.uint8 else -3, 4, shape, generator=g).to(dtype)


def check(got, ref, dtype=torch.float32, scale=1.0):
    got = got.cpu()
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, ref.dtype, got.shape, ref.shape)
    if ref.dtype.is_floating_point:
        t = 1e-5 if dtype == torch.float32 else 2e-2
        torch.testing.assert_close(got, ref, rtol=t, atol=t * scale, equal_nan=True)
    else:
        assert torch.equal(got, ref), (got, ref)


@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool])
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_cumsum_cumprod_every_dim(op, dtype):
    x = sample((4, 5, 6), dtype)
    if op == "cumprod" and dtype.is_floating_point:
        x = x / 4 + 1  # products that stay in range
    f = getattr(torch, op)
    for dim in (0, 1, 2, -1):
        check(f(x.to(DEV), dim), f(x, dim), dtype, scale=10)
        # Views scan in place: a permutation and a slice with a step.
        check(f(x.to(DEV).permute(2, 0, 1), dim), f(x.permute(2, 0, 1), dim), dtype, scale=10)
        check(f(x.to(DEV)[:, ::2], dim), f(x[:, ::2], dim), dtype, scale=10)
    assert_native()


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_dtype_out_and_inplace(op):
    x = sample((3, 7), torch.int32)
    f = getattr(torch, op)
    # Integers scan as int64 by default; dtype= casts first, as CPU.
    check(f(x.to(DEV), 1), f(x, 1))
    check(f(x.to(DEV), 1, dtype=torch.float32), f(x, 1, dtype=torch.float32))
    check(f(x.to(DEV), 0, dtype=torch.int16), f(x, 0, dtype=torch.int16))
    y = sample((3, 7), torch.float16)
    check(f(y.to(DEV), 1, dtype=torch.float32), f(y, 1, dtype=torch.float32))
    # out=: a resized tensor and a strided one.
    out = torch.empty(0, dtype=torch.int64, device=DEV)
    res = f(x.to(DEV), 1, out=out)
    assert res is out
    check(out, f(x, 1))
    out_t = torch.empty(7, 3, dtype=torch.int64, device=DEV).t()
    f(x.to(DEV), 0, out=out_t)
    check(out_t, f(x, 0))
    # In place, on a view.
    z = sample((4, 6), torch.float32)
    zd = z.to(DEV)
    getattr(zd[:, 1:5], op + "_")(1)
    getattr(z[:, 1:5], op + "_")(1)
    check(zd, z)
    assert_native()


@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool])
@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin(op, dtype):
    # Few distinct values: many ties, whose index must be the latest, as on CPU.
    g = torch.Generator().manual_seed(3)
    x = torch.randint(0, 3, (5, 9, 4), generator=g).to(dtype)
    f = getattr(torch, op)
    for dim in (0, 1, 2, -2):
        got, ref = f(x.to(DEV), dim), f(x, dim)
        check(got.values, ref.values, dtype)
        check(got.indices, ref.indices)
        got, ref = f(x.to(DEV).transpose(0, 2), dim), f(x.transpose(0, 2), dim)
        check(got.values, ref.values, dtype)
        check(got.indices, ref.indices)
    assert_native()


@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin_nan_inf(op):
    x = torch.tensor([[1.0, float("nan"), 3.0, float("nan"), -1.0],
                      [float("-inf"), float("-inf"), float("inf"), 2.0, float("inf")]])
    f = getattr(torch, op)
    got, ref = f(x.to(DEV), 1), f(x, 1)
    check(got.values, ref.values)
    check(got.indices, ref.indices)
    assert_native()


@pytest.mark.parametrize("dtype", FLOATS)
def test_logcumsumexp(dtype):
    x = (sample((4, 6, 5), dtype) * 10).to(dtype)
    for dim in (0, 1, 2, -1):
        check(torch.logcumsumexp(x.to(DEV), dim), torch.logcumsumexp(x, dim), dtype, scale=10)
    special = torch.tensor([float("-inf"), float("-inf"), 0.0, float("inf"), 1.0, float("nan"), 2.0], dtype=dtype)
    check(torch.logcumsumexp(special.to(DEV), 0), torch.logcumsumexp(special, 0), dtype)
    out = torch.empty(0, device=DEV, dtype=dtype)
    torch.logcumsumexp(x.to(DEV), 1, out=out)
    check(out, torch.logcumsumexp(x, 1), dtype, scale=10)
    assert_native()


@pytest.mark.parametrize("op", ["cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"])
def test_zero_dim_and_empty(op):
    f = getattr(torch, op)
    for x in (torch.tensor(2.5), torch.empty(0, 3), torch.empty(3, 0)):
        for dim in ((0,) if x.dim() == 0 else (0, 1)):
            got, ref = f(x.to(DEV), dim), f(x, dim)
            if op in ("cummax", "cummin"):
                check(got.values, ref.values)
                check(got.indices, ref.indices)
            else:
                check(got, ref)
    with pytest.raises(IndexError, match="Dimension out of range"):
        f(torch.ones(2, 3, device=DEV), 2)


@pytest.mark.parametrize("op", ["cumsum", "cummax", "logcumsumexp"])
def test_long_lines_split_into_parts(op):
    # One and three lines of 2^18 elements: the launcher splits each into parts (a totals
    # pass and a starting-state pass run first).
    f = getattr(torch, op)
    for shape, dim in (((1 << 18,), 0), ((3, 1 << 18), 1), ((1 << 18, 3), 0)):
        x = sample(shape, torch.float32, seed=5)
        if op == "cummax" and len(shape) == 1:
            x[1000] = float("nan")  # NaN from there on, at the latest NaN's index
        names = kernels_run(lambda: f(x.to(DEV), dim))
        assert any(n.startswith(op + "_rows_") for n in names), names
        got, ref = f(x.to(DEV), dim), f(x.double(), dim)
        if op == "cummax":
            check(got.values, ref.values.float())
            check(got.indices, ref.indices)
        else:
            # float32 accumulation over 2^18 elements: CPU accumulates in double.
            torch.testing.assert_close(got.cpu(), ref.float(), rtol=1e-4, atol=1e-2)
    assert_native()


def test_channels_last_and_gradients():
    x = sample((2, 3, 4, 5), torch.float32).contiguous(memory_format=torch.channels_last)
    for dim in range(4):
        check(torch.cumsum(x.to(DEV), dim), torch.cumsum(x, dim))
        got, ref = torch.cummax(x.to(DEV), dim), torch.cummax(x, dim)
        check(got.values, ref.values)
        check(got.indices, ref.indices)
    for op in ("cumsum", "cumprod", "logcumsumexp"):
        a = (sample((4, 5), torch.float32, seed=7) / 2 + 1).requires_grad_()
        b = a.detach().to(DEV).requires_grad_()
        getattr(torch, op)(a, 1).pow(2).sum().backward()
        getattr(torch, op)(b, 1).pow(2).sum().backward()
        check(b.grad, a.grad, scale=10)
    a = sample((4, 5), torch.float32, seed=8).requires_grad_()
    b = a.detach().to(DEV).requires_grad_()
    torch.cummax(a, 0).values.sum().backward()
    torch.cummax(b, 0).values.sum().backward()
    check(b.grad, a.grad)


def test_float64_falls_back_visibly():
    x = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    check(torch.cumsum(x.to(DEV), 1), torch.cumsum(x, 1))
    assert any("cumsum" in op for op in torch.metalx.fallback_stats())
