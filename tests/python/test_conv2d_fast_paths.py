"""The fast convolution kernels (kernels/conv2d_tiled.metal, conv2d_depthwise.metal) on
shapes chosen to reach them and their edges, forward and every gradient against CPU:
channel counts that are and are not multiples of the 8-channel tiles, rows narrower
than the 8-pixel tiles and not multiples of them, padding larger than the kernel
(a negative padding for the input gradient), strided 1x1 projections, dilation,
groups, several weight-gradient row chunks, layouts and 16-bit dtypes. Each case also
runs with the simulator's other kernel builds (METALSIM_KERNEL_ISA=baseline and
x86-64-v3, in a subprocess) in test_other_isa_builds_match_cpu: their register tiles
differ (8 positions per thread; 32 in the x86-64-v4 build the default picks here)."""

import os
import platform
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

CL = torch.channels_last


def tol(dtype):
    return {torch.float32: dict(rtol=1e-4, atol=1e-4),
            torch.float16: dict(rtol=1e-2, atol=1e-2),
            torch.bfloat16: dict(rtol=4e-2, atol=4e-2)}[dtype]


def run(x, w, b, transposed, go_seed, **kw):
    x = x.detach().requires_grad_()
    w = w.detach().requires_grad_()
    b = None if b is None else b.detach().requires_grad_()
    out = (F.conv_transpose2d if transposed else F.conv2d)(x, w, b, **kw)
    go = torch.randn(out.shape, generator=torch.Generator().manual_seed(go_seed)).to(out.dtype).to(out.device)
    grads = torch.autograd.grad(out, [t for t in (x, w, b) if t is not None], go)
    return out, grads


def check(cin, cout, hw, k, stride=1, padding=0, dilation=1, groups=1, n=2, bias=True, transposed=False,
          dtype=torch.float32, layout="contiguous", output_padding=0):
    g = torch.Generator().manual_seed(cin * 100 + cout)
    h, w_ = hw if isinstance(hw, tuple) else (hw, hw)
    x = torch.randn(n, cin, h, w_, generator=g)
    wshape = (cin, cout // groups, *k) if transposed else (cout, cin // groups, *k)
    w = torch.randn(*wshape, generator=g) * (1.0 / (cin // groups * k[0] * k[1]) ** 0.5)
    b = torch.randn(cout, generator=g) if bias else None
    if layout == "channels_last":
        x = x.contiguous(memory_format=CL)
    x, w = x.to(dtype), w.to(dtype)
    b = None if b is None else b.to(dtype)
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    if transposed:
        kw["output_padding"] = output_padding
    torch.metalx.reset_fallback_stats()
    dev = run(x.to("metalx"), w.to("metalx"), None if b is None else b.to("metalx"), transposed, 7, **kw)
    assert not any("conv" in op for op in torch.metalx.fallback_stats())
    f = (lambda t: t.float()) if dtype != torch.float32 else (lambda t: t)
    ref = run(f(x), f(w), None if b is None else f(b), transposed, 7, **kw)
    t = tol(dtype)
    torch.testing.assert_close(dev[0].cpu().float(), ref[0].float(), **t)
    for gd, gc in zip(dev[1], ref[1]):
        # Gradients of weights and biases sum many products: a looser bound.
        scale = 1.0 if gd.shape == dev[1][0].shape else 4.0
        torch.testing.assert_close(gd.cpu().float(), gc.float(), rtol=t["rtol"] * scale, atol=t["atol"] * scale)


TILED = [
    # cin, cout, hw, k, stride, padding, dilation, groups
    (16, 16, 12, (3, 3), 1, 1, 1, 1),       # every path tiled, one row chunk per image
    (12, 20, 11, (3, 3), 1, 1, 1, 1),       # channels not multiples of 8: zero-padded / overlapped tiles
    (16, 24, 5, (3, 3), 1, 1, 1, 1),        # rows narrower than a pixel tile
    (8, 8, (9, 13), (3, 2), 1, (1, 0), 1, 1),  # non-square, asymmetric padding
    (16, 16, 10, (3, 3), 1, 2, 2, 1),       # dilation
    (32, 32, 9, (3, 3), 1, 1, 1, 2),        # groups of 16 channels
    (16, 8, 10, (1, 1), 1, 0, 1, 1),        # 1x1: X read in place
    (16, 32, 14, (1, 1), 2, 0, 1, 1),       # strided 1x1 projection: subsampled input
    (8, 16, 10, (1, 1), 1, 1, 1, 1),        # padding beyond the kernel: input gradient crops
    (16, 16, 12, (3, 3), 2, 1, 1, 1),       # strided 3x3: direct forward, tiled weight gradient
    (4, 16, 12, (3, 3), 1, 1, 1, 1),        # 4 input channels: tiled forward, taps weight gradient
]


@pytest.mark.parametrize("cfg", TILED, ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_tiled_paths_match_cpu(cfg, bias):
    cin, cout, hw, k, s, p, d, g = cfg
    check(cin, cout, hw, k, s, p, d, g, bias=bias)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_tiled_dtypes_and_layouts(dtype, layout):
    check(16, 24, 10, (3, 3), 1, 1, dtype=dtype, layout=layout)
    check(16, 16, 9, (1, 1), 2, 0, dtype=dtype, layout=layout)


def test_weight_gradient_over_many_row_chunks():
    # 4 images x 40 rows of 40 pixels: the weight gradient is split into several row
    # chunks (conv2dWeightGradChunks), summed by conv2d_sum_chunks.
    check(8, 8, 40, (3, 3), 1, 1, n=4)


@pytest.mark.parametrize("cfg", [(16, 16, (3, 3), 1, 0, 1, 1), (8, 16, (3, 3), 1, 0, 2, 1), (16, 8, (1, 1), 1, 0, 1, 2)],
                         ids=lambda c: "-".join(map(str, c)))
def test_stride1_transposed_runs_tiled_and_matches_cpu(cfg):
    cin, cout, k, s, p, d, g = cfg
    check(cin, cout, 9, k, s, p, d, g, transposed=True)
    check(cin, cout, 9, k, s, 1, d, g, transposed=True, output_padding=1 if d > 1 else 0)


# The weight gradient with fewer than 8 channels per group on a side
# (conv2d_taps_bwd_w: 9 taps x 2 output channels per thread, rows in lanes of 16).
TAPS = [
    # cin, cout, hw, k, stride, padding, dilation, groups, n
    (3, 32, 32, (3, 3), 1, 1, 1, 1, 4),      # a stem: whole lane groups, several row chunks
    (1, 5, (13, 21), (3, 3), 1, 1, 1, 1, 2),  # odd output channels, rows ending mid-lane-group
    (3, 8, 20, (7, 7), 2, 3, 1, 1, 2),       # 49 taps in 6 groups of 9, strided rows
    (4, 6, (11, 12), (3, 3), 1, 2, 2, 2, 2),  # dilation, two groups
    (3, 16, 9, (2, 3), 1, (1, 0), 1, 1, 3),  # non-square kernel, asymmetric padding
    (16, 4, 10, (3, 3), 1, 1, 1, 1, 2),      # few output channels, many input channels
    (3, 8, 6, (1, 1), 1, 0, 1, 1, 2),        # 1x1: one tap of nine used
]


@pytest.mark.parametrize("cfg", TAPS, ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_taps_weight_gradient_matches_cpu(cfg, layout):
    cin, cout, hw, k, s, p, d, g, n = cfg
    check(cin, cout, hw, k, s, p, d, g, n=n, layout=layout)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_taps_weight_gradient_dtypes(dtype):
    check(3, 16, 18, (3, 3), 1, 1, n=2, dtype=dtype)


def test_taps_weight_gradient_same_bits_on_avx2_and_avx512_builds():
    """conv2d_taps_bwd_w adds its 16 lanes in one fixed order whether a build runs
    them 16 (x86-64-v4), 8 (x86-64-v3) or 4 at a time: both FMA builds give the same bits."""
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("x86-64 builds exist on x86-64 hosts only")
    script = (
        "import torch, metalx, sys\n"
        "g = torch.Generator().manual_seed(3)\n"
        "x = torch.randn(4, 3, 19, 37, generator=g).to('metalx')\n"
        "dy = torch.randn(4, 10, 19, 37, generator=g).to('metalx')\n"
        "w = torch.randn(10, 3, 3, 3, generator=g).to('metalx')\n"
        "dw = torch.ops.aten.convolution_backward(dy, x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1,"
        " [False, True, False])[1]\n"
        "torch.save(dw.cpu(), sys.argv[1])\n")
    out = {}
    for isa in ("x86-64-v3", "x86-64-v4"):
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"taps_dw_{os.getpid()}_{isa}.pt")
        r = subprocess.run([sys.executable, "-c", script, path], env=dict(os.environ, METALSIM_KERNEL_ISA=isa),
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0 and "not supported" in r.stderr:
            pytest.skip(f"this CPU cannot run the {isa} build")
        assert r.returncode == 0, r.stderr[-3000:]
        out[isa] = torch.load(path)
        os.unlink(path)
    assert torch.equal(out["x86-64-v3"], out["x86-64-v4"])


DEPTHWISE = [
    # c, hw, k, padding
    (16, 28, (3, 3), 1),
    (8, (9, 13), (3, 3), 1),     # rows and columns not multiples of the 7 x 8 tiles
    (8, 9, (3, 3), 0),
    (8, 9, (2, 3), (1, 0)),
    (8, 6, (1, 1), 0),
    (8, 5, (3, 3), 2),           # padding beyond the kernel
]


@pytest.mark.parametrize("cfg", DEPTHWISE, ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_depthwise3_matches_cpu(cfg, layout):
    c, hw, k, p = cfg
    check(c, c, hw, k, 1, p, 1, c, layout=layout)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_depthwise3_dtypes(dtype):
    check(16, 16, 12, (3, 3), 1, 1, 1, 16, dtype=dtype)


@pytest.mark.parametrize("isa", ["baseline", "x86-64-v3"])
def test_other_isa_builds_match_cpu(isa):
    """The same cases with another of the simulator's kernel builds."""
    if isa != "baseline" and platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("x86-64 builds exist on x86-64 hosts only")
    env = dict(os.environ, METALSIM_KERNEL_ISA=isa)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-k", "not other_isa_builds", __file__],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


@pytest.mark.parametrize("k", [1, 3])
def test_overlapping_input_rows_match_cpu(k):
    """X whose rows overlap (row stride 5 < width 12): the tiled kernel must not read
    it as one flat line of distinct positions."""
    base = torch.randn(2 * 8 * 40 + 64, generator=torch.Generator().manual_seed(k))
    shape, strides = (2, 8, 10, 12), (8 * 40, 40, 5, 1)
    w = torch.randn(8, 8, k, k, generator=torch.Generator().manual_seed(10 + k))
    out = F.conv2d(base.to("metalx").as_strided(shape, strides), w.to("metalx"))
    torch.testing.assert_close(out.cpu(), F.conv2d(base.as_strided(shape, strides), w), **tol(torch.float32))

