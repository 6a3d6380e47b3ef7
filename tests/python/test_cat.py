"""cat and stack on the device (backend/ops/cat.cpp) against CPU torch: dtypes, many
inputs, mixed layouts and dtypes (type promotion), channels_last, empty inputs, out=,
autograd and CPU's errors. Native cases must not fall back."""

import pytest
import torch

from device_checks import assert_native

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"
TYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool]


def sample(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(0, 100, shape, generator=g).to(dtype)


def assert_same(got, ref):
    assert got.device.type == DEV
    assert got.dtype == ref.dtype and got.shape == ref.shape
    assert torch.equal(got.cpu(), ref)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_and_stack(dtype, dim):
    parts = [sample((3, 4, 5), dtype, seed=i) for i in range(3)]
    assert_same(torch.cat([p.to(DEV) for p in parts], dim), torch.cat(parts, dim))
    assert_same(torch.stack([p.to(DEV) for p in parts], dim), torch.stack(parts, dim))
    assert_native()


def test_many_inputs_and_mixed_layouts():
    parts = [sample((2, i + 1, 3), torch.float32, seed=i) for i in range(40)]
    assert_same(torch.cat([p.to(DEV) for p in parts], 1), torch.cat(parts, 1))
    a = sample((4, 6), torch.float32)
    b = sample((6, 4), torch.float32, seed=1)
    c = sample((4, 12), torch.float32, seed=2)
    got = torch.cat([a.to(DEV), b.to(DEV).t(), c.to(DEV)[:, ::2]], 0)  # contiguous, transposed, strided
    assert_same(got, torch.cat([a, b.t(), c[:, ::2]], 0))
    assert_native()


def test_type_promotion_empty_and_legacy_empty():
    a = sample((2, 3), torch.int32)
    b = sample((1, 3), torch.float16, seed=1)
    assert_same(torch.cat([a.to(DEV), b.to(DEV)]), torch.cat([a, b]))
    e = torch.empty(0, 3)
    assert_same(torch.cat([e.to(DEV), b.float().to(DEV), e.to(DEV)]), torch.cat([e, b.float(), e]))
    legacy = torch.empty(0)
    assert_same(torch.cat([legacy.to(DEV), b.to(DEV)]), torch.cat([legacy, b]))
    assert_same(torch.cat([e.to(DEV), e.to(DEV)]), torch.cat([e, e]))
    assert_native()


def test_channels_last():
    a = sample((2, 3, 4, 5), torch.float32).to(memory_format=torch.channels_last)
    b = sample((2, 6, 4, 5), torch.float32, seed=1).to(memory_format=torch.channels_last)
    ref = torch.cat([a, b], 1)
    got = torch.cat([a.to(DEV), b.to(DEV)], 1)
    assert_same(got, ref)
    assert got.is_contiguous(memory_format=torch.channels_last) == ref.is_contiguous(memory_format=torch.channels_last)
    assert_native()


def test_out_and_autograd():
    a = sample((2, 3), torch.float32)
    b = sample((4, 3), torch.float32, seed=1)
    out = torch.empty(0, device=DEV)
    torch.cat([a.to(DEV), b.to(DEV)], out=out)
    assert_same(out, torch.cat([a, b]))
    ad, bd = a.to(DEV).requires_grad_(), b.to(DEV).requires_grad_()
    go = sample((6, 3), torch.float32, seed=2)
    torch.cat([ad, bd]).backward(go.to(DEV))
    assert_same(ad.grad, go[:2])
    assert_same(bd.grad, go[2:])
    assert_native()


def test_errors_match_cpu():
    cases = [lambda d: torch.cat([torch.ones(3, 4, device=d), torch.ones(3, 5, device=d)]),
             lambda d: torch.cat([torch.ones(3, 4, device=d), torch.ones(3, device=d)]),
             lambda d: torch.cat([], 0),
             lambda d: torch.cat([torch.ones(3, device=d)], 2),
             lambda d: torch.stack([torch.ones(3, device=d), torch.ones(4, device=d)])]
    for make in cases:
        with pytest.raises(Exception) as cpu:
            make("cpu")
        with pytest.raises(type(cpu.value)) as got:
            make(DEV)
        assert str(got.value) == str(cpu.value)
