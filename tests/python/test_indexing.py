"""Indexing along a dim on the device (backend/ops/indexing.cpp, kernels/indexing.metal):
index_select, embedding (forward and backward), gather, scatter / scatter_add /
scatter_reduce, index_add, index_copy, index_fill, against CPU torch over dtypes,
non-contiguous operands, empty tensors, autograd and bad indices (same error as CPU).
Native cases must not fall back."""

import pytest
import torch
import torch.nn.functional as F

from device_checks import assert_native

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"
FLOATS = [torch.float32, torch.float16, torch.bfloat16]
TYPES = FLOATS + [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]


def sample(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 3).to(dtype)
    return torch.randint(0 if dtype == torch.uint8 else -20, 20, shape, generator=g).to(dtype)


def dev(t):
    return t.to(DEV)


def assert_same(got, ref, **kw):
    assert got.device.type == DEV
    got = got.cpu()
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, ref.dtype, got.shape, ref.shape)
    if ref.dtype.is_floating_point:
        torch.testing.assert_close(got, ref, equal_nan=True, **kw)
    else:
        assert torch.equal(got, ref)


def same_error(fn, *cpu_args):
    """fn raises on metalx what it raises on CPU: argument errors at the op with CPU's
    message, index values out of range from the device-side check at the next
    synchronisation, with CPU's type and message inside one that names the check."""
    with pytest.raises(Exception) as cpu:
        fn(*cpu_args)
    with pytest.raises(type(cpu.value)) as got:
        fn(*[dev(a) if isinstance(a, torch.Tensor) else a for a in cpu_args])
        torch.metalx.synchronize()
    got_msg, cpu_msg = str(got.value).split("\n")[0], str(cpu.value).split("\n")[0]
    assert got_msg == cpu_msg or ("device-side index check failed" in got_msg and cpu_msg in got_msg), (got_msg, cpu_msg)
    torch.metalx.synchronize()  # reported once


# ---- index_select / embedding ----

@pytest.mark.parametrize("dtype", TYPES + [torch.float64])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(dtype, dim):
    x = sample((5, 7, 3), dtype)
    idx = torch.tensor([4, 0, 2, 2, 1])[: x.shape[dim]] if dim == 0 else torch.tensor([2, 0, 2, 1])
    for i in (idx, idx.int()):
        assert_same(torch.index_select(dev(x), dim, dev(i)), torch.index_select(x, dim, i))
    # non-contiguous self and index, out=
    xt = dev(x).transpose(0, 2)
    istride = dev(torch.tensor([0, 9, 1, 9, 2]))[::2]
    out = torch.empty(0, device=DEV, dtype=dtype)
    torch.index_select(xt, 1, istride, out=out)
    assert_same(out, torch.index_select(x.transpose(0, 2), 1, torch.tensor([0, 1, 2])))
    if dtype != torch.float64:
        assert_native()


def test_index_select_scalars_and_empty():
    assert_same(dev(torch.tensor(3.5)).index_select(0, dev(torch.tensor([0]))), torch.tensor(3.5).index_select(0, torch.tensor([0])))
    x = sample((4, 3), torch.float32)
    assert_same(dev(x).index_select(0, dev(torch.tensor([], dtype=torch.long))), x.index_select(0, torch.tensor([], dtype=torch.long)))
    assert_same(dev(torch.empty(0, 3)).index_select(1, dev(torch.tensor([2]))), torch.empty(0, 3).index_select(1, torch.tensor([2])))
    assert_native()


def test_index_select_errors():
    x = sample((3, 4), torch.float32)
    same_error(lambda a, i: a.index_select(0, i), x, torch.tensor([3]))
    same_error(lambda a, i: a.index_select(0, i), x, torch.tensor([-1]))
    same_error(lambda a, i: a.index_select(0, i), x, torch.tensor([1.0]))
    same_error(lambda a, i: a.index_select(0, i), x, torch.tensor([[1]]))
    # the process stays usable after an index error
    assert_same(dev(x).index_select(0, dev(torch.tensor([1]))), x.index_select(0, torch.tensor([1])))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("padding_idx,scale", [(None, False), (2, False), (None, True), (0, True)])
def test_embedding_forward_backward(dtype, padding_idx, scale):
    w = sample((10, 6), torch.float32).to(dtype)
    idx = torch.tensor([[1, 2, 2, 9], [0, 2, 5, 1]])
    ref_w = w.clone().requires_grad_()
    got_w = dev(w).requires_grad_()
    ref = F.embedding(idx, ref_w, padding_idx=padding_idx, scale_grad_by_freq=scale)
    got = F.embedding(dev(idx), got_w, padding_idx=padding_idx, scale_grad_by_freq=scale)
    go = sample(ref.shape, torch.float32, seed=1).to(dtype)
    ref.backward(go)
    got.backward(dev(go))
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    assert_same(got.detach(), ref.detach())
    assert_same(got_w.grad, ref_w.grad, **tol)
    assert_native()


def test_embedding_backward_is_deterministic_and_checks_indices():
    w = dev(torch.zeros(50, 8)).requires_grad_()
    idx = dev(torch.randint(0, 50, (4000,), generator=torch.Generator().manual_seed(0)))
    go = dev(torch.randn(4000, 8, generator=torch.Generator().manual_seed(1)))
    grads = []
    for _ in range(2):
        w.grad = None
        F.embedding(idx, w).backward(go)
        grads.append(w.grad.cpu())
    assert torch.equal(grads[0], grads[1])
    same_error(lambda i, ww: F.embedding(i, ww), torch.tensor([10]), torch.randn(10, 3))


# ---- gather ----

@pytest.mark.parametrize("dtype", TYPES + [torch.float64])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(dtype, dim):
    x = sample((4, 5, 6), dtype)
    g = torch.Generator().manual_seed(2)
    size = list(x.shape)
    size[dim] = 7
    size[(dim + 1) % 3] -= 1  # index smaller than self off dim
    idx = torch.randint(0, x.shape[dim], size, generator=g)
    assert_same(torch.gather(dev(x), dim, dev(idx)), torch.gather(x, dim, idx))
    # non-contiguous self and index
    xt = dev(x.transpose(0, 1).contiguous()).transpose(0, 1)
    it = dev(idx.transpose(0, 2).contiguous()).transpose(0, 2)
    assert_same(torch.gather(xt, dim, it), torch.gather(x, dim, idx))
    if dtype != torch.float64:
        assert_native()


def test_gather_autograd_empty_and_errors():
    x = sample((3, 4), torch.float32)
    idx = torch.tensor([[0, 1, 1, 3], [2, 2, 0, 0]])
    xr, xd = x.clone().requires_grad_(), dev(x).requires_grad_()
    torch.gather(xr, 1, idx).sum().backward()
    torch.gather(xd, 1, dev(idx)).sum().backward()
    assert_same(xd.grad, xr.grad)
    assert_same(torch.gather(dev(x), 0, dev(torch.empty(0, 4, dtype=torch.long))), torch.gather(x, 0, torch.empty(0, 4, dtype=torch.long)))
    assert_native()
    same_error(lambda a, i: torch.gather(a, 0, i), x, torch.tensor([[3]]))
    same_error(lambda a, i: torch.gather(a, 0, i), x, torch.tensor([[-1]]))
    same_error(lambda a, i: torch.gather(a, 0, i), x, torch.tensor([[1.0]]))
    same_error(lambda a, i: torch.gather(a, 0, i), x, torch.tensor([1]))


# ---- scatter family ----

def scatter_case(dtype, dim, seed=3):
    g = torch.Generator().manual_seed(seed)
    x = sample((5, 6), dtype, seed=seed)
    src = sample((7, 8), dtype, seed=seed + 1)
    size = [4, 5]
    size[dim] = 7
    idx = torch.randint(0, x.shape[dim], size, generator=g)
    return x, idx, src


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_and_scatter_add(dtype, dim):
    x, idx, src = scatter_case(dtype, dim)
    # scatter with duplicate indices is order-dependent: compare with unique targets
    uniq = torch.argsort(torch.rand(x.shape[dim], generator=torch.Generator().manual_seed(4)))[: idx.shape[dim]]
    uidx = uniq.view(-1, 1).expand(-1, idx.shape[1]) if dim == 0 else uniq[: idx.shape[1]].view(1, -1).expand(idx.shape[0], -1)
    if uidx.shape[dim] <= x.shape[dim]:
        assert_same(dev(x).scatter(dim, dev(uidx), dev(src)), x.scatter(dim, uidx, src))
    assert_same(dev(x).scatter(dim, dev(idx), 3), x.scatter(dim, idx, 3))
    if dtype != torch.bool:
        # half/bfloat16 sums: CPU may add in another order (1 ulp)
        tol = dict(rtol=1e-2, atol=1e-2) if dtype in (torch.float16, torch.bfloat16) else {}
        assert_same(dev(x).scatter_add(dim, dev(idx), dev(src)), x.scatter_add(dim, idx, src), **tol)
        y = dev(x).t().contiguous().t()  # in place into a non-contiguous self
        y.scatter_add_(dim, dev(idx), dev(src))
        assert_same(y, x.scatter_add(dim, idx, src), **tol)
    assert_native()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(dtype, reduce, include_self):
    x, idx, src = scatter_case(dtype, 0)
    if reduce == "prod" and dtype.is_floating_point:
        src = (src.float().sign() * 0.5 + src.float() / 8).to(dtype)  # keep products small
    ref = x.scatter_reduce(0, idx, src, reduce, include_self=include_self)
    got = dev(x).scatter_reduce(0, dev(idx), dev(src), reduce, include_self=include_self)
    assert_same(got, ref, rtol=1e-2, atol=1e-2)
    assert_native()


def test_scatter_reduce_nan_and_legacy_reduce_and_errors():
    x = torch.zeros(3)
    src = torch.tensor([1.0, float("nan"), 2.0, 5.0])
    idx = torch.tensor([0, 0, 1, 1])
    assert_same(dev(x).scatter_reduce(0, dev(idx), dev(src), "amax"), x.scatter_reduce(0, idx, src, "amax"))
    assert_same(dev(x).scatter(0, dev(idx), dev(src), reduce="add"), x.scatter(0, idx, src, reduce="add"))
    assert_native()
    same_error(lambda a, i, s: a.scatter_add(0, i, s), x, torch.tensor([3]), src)
    same_error(lambda a, i, s: a.scatter(0, i, s), x, torch.tensor([-1]), src)
    same_error(lambda a, i, s: a.scatter_reduce(0, i, s, "median"), x, idx, src)
    same_error(lambda a, i, s: a.scatter(0, i, s), x, idx.float(), src)


def test_scatter_add_autograd():
    x, idx, src = scatter_case(torch.float32, 1)
    src = src[:4, :7]
    sr, sd = src.clone().requires_grad_(), dev(src).requires_grad_()
    go = sample((5, 6), torch.float32, seed=9)
    x.scatter_add(1, idx, sr).backward(go)
    dev(x).scatter_add(1, dev(idx), sd).backward(dev(go))
    assert_same(sd.grad, sr.grad)


# ---- index_add / index_copy / index_fill ----

@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32, torch.uint8])
@pytest.mark.parametrize("dim", [0, 1])
def test_index_add(dtype, dim):
    x = sample((5, 6), dtype)
    idx = torch.tensor([4, 0, 4, 1])
    shape = [5, 6]
    shape[dim] = 4
    src = sample(shape, dtype, seed=5)
    assert_same(dev(x).index_add(dim, dev(idx), dev(src)), x.index_add(dim, idx, src), rtol=1e-2, atol=1e-2)
    assert_same(dev(x).index_add(dim, dev(idx.int()), dev(src), alpha=2), x.index_add(dim, idx.int(), src, alpha=2),
                rtol=1e-2, atol=1e-2)
    y = dev(x).t().contiguous().t()
    y.index_add_(dim, dev(idx), dev(src))
    assert_same(y, x.index_add(dim, idx, src), rtol=1e-2, atol=1e-2)
    assert_native()
    same_error(lambda a, i, s: a.index_add(dim, i, s), x, torch.tensor([6, 0, 0, 0]), src)
    same_error(lambda a, i, s: a.index_add(dim, i, s), x, torch.tensor([-1, 0, 0, 0]), src)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool])
def test_index_copy_and_index_fill(dtype):
    x = sample((5, 6), dtype)
    idx = torch.tensor([3, 0, 4])
    src = sample((5, 3), dtype, seed=6)
    assert_same(dev(x).index_copy(1, dev(idx), dev(src)), x.index_copy(1, idx, src))
    y = dev(x)
    y.index_copy_(1, dev(idx), dev(src))
    assert_same(y, x.index_copy(1, idx, src))
    fill = True if dtype == torch.bool else 7
    assert_same(dev(x).index_fill(0, dev(torch.tensor([-1, 2])), fill), x.index_fill(0, torch.tensor([-1, 2]), fill))
    assert_same(dev(x).index_fill(1, dev(idx), dev(torch.tensor(fill))), x.index_fill(1, idx, torch.tensor(fill)))
    assert_native()
    same_error(lambda a, i, s: a.index_copy(1, i, s), x, torch.tensor([6, 0, 0]), src)
    same_error(lambda a, i: a.index_fill(1, i, 1), x, torch.tensor([6]))


# ---- advanced indexing: index.Tensor, index_put_ ----

def long_t(*v):
    return torch.tensor(v, dtype=torch.long)


@pytest.mark.parametrize("dtype", TYPES + [torch.float64])
def test_advanced_index(dtype):
    x = sample((4, 5, 6), dtype)
    cases = [
        lambda t, d: t[d(long_t(3, 0, -1, 3))],
        lambda t, d: t[:, d(long_t(4, 1))],
        lambda t, d: t[..., d(long_t(5, 0, 2))],
        lambda t, d: t[d(long_t(0, 3)), d(long_t(1, 4))],  # paired
        lambda t, d: t[d(long_t(0, 3)).view(2, 1), :, d(long_t(1, 4, 5))],  # broadcast, not adjacent
        lambda t, d: t[:, d(long_t(2, 2).int())],
        lambda t, d: t.transpose(0, 2)[d(long_t(1, 5))],  # non-contiguous self
        lambda t, d: t[d(torch.empty(0, dtype=torch.long))],
    ]
    for case in cases:
        assert_same(case(dev(x), dev), case(x, lambda i: i))
    assert_native()


def test_advanced_index_with_cpu_indices_and_masks():
    x = sample((4, 5), torch.float32)
    assert_same(dev(x)[long_t(1, 2)], x[long_t(1, 2)])  # CPU indices, as CUDA accepts
    mask = x > 0
    assert_same(dev(x)[dev(mask)], x[mask])  # masks go through nonzero


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32, torch.bool])
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(dtype, accumulate):
    if dtype == torch.bool and accumulate:
        pytest.skip("CPU sums bools with or")
    x = sample((4, 5, 6), dtype)
    vals = sample((3, 6), dtype, seed=2)
    i0, i1 = long_t(3, 0, 3), long_t(1, -1, 1)  # a repeated pair: accumulate sums it
    ref = x.clone().index_put_((i0, i1), vals, accumulate=accumulate)
    got = dev(x).index_put_((dev(i0), dev(i1)), dev(vals), accumulate=accumulate)
    assert_same(got, ref, rtol=1e-2, atol=1e-2)
    # scalar value broadcast, one index on a middle dim, non-contiguous self
    y = dev(x).transpose(0, 2)
    y[:, dev(long_t(4, 0))] = dev(torch.tensor(True if dtype == torch.bool else 2).to(dtype))
    ref2 = x.transpose(0, 2).clone()
    ref2[:, long_t(4, 0)] = torch.tensor(True if dtype == torch.bool else 2).to(dtype)
    assert_same(y, ref2)
    assert_native()


def test_index_put_repeated_indices_accumulate_in_order():
    x = torch.zeros(3)
    idx = torch.tensor([0, 2, 0, 0, 2])
    v = torch.tensor([1e8, 1.0, 1.0, -1e8, 3.0])
    ref = x.clone().index_put_((idx,), v, accumulate=True)
    got = dev(x).index_put_((dev(idx),), dev(v), accumulate=True)
    assert torch.equal(got.cpu(), ref)  # same order of additions as CPU
    assert_native()


def test_advanced_index_autograd():
    x = sample((5, 4), torch.float32)
    idx = long_t(1, 3, 1, 0)
    xr, xd = x.clone().requires_grad_(), dev(x).requires_grad_()
    go = sample((4, 4), torch.float32, seed=3)
    xr[idx].backward(go)
    xd[dev(idx)].backward(dev(go))
    assert_same(xd.grad, xr.grad)
    assert_native()


def test_advanced_index_errors():
    x = sample((4, 5), torch.float32)
    same_error(lambda t, i: t[i], x, long_t(4))
    same_error(lambda t, i: t[i], x, long_t(-5))
    same_error(lambda t, i: t[:, i], x, long_t(5))
    same_error(lambda t, i: t[i, i, i], x, long_t(0))
    same_error(lambda t, i: t[i], x, torch.tensor([0.0]))
    same_error(lambda t, i, j: t[i, j], x, long_t(0, 1), long_t(0, 1, 2))
    same_error(lambda t, i, v: t.index_put_((i,), v), x, long_t(0, 1), torch.ones(2, 5, dtype=torch.float64))
    same_error(lambda t, i, v: t.index_put_((i,), v), x, long_t(0, 1), torch.ones(3, 5))
    same_error(lambda t, i, v: t.index_put_((i,), v, accumulate=True), x, long_t(9), torch.ones(5))
    assert_same(dev(x)[dev(long_t(1))], x[long_t(1)])  # still usable
