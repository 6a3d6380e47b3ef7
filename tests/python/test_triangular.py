"""Native tril/triu (backend/ops/triangular.cpp, kernels/triangular.metal) against CPU
torch: every dtype of 1, 2, 4 and 8 bytes, diagonals inside and outside the matrix,
batches, views with any strides, out= and in-place forms, empty tensors, the causal mask
nn.Transformer builds, CPU's errors, and the CPU fallback for complex128."""

import pytest
import torch

from device_checks import assert_native

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16, torch.int8,
          torch.uint8, torch.bool, torch.float64, torch.complex64]


def sample(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * 10
    if dtype == torch.bool:
        return x > 0
    if dtype == torch.complex64:
        return torch.complex(x, -x)
    return x.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", [torch.tril, torch.triu])
@pytest.mark.parametrize("diagonal", [0, 1, -2, 7, -9])
def test_matches_cpu(dtype, op, diagonal):
    x = sample((3, 5, 6), dtype)
    got = op(x.to(DEV), diagonal)
    assert got.device.type == DEV and got.dtype == dtype
    assert torch.equal(got.cpu(), op(x, diagonal))
    assert_native()


@pytest.mark.parametrize("op", [torch.tril, torch.triu])
def test_views_with_any_strides(op):
    x = sample((4, 7, 9), torch.float32)
    d = x.to(DEV)
    views = [lambda t: t.transpose(1, 2), lambda t: t[:, 1::2, ::3], lambda t: t[1], lambda t: t.permute(2, 0, 1),
             lambda t: t[:1].expand(3, 7, 9)]
    for view in views:
        got = op(view(d), 1)
        assert got.is_contiguous() or got.stride() == view(x).stride()
        assert torch.equal(got.cpu(), op(view(x), 1))
    # many dims, and the 2-d and 8-d limits of the kernel's coordinates
    y = sample((2, 1, 2, 1, 2, 1, 3, 4), torch.float32)
    assert torch.equal(op(y.to(DEV), -1).cpu(), op(y, -1))
    assert_native()


@pytest.mark.parametrize("name", ["tril", "triu"])
def test_out_and_inplace(name):
    x = sample((2, 6, 5), torch.float16)
    ref = getattr(torch, name)(x, 2)
    out = torch.empty(0, dtype=torch.float16, device=DEV)  # resized by the op
    getattr(torch, name)(x.to(DEV), 2, out=out)
    assert torch.equal(out.cpu(), ref)
    strided_out = torch.zeros(5, 6, 2, dtype=torch.float16, device=DEV).permute(2, 1, 0)
    getattr(torch, name)(x.to(DEV), 2, out=strided_out)
    assert torch.equal(strided_out.cpu(), ref)
    d = x.to(DEV)
    view = d.transpose(1, 2)  # in place through a non-contiguous view
    getattr(view, name + "_")(-1)
    ref_x = x.clone()
    getattr(ref_x.transpose(1, 2), name + "_")(-1)
    assert torch.equal(d.cpu(), ref_x)
    assert_native()


def test_empty_and_causal_mask():
    assert torch.tril(torch.empty(0, 4, device=DEV)).shape == (0, 4)
    assert torch.triu(torch.empty(2, 3, 0, device=DEV, dtype=torch.int32)).shape == (2, 3, 0)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(9, device=DEV)
    assert torch.equal(mask.cpu(), torch.nn.Transformer.generate_square_subsequent_mask(9))
    causal = torch.ones(5, 7, dtype=torch.bool, device=DEV).tril()
    assert torch.equal(causal.cpu(), torch.ones(5, 7, dtype=torch.bool).tril())
    assert_native()


def test_errors_as_cpu():
    for op in (torch.tril, torch.triu):
        for bad in (torch.ones(3), torch.tensor(1.0)):
            with pytest.raises(RuntimeError) as cpu_error:
                op(bad)
            with pytest.raises(RuntimeError) as dev_error:
                op(bad.to(DEV))
            assert str(dev_error.value) == str(cpu_error.value)
    with pytest.raises(RuntimeError, match="dtype"):
        torch.tril(torch.ones(3, 3, device=DEV), out=torch.empty(3, 3, dtype=torch.int32, device=DEV))


def test_complex128_runs_on_cpu_fallback():
    x = sample((4, 4), torch.complex64).to(torch.complex128)
    assert torch.equal(torch.triu(x.to(DEV), 1).cpu(), torch.triu(x, 1))
    assert sum(torch.metalx.fallback_stats().values()) >= 1
