"""Native sorting (backend/ops/sort_lines.cpp, kernels/sort.metal) and what is built on it
(sort, argsort, msort, topk, unique, unique_consecutive, randperm, multinomial) against
CPU torch: every dtype with kernels, any dim and strides, lines shorter and longer than
one threadgroup block (the merge passes), ties, NaN and -0, out= forms, CPU's errors, and
the CPU fallback for float64. Values are compared exactly; indices exactly too, since
the device sort is stable and CPU's order is the stable one for distinct values and for
ties in its stable sort."""

import math

import pytest
import torch

from device_checks import assert_native

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16, torch.int8,
          torch.uint8, torch.bool]


def sample(shape, dtype, seed=0, spread=10.0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * spread
    if dtype == torch.bool:
        return x > 0
    if dtype == torch.uint8:
        return x.abs().to(dtype)
    return x.to(dtype)


def assert_sort_matches(x, dim=-1, descending=False, **kw):
    got_v, got_i = torch.sort(x.to(DEV), dim=dim, descending=descending, stable=True, **kw)
    ref_v, ref_i = torch.sort(x, dim=dim, descending=descending, stable=True, **kw)
    assert got_v.dtype == ref_v.dtype and got_i.dtype == torch.int64
    assert torch.equal(got_v.cpu(), ref_v), (x.dtype, dim, descending)
    assert torch.equal(got_i.cpu(), ref_i), (x.dtype, dim, descending)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_matches_cpu_with_ties(dtype, descending):
    # spread 3: many equal values in the integer types; stable order decides indices
    x = sample((4, 5, 37), dtype, spread=3.0)
    for dim in (0, 1, 2, -1):
        assert_sort_matches(x, dim, descending)
    assert_native()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int16, torch.bfloat16])
@pytest.mark.parametrize("n", [2047, 2048, 2049, 5000, 20001])
def test_long_lines_merge_passes(dtype, n):
    x = sample((2, n), dtype, seed=n, spread=1000.0)
    assert_sort_matches(x, -1, False)
    assert_sort_matches(x, -1, True)
    assert_native()


def test_many_short_lines_and_edge_sizes():
    for shape, dim in [((3000, 3), 1), ((1, 1), 0), ((5, 1), 1), ((0, 4), 1), ((4, 0), 1), ((6, 129), 1),
                       ((7,), 0)]:
        assert_sort_matches(sample(shape, torch.float32), dim)
    x = torch.tensor(3.5)
    v, i = torch.sort(x.to(DEV))
    assert v.item() == 3.5 and i.item() == 0 and v.dim() == 0
    assert_native()


def test_nan_inf_and_signed_zero_order_as_cpu():
    x = torch.tensor([1.0, float("nan"), -0.0, float("-inf"), 0.0, float("inf"), -0.0, float("nan"), -2.0, 0.0])
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for descending in (False, True):
            got_v, got_i = torch.sort(x.to(dtype).to(DEV), descending=descending, stable=True)
            ref_v, ref_i = torch.sort(x.to(dtype), descending=descending, stable=True)
            assert torch.equal(got_i.cpu(), ref_i)
            # signs of zeros too: values are moved, not recomputed
            assert got_v.cpu().view(torch.int16 if dtype != torch.float32 else torch.int32).equal(
                ref_v.view(torch.int16 if dtype != torch.float32 else torch.int32))
    assert_native()


def test_integer_extremes():
    for dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        info = torch.iinfo(dtype)
        x = torch.tensor([0, info.max, info.min, 1, info.max, -1 if info.min < 0 else 2, info.min], dtype=dtype)
        assert_sort_matches(x, 0, False)
        assert_sort_matches(x, 0, True)
    assert_native()


def test_views_read_in_place_and_outputs_any_strides():
    x = sample((6, 8, 10), torch.float32, spread=2.0).to(torch.int32).to(torch.float32)
    d = x.to(DEV)
    views = [lambda t: t.transpose(0, 2), lambda t: t[:, 1::2, ::3], lambda t: t.permute(1, 2, 0),
             lambda t: t[:1].expand(4, 8, 10), lambda t: t[2]]
    for view in views:
        for dim in (0, -1):
            got_v, got_i = torch.sort(view(d), dim=dim, stable=True)
            ref_v, ref_i = torch.sort(view(x), dim=dim, stable=True)
            assert torch.equal(got_v.cpu(), ref_v) and torch.equal(got_i.cpu(), ref_i)
    # out= of other strides: written through them
    vals = torch.empty(10, 6, device=DEV).t()
    idx = torch.empty(10, 6, dtype=torch.long, device=DEV).t()
    torch.sort(d[:, 0, :], dim=1, stable=True, out=(vals, idx))
    ref_v, ref_i = torch.sort(x[:, 0, :], dim=1, stable=True)
    assert vals.stride() == (1, 6) and torch.equal(vals.cpu(), ref_v) and torch.equal(idx.cpu(), ref_i)
    assert_native()


def test_out_resized_and_aliasing_self():
    x = sample((3, 50), torch.float16)
    vals = torch.empty(0, dtype=torch.float16, device=DEV)
    idx = torch.empty(0, dtype=torch.long, device=DEV)
    torch.sort(x.to(DEV), 1, True, out=(vals, idx))
    ref_v, ref_i = torch.sort(x, dim=1, descending=True, stable=True)
    assert torch.equal(vals.cpu(), ref_v) and torch.equal(idx.cpu(), ref_i)
    d = x.to(DEV)
    torch.sort(d, 1, out=(d, idx))  # values written over their own input
    assert torch.equal(d.cpu(), torch.sort(x, 1).values)
    assert_native()


def test_argsort_msort_and_unstable_sort():
    x = sample((5, 300), torch.float32)
    d = x.to(DEV)
    assert torch.equal(torch.argsort(d, dim=1).cpu(), torch.argsort(x, dim=1))
    assert torch.equal(torch.argsort(d, dim=0, descending=True, stable=True).cpu(),
                       torch.argsort(x, dim=0, descending=True, stable=True))
    assert torch.equal(torch.msort(d).cpu(), torch.msort(x))
    v, i = d.sort(dim=1)  # stable=None: distinct values, so the same indices
    assert torch.equal(v.cpu(), x.sort(dim=1).values) and torch.equal(i.cpu(), x.sort(dim=1).indices)
    assert_native()


def test_sort_errors_match_cpu():
    for dev in ("cpu", DEV):
        with pytest.raises(IndexError, match="Dimension out of range"):
            torch.sort(torch.zeros(3, 4, device=dev), dim=2)
        with pytest.raises(RuntimeError, match="dtype long"):
            torch.sort(torch.zeros(3, device=dev), out=(torch.empty(3, device=dev), torch.empty(3, device=dev)))


def test_float64_and_complex_run_on_the_fallback():
    x = sample((3, 40), torch.float32).double()
    v, i = torch.sort(x.to(DEV), dim=1)
    assert torch.equal(v.cpu(), torch.sort(x, dim=1).values)
    assert "aten::sort.values_stable" in torch.metalx.fallback_stats()


def distinct_lines(shape, dim, dtype, seed=0):
    """Values distinct along `dim` (each line a shuffle of -n/2 .. n/2), exact in every
    dtype up to n = 200, so that CPU's topk indices are defined."""
    g = torch.Generator().manual_seed(seed)
    n = shape[dim]
    moved = list(shape)
    moved.append(moved.pop(dim))
    lines = torch.stack([torch.randperm(n, generator=g) - n // 2 for _ in range(math.prod(moved[:-1]))])
    x = lines.view(moved).movedim(-1, dim)
    return (x - x.min()).to(dtype) if dtype == torch.uint8 else x.to(dtype)


@pytest.mark.parametrize("dtype", [t for t in DTYPES if t != torch.bool])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_matches_cpu(dtype, largest):
    for dim in (-1, 0, 1):
        shape = [6, 4, 5]
        shape[dim] = 200
        x = distinct_lines(shape, dim, dtype, seed=dim + 3)
        n = x.size(dim)
        for k in sorted({0, 1, 2, n // 2, n}):
            got_v, got_i = torch.topk(x.to(DEV), k, dim=dim, largest=largest)
            ref_v, ref_i = torch.topk(x, k, dim=dim, largest=largest)
            assert torch.equal(got_v.cpu(), ref_v), (dim, k)
            assert torch.equal(got_i.cpu(), ref_i), (dim, k)
    assert_native()


def test_topk_nan_unsorted_out_and_errors():
    x = torch.tensor([[1.0, float("nan"), 3.0, -1.0, 2.0], [0.5, 0.25, float("inf"), float("-inf"), 0.0]])
    for largest in (True, False):
        got = torch.topk(x.to(DEV), 3, largest=largest)
        ref = torch.topk(x, 3, largest=largest)
        assert torch.allclose(got.values.cpu(), ref.values, equal_nan=True)
        assert torch.equal(got.indices.cpu(), ref.indices)
    # sorted=False: the same set of elements
    y = sample((4, 1000), torch.float32)
    got = torch.topk(y.to(DEV), 10, sorted=False)
    ref = torch.topk(y, 10, sorted=False)
    assert torch.equal(got.values.cpu().sort(dim=1).values, ref.values.sort(dim=1).values)
    vals = torch.empty(0, device=DEV)
    idx = torch.empty(0, dtype=torch.long, device=DEV)
    torch.topk(y.to(DEV), 7, dim=1, out=(vals, idx))
    assert torch.equal(vals.cpu(), torch.topk(y, 7).values) and torch.equal(idx.cpu(), torch.topk(y, 7).indices)
    long_line = sample((20000,), torch.float32, seed=9)
    assert torch.equal(torch.topk(long_line.to(DEV), 5).indices.cpu(), torch.topk(long_line, 5).indices)
    assert_native()
    for dev in ("cpu", DEV):
        with pytest.raises(RuntimeError, match="out of range"):
            torch.topk(torch.zeros(3, 4, device=dev), 5)
        with pytest.raises(RuntimeError, match="out of range"):
            torch.topk(torch.zeros(3, 4, device=dev), -1)
        with pytest.raises(RuntimeError, match="topk does not support bool"):
            torch.topk(torch.zeros(3, 4, dtype=torch.bool, device=dev), 2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_unique_matches_cpu(dtype):
    x = sample((7, 33), dtype, seed=5, spread=4.0)
    for kw in ({}, {"return_inverse": True}, {"return_counts": True}, {"return_inverse": True, "return_counts": True},
               {"sorted": False, "return_inverse": True, "return_counts": True}):
        got = torch.unique(x.to(DEV), **kw)
        ref = torch.unique(x, **kw)
        got = got if isinstance(got, tuple) else (got,)
        ref = ref if isinstance(ref, tuple) else (ref,)
        for g, r in zip(got, ref):
            assert g.dtype == r.dtype and torch.equal(g.cpu(), r), kw
    assert_native()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.float16])
def test_unique_consecutive_matches_cpu(dtype):
    x = sample((300,), dtype, seed=2, spread=1.5).view(30, 10).t()  # a strided view, with runs
    for kw in ({}, {"return_inverse": True, "return_counts": True}):
        got = torch.unique_consecutive(x.to(DEV), **kw)
        ref = torch.unique_consecutive(x, **kw)
        got = got if isinstance(got, tuple) else (got,)
        ref = ref if isinstance(ref, tuple) else (ref,)
        for g, r in zip(got, ref):
            assert torch.equal(g.cpu(), r), kw
    assert_native()


def test_unique_nan_empty_and_long_input():
    x = torch.tensor([2.0, float("nan"), 1.0, 2.0, float("nan"), -0.0, 0.0])
    got = torch.unique(x.to(DEV), return_inverse=True, return_counts=True)
    ref = torch.unique(x, return_inverse=True, return_counts=True)
    assert torch.allclose(got[0].cpu(), ref[0], equal_nan=True)
    assert torch.equal(got[1].cpu(), ref[1]) and torch.equal(got[2].cpu(), ref[2])
    e = torch.empty(0, 3)
    for g, r in zip(torch.unique(e.to(DEV), return_inverse=True, return_counts=True),
                    torch.unique(e, return_inverse=True, return_counts=True)):
        assert g.shape == r.shape and g.dtype == r.dtype
    big = torch.randint(0, 5000, (30000,), generator=torch.Generator().manual_seed(1))
    for g, r in zip(torch.unique(big.to(DEV), return_counts=True), torch.unique(big, return_counts=True)):
        assert torch.equal(g.cpu(), r)
    assert_native()


def is_permutation(p, n):
    return p.numel() == n and torch.equal(p.sort().values, torch.arange(n))


@pytest.mark.parametrize("n", [0, 1, 2, 7, 2048, 2049, 100000])
def test_randperm_is_a_permutation(n):
    p = torch.randperm(n, device=DEV)
    assert p.device.type == DEV and p.dtype == torch.int64
    assert is_permutation(p.cpu(), n)
    assert_native()


def test_randperm_same_seed_same_permutation_and_dtypes():
    torch.metalx.manual_seed(7)
    a = torch.randperm(5000, device=DEV).cpu()
    b = torch.randperm(5000, device=DEV).cpu()
    torch.metalx.manual_seed(7)
    assert torch.equal(torch.randperm(5000, device=DEV).cpu(), a)
    assert not torch.equal(a, b) and is_permutation(b, 5000)
    g = torch.Generator(DEV).manual_seed(3)
    c = torch.randperm(1000, generator=g, device=DEV).cpu()
    g.manual_seed(3)
    assert torch.equal(torch.randperm(1000, generator=g, device=DEV).cpu(), c)
    for dtype in (torch.int32, torch.int16, torch.float32, torch.float16, torch.uint8):
        p = torch.randperm(200, device=DEV, dtype=dtype)
        assert p.dtype == dtype and is_permutation(p.cpu().long(), 200)
    out = torch.empty(3, dtype=torch.long, device=DEV)
    torch.randperm(50, out=out)
    assert is_permutation(out.cpu(), 50)
    assert_native()
    # every position is equally likely to hold any value: the first element over many draws
    firsts = torch.stack([torch.randperm(10, device=DEV)[0] for _ in range(2000)]).cpu()
    counts = torch.bincount(firsts, minlength=10).double()
    chi2 = (((counts - 200) ** 2) / 200).sum().item()
    assert chi2 < 27.9  # chi-square, 9 degrees of freedom, p = 0.001


def test_randperm_errors_match_cpu():
    for dev in ("cpu", DEV):
        with pytest.raises(RuntimeError, match="negative"):
            torch.randperm(-1, device=dev)
        with pytest.raises(RuntimeError, match="2049"):
            torch.randperm(3000, device=dev, dtype=torch.float16)


def chi_square(counts, probs):
    expected = probs * counts.sum()
    keep = expected > 0
    return (((counts[keep] - expected[keep]) ** 2) / expected[keep]).sum().item(), int(keep.sum()) - 1


# 99.9th percentile of chi-square by degrees of freedom (Wilson-Hilferty approximation)
def chi_square_bound(dof):
    z = 3.09
    return dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_multinomial_with_replacement_distribution(dtype):
    probs = torch.tensor([[0.1, 0.0, 0.3, 0.6, 0.0, 1.0], [5.0, 1.0, 1.0, 1.0, 1.0, 1.0]], dtype=dtype)
    s = torch.multinomial(probs.to(DEV), 40000, replacement=True)
    assert s.shape == (2, 40000) and s.dtype == torch.int64
    assert_native()
    s = s.cpu()
    for row in range(2):
        p = probs[row].double() / probs[row].double().sum()
        counts = torch.bincount(s[row], minlength=6).double()
        assert counts[p == 0].sum() == 0  # zero-probability categories are never drawn
        stat, dof = chi_square(counts, p)
        assert stat < chi_square_bound(dof), (row, stat)


def test_multinomial_without_replacement():
    probs = torch.tensor([0.05, 0.0, 0.4, 0.25, 0.3])
    s = torch.multinomial(probs.to(DEV).expand(4000, 5), 4, replacement=False).cpu()
    assert_native()
    # distinct categories per row, never the one of probability 0
    assert torch.equal(s.sort(dim=1).values, torch.tensor([0, 2, 3, 4]).expand(4000, 4))
    # first draws follow the probabilities
    stat, dof = chi_square(torch.bincount(s[:, 0], minlength=5).double(), probs.double())
    assert stat < chi_square_bound(dof)
    one = torch.multinomial(probs.to(DEV), 1).cpu()
    assert one.shape == (1,) and one.item() in (0, 2, 3, 4)


def test_multinomial_same_seed_same_samples_and_out():
    probs = torch.rand(3, 50).to(DEV)
    torch.metalx.manual_seed(11)
    a = torch.multinomial(probs, 20, replacement=True)
    torch.metalx.manual_seed(11)
    assert torch.equal(torch.multinomial(probs, 20, replacement=True).cpu(), a.cpu())
    out = torch.empty(0, dtype=torch.long, device=DEV)
    torch.multinomial(probs[0], 30, replacement=True, out=out)
    assert out.shape == (30,) and int(out.max()) < 50
    assert_native()


def test_multinomial_errors_match_cpu():
    cases = [
        (lambda dev: torch.multinomial(torch.tensor([0.5, -0.1], device=dev), 2, True), "probability entry < 0"),
        (lambda dev: torch.multinomial(torch.tensor([0.5, float("inf")], device=dev), 2, True), "infinity or NaN"),
        (lambda dev: torch.multinomial(torch.zeros(3, device=dev), 2, True), "sum of probabilities <= 0"),
        (lambda dev: torch.multinomial(torch.ones(3, device=dev), 4, False), "without replacement"),
        (lambda dev: torch.multinomial(torch.tensor([1.0, -1.0, 2.0], device=dev), 2, False), "element < 0"),
        (lambda dev: torch.multinomial(torch.ones(3, device=dev), 0, True), "n_sample <= 0"),
        (lambda dev: torch.multinomial(torch.ones(2, 2, 2, device=dev), 1, True), "1 or 2 dim"),
        (lambda dev: torch.multinomial(torch.ones(3, dtype=torch.long, device=dev), 1, True), "floating"),
    ]
    for fn, msg in cases:
        for dev in ("cpu", DEV):
            with pytest.raises(RuntimeError, match=msg):
                fn(dev)


def test_upstream_tie_order_check_accepts_other_ties_and_rejects_wrong_indices():
    """metalx.testing.tie_order, which the upstream OpInfo comparison uses for sort and
    topk without stable=True: another order of equal values passes, anything else fails."""
    import unittest

    from torch.testing._internal.opinfo.core import SampleInput

    from metalx.testing.tie_order import tie_order_check

    tc = unittest.TestCase()
    tc.assertEqual = lambda a, b, **kw: torch.testing.assert_close(a, b, equal_nan=True, atol=0, rtol=0)
    x = torch.tensor([3, 1, 3, 2, 1])
    check = tie_order_check("sort", SampleInput(x, args=(0,)))
    ref = (torch.tensor([1, 1, 2, 3, 3]), torch.tensor([1, 4, 3, 0, 2]))
    check(tc, (ref[0], torch.tensor([4, 1, 3, 2, 0])), ref, "ties swapped", 0, 0)
    for bad in (torch.tensor([4, 1, 3, 2, 1]), torch.tensor([4, 1, 0, 2, 3])):
        with pytest.raises(AssertionError):
            check(tc, (ref[0], bad), ref, "wrong", 0, 0)
    assert tie_order_check("sort", SampleInput(x, args=(0,), kwargs={"stable": True})) is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int8, torch.uint8])
def test_topk_small_k_over_many_lines(dtype):
    # k <= 16 over >= 64 lines runs a thread per line (sort_small_k): same results
    x = distinct_lines([70, 3, 120], 2, dtype, seed=4)
    for dim, view in ((-1, x), (0, x.transpose(0, 2))):
        for k in (1, 5, 16):
            for largest in (True, False):
                got = torch.topk(view.to(DEV), k, dim=dim, largest=largest)
                ref = torch.topk(view, k, dim=dim, largest=largest)
                assert torch.equal(got.values.cpu(), ref.values) and torch.equal(got.indices.cpu(), ref.indices)
    # ties and NaN: the first k of the stable sort, as the full-sort path gives
    y = sample((100, 40), torch.float32, seed=8, spread=2.0).round()
    y[::7, 3] = float("nan")
    got = torch.topk(y.to(DEV), 6, largest=True)
    ref = torch.sort(y, descending=True, stable=True)
    assert torch.allclose(got.values.cpu(), ref.values[:, :6], equal_nan=True)
    assert torch.equal(got.indices.cpu(), ref.indices[:, :6])
    kv = torch.kthvalue(y.to(DEV), 1, dim=1)
    assert torch.equal(kv.indices.cpu(), torch.sort(y, stable=True).indices[:, 0])
    assert_native()
