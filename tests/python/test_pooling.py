"""Native 2-d pooling (backend/ops/pooling.cpp, kernels/pooling.metal) against CPU torch:
max_pool2d with indices, avg_pool2d (padding, ceil_mode, count_include_pad,
divisor_override), adaptive avg/max pool, forward and backward, every float dtype,
contiguous and channels_last inputs read in place, 3-d inputs, NaN, bad arguments
raising CPU's errors, and the CPU fallback for float64."""

import pytest
import torch
import torch.nn.functional as F

from device_checks import assert_native, assert_same, sample, with_grad

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"
FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def tol(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-2, atol=1e-2)


def compare(fn, x, dtype, channels_last=False):
    """fn on the device against CPU in float32 (CPU's half pooling accumulates in float)."""
    ref, ref_grad = with_grad(lambda t: fn(t.float()), x)
    d = x.to(DEV)
    if channels_last:
        d = d.contiguous(memory_format=torch.channels_last)
    got, got_grad = with_grad(fn, d)
    if channels_last:
        assert got.is_contiguous(memory_format=torch.channels_last)
    assert_same(got, ref.to(dtype), **tol(dtype))
    assert_same(got_grad, ref_grad.to(dtype), **tol(dtype))


MAX_ARGS = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=3, stride=1, dilation=2),
            dict(kernel_size=(2, 3), stride=(2, 1), ceil_mode=True)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("args", MAX_ARGS)
@pytest.mark.parametrize("channels_last", [False, True])
def test_max_pool2d_matches_cpu(dtype, args, channels_last):
    x = sample((2, 3, 9, 8), dtype)
    compare(lambda t: F.max_pool2d(t, **args), x, dtype, channels_last)
    _, idx = F.max_pool2d(x.to(DEV), return_indices=True, **args)
    _, ref_idx = F.max_pool2d(x.float(), return_indices=True, **args)
    if dtype == torch.float32:
        assert torch.equal(idx.cpu(), ref_idx)
    assert_native()


AVG_ARGS = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
            dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
            dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
            dict(kernel_size=(3, 2), stride=1, padding=(1, 0), divisor_override=5),
            dict(kernel_size=2, divisor_override=-2)]  # CPU takes a negative divisor too


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("args", AVG_ARGS)
@pytest.mark.parametrize("channels_last", [False, True])
def test_avg_pool2d_matches_cpu(dtype, args, channels_last):
    x = sample((2, 3, 9, 8), dtype)
    compare(lambda t: F.avg_pool2d(t, **args), x, dtype, channels_last)
    assert_native()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("size", [(3, 3), (4, 5), (9, 8), (2, 1)])
@pytest.mark.parametrize("channels_last", [False, True])
def test_adaptive_pools_match_cpu(dtype, size, channels_last):
    x = sample((2, 3, 9, 8), dtype)
    compare(lambda t: F.adaptive_avg_pool2d(t, size), x, dtype, channels_last)
    compare(lambda t: F.adaptive_max_pool2d(t, size), x, dtype, channels_last)
    assert_native()


# Windows that never share an input (stride >= the dilated kernel) take the scatter
# kernel: tiling the input exactly, with gaps, rows left over, padding, dilation and
# ceil_mode (a clamped last window). grad_input= starts as garbage, so a position no
# window covers must still come out 0.
DISJOINT_ARGS = [dict(kernel_size=2), dict(kernel_size=2, stride=3), dict(kernel_size=3, stride=3, padding=1),
                 dict(kernel_size=2, stride=4, dilation=2), dict(kernel_size=(1, 2), stride=(2, 2)),
                 dict(kernel_size=3, ceil_mode=True)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("args", DISJOINT_ARGS)
@pytest.mark.parametrize("shape", [(2, 3, 8, 8), (2, 3, 11, 9)])
def test_max_pool2d_backward_with_disjoint_windows(dtype, args, shape):
    x = sample(shape, dtype)
    compare(lambda t: F.max_pool2d(t, **args), x, dtype, channels_last=shape[-1] == 9)
    k, st = args["kernel_size"], args.get("stride", args["kernel_size"])
    pad, dil, ceil = args.get("padding", 0), args.get("dilation", 1), args.get("ceil_mode", False)
    out, idx = F.max_pool2d(x, return_indices=True, **args)
    g = sample(out.shape, dtype)
    ref = torch.ops.aten.max_pool2d_with_indices_backward(g, x, k, st, pad, dil, ceil, idx)
    got = torch.full(shape, 7.0, dtype=dtype, device=DEV)
    torch.ops.aten.max_pool2d_with_indices_backward(g.to(DEV), x.to(DEV), k, st, pad, dil, ceil, idx.to(DEV),
                                                    grad_input=got)
    assert torch.equal(got.cpu(), ref)
    assert_native()


def test_max_pool2d_backward_sums_overlapping_windows():
    # Overlapping windows (stride < kernel) keep the gather: an input that is the max of
    # several windows gets the sum of their gradients.
    x = torch.zeros(1, 1, 5, 5)
    x[0, 0, 2, 2] = 1.0
    out, idx = F.max_pool2d(x, 3, 1, return_indices=True)
    g = sample(out.shape)
    ref = torch.ops.aten.max_pool2d_with_indices_backward(g, x, 3, 1, 0, 1, False, idx)
    got = torch.ops.aten.max_pool2d_with_indices_backward(g.to(DEV), x.to(DEV), 3, 1, 0, 1, False, idx.to(DEV))
    assert_same(got, ref)
    assert_native()


def test_pooling_three_dim_inputs_and_nan():
    x = sample((3, 7, 6))
    x[0, 1, 1] = float("nan")
    for fn in [lambda t: F.max_pool2d(t, 2), lambda t: F.avg_pool2d(t, 3, 2, 1),
               lambda t: F.adaptive_avg_pool2d(t, (2, 4)), lambda t: F.adaptive_max_pool2d(t, 3)]:
        assert_same(fn(x.to(DEV)), fn(x))
    _, idx = F.max_pool2d(x.to(DEV), 2, return_indices=True)
    assert torch.equal(idx.cpu(), F.max_pool2d(x, 2, return_indices=True)[1])
    assert_native()


def test_pooling_on_non_contiguous_views():
    x = sample((2, 6, 10, 10))
    v = x[:, ::2, 1:, :].transpose(2, 3)
    assert_same(F.max_pool2d(v.to(DEV), 3, 2), F.max_pool2d(v, 3, 2))
    assert_same(F.avg_pool2d(x.to(DEV)[:, ::2, 1:, :].transpose(2, 3), 3, 2), F.avg_pool2d(v, 3, 2))
    assert_native()


def test_pooling_bad_arguments_raise_as_on_cpu():
    x = sample((1, 2, 4, 4))
    for fn in [lambda t: F.max_pool2d(t, 2, padding=2), lambda t: F.avg_pool2d(t, 2, padding=3),
               lambda t: F.max_pool2d(t, 5), lambda t: F.adaptive_avg_pool2d(t[0, 0, 0], 2)]:
        with pytest.raises(RuntimeError) as cpu_err:
            fn(x)
        with pytest.raises(RuntimeError, match=str(cpu_err.value).split("\n")[0][:25].replace("(", ".").replace(")", ".")):
            fn(x.to(DEV))


def test_pooling_float64_runs_on_the_cpu_fallback():
    x = sample((1, 2, 4, 4)).double()
    assert_same(F.max_pool2d(x.to(DEV), 2), F.max_pool2d(x, 2))
    assert "aten::max_pool2d_with_indices.out" in torch.metalx.fallback_stats()
