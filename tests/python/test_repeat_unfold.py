"""repeat and unfold on metalx without the CPU fallback: unfold is a view (as_strided,
registered in backend/ops/tensor.cpp), and repeat is torch's composite over unfold
views of its output and one device copy, against CPU torch."""

import pytest
import torch

from device_checks import assert_native

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool, torch.uint8])
@pytest.mark.parametrize("shape,repeats", [((3,), (2,)), ((2, 3), (2, 1)), ((2, 3), (1, 2, 3)), ((), (4, 2)),
                                           ((2, 1, 3), (1, 3, 1)), ((0, 2), (2, 2)), ((2, 2), (0, 1))])
def test_repeat_matches_cpu(dtype, shape, repeats):
    x = (torch.randn(shape, generator=torch.Generator().manual_seed(0)) * 5).to(dtype)
    got = x.to(DEV).repeat(*repeats)
    assert got.device.type == DEV
    assert torch.equal(got.cpu(), x.repeat(*repeats))
    assert_native()


def test_repeat_of_a_strided_view_and_its_gradient():
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(1))
    xd = x.to(DEV).t()
    assert torch.equal(xd.repeat(2, 3).cpu(), x.t().repeat(2, 3))
    xr, xg = x.clone().requires_grad_(), x.to(DEV).requires_grad_()
    g = torch.randn(8, 10, generator=torch.Generator().manual_seed(2))
    xr.repeat(2, 2).backward(g)
    xg.repeat(2, 2).backward(g.to(DEV))
    torch.testing.assert_close(xg.grad.cpu(), xr.grad)
    assert_native()


def test_unfold_is_a_view():
    x = torch.arange(24.0).reshape(4, 6)
    xd = x.to(DEV)
    u = xd.unfold(1, 3, 2)
    assert u._base is xd and u.shape == x.unfold(1, 3, 2).shape
    assert torch.equal(u.cpu(), x.unfold(1, 3, 2))
    xd.unfold(1, 2, 3).zero_()  # writes through to the base (windows that do not overlap)
    ref = x.clone()
    ref.unfold(1, 2, 3).zero_()
    assert torch.equal(xd.cpu(), ref)
    with pytest.raises(RuntimeError, match="maximum size for tensor at dimension 1 is 6 but size is 7"):
        xd.unfold(1, 7, 1)
    assert_native()
