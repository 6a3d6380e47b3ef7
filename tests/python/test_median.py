"""median and nanmedian on metalx (backend/ops/median.cpp) against CPU torch: whole
tensor and along a dim, NaN rules, every sortable dtype, keepdim, views, out=, errors
and the CPU fallback for float64."""

import pytest
import torch

from device_checks import assert_native

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16, torch.int8,
          torch.uint8]


def sample(shape, dtype, seed, nan_rate=0.0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        x = torch.randn(shape, generator=g).to(dtype)
        if nan_rate:
            x[torch.rand(shape, generator=g) < nan_rate] = float("nan")
        return x
    return torch.randint(0, 100, shape, generator=g).to(dtype)


def assert_median_pair(got, ref, x, dim, keepdim):
    """Values equal CPU's; indices point at those values (CPU's choice among equal values
    is nondeterministic), and equal CPU's wherever the line has no ties."""
    values, indices = got
    assert values.dtype == ref.values.dtype and indices.dtype == torch.int64
    assert values.shape == ref.values.shape and indices.shape == ref.indices.shape
    torch.testing.assert_close(values.cpu(), ref.values, equal_nan=True, rtol=0, atol=0)
    idx = indices.cpu() if keepdim else indices.cpu().unsqueeze(dim)
    picked = x.gather(dim, idx)
    torch.testing.assert_close(picked if keepdim else picked.squeeze(dim), ref.values, equal_nan=True, rtol=0,
                               atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_median_along_dim_matches_cpu(dtype, dim, keepdim):
    x = sample((7, 10, 6), dtype, seed=1)
    for fn in (torch.median, torch.nanmedian):
        got = fn(x.to(DEV), dim, keepdim=keepdim)
        assert_median_pair(got, fn(x, dim, keepdim=keepdim), x, dim, keepdim)
    assert_native()


@pytest.mark.parametrize("dtype", DTYPES)
def test_whole_tensor_median_matches_cpu(dtype):
    for shape in [(1,), (2,), (9,), (4, 5, 6), ()]:
        x = sample(shape, dtype, seed=2)
        for fn in (torch.median, torch.nanmedian):
            got = fn(x.to(DEV))
            assert got.shape == () and got.dtype == dtype
            assert torch.equal(got.cpu(), fn(x)), (fn, shape)
    assert_native()


def test_nan_rules_match_cpu():
    nan = float("nan")
    x = torch.tensor([[3.0, nan, 1.0, nan, 2.0], [nan] * 5, [1.0, 4.0, 0.0, 2.0, 5.0], [nan, 2.0, 8.0, 1.0, nan]])
    d = x.to(DEV)
    med = torch.median(d, 1)
    ref = torch.median(x, 1)
    torch.testing.assert_close(med.values.cpu(), ref.values, equal_nan=True)
    # median in a line with NaN: that line's first NaN, as CPU returns it
    assert med.indices.cpu().tolist() == [1, 0, 3, 0] == ref.indices.tolist()
    nmed = torch.nanmedian(d, 1)
    nref = torch.nanmedian(x, 1)
    torch.testing.assert_close(nmed.values.cpu(), nref.values, equal_nan=True)
    rows_with_values = [0, 2, 3]  # the all-NaN row's index is CPU's nth_element's pick
    assert nmed.indices.cpu()[rows_with_values].tolist() == nref.indices[rows_with_values].tolist()
    assert torch.isnan(torch.median(d).cpu()) and torch.isnan(torch.median(x))
    assert torch.equal(torch.nanmedian(d).cpu(), torch.nanmedian(x))
    many = sample((300, 33), torch.float32, seed=3, nan_rate=0.3)
    for fn in (torch.median, torch.nanmedian):
        assert_median_pair(fn(many.to(DEV), 1), fn(many, 1), many, 1, False)
    assert_native()


def test_views_out_and_autograd():
    x = sample((8, 12), torch.float32, seed=4)
    view = x.to(DEV).t()[2:, ::2]
    ref_view = x.t()[2:, ::2]
    assert_median_pair(torch.median(view, 0), torch.median(ref_view, 0), ref_view, 0, False)
    values = torch.empty(0, device=DEV)
    indices = torch.empty(0, device=DEV, dtype=torch.int64)
    torch.median(x.to(DEV), 1, out=(values, indices))
    assert_median_pair((values, indices), torch.median(x, 1), x, 1, False)
    leaf = x.to(DEV).requires_grad_()
    torch.median(leaf, 1).values.sum().backward()
    ref = x.clone().requires_grad_()
    torch.median(ref, 1).values.sum().backward()
    torch.testing.assert_close(leaf.grad.cpu(), ref.grad)
    assert_native()


def test_errors_match_cpu():
    empty = torch.empty(0, 3)
    for fn in (torch.median, torch.nanmedian):
        with pytest.raises(IndexError) as cpu:
            fn(empty, 0)
        with pytest.raises(IndexError) as got:
            fn(empty.to(DEV), 0)
        assert str(got.value) == str(cpu.value)
    x = torch.randn(3, 4)
    bad = (torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.int64))
    with pytest.raises(RuntimeError) as cpu:
        torch.median(x, 1, out=bad)
    with pytest.raises(RuntimeError) as got:
        torch.median(x.to(DEV), 1, out=tuple(t.to(DEV) for t in bad))
    # The same check and wording; only the tensor type names differ by device.
    assert str(got.value).split(" but type")[0] == str(cpu.value).split(" but type")[0]


def test_float64_and_empty_run_cpus_kernel():
    x = sample((5, 6), torch.float64, seed=5)
    assert torch.equal(torch.median(x.to(DEV), 1).values.cpu(), torch.median(x, 1).values)
    assert torch.isnan(torch.median(torch.empty(0, device=DEV)).cpu())
    stats = torch.metalx.fallback_stats()
    assert stats == {"aten::median.dim_values": 1, "aten::median": 1}, stats
