"""Native layer_norm and batch_norm (backend/ops/layer_norm.cpp, backend/ops/batch_norm.cpp,
kernels in kernels/layer_norm.metal and kernels/batch_norm.metal) against CPU torch:
every float dtype, weights or none, training with running-stat updates and eval,
channels_last read in place, autocast's mixed dtypes (half input, float parameters),
autograd through the modules, and the CPU fallback for float64."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from device_checks import assert_native

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"
FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)


def sample(shape, dtype=torch.float32, scale=2.0, shift=0.5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale + shift).to(dtype)


def assert_same(got, ref, **kw):
    assert got.device.type == DEV
    got = got.cpu()
    assert got.dtype == ref.dtype and got.shape == ref.shape
    torch.testing.assert_close(got, ref, equal_nan=True, **kw)


def run_with_grads(fn, inputs, grad_seed=1):
    leaves = [x.detach().requires_grad_() if x is not None else None for x in inputs]
    out = fn(*leaves)
    g = sample(out.shape, out.dtype, scale=1.0, shift=0.0, seed=grad_seed).to(out.device)
    out.backward(g)
    return out.detach(), [x.grad if x is not None else None for x in leaves]


def upcast(t):
    return None if t is None else t.float()


# ---- layer_norm ----


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,normalized", [((6, 40), (40,)), ((2, 3, 5, 8), (5, 8)), ((3, 5000), (5000,)),
                                              ((4, 7), (7,))])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_forward_backward_match_cpu(dtype, shape, normalized, affine):
    x = sample(shape, dtype)
    w = sample(normalized, dtype, scale=0.5, shift=1.0, seed=2) if affine else None
    b = sample(normalized, dtype, scale=0.5, shift=0.0, seed=3) if affine else None

    def fn(x, w, b):
        return F.layer_norm(x, normalized, w, b, eps=1e-5)

    ref, ref_grads = run_with_grads(lambda *a: fn(*[upcast(t) for t in a]), [x, w, b])
    got, got_grads = run_with_grads(fn, [x.to(DEV), None if w is None else w.to(DEV), None if b is None else b.to(DEV)])
    assert_same(got, ref.to(dtype), **tol(dtype))
    for g, r in zip(got_grads, ref_grads):
        if r is None:
            assert g is None
        else:
            assert_same(g, r.to(dtype), **tol(dtype))
    assert_native()


def test_layer_norm_statistics_and_non_contiguous_input():
    x = sample((8, 6, 10))
    d = x.to(DEV)
    got = torch.native_layer_norm(d.transpose(0, 1), [10], None, None, 1e-5)
    ref = torch.native_layer_norm(x.transpose(0, 1), [10], None, None, 1e-5)
    for g, r in zip(got, ref):
        assert_same(g, r, rtol=1e-4, atol=1e-5)
    empty = torch.empty(0, 4)
    assert_same(F.layer_norm(empty.to(DEV), (4,)), F.layer_norm(empty, (4,)))
    assert_native()


def test_layer_norm_bad_shapes_raise_as_on_cpu():
    x = sample((3, 4))
    with pytest.raises(RuntimeError, match="Given normalized_shape=\\[5\\]"):
        F.layer_norm(x.to(DEV), (5,))
    with pytest.raises(RuntimeError, match="Expected weight to be of same shape as normalized_shape"):
        F.layer_norm(x.to(DEV), (4,), torch.ones(3, device=DEV))


def test_layer_norm_float64_runs_on_the_cpu_fallback():
    x = sample((3, 4)).double()
    assert_same(F.layer_norm(x.to(DEV), (4,)), F.layer_norm(x, (4,)))
    assert "aten::native_layer_norm" in torch.metalx.fallback_stats()


# ---- batch_norm ----


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (8, 5), (3, 4, 7)])
@pytest.mark.parametrize("channels_last", [False, True])
def test_batch_norm_training_matches_cpu(dtype, shape, channels_last):
    if channels_last and len(shape) != 4:
        pytest.skip("channels_last is 4-d")
    C = shape[1]
    x = sample(shape, dtype)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    w = sample((C,), dtype, scale=0.5, shift=1.0, seed=2)
    b = sample((C,), dtype, scale=0.5, shift=0.0, seed=3)
    rm_cpu, rv_cpu = torch.zeros(C), torch.ones(C)
    rm_dev, rv_dev = torch.zeros(C, dtype=dtype, device=DEV), torch.ones(C, dtype=dtype, device=DEV)

    ref, ref_grads = run_with_grads(
        lambda x, w, b: F.batch_norm(x.float(), rm_cpu, rv_cpu, w.float(), b.float(), True, 0.1, 1e-5), [x, w, b])
    got, got_grads = run_with_grads(
        lambda x, w, b: F.batch_norm(x, rm_dev, rv_dev, w, b, True, 0.1, 1e-5), [x.to(DEV), w.to(DEV), b.to(DEV)])
    if channels_last:
        assert got.is_contiguous(memory_format=torch.channels_last)
    assert_same(got, ref.to(dtype), **tol(dtype))
    for g, r in zip(got_grads, ref_grads):
        assert_same(g, r.to(dtype), **tol(dtype))
    assert_same(rm_dev, rm_cpu.to(dtype), **tol(dtype))
    assert_same(rv_dev, rv_cpu.to(dtype), **tol(dtype))
    assert_native()


@pytest.mark.parametrize("dtype", FLOATS)
def test_batch_norm_eval_and_autocast_mixed_dtypes_match_cpu(dtype):
    C = 3
    x = sample((2, C, 4, 5), dtype)
    rm, rv = sample((C,), seed=4), sample((C,), seed=5).abs() + 0.5
    w, b = sample((C,), seed=6), sample((C,), seed=7)
    # float parameters with a lower-precision input: CPU's mixed type, autocast's case
    ref, ref_grads = run_with_grads(lambda x, w, b: F.batch_norm(x.float(), rm, rv, w, b, False, 0.1, 1e-5),
                                    [x, w, b])
    got, got_grads = run_with_grads(
        lambda x, w, b: F.batch_norm(x, rm.to(DEV), rv.to(DEV), w, b, False, 0.1, 1e-5),
        [x.to(DEV), w.to(DEV), b.to(DEV)])
    assert_same(got, ref.to(dtype), **tol(dtype))
    assert_same(got_grads[0], ref_grads[0].to(dtype), **tol(dtype))
    assert_same(got_grads[1], ref_grads[1], **tol(dtype))
    assert_same(got_grads[2], ref_grads[2], **tol(dtype))
    assert_native()


def test_batch_norm_modules_train_like_cpu():
    torch.manual_seed(0)
    # InstanceNorm without affine parameters: with them it repeats them per sample
    # (aten::repeat, not part of this family).
    cpu = nn.Sequential(nn.BatchNorm2d(4), nn.InstanceNorm2d(4))
    dev = nn.Sequential(nn.BatchNorm2d(4), nn.InstanceNorm2d(4)).to(DEV)
    dev.load_state_dict(cpu.state_dict())
    x = sample((3, 4, 5, 5))
    for _ in range(2):
        cpu(x).square().sum().backward()
        dev(x.to(DEV)).square().sum().backward()
    for (name, p), q in zip(cpu.named_parameters(), dev.parameters()):
        assert_same(q.grad, p.grad, rtol=1e-3, atol=1e-3)
    for (name, buf), q in zip(cpu.named_buffers(), dev.buffers()):
        assert_same(q, buf, rtol=1e-4, atol=1e-4)
    cpu.eval(), dev.eval()
    assert_same(dev(x.to(DEV)), cpu(x), rtol=1e-4, atol=1e-4)
    assert_native()


def test_batch_norm_float64_runs_on_the_cpu_fallback():
    x = sample((2, 3, 4)).double()
    out = F.batch_norm(x.to(DEV), None, None, training=True)
    assert_same(out, F.batch_norm(x, None, None, training=True))
    assert "aten::native_batch_norm" in torch.metalx.fallback_stats()


# ---- group_norm ----


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,groups", [((2, 6, 5, 4), 3), ((3, 4, 7), 1), ((2, 8), 4)])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_forward_backward_match_cpu(dtype, shape, groups, affine):
    C = shape[1]
    x = sample(shape, dtype)
    w = sample((C,), dtype, scale=0.5, shift=1.0, seed=2) if affine else None
    b = sample((C,), dtype, scale=0.5, shift=0.0, seed=3) if affine else None

    def fn(x, w, b):
        return F.group_norm(x, groups, w, b, eps=1e-5)

    # CPU in the same dtype: mean and rstd are stored in it, and the backward of a
    # small group is sensitive to their rounding.
    ref, ref_grads = run_with_grads(fn, [x, w, b])
    got, got_grads = run_with_grads(fn, [x.to(DEV), None if w is None else w.to(DEV), None if b is None else b.to(DEV)])
    assert_same(got, ref, **tol(dtype))
    for g, r in zip(got_grads, ref_grads):
        if r is None:
            assert g is None
        else:
            assert_same(g, r, **tol(dtype))
    assert_native()


def test_group_norm_channels_last_and_bad_groups():
    x = sample((2, 4, 3, 3)).contiguous(memory_format=torch.channels_last)
    assert_same(F.group_norm(x.to(DEV), 2), F.group_norm(x, 2), rtol=1e-4, atol=1e-5)
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        F.group_norm(x.to(DEV), 3)


def test_bfloat16_batch_instance_and_group_norm_round_as_cpu():
    # bfloat16 parameters: CPU stores the batch's mean and sum of squared deviations in
    # bfloat16 before it derives invstd, and group_norm's x * scale + shift is one
    # fused multiply-add; outputs of a few units land an ulp off otherwise. CPU's own
    # bfloat16 results are the reference, bit for bit.
    dt = torch.bfloat16
    x = sample((6, 5, 7), dt, scale=3.0, shift=2.0, seed=4)
    w = sample((5,), dt, scale=2.0, shift=1.0, seed=5)
    b = sample((5,), dt, scale=2.0, shift=0.0, seed=6)
    rm, rv = sample((5,), dt, seed=7), sample((5,), dt, scale=0.3, shift=1.0, seed=8)
    rm_dev, rv_dev = rm.to(DEV), rv.to(DEV)
    ref = F.batch_norm(x, rm, rv, w, b, True, 0.5, 0.6)
    got = F.batch_norm(x.to(DEV), rm_dev, rv_dev, w.to(DEV), b.to(DEV), True, 0.5, 0.6)
    assert torch.equal(got.cpu(), ref)
    assert torch.equal(rm_dev.cpu(), rm) and torch.equal(rv_dev.cpu(), rv)
    ref = F.instance_norm(x, weight=w, bias=b, eps=0.6)
    assert torch.equal(F.instance_norm(x.to(DEV), weight=w.to(DEV), bias=b.to(DEV), eps=0.6).cpu(), ref)
    xg = sample((20, 6, 10, 10), dt, scale=4.0, shift=0.0, seed=9)
    wg = sample((6,), dt, scale=4.0, shift=0.0, seed=10)
    bg = sample((6,), dt, scale=4.0, shift=0.0, seed=11)
    ref = F.group_norm(xg, 6, wg, bg)
    assert torch.equal(F.group_norm(xg.to(DEV), 6, wg.to(DEV), bg.to(DEV)).cpu(), ref)
    assert_native()
