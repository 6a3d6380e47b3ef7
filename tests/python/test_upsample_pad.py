"""Native upsampling and padding (backend/ops/upsample.cpp + kernels/upsample.metal,
backend/ops/padding.cpp + kernels/padding.metal) against CPU torch: F.interpolate
nearest / nearest-exact / linear / bilinear (align_corners both ways, sizes or scale
factors, up and down), reflection and replication pads in 1-d and 2-d, forward and
backward, every float dtype, contiguous, channels_last and strided views read in place,
out= forms, bad arguments raising CPU's errors, and which dtypes take the CPU fallback.
1-d pools are composite over the native 2-d pools: checked here to stay native."""

import pytest
import torch
import torch.nn.functional as F

from device_checks import assert_native, assert_same, sample, with_grad

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"
FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def tol(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-2, atol=2e-2)


def compare(fn, x, dtype, layout=None):
    """fn and its gradient on the device against CPU in float32, rounded to dtype
    (the device computes in float and rounds once)."""
    ref, ref_grad = with_grad(lambda t: fn(t.float()), x)
    d = x.to(DEV)
    if layout is not None:
        d = layout(d)
    got, got_grad = with_grad(fn, d)
    assert_same(got, ref.to(dtype), **tol(dtype))
    assert_same(got_grad, ref_grad.to(dtype), **tol(dtype))
    return got


def channels_last(t):
    return t.contiguous(memory_format=torch.channels_last)


def transposed_view(t):
    """A non-contiguous view with t's values: a copy stored transposed, transposed back."""
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


# ---- upsampling ----

INTERP_2D = [
    dict(size=(10, 12), mode="nearest"),
    dict(scale_factor=2, mode="nearest"),
    dict(scale_factor=(1.7, 0.6), mode="nearest"),
    dict(size=(3, 4), mode="nearest"),
    dict(size=(10, 13), mode="nearest-exact"),
    dict(scale_factor=(0.5, 2.5), mode="nearest-exact"),
    dict(size=(11, 9), mode="bilinear", align_corners=False),
    dict(size=(11, 9), mode="bilinear", align_corners=True),
    dict(scale_factor=2, mode="bilinear", align_corners=False),
    dict(scale_factor=(0.6, 1.5), mode="bilinear", align_corners=False),
    dict(scale_factor=(1.3, 0.7), mode="bilinear", align_corners=False, recompute_scale_factor=True),
    dict(size=(3, 2), mode="bilinear", align_corners=True),
    dict(size=(1, 1), mode="bilinear", align_corners=True),
    dict(size=(5, 6), mode="bilinear", align_corners=False),  # the input's own size: identity
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("args", INTERP_2D, ids=lambda a: "-".join(f"{k}={v}" for k, v in a.items()))
def test_interpolate_2d_matches_cpu(dtype, args):
    x = sample((2, 3, 5, 6), dtype)
    compare(lambda t: F.interpolate(t, **args), x, dtype)
    assert_native()


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear"])
@pytest.mark.parametrize("layout", [channels_last, transposed_view], ids=["channels_last", "view"])
def test_interpolate_2d_reads_layouts_in_place(mode, layout):
    x = sample((2, 4, 5, 7))
    got = compare(lambda t: F.interpolate(t, size=(8, 9), mode=mode), x, torch.float32, layout)
    if layout is channels_last:  # the output keeps the input's memory format, as on CPU
        assert got.is_contiguous(memory_format=torch.channels_last)
    assert_native()


INTERP_1D = [
    dict(size=13, mode="nearest"),
    dict(scale_factor=0.4, mode="nearest"),
    dict(size=13, mode="nearest-exact"),
    dict(size=13, mode="linear", align_corners=False),
    dict(size=13, mode="linear", align_corners=True),
    dict(scale_factor=1.6, mode="linear", align_corners=False),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("args", INTERP_1D, ids=lambda a: "-".join(f"{k}={v}" for k, v in a.items()))
def test_interpolate_1d_matches_cpu(dtype, args):
    x = sample((2, 3, 7), dtype)
    compare(lambda t: F.interpolate(t, **args), x, dtype)
    compare(lambda t: F.interpolate(t, **args), x, dtype, transposed_view)
    assert_native()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("channels", [3, 4])
@pytest.mark.parametrize("layout", [None, channels_last], ids=["contiguous", "channels_last"])
@pytest.mark.parametrize("size", [(100, 90), (40, 30)], ids=["large", "small"])
def test_linear_half_matches_cpu_kernel_choice(dtype, channels, layout, size):
    """CPU's generic linear kernel rounds its weights to half/bfloat16 (large outputs,
    1-d); its vectorised one keeps them in float (small outputs, channels_last with > 3
    channels). metalx follows the same choice, so it matches CPU in the dtype itself."""
    x = (sample((2, channels, 20, 17)) * 9).to(dtype)
    d = x.to(DEV) if layout is None else layout(x.to(DEV))
    c = x if layout is None else layout(x)
    ulp = dict(rtol=1e-3, atol=1e-3) if dtype == torch.float16 else dict(rtol=8e-3, atol=8e-3)

    def check(got, ref):
        # Bit-equal to CPU but for rare last-bit ties (CPU's vector code fuses
        # multiply-adds); the other weight rounding would change ~half the elements.
        assert_same(got, ref, **ulp)
        assert (got.cpu() != ref).float().mean().item() < 2e-3

    for ac in [False, True]:
        check(F.interpolate(d, size=size, mode="bilinear", align_corners=ac),
              F.interpolate(c, size=size, mode="bilinear", align_corners=ac))
    x1 = x[:, :, 0]
    check(F.interpolate(x1.to(DEV), size=size[0], mode="linear"), F.interpolate(x1, size=size[0], mode="linear"))
    assert_native()


def test_upsample_out_forms_and_direct_scales():
    x = sample((1, 2, 4, 5))
    for op, args in [(torch.ops.aten.upsample_nearest2d, ([7, 9], 1.9, 1.8)),
                     (torch.ops.aten._upsample_nearest_exact2d, ([7, 9], None, None)),
                     (torch.ops.aten.upsample_bilinear2d, ([7, 9], False, 1.9, 1.8)),
                     (torch.ops.aten.upsample_bilinear2d, ([7, 9], True, None, None))]:
        ref = op(x, *args)
        out = torch.empty(0, device=DEV)
        res = op.out(x.to(DEV), *args, out=out)
        assert res is out
        assert_same(out, ref)
    assert_native()


def test_upsample_infinite_gradient_stays_local():
    """The gather skips outputs that do not read an input: an infinite gradient of one
    output reaches only the inputs it sampled, as CPU's scatter does."""
    x = sample((1, 1, 4, 4))
    for mode in ["nearest", "bilinear"]:
        def fn(t):
            return F.interpolate(t, size=(4, 8), mode=mode)
        out = fn(x)
        g = torch.zeros_like(out)
        g[0, 0, 1, 3] = float("inf")
        ref = torch.autograd.grad(fn(x.requires_grad_()), x, g)[0]
        d = x.detach().to(DEV).requires_grad_()
        got = torch.autograd.grad(fn(d), d, g.to(DEV))[0]
        assert_same(got, ref)
        x = x.detach()
    assert_native()


def test_upsample_bad_arguments_raise_as_on_cpu():
    x = sample((1, 2, 4, 4))
    for fn in [lambda t: torch.ops.aten.upsample_nearest2d(t, [0, 3]),
               lambda t: torch.ops.aten.upsample_bilinear2d(t[0, 0], [3, 3], False),
               lambda t: torch.ops.aten.upsample_nearest2d_backward(t, [5, 5], [1, 2, 4, 4])]:
        with pytest.raises(RuntimeError) as cpu_err:
            fn(x)
        with pytest.raises(RuntimeError) as dev_err:
            fn(x.to(DEV))
        assert str(dev_err.value).split("\n")[0] == str(cpu_err.value).split("\n")[0]


def test_upsample_uint8_and_float64_run_on_the_cpu_fallback():
    x = (sample((1, 2, 3, 3)) * 50).clamp(0, 255).to(torch.uint8)
    assert torch.equal(F.interpolate(x.to(DEV), scale_factor=2).cpu(), F.interpolate(x, scale_factor=2))
    assert "aten::upsample_nearest2d.out" in torch.metalx.fallback_stats()
    xd = sample((1, 2, 3, 3)).double()
    assert_same(F.interpolate(xd.to(DEV), size=(5, 4), mode="bilinear"), F.interpolate(xd, size=(5, 4), mode="bilinear"))
    assert "aten::upsample_bilinear2d.out" in torch.metalx.fallback_stats()


# ---- padding ----

PADS_2D = [(1, 2, 3, 0), (0, 0, 2, 2), (3, 3, 3, 3), (-1, 2, 1, -2)]
PADS_1D = [(1, 2), (3, 0), (4, 4), (-2, 1)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("pad", PADS_2D)
def test_pad_2d_matches_cpu(dtype, mode, pad):
    x = sample((2, 3, 5, 6), dtype)
    compare(lambda t: F.pad(t, pad, mode=mode), x, dtype)
    compare(lambda t: F.pad(t, pad, mode=mode), x[0], dtype)  # no batch dim
    assert_native()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("pad", PADS_1D)
def test_pad_1d_matches_cpu(dtype, mode, pad):
    x = sample((2, 3, 6), dtype)
    compare(lambda t: F.pad(t, pad, mode=mode), x, dtype)
    compare(lambda t: F.pad(t, pad, mode=mode), x[0], dtype)
    assert_native()


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("layout", [channels_last, transposed_view], ids=["channels_last", "view"])
def test_pad_2d_reads_layouts_in_place(mode, layout):
    x = sample((2, 4, 5, 7))
    compare(lambda t: F.pad(t, (2, 1, 1, 3), mode=mode), x, torch.float32, layout)
    assert_native()


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8, torch.float64])
def test_pad_forward_moves_every_element_size_natively(dtype):
    x = (sample((2, 3, 4, 5)) * 5).to(dtype)  # float64 only moves: native too
    for mode in ["reflect", "replicate"]:
        assert torch.equal(F.pad(x.to(DEV), (2, 1, 3, 0), mode=mode).cpu(), F.pad(x, (2, 1, 3, 0), mode=mode))
        assert torch.equal(F.pad(x[0, 0].to(DEV), (3, 1), mode=mode).cpu(), F.pad(x[0, 0], (3, 1), mode=mode))
    assert_native()


def test_pad_out_forms():
    x = sample((2, 3, 5))
    x2 = sample((2, 3, 4, 5))
    for op, t, pad in [(torch.ops.aten.reflection_pad1d, x, [2, 1]), (torch.ops.aten.replication_pad1d, x, [2, 1]),
                       (torch.ops.aten.reflection_pad2d, x2, [2, 1, 0, 3]),
                       (torch.ops.aten.replication_pad2d, x2, [2, 1, 0, 3])]:
        out = torch.empty(0, device=DEV)
        assert op.out(t.to(DEV), pad, out=out) is out
        assert_same(out, op(t, pad))
    g = sample((2, 3, 7, 8))
    for op in [torch.ops.aten.reflection_pad2d_backward, torch.ops.aten.replication_pad2d_backward]:
        out = torch.empty(0, device=DEV)
        assert op.grad_input(g.to(DEV), x2.to(DEV), [2, 1, 0, 3], grad_input=out) is out
        assert_same(out, op(g, x2, [2, 1, 0, 3]))
    assert_native()


def test_pad_bad_arguments_raise_as_on_cpu():
    x = sample((1, 2, 4, 4))
    for fn in [lambda t: F.pad(t, (4, 0, 0, 0), mode="reflect"),
               lambda t: F.pad(t, (1, 1, 0, 4), mode="reflect"),
               lambda t: torch.ops.aten.reflection_pad2d(t[0, 0, 0], [1, 1, 1, 1]),
               lambda t: torch.ops.aten.reflection_pad1d(t, [1, 1]),
               lambda t: torch.ops.aten.replication_pad2d(t, [1, 1]),
               lambda t: torch.ops.aten.reflection_pad2d_backward(t, t, [1, 1, 1, 1]),
               lambda t: torch.ops.aten.replication_pad2d_backward(t, t, [1, 0, 0, 0]),
               lambda t: F.pad(t.bool(), (1, 1, 1, 1), mode="reflect"),  # CPU has no bool pads
               lambda t: F.pad(t[0].bool(), (1, 1), mode="replicate")]:
        with pytest.raises(RuntimeError) as cpu_err:
            fn(x)
        with pytest.raises(RuntimeError) as dev_err:
            fn(x.to(DEV))
        assert str(dev_err.value).split("\n")[0] == str(cpu_err.value).split("\n")[0]


def test_pad_float64_backward_runs_on_the_cpu_fallback():
    x = sample((1, 2, 4, 4)).double()
    compare(lambda t: F.pad(t, (1, 2, 2, 1), mode="reflect"), x, torch.float64)
    assert "aten::reflection_pad2d_backward.grad_input" in torch.metalx.fallback_stats()


def test_constant_pad_is_native():
    x = sample((2, 3, 4, 5))
    for dtype in FLOATS:
        compare(lambda t: F.pad(t, (1, 2, -1, 3), value=0.5), x.to(dtype), dtype)
    compare(lambda t: F.pad(t, (1, 2, 3, 0), value=-1.0), x, torch.float32, channels_last)
    assert_native()


# ---- 1-d pools: composite over the native 2-d pools ----

@pytest.mark.parametrize("dtype", FLOATS)
def test_pool_1d_is_native(dtype):
    x = sample((2, 3, 11), dtype)
    compare(lambda t: F.max_pool1d(t, 3, 2, 1), x, dtype)
    compare(lambda t: F.avg_pool1d(t, 3, 2, 1, count_include_pad=False), x, dtype)
    compare(lambda t: F.adaptive_avg_pool1d(t, 4), x, dtype)
    compare(lambda t: F.adaptive_max_pool1d(t, 4), x, dtype)
    compare(lambda t: F.lp_pool1d(t.abs() + 0.1, 2, 3), x, dtype)
    assert_native()
