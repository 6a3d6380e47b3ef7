"""Native reductions (backend/ops/reduce.cpp, kernels/reduce.metal) against CPU torch:
full and per-dim, keepdim, several dims, dtype=, out=, views and channels_last, empty
inputs, NaN, and each kernel the launcher picks (rows, columns, split into parts)."""

import pytest
import torch

from device_checks import kernels_run

pytestmark = pytest.mark.usefixtures("no_fallback")

DEV = "metalx"
FLOATS = [torch.float32, torch.float16, torch.bfloat16]
INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]


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
        assert torch.equal(got, ref)


DIMS = [None, 0, 1, 2, -1, (0, 2), (1, 2), (0, 1, 2)]


@pytest.mark.parametrize("dtype", FLOATS + INTS)
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("op", ["sum", "prod", "amax", "amin"])
def test_sum_prod_amax_amin(op, dim, dtype):
    if op == "prod" and isinstance(dim, tuple):
        pytest.skip("prod takes one dim")
    x = sample((5, 6, 7), dtype)
    if op == "prod" and dtype.is_floating_point:
        x = x / 2 + 1
    f = getattr(torch, op)
    if dim is None:
        got, ref = (f(x.to(DEV)) if op in ("sum", "prod") else f(x.to(DEV), dim=())), (f(x) if op in ("sum", "prod") else f(x, dim=()))
    else:
        got, ref = f(x.to(DEV), dim, keepdim=True), f(x, dim, keepdim=True)
        check(got, ref, dtype, scale=10)
        got, ref = f(x.to(DEV).permute(2, 0, 1), dim), f(x.permute(2, 0, 1), dim)
    check(got, ref, dtype, scale=10)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", DIMS)
def test_mean_var_std_norms(dim, dtype):
    x = sample((5, 6, 7), dtype, seed=1)
    d = x.to(DEV)
    kw = {} if dim is None else {"dim": dim}
    check(torch.mean(d, **kw), torch.mean(x, **kw), dtype)
    for correction in (0, 1):
        check(torch.var(d, correction=correction, **kw), torch.var(x, correction=correction, **kw), dtype)
        check(torch.std(d, correction=correction, **kw), torch.std(x, correction=correction, **kw), dtype)
        for got, ref in zip(torch.var_mean(d, correction=correction, **kw), torch.var_mean(x, correction=correction, **kw)):
            check(got, ref, dtype)
    for ord in (2, 1, 0, 3.5, float("inf"), -float("inf")):
        check(torch.linalg.vector_norm(d, ord, **kw), torch.linalg.vector_norm(x, ord, **kw), dtype, scale=10)
    check(torch.logsumexp(d, dim if dim is not None else (0, 1, 2)), torch.logsumexp(x, dim if dim is not None else (0, 1, 2)), dtype)


@pytest.mark.parametrize("dtype", FLOATS + INTS[:-1])
def test_arg_reductions_and_max_with_indices(dtype):
    x = sample((6, 9, 4), dtype, seed=2)
    d = x.to(DEV)
    for dim in (0, 1, 2, -1):
        check(torch.argmax(d, dim), torch.argmax(x, dim))
        check(torch.argmin(d, dim, keepdim=True), torch.argmin(x, dim, keepdim=True))
        values, indices = torch.max(d, dim)
        ref_values, ref_indices = torch.max(x, dim)
        check(values, ref_values, dtype)
        check(indices, ref_indices)
        values, indices = torch.min(d.transpose(0, 2), dim, keepdim=True)
        ref_values, ref_indices = torch.min(x.transpose(0, 2), dim, keepdim=True)
        check(values, ref_values, dtype)
        check(indices, ref_indices)
    check(torch.argmax(d), torch.argmax(x))  # over the flattened input
    check(torch.argmin(d.transpose(0, 1)), torch.argmin(x.transpose(0, 1)))
    check(torch.max(d), torch.max(x), dtype)
    mn, mx = torch.aminmax(d, dim=1)
    rmn, rmx = torch.aminmax(x, dim=1)
    check(mn, rmn, dtype)
    check(mx, rmx, dtype)


def test_nan_propagates_and_ties_pick_the_first_index():
    x = torch.tensor([[1.0, float("nan"), 3.0, float("nan")], [2.0, 5.0, 5.0, 1.0]])
    d = x.to(DEV)
    check(torch.amax(d, 1), torch.amax(x, 1))
    check(torch.argmax(d, 1), torch.argmax(x, 1))
    check(torch.max(d, 1)[1], torch.max(x, 1)[1])
    check(torch.sum(d, 1), torch.sum(x, 1))
    check(torch.argmin(d, 1), torch.argmin(x, 1))


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_any_all_count_nonzero(dtype):
    x = sample((4, 5, 6), dtype, seed=3)
    if dtype != torch.bool:
        x[1] = 0
    d = x.to(DEV)
    for dim in (None, 0, 2, (0, 1)):
        kw = {} if dim is None else {"dim": dim}
        check(torch.any(d, **kw), torch.any(x, **kw))
        check(torch.all(d, **kw), torch.all(x, **kw))
        check(torch.count_nonzero(d, **kw), torch.count_nonzero(x, **kw))


def test_dtype_out_and_keepdim():
    x = sample((8, 16), torch.float16, seed=4)
    d = x.to(DEV)
    check(torch.sum(d, 1, dtype=torch.float32), torch.sum(x, 1, dtype=torch.float32))
    i = sample((8, 16), torch.int32)
    check(torch.sum(i.to(DEV), 0), torch.sum(i, 0))  # int32 sums to int64
    check(torch.sum(i.to(DEV), 0, dtype=torch.int32), torch.sum(i, 0, dtype=torch.int32))
    out = torch.empty(3, device=DEV, dtype=torch.float16)
    torch.sum(d, 0, keepdim=True, out=out)
    check(out, torch.sum(x, 0, keepdim=True), torch.float16)
    out = torch.empty(8, 1, device=DEV, dtype=torch.float16)
    torch.amax(d, 1, keepdim=True, out=out)
    check(out, torch.amax(x, 1, keepdim=True), torch.float16)


def test_channels_last_and_offset_views():
    x = sample((2, 8, 5, 6), torch.float32, seed=5)
    cl = x.to(DEV).to(memory_format=torch.channels_last)
    for dim in ((0, 2, 3), 1, (2, 3)):
        check(cl.sum(dim), x.sum(dim))
        check(cl.amax(dim), x.amax(dim))
    v = x.to(DEV)[:, 2:7, 1:, ::2]
    check(v.mean((1, 3)), x[:, 2:7, 1:, ::2].mean((1, 3)))


def test_empty_reductions():
    e = torch.empty(3, 0, device=DEV)
    check(e.sum(1), torch.zeros(3))
    check(e.prod(1), torch.ones(3))
    check(e.mean(1), torch.full((3,), float("nan")))
    check(e.any(1), torch.zeros(3, dtype=torch.bool))
    check(e.all(1), torch.ones(3, dtype=torch.bool))
    assert e.sum(0).shape == (0,)
    with pytest.raises(IndexError, match="Expected reduction dim 1 to have non-zero size"):
        e.amax(1)


def test_large_reductions_pick_the_kernel_for_the_shape():
    torch.manual_seed(0)
    x = torch.randn(1 << 22)
    d = x.to(DEV)
    names = kernels_run(lambda: d.sum())
    # Split into parts, one command; the simulator reduces a full tensor as one output of
    # the column kernel (a thread per part, no fibers).
    simulated = torch.metalx.driver_name() == "sim"
    first = "sum_cols_float" if simulated else "sum_rows_float"
    assert names == [first + " + sum_partials_float"], names
    check(d.sum(), x.sum(), scale=100)
    m = torch.randn(4096, 64)
    dm = m.to(DEV)
    # Outer dim: adjacent outputs. The simulator gives one thread all 64 of them and
    # splits the 4096 rows into parts to keep both cores busy.
    cols = "sum_cols_float + sum_partials_float" if simulated else "sum_cols_float"
    assert kernels_run(lambda: dm.sum(0)) == [cols]
    check(dm.sum(0), m.sum(0), scale=10)
    # Rows along contiguous memory: a SIMD group per output on a GPU; the simulator runs
    # every reduction on the column kernel (no fibers).
    assert kernels_run(lambda: dm.sum(1)) == (["sum_cols_float"] if simulated else ["sum_rows_float"])
    check(dm.sum(1), m.sum(1), scale=10)
    tall = torch.randn(1 << 20, 3)
    exact = tall.double().sum(0)
    torch.testing.assert_close(tall.to(DEV).sum(0).cpu().double(), exact, rtol=1e-5, atol=1e-3)  # few long columns: parts
    torch.testing.assert_close(d.sum().cpu().double(), x.double().sum(), rtol=1e-5, atol=1e-3)
    check(tall.to(DEV).var(0), tall.var(0))
    check(tall.to(DEV).argmax(0), tall.argmax(0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_outer_dim_reductions_over_wide_strips_and_parts(dtype):
    # Reducing the outer dim of a wide matrix: the simulator gives a thread a strip of up
    # to 1024 adjacent outputs (here one full strip and a ragged one of 476), and splits
    # the rows into parts when there are few strips; NaN and ties sit in both strips.
    x = sample((3000, 1500), dtype, seed=7)
    if dtype.is_floating_point:
        x[1234, 5] = float("nan")
        x[2999, 1400] = float("nan")
    d = x.to(DEV)
    check(d.sum(0), x.sum(0), dtype, scale=100)
    check(d.amax(0), x.amax(0), dtype)
    check(d.amin(0, keepdim=True), x.amin(0, keepdim=True), dtype)
    check(d.argmax(0), x.argmax(0))
    check(d.argmin(0), x.argmin(0))
    check(d.any(0), x.any(0))
    check(d.all(0), x.all(0))
    if dtype.is_floating_point:
        check(d.mean(0), x.mean(0), dtype)
        check(d.var(0), x.var(0), dtype, scale=10)
        check(torch.linalg.vector_norm(d, dim=0), torch.linalg.vector_norm(x, dim=0), dtype, scale=10)
        check(d.sum(0, dtype=torch.float32), x.sum(0, dtype=torch.float32), torch.float32, scale=100)
    # Outer and middle dims with a kept innermost dim, and a view with a row stride.
    y = sample((6, 700, 300), dtype, seed=8)
    check(y.to(DEV).sum((0, 1)), y.sum((0, 1)), dtype, scale=100)
    check(y.to(DEV).amax(1), y.amax(1), dtype)
    check(d[:, 100:1400].sum(0), x[:, 100:1400].sum(0), dtype, scale=100)


def test_float64_reductions_fall_back():
    x = torch.randn(10, 10, dtype=torch.float64)
    torch.metalx.reset_fallback_stats()
    check(x.to(DEV).sum(0), x.sum(0))
    assert torch.metalx.fallback_stats() == {"aten::sum.IntList_out": 1}
    torch.metalx.reset_fallback_stats()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("dim", [1, 2])
def test_half_precision_prod_rounds_each_product_as_cpu(dtype, dim):
    # CPU multiplies half and bfloat16 in the dtype: every partial product is rounded,
    # so a product rounded once from float is an ulp off. Short rows: CPU's order is
    # the sequential one there, and the results must be CPU's bit for bit.
    g = torch.Generator().manual_seed(5)
    x = (torch.rand(6, 9, 7, generator=g) * 1.5 + 0.5).to(dtype)
    got = x.to(DEV).prod(dim).cpu()
    assert torch.equal(got, x.prod(dim))
    masked = torch.rand(6, 9, 7, generator=g) > 0.3
    got = torch.masked.prod(x.to(DEV), dim, mask=masked.to(DEV)).cpu()
    assert torch.equal(got, torch.masked.prod(x, dim, mask=masked))
