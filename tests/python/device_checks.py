"""Checks the device tests share: which kernels a call ran, that nothing fell back to
the CPU, and comparing a device result (and its gradient) with CPU torch's. The fixtures that reset the fallback report around each test are in
conftest.py (`fallback_stats_reset`, `no_fallback`)."""

import torch


def kernels_run(fn):
    """The device kernels `fn` runs, by name."""
    with torch.metalx.profiler.profile() as prof:
        fn()
    return [c["name"] for c in prof.commands]


def assert_native():
    """Nothing ran on the CPU fallback since the report was last reset."""
    assert torch.metalx.fallback_stats() == {}


def sample(shape, dtype=torch.float32, seed=0):
    """A seeded normal sample, the same on every run."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def assert_same(got, ref, **kw):
    """`got` lives on metalx and equals CPU's `ref` (dtype, shape, values; NaN equal NaN)."""
    assert got.device.type == "metalx"
    got = got.cpu()
    assert got.dtype == ref.dtype and got.shape == ref.shape
    torch.testing.assert_close(got, ref, equal_nan=True, **kw)


def assert_same_error(make):
    """make("metalx") raises what make("cpu") raises: the same type and message."""
    import pytest

    with pytest.raises(Exception) as cpu:
        make("cpu")
    with pytest.raises(type(cpu.value)) as dev:
        make("metalx")
    assert str(dev.value) == str(cpu.value)


def with_grad(fn, x, seed=1):
    """fn(x) and the gradient of x for a seeded output gradient."""
    x = x.detach().requires_grad_()
    out = fn(x)
    g = sample(out.shape, out.dtype, seed=seed).to(out.device)
    out.backward(g)
    return out.detach(), x.grad
