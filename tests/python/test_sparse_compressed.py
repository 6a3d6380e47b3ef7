"""Sparse compressed tensors (CSR and kin) on metalx, against CPU."""

import pytest
import torch


def _eye_csr(n, dtype=torch.float32):
    return torch.eye(n, dtype=dtype).to_sparse_csr()


def test_csr_members_are_metalx_and_round_trip():
    cpu = torch.tensor([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]]).to_sparse_csr()
    dev = cpu.to("metalx")
    assert dev.layout == torch.sparse_csr and dev.is_metalx
    assert dev.crow_indices().is_metalx and dev.col_indices().is_metalx and dev.values().is_metalx
    assert torch.equal(dev.crow_indices().cpu(), cpu.crow_indices())
    assert torch.equal(dev.to_dense().cpu(), cpu.to_dense())
    back = dev.cpu()
    assert back.layout == torch.sparse_csr and torch.equal(back.to_dense(), cpu.to_dense())


def test_dense_to_csr_on_metalx():
    x = torch.tensor([[0.0, 1.5], [2.0, 0.0], [0.0, 0.0]])
    dev = x.to("metalx").to_sparse_csr()
    assert dev.layout == torch.sparse_csr and dev.is_metalx
    assert torch.equal(dev.to_dense().cpu(), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
@pytest.mark.parametrize("m,n,k", [(5, 5, 5), (5, 0, 5), (0, 5, 5), (5, 5, 0)])
def test_sparse_sampled_addmm_matches_cpu(dtype, m, n, k):
    alpha, beta = (2 + 3j, 1 + 2j) if dtype.is_complex else (0.6, 0.2)
    g = torch.Generator().manual_seed(m * 100 + n * 10 + k)
    c = torch.eye(m, n, dtype=dtype).to_sparse_csr()
    a = torch.randn(m, k, generator=g, dtype=dtype)
    b = torch.randn(k, n, generator=g, dtype=dtype)
    expected = torch.sparse.sampled_addmm(c, a, b, alpha=alpha, beta=beta)
    actual = torch.sparse.sampled_addmm(c.to("metalx"), a.to("metalx"), b.to("metalx"), alpha=alpha, beta=beta)
    assert actual.layout == torch.sparse_csr and actual.is_metalx
    assert torch.equal(actual.crow_indices().cpu(), expected.crow_indices())
    assert torch.equal(actual.col_indices().cpu(), expected.col_indices())
    torch.testing.assert_close(actual.values().cpu(), expected.values())


def test_csr_matmul_with_dense():
    x = torch.randn(4, 4)
    x[x.abs() < 0.5] = 0
    d = torch.randn(4, 3)
    expected = x.to_sparse_csr() @ d
    actual = x.to_sparse_csr().to("metalx") @ d.to("metalx")
    assert actual.is_metalx
    torch.testing.assert_close(actual.cpu(), expected)
