"""Ops metalx does not implement run on the CPU; views and storage ops run natively."""


def test_add_through_cpu_fallback(torch):
    a = torch.arange(6.0).reshape(2, 3)
    b = torch.full((2, 3), 0.5)
    result = torch.add(a.to("metalx"), b.to("metalx"))
    assert result.is_metalx
    torch.testing.assert_close(result.cpu(), a + b)


def test_inplace_and_matmul_through_fallback(torch):
    a = torch.randn(4, 3, dtype=torch.float64)
    b = torch.randn(3, 5, dtype=torch.float64)
    x = a.to("metalx")
    x.mul_(2)
    assert x.is_metalx
    torch.testing.assert_close(x.cpu(), a * 2)
    product = torch.matmul(x, b.to("metalx"))
    assert product.is_metalx
    torch.testing.assert_close(product.cpu(), (a * 2) @ b)


def test_views_share_memory(torch):
    base = torch.arange(12.0).to("metalx")
    view = base.view(3, 4)
    assert view.data_ptr() == base.data_ptr()
    strided = base.as_strided((2, 2), (4, 1), 2)
    assert strided.data_ptr() == base.data_ptr() + 2 * 4
    reshaped = base.reshape(4, 3)
    assert torch.equal(reshaped.cpu(), torch.arange(12.0).reshape(4, 3))


def test_empty_strided_and_resize(torch):
    t = torch.empty_strided((2, 3), (1, 2), device="metalx")
    assert t.stride() == (1, 2)
    r = torch.arange(4.0).to("metalx")
    r.resize_(2, 4)  # grows the storage, keeping the first elements
    assert r.shape == (2, 4)
    assert r.untyped_storage().nbytes() >= 8 * 4
    assert r.view(-1)[:4].contiguous().cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    r.resize_(0)
    assert r.numel() == 0


def test_set_overloads(torch):
    source = torch.arange(6.0).to("metalx")
    t = torch.empty(0, device="metalx")
    t.set_(source)
    assert t.data_ptr() == source.data_ptr() and t.shape == (6,)
    u = torch.empty(0, device="metalx")
    u.set_(source.untyped_storage(), 2, (2, 2), (2, 1))
    assert torch.equal(u.cpu(), torch.tensor([[2.0, 3.0], [4.0, 5.0]]))
    v = torch.empty(0, device="metalx")
    v.set_(source.untyped_storage())
    assert v.shape == (6,)
    u.set_()
    assert u.numel() == 0 and u.is_metalx
