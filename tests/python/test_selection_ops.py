"""Native selection ops (backend/ops/selection.cpp + kernels/selection.metal, take_put.cpp,
eye.cpp) against CPU torch: nonzero/argwhere/nonzero_static, masked_select,
masked_scatter_, flip, roll, take, put_ and eye in every dtype of 1, 2, 4 and 8 bytes,
views read in place, several count blocks (outputs in row-major order), out= forms,
autograd, CPU's errors, and no CPU fallback."""

import pytest
import torch

from device_checks import assert_native

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16, torch.int8,
          torch.uint8, torch.bool, torch.float64, torch.complex64]


def sample(shape, dtype, seed=0, zeros=0.5):
    """Values of `dtype` with about `zeros` of them zero (floating ones include -0.0 and NaN)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * 10
    x = x.masked_fill(torch.rand(shape, generator=g) < zeros, 0.0)
    if dtype == torch.bool:
        return x != 0
    if dtype == torch.complex64:
        return torch.complex(x, torch.zeros_like(x)).masked_fill(x.abs() > 12, 0.5j)
    if dtype.is_floating_point and x.numel() > 4:
        flat = x.view(-1)
        flat[1] = -0.0
        flat[3] = float("nan")
    return x.to(dtype)


def same(got, ref):
    assert got.device.type == DEV
    assert got.dtype == ref.dtype and got.shape == ref.shape
    assert torch.equal(got.cpu(), ref) or (ref.dtype.is_floating_point and torch.allclose(
        got.cpu(), ref, equal_nan=True, rtol=0, atol=0))


# ---- nonzero ----

@pytest.mark.parametrize("dtype", DTYPES)
def test_nonzero_matches_cpu(dtype):
    x = sample((5, 7, 3), dtype)
    same(torch.nonzero(x.to(DEV)), torch.nonzero(x))
    same(torch.argwhere(x.to(DEV)), torch.argwhere(x))
    for got, ref in zip(torch.nonzero(x.to(DEV), as_tuple=True), torch.nonzero(x, as_tuple=True)):
        same(got, ref)
    assert_native()


def test_nonzero_many_blocks_in_row_major_order():
    # 3 * 1000 * 7 elements: several count blocks, zeros bunched so some blocks are empty.
    x = sample((3, 1000, 7), torch.float32, zeros=0.7)
    x[1, 100:600] = 0
    same(torch.nonzero(x.to(DEV)), torch.nonzero(x))
    same(torch.nonzero(x.to(DEV).transpose(0, 2)), torch.nonzero(x.transpose(0, 2)))
    assert_native()


def test_nonzero_views_scalars_and_empty():
    x = sample((6, 8), torch.int32)
    d = x.to(DEV)
    for view in [lambda t: t.t(), lambda t: t[1::2, ::3], lambda t: t[2], lambda t: t[:1].expand(4, 8),
                 lambda t: t.unsqueeze(1)]:
        same(torch.nonzero(view(d)), torch.nonzero(view(x)))
    for v in [torch.tensor(3.0), torch.tensor(0.0), torch.tensor(-0.0), torch.zeros(0, 3), torch.zeros(4, 5)]:
        same(torch.nonzero(v.to(DEV)), torch.nonzero(v))
    y = sample((2, 1, 2, 1, 2, 1, 3, 4), torch.float16)
    same(torch.nonzero(y.to(DEV)), torch.nonzero(y))
    assert_native()


def test_nonzero_out_and_errors():
    x = sample((4, 5), torch.float32)
    out = torch.empty(0, dtype=torch.long, device=DEV)  # resized by the op
    torch.nonzero(x.to(DEV), out=out)
    same(out, torch.nonzero(x))
    with pytest.raises(RuntimeError, match="Expected out tensor to have scalar type Long"):
        torch.nonzero(x.to(DEV), out=torch.empty(0, device=DEV))
    assert_native()


@pytest.mark.parametrize("size,fill", [(0, -1), (3, -1), (40, -7)])
def test_nonzero_static(size, fill):
    x = sample((4, 6), torch.bfloat16)
    same(torch.nonzero_static(x.to(DEV), size=size, fill_value=fill), torch.nonzero_static(x, size=size,
                                                                                           fill_value=fill))
    assert_native()
    with pytest.raises(RuntimeError, match="'size' must be an non-negative integer"):
        torch.nonzero_static(x.to(DEV), size=-1)


def test_nonzero_more_dims_than_the_kernel_falls_back():
    x = sample((1, 2, 1, 2, 1, 2, 1, 2, 3), torch.float32)
    same(torch.nonzero(x.to(DEV)), torch.nonzero(x))
    assert "aten::nonzero.out" in torch.metalx.fallback_stats()


# ---- masked_select ----

@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_select_matches_cpu(dtype):
    x = sample((6, 9), dtype, seed=1)
    mask = sample((6, 9), torch.bool, seed=2)
    same(torch.masked_select(x.to(DEV), mask.to(DEV)), torch.masked_select(x, mask))
    assert_native()


def test_masked_select_broadcasts_views_and_many_blocks():
    x = sample((3, 50, 200), torch.float32, seed=3)
    mask = sample((50, 1), torch.bool, seed=4)
    same(x.to(DEV).masked_select(mask.to(DEV)), x.masked_select(mask))
    # the mask broadcast up to self's shape, and self up to the mask's
    same(x[0, 0].to(DEV).masked_select(mask.to(DEV)), x[0, 0].masked_select(mask))
    big = sample((3, 50, 200), torch.bool, seed=5)
    same(x.to(DEV).transpose(0, 2).masked_select(big.to(DEV).transpose(0, 2)),
         x.transpose(0, 2).masked_select(big.transpose(0, 2)))
    same(torch.tensor(2.0, device=DEV).masked_select(torch.tensor(True, device=DEV)),
         torch.tensor(2.0).masked_select(torch.tensor(True)))
    same(torch.zeros(0, 3, device=DEV).masked_select(torch.ones(3, dtype=torch.bool, device=DEV)),
         torch.zeros(0, 3).masked_select(torch.ones(3, dtype=torch.bool)))
    assert_native()


def test_masked_select_out_backward_and_errors():
    x = sample((5, 4), torch.float32, seed=6)
    mask = sample((5, 4), torch.bool, seed=7)
    out = torch.empty(1, device=DEV)
    torch.masked_select(x.to(DEV), mask.to(DEV), out=out)
    same(out, x.masked_select(mask))
    xd = x.to(DEV).requires_grad_()
    g = torch.arange(int(mask.sum()), dtype=torch.float32)
    xd.masked_select(mask.to(DEV)).backward(g.to(DEV))
    xc = x.clone().requires_grad_()
    xc.masked_select(mask).backward(g)
    same(xd.grad, xc.grad)
    assert_native()
    with pytest.raises(RuntimeError, match="expected BoolTensor for mask"):
        x.to(DEV).masked_select(mask.to(DEV, torch.uint8))
    with pytest.raises(RuntimeError, match="self and result must have the same scalar type"):
        torch.masked_select(x.to(DEV), mask.to(DEV), out=torch.empty(0, dtype=torch.long, device=DEV))
    with pytest.raises(RuntimeError, match="must match the size"):
        x.to(DEV).masked_select(torch.ones(3, dtype=torch.bool, device=DEV))


# ---- masked_scatter_ ----

@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_scatter_matches_cpu(dtype):
    x = sample((7, 5), dtype, seed=8)
    mask = sample((7, 5), torch.bool, seed=9)
    source = sample((40,), dtype, seed=10)
    got = x.to(DEV).masked_scatter_(mask.to(DEV), source.to(DEV))
    same(got, x.clone().masked_scatter_(mask, source))
    assert_native()


def test_masked_scatter_views_broadcast_and_backward():
    x = sample((4, 300, 6), torch.float32, seed=11)
    mask = sample((300, 1), torch.bool, seed=12)
    source = sample((10, 800), torch.float32, seed=13)
    # self a view written in place, the source read in its logical (row-major) order
    d = x.to(DEV)
    d.transpose(0, 2).masked_scatter_(mask.t().to(DEV).unsqueeze(2).expand(6, 300, 4), source.t().to(DEV))
    ref = x.clone()
    ref.transpose(0, 2).masked_scatter_(mask.t().unsqueeze(2).expand(6, 300, 4), source.t())
    same(d, ref)
    same(x.to(DEV).masked_scatter(mask.to(DEV), source.to(DEV)), x.masked_scatter(mask, source))
    # gradients: self through masked_fill, source through masked_select
    xs, ss = x[0].clone().requires_grad_(), source.clone().requires_grad_()
    xd, sd = x[0].to(DEV).requires_grad_(), source.to(DEV).requires_grad_()
    xs.masked_scatter(mask, ss).mul(torch.arange(6.0)).sum().backward()
    xd.masked_scatter(mask.to(DEV), sd).mul(torch.arange(6.0, device=DEV)).sum().backward()
    same(xd.grad, xs.grad)
    same(sd.grad, ss.grad)
    assert_native()


def test_masked_scatter_errors():
    x = torch.zeros(3, 4, device=DEV)
    mask = torch.ones(3, 4, dtype=torch.bool, device=DEV)
    with pytest.raises(RuntimeError, match="Number of elements of source < number of ones in mask"):
        x.masked_scatter_(mask, torch.ones(11, device=DEV))
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        x.masked_scatter_(mask.to(torch.uint8), torch.ones(12, device=DEV))
    with pytest.raises(RuntimeError, match="expected self and source to have same dtypes"):
        x.masked_scatter_(mask, torch.ones(12, dtype=torch.int32, device=DEV))
    with pytest.raises(RuntimeError, match="expanded size"):
        x.masked_scatter_(torch.ones(5, dtype=torch.bool, device=DEV), torch.ones(12, device=DEV))
    # an all-false mask takes nothing from an empty source
    x.masked_scatter_(mask.logical_not(), torch.ones(0, device=DEV))
    assert torch.equal(x.cpu(), torch.zeros(3, 4))


# ---- flip, roll ----

@pytest.mark.parametrize("dtype", DTYPES)
def test_flip_and_roll_match_cpu(dtype):
    x = sample((4, 5, 6), dtype, seed=14)
    d = x.to(DEV)
    for dims in [(0,), (1, 2), (-1,), (0, 1, 2), ()]:
        same(d.flip(dims), x.flip(dims))
    for shifts, dims in [(1, 0), ((2, -3), (1, 2)), (7, -1), ((1, 1), (0, 0)), (-13, None), (0, 1)]:
        same(d.roll(shifts, dims), x.roll(shifts, dims))
    assert_native()


def test_flip_roll_views_composites_and_backward():
    x = sample((5, 8, 3), torch.float16, seed=15)
    d = x.to(DEV)
    for view in [lambda t: t.transpose(0, 2), lambda t: t[1::2, ::3], lambda t: t[:1].expand(4, 8, 3),
                 lambda t: t.permute(2, 0, 1)]:
        same(view(d).flip(0, 2), view(x).flip(0, 2))
        same(view(d).roll((3, -1), (0, 2)), view(x).roll((3, -1), (0, 2)))
        same(view(d).roll(5), view(x).roll(5))
    m = x[0]
    same(m.to(DEV).fliplr(), m.fliplr())
    same(m.to(DEV).flipud(), m.flipud())
    same(m.to(DEV).rot90(1, (0, 1)), m.rot90(1, (0, 1)))
    same(torch.tensor(3.0, device=DEV).flip(()), torch.tensor(3.0).flip(()))
    same(torch.zeros(0, 4, device=DEV).roll(2, 0), torch.zeros(0, 4).roll(2, 0))
    out = torch.empty(0, dtype=torch.float16, device=DEV)
    torch.ops.aten.flip.out(d, [1], out=out)
    same(out, x.flip(1))
    w = torch.randn(4, 6)
    wd = w.to(DEV).requires_grad_()
    wc = w.clone().requires_grad_()
    (wd.flip(1).roll(2, 0) * torch.arange(24.0, device=DEV).view(4, 6)).sum().backward()
    (wc.flip(1).roll(2, 0) * torch.arange(24.0).view(4, 6)).sum().backward()
    same(wd.grad, wc.grad)
    assert_native()


def test_flip_roll_errors():
    d = torch.zeros(3, 4, device=DEV)
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times"):
        d.flip(0, 0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        d.flip(3)
    with pytest.raises(RuntimeError, match="shifts and dimensions must align"):
        d.roll(1, (0, 1))
    with pytest.raises(RuntimeError, match="`shifts` required"):
        d.roll((), ())
    with pytest.raises(IndexError, match="Dimension out of range"):
        d.roll(1, 5)


# ---- take, put_ ----

@pytest.mark.parametrize("dtype", DTYPES)
def test_take_put_match_cpu(dtype):
    x = sample((4, 6), dtype, seed=16)
    index = torch.tensor([[0, 23, -1], [5, -24, 5]])
    same(x.to(DEV).take(index.to(DEV)), x.take(index))
    source = sample((2, 3), dtype, seed=17)
    flat = torch.tensor([0, 23, -1, 5, 7, 9])
    same(x.to(DEV).put_(flat.to(DEV), source.to(DEV)), x.clone().put_(flat, source))
    assert_native()
    if dtype != torch.bool:
        unique = torch.tensor([0, 23, -3, 5, 7, 9])
        same(x.to(DEV).put_(unique.to(DEV), source.to(DEV), accumulate=True),
             x.clone().put_(unique, source, accumulate=True))
        # accumulate adds through index_add_, whose float64/complex arithmetic stays on the CPU
        assert set(torch.metalx.fallback_stats()) <= ({"aten::index_add_"} if dtype in (
            torch.float64, torch.complex64) else set())


def test_take_put_views_accumulate_and_backward():
    x = sample((5, 7), torch.float32, seed=18)
    index = torch.tensor([3, 3, 0, -2, 34, 3])
    source = torch.arange(6.0)
    d = x.to(DEV).t()  # non-contiguous self
    same(d.take(index.to(DEV)), x.t().take(index))
    same(d.put_(index.to(DEV), source.to(DEV), accumulate=True), x.t().clone().put_(index, source, accumulate=True))
    same(x.to(DEV).put(index.to(DEV), source.to(DEV), accumulate=True), x.put(index, source, accumulate=True))
    out = torch.empty(0, device=DEV)
    torch.take(x.to(DEV), index.view(2, 3).to(DEV), out=out)
    same(out, torch.take(x, index.view(2, 3)))
    xd, xc = x.to(DEV).requires_grad_(), x.clone().requires_grad_()
    (xd.take(index.to(DEV)) * source.to(DEV)).sum().backward()
    (xc.take(index) * source).sum().backward()
    same(xd.grad, xc.grad)
    assert_native()


def test_take_put_errors():
    d = torch.zeros(3, 4, device=DEV)
    # Index values are checked on the device: the error comes at the next synchronisation.
    with pytest.raises(IndexError, match="in take: out of range: tried to access index 12 on a tensor of 12 elements"):
        d.take(torch.tensor([1, 12], device=DEV))
        torch.metalx.synchronize()
    with pytest.raises(IndexError, match="in put_: out of range: tried to access index -13"):
        d.put_(torch.tensor([-13], device=DEV), torch.ones(1, device=DEV))
        torch.metalx.synchronize()
    assert d.cpu().eq(0).all()  # the bad put_ wrote nothing
    with pytest.raises(RuntimeError, match="Expected a long tensor for index"):
        d.take(torch.tensor([1], dtype=torch.int32, device=DEV))
    with pytest.raises(IndexError, match="tried to take from an empty tensor"):
        torch.zeros(0, device=DEV).take(torch.tensor([0], device=DEV))
    with pytest.raises(IndexError, match="same number of elements"):
        d.put_(torch.tensor([1], device=DEV), torch.ones(2, device=DEV))
    with pytest.raises(RuntimeError, match="self and source expected to have the same dtype"):
        d.put_(torch.tensor([1], device=DEV), torch.ones(1, dtype=torch.float16, device=DEV))
    assert torch.equal(d.cpu(), torch.zeros(3, 4))


# ---- eye ----

@pytest.mark.parametrize("dtype", DTYPES)
def test_eye_matches_cpu(dtype):
    for shape in [(4,), (3, 5), (6, 2), (0,), (0, 3)]:
        same(torch.eye(*shape, dtype=dtype, device=DEV), torch.eye(*shape, dtype=dtype))
    out = torch.full((9,), 5, dtype=dtype, device=DEV)
    torch.eye(3, 4, out=out)
    same(out, torch.eye(3, 4, dtype=dtype))
    assert_native()


def test_eye_errors():
    with pytest.raises(RuntimeError, match="n must be greater or equal to 0, got -1"):
        torch.eye(-1, device=DEV)
    with pytest.raises(RuntimeError, match="m must be greater or equal to 0, got -2"):
        torch.eye(2, -2, device=DEV)


# ---- searchsorted, bucketize ----

SEARCH_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16, torch.int8,
                 torch.uint8]


def search_sample(dtype, seed):
    g = torch.Generator().manual_seed(seed)
    bd = (torch.rand(3, 9, generator=g) * 60).to(dtype).sort(-1).values
    values = (torch.rand(3, 11, generator=g) * 70 - 5).to(dtype) if dtype != torch.uint8 else \
        (torch.rand(3, 11, generator=g) * 70).to(dtype)
    values[0, :4] = bd[0, :4]  # values equal to boundaries: left and right differ
    return bd, values


@pytest.mark.parametrize("dtype", SEARCH_DTYPES)
def test_searchsorted_bucketize_match_cpu(dtype):
    bd, values = search_sample(dtype, 20)
    for right in [False, True]:
        for out_int32 in [False, True]:
            same(torch.searchsorted(bd.to(DEV), values.to(DEV), right=right, out_int32=out_int32),
                 torch.searchsorted(bd, values, right=right, out_int32=out_int32))
            same(torch.searchsorted(bd[1].to(DEV), values.to(DEV), right=right, out_int32=out_int32),
                 torch.searchsorted(bd[1], values, right=right, out_int32=out_int32))
            same(torch.bucketize(values.to(DEV), bd[2].to(DEV), right=right, out_int32=out_int32),
                 torch.bucketize(values, bd[2], right=right, out_int32=out_int32))
        same(torch.searchsorted(bd[0].to(DEV), 7, right=right), torch.searchsorted(bd[0], 7, right=right))
        same(torch.bucketize(7, bd[0].to(DEV), right=right), torch.bucketize(7, bd[0], right=right))
    same(torch.searchsorted(bd.to(DEV), values.to(DEV), side="right"), torch.searchsorted(bd, values, side="right"))
    assert_native()


def test_searchsorted_sorter_views_nan_promotion_and_out():
    g = torch.Generator().manual_seed(21)
    unsorted = torch.randn(4, 10, generator=g)
    sorter = unsorted.argsort(-1)
    values = torch.randn(4, 6, generator=g)
    values[0, 0] = float("nan")
    unsorted[1, 3] = float("nan")
    sorter = unsorted.argsort(-1)
    for side in ["left", "right"]:
        same(torch.searchsorted(unsorted.to(DEV), values.to(DEV), side=side, sorter=sorter.to(DEV)),
             torch.searchsorted(unsorted, values, side=side, sorter=sorter))
    bd = unsorted.sort(-1).values
    same(torch.searchsorted(bd.to(DEV).t().contiguous().t(), values.to(DEV).t().contiguous().t()),
         torch.searchsorted(bd, values))
    # int boundaries with float values: both promoted, as CPU does
    ibd = torch.arange(0, 20, 3)
    same(torch.searchsorted(ibd.to(DEV), values.to(DEV) * 10), torch.searchsorted(ibd, values * 10))
    out = torch.empty(2, 2, dtype=torch.long, device=DEV).t()  # resized, then written
    torch.searchsorted(bd.to(DEV), values.to(DEV), out=out)
    same(out, torch.searchsorted(bd, values))
    assert_native()


def test_searchsorted_errors():
    bd = torch.arange(5.0, device=DEV)
    v = torch.ones(3, device=DEV)
    with pytest.raises(RuntimeError, match="side can only be 'left' or 'right'"):
        torch.searchsorted(bd, v, side="middle")
    with pytest.raises(RuntimeError, match="side and right can't be set to opposites"):
        torch.searchsorted(bd, v, side="left", right=True)
    with pytest.raises(RuntimeError, match="sorter index out of range"):
        torch.searchsorted(bd, v, sorter=torch.tensor([0, 1, 2, 3, 5], device=DEV))
    with pytest.raises(RuntimeError, match="boundaries tensor must be 1 dimension"):
        torch.bucketize(v, bd.view(1, 5))
    with pytest.raises(RuntimeError, match="output tensor's dtype is wrong"):
        torch.searchsorted(bd, v, out=torch.empty(3, dtype=torch.int32, device=DEV))


# ---- linspace ----

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_linspace_matches_cpu(dtype):
    for start, end, steps in [(0, 1, 5), (-3.3, 7.9, 1001), (10, -2, 64), (0.1, 0.1, 9), (5, 6, 1), (0, 1, 0),
                              (-1e3, 1e3, 4097)]:
        got = torch.linspace(start, end, steps, dtype=dtype, device=DEV)
        ref = torch.linspace(start, end, steps, dtype=dtype)
        assert got.dtype == dtype and got.shape == ref.shape
        # Within the dtype's usual tolerance, not bit for bit: whether `start + step * i`
        # is one fused multiply-add depends on the kernel build's ISA (the
        # METALSIM_SHADER_VALIDATION=all build has no FMA), as CPU torch's own result
        # depends on the CPU's.
        torch.testing.assert_close(got.cpu(), ref)
        if steps:  # the ends are exact
            assert got[0].item() == ref[0].item() and got[-1].item() == ref[-1].item()
    out = torch.empty(3, 5, dtype=dtype, device=DEV).t()  # resized to 7
    torch.linspace(-1, 1, 7, out=out)
    torch.testing.assert_close(out.cpu(), torch.linspace(-1, 1, 7, dtype=dtype))
    assert_native()
    with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        torch.linspace(0, 1, -1, device=DEV)


# ---- histc ----

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_histc_matches_cpu(dtype):
    g = torch.Generator().manual_seed(22)
    x = (torch.randn(40, 25, generator=g) * 4).to(dtype)
    same(torch.histc(x.to(DEV), 10), torch.histc(x, 10))  # edges from the data's aminmax
    x[0, :3] = torch.tensor([float("nan"), 1.0, -1.0])  # NaN skipped; values on the edges
    # (CPU counts in the input dtype: a bfloat16 bin stops counting at 256, metalx's do not,
    # so bins here stay below that)
    for bins, lo, hi in [(7, -1, 1), (3, -3, 3), (100, -2.5, 6.1)]:
        same(torch.histc(x.to(DEV), bins, lo, hi), torch.histc(x, bins, lo, hi))
    same(torch.histc(x[1:, ::3].to(DEV).t(), 5), torch.histc(x[1:, ::3].t(), 5))
    same(torch.histc(torch.full((6,), 2.0, dtype=dtype, device=DEV), 3),
         torch.histc(torch.full((6,), 2.0, dtype=dtype), 3))
    same(torch.histc(torch.zeros(0, dtype=dtype, device=DEV), 4), torch.histc(torch.zeros(0, dtype=dtype), 4))
    out = torch.empty(2, dtype=dtype, device=DEV)
    torch.histc(x.to(DEV), 6, -2, 2, out=out)  # resized
    same(out, torch.histc(x, 6, -2, 2))
    assert_native()


def test_histc_errors():
    x = torch.randn(5, device=DEV)
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        torch.histc(x, -1)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(x, 3, 2, 1)
    with pytest.raises(RuntimeError, match="is not finite"):
        torch.histc(torch.tensor([1.0, float("inf")], device=DEV), 3)
    with pytest.raises(RuntimeError, match="should have the same dtype"):
        torch.histc(x, 3, out=torch.empty(3, dtype=torch.float16, device=DEV))
