"""torch.mode (backend/ops/mode.cpp) and torch.unique / unique_consecutive along a dim
(backend/ops/unique_dim.cpp) on metalx against CPU torch: every sortable dtype, ties,
NaN, keepdim, views, the outputs' shapes, errors, and the CPU fallback for float64."""

import pytest
import torch

from device_checks import assert_native, assert_same_error

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16, torch.int8,
          torch.uint8, torch.bool]


def few_values(shape, dtype, seed, high=4):
    """Values from a small range, so lines and slices repeat."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, high, shape, generator=g)
    return x.bool() if dtype == torch.bool else (x - 1).to(dtype) if dtype.is_signed else x.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_mode_on_short_lines_matches_cpu_values_and_indices(dtype, dim, keepdim):
    # Lines of at most 16: CPU's sort keeps equal values in input order there, so its
    # index (the last copy of the mode) is determined and must match exactly.
    x = few_values((6, 9, 5), dtype, seed=1)
    got = torch.mode(x.to(DEV), dim, keepdim)
    ref = torch.mode(x, dim, keepdim)
    assert torch.equal(got.values.cpu(), ref.values) and torch.equal(got.indices.cpu(), ref.indices)
    assert_native()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8])
def test_mode_on_long_lines_returns_the_smallest_most_frequent_value_and_its_last_position(dtype):
    x = few_values((5, 300), dtype, seed=2, high=6)
    values, indices = torch.mode(x.to(DEV), 1)
    ref = torch.mode(x, 1)
    assert torch.equal(values.cpu(), ref.values)
    # CPU's index is whichever copy its unstable sort left last; metalx's is the last copy.
    for line, v, i in zip(x, values.cpu(), indices.cpu()):
        assert line[i] == v and not (line[i + 1:] == v).any()
    assert_native()


def test_mode_of_views_nan_and_zero_dim_inputs():
    x = few_values((8, 12), torch.float32, seed=3)
    x[2, :5] = float("nan")  # each NaN a run of one: never the mode of a line with repeats
    x[5] = float("nan")  # all NaN: every run has length one, the first (a NaN) wins
    view = x.to(DEV).t()[:, ::2]
    got, ref = torch.mode(view, 0), torch.mode(x.t()[:, ::2], 0)
    torch.testing.assert_close(got.values.cpu(), ref.values, equal_nan=True, rtol=0, atol=0)
    assert torch.equal(got.indices.cpu(), ref.indices)
    scalar = torch.mode(torch.tensor(2.5, device=DEV))
    assert scalar.values.item() == 2.5 and scalar.indices.item() == 0 and scalar.indices.dim() == 0
    out_values, out_indices = torch.empty(0, device=DEV), torch.empty(0, dtype=torch.long, device=DEV)
    torch.mode(x.to(DEV), 1, out=(out_values, out_indices))
    torch.testing.assert_close(out_values.cpu(), torch.mode(x, 1).values, equal_nan=True, rtol=0, atol=0)
    assert_native()


@pytest.mark.parametrize("make", [lambda d: torch.mode(torch.empty(0, 3, device=d), 0),
                                  lambda d: torch.mode(torch.ones(2, 3, device=d), 2)])
def test_mode_errors_are_cpus(make):
    assert_same_error(make)


def test_mode_of_float64_runs_on_the_cpu_fallback():
    x = few_values((4, 7), torch.float64, seed=4)
    got = torch.mode(x.to(DEV), 1)
    assert torch.equal(got.values.cpu(), torch.mode(x, 1).values)
    assert torch.metalx.fallback_stats().get("aten::mode", 0) == 1


def assert_unique_matches(got, ref):
    for g, r in zip(got, ref):
        assert g.device.type == DEV and g.dtype == r.dtype and g.shape == r.shape
        torch.testing.assert_close(g.cpu(), r, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unique_along_dim_matches_cpu(dtype, dim):
    # Slices of up to 7 x 6 elements: several rounds of pairing columns (odd ones too).
    x = few_values((9, 7, 6), dtype, seed=5, high=2)
    x = torch.cat([x, x[:4]], 0)  # repeated slices along every dim
    for flags in [(False, False), (True, True), (True, False)]:
        got = torch.unique(x.to(DEV), dim=dim, return_inverse=flags[0], return_counts=flags[1])
        ref = torch.unique(x, dim=dim, return_inverse=flags[0], return_counts=flags[1])
        assert_unique_matches(got if isinstance(got, tuple) else (got,), ref if isinstance(ref, tuple) else (ref,))
    assert_native()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
@pytest.mark.parametrize("dim", [0, 1])
def test_unique_consecutive_along_dim_matches_cpu(dtype, dim):
    x = few_values((12, 10), dtype, seed=6, high=2)
    x = x.repeat_interleave(2, dim=dim)  # consecutive repeats
    got = torch.unique_consecutive(x.to(DEV), dim=dim, return_inverse=True, return_counts=True)
    assert_unique_matches(got, torch.unique_consecutive(x, dim=dim, return_inverse=True, return_counts=True))
    assert_native()


def test_unique_along_dim_of_views_and_rows_with_nan():
    x = few_values((10, 16), torch.float32, seed=7, high=2)
    view = x.to(DEV)[::2, 1::3]
    assert_unique_matches(torch.unique(view, dim=0, return_inverse=True, return_counts=True),
                          torch.unique(x[::2, 1::3], dim=0, return_inverse=True, return_counts=True))
    # A row holding NaN equals no row, itself included: each copy is its own group.
    rows = torch.tensor([[1.0, float("nan")], [0.0, 2.0], [1.0, float("nan")], [0.0, 2.0]])
    values, inverse, counts = torch.unique(rows.to(DEV), dim=0, return_inverse=True, return_counts=True)
    assert counts.cpu().tolist() == [2, 1, 1] and values.shape == (3, 2)
    assert torch.equal(values.cpu()[0], torch.tensor([0.0, 2.0])) and inverse.cpu()[1] == inverse.cpu()[3] == 0
    assert_native()


@pytest.mark.parametrize("make", [lambda d: torch.unique(torch.empty(0, 3, device=d), dim=1),
                                  lambda d: torch.unique(torch.ones(2, 3, device=d), dim=2),
                                  lambda d: torch.unique_consecutive(torch.ones(2, 3, device=d), dim=-3)])
def test_unique_along_dim_errors_are_cpus(make):
    assert_same_error(make)


def test_unique_along_an_empty_dim_matches_cpu():
    x = torch.empty(0, 3)
    assert_unique_matches(torch.unique(x.to(DEV), dim=0, return_inverse=True, return_counts=True),
                          torch.unique(x, dim=0, return_inverse=True, return_counts=True))


def test_upstream_tie_order_check_accepts_another_copy_of_the_mode_only():
    """metalx.testing.tie_order for mode (the upstream comparison uses it): an index of
    another copy of the mode passes, an index of a different value fails."""
    import unittest

    from torch.testing._internal.opinfo.core import SampleInput

    from metalx.testing.tie_order import tie_order_check

    tc = unittest.TestCase()
    tc.assertEqual = lambda a, b, **kw: torch.testing.assert_close(a, b, atol=0, rtol=0)
    x = torch.tensor([[3, 1, 3, 2, 1, 1], [5, 5, 4, 4, 0, 4]])
    ref = torch.mode(x, 1)
    for keepdim in (False, True):
        check = tie_order_check("mode", SampleInput(x, args=(1, keepdim)))
        shape = (2, 1) if keepdim else (2,)
        values = ref.values.view(shape)
        check(tc, (values, torch.tensor([1, 3]).view(shape)), (values, ref.indices.view(shape)), "other copy", 0, 0)
        with pytest.raises(AssertionError):
            check(tc, (values, torch.tensor([0, 3]).view(shape)), (values, ref.indices.view(shape)), "wrong", 0, 0)
