"""Sparse COO tensors on metalx: torch's SparseTensorImpl over metalx indices and
values; structure ops run natively, compute ops on the CPU fallback. CPU is the
reference throughout."""

import pytest
import torch


def _dense(seed=0, shape=(4, 5)):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    x[x.abs() < 0.8] = 0  # some zeros, some non-zeros
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool, torch.complex64])
def test_to_sparse_on_metalx_matches_cpu(dtype):
    x = _dense().to(dtype)
    s = x.to("metalx").to_sparse()
    expected = x.to_sparse()
    assert s.is_sparse and s.is_metalx and s.layout == torch.sparse_coo
    # The members are metalx tensors too (not CPU tensors behind a metalx label).
    assert s._indices().is_metalx and s._values().is_metalx
    assert s._nnz() == expected._nnz() and s.is_coalesced() == expected.is_coalesced()
    assert torch.equal(s._indices().cpu(), expected._indices())
    assert torch.equal(s._values().cpu(), expected._values())
    assert torch.equal(s.to_dense().cpu(), x)


def test_to_sparse_with_sparse_dim_keeps_dense_dims():
    x = _dense(1, (3, 4, 2))
    s = x.to("metalx").to_sparse(2)
    assert (s.sparse_dim(), s.dense_dim()) == (2, 1)
    assert torch.equal(s.to_dense().cpu(), x)


def test_cpu_sparse_moves_to_metalx_and_back():
    cpu = torch.sparse_coo_tensor(torch.tensor([[0, 2, 0], [1, 0, 1]]), torch.tensor([1.0, 2.0, 3.0]), (3, 2))
    dev = cpu.to("metalx")  # uncoalesced: a duplicate index
    assert dev.is_metalx and not dev.is_coalesced()
    back = dev.cpu()
    assert back.device.type == "cpu" and back.is_sparse
    assert torch.equal(back.to_dense(), cpu.to_dense())
    coalesced = dev.coalesce()  # a compute op: CPU fallback
    assert coalesced.is_metalx and coalesced.is_coalesced()
    assert torch.equal(coalesced._values().cpu(), cpu.coalesce()._values())


def test_sparse_compute_ops_match_cpu():
    a, b = _dense(2), _dense(3)
    sa, sb = a.to_sparse(), b.to_sparse()
    da, db = sa.to("metalx"), sb.to("metalx")
    torch.testing.assert_close((da + db).to_dense().cpu(), (sa + sb).to_dense())
    torch.testing.assert_close((da * 2.5).to_dense().cpu(), (sa * 2.5).to_dense())
    m = torch.randn(5, 3)
    torch.testing.assert_close(torch.sparse.mm(da, m.to("metalx")).cpu(), torch.sparse.mm(sa, m))
    torch.testing.assert_close(torch.sparse.sum(da).cpu(), torch.sparse.sum(sa))


def test_in_place_sparse_op_updates_the_metalx_tensor():
    # The CPU kernel gives the sparse argument new members (add_ of another pattern):
    # the metalx tensor must take them, and stay the same Python object.
    a, b = _dense(4), _dense(5)
    dev = a.to_sparse().to("metalx")
    out = dev.add_(b.to_sparse().to("metalx"))
    assert out is dev and dev.is_metalx and dev._values().is_metalx
    torch.testing.assert_close(dev.to_dense().cpu(), a + b)
    dev.zero_()
    assert dev._nnz() == 0 and torch.equal(dev.to_dense().cpu(), torch.zeros_like(a))


def test_values_are_a_view_of_the_metalx_member():
    dev = _dense(6).to("metalx").to_sparse()
    dev._values().mul_(0)  # writes through to the sparse tensor
    assert torch.equal(dev.to_dense().cpu(), torch.zeros(4, 5))


def test_sparse_ops_are_reported_as_fallbacks():
    torch.metalx.reset_fallback_stats()
    _dense(7).to("metalx").to_sparse().to_dense()
    stats = torch.metalx.fallback_stats()
    assert "aten::_to_sparse" in stats and "aten::_to_dense" in stats
    # Structure ops (members, sizes) run natively, not through the fallback.
    assert "aten::_values" not in stats and "aten::_nnz" not in stats
