"""Convolution on metalx: native kernels for 1-D/2-D (plain and transposed) convolutions
in float32/float16/bfloat16, forward and every gradient, compared with CPU torch;
3-D and float64 run on the CPU over device memory and match CPU exactly."""

import itertools

import pytest
import torch
import torch.nn.functional as F

CL = torch.channels_last
LOW = (torch.float16, torch.bfloat16)


def tol(dtype):
    return {torch.float32: dict(rtol=1e-4, atol=1e-4),
            torch.float16: dict(rtol=1e-2, atol=1e-2),
            torch.bfloat16: dict(rtol=4e-2, atol=4e-2),
            torch.float64: dict(rtol=0, atol=0)}[dtype]


def layout_view(base, layout, c):
    """A view of `base` (N, C+extra, H, 2W) with channels c in the given layout."""
    if layout == "contiguous":
        return base[:, :c, :, : base.shape[3] // 2].contiguous()
    if layout == "channels_last":
        return base[:, :c, :, : base.shape[3] // 2].contiguous(memory_format=CL)
    if layout == "strided":  # every other column: non-contiguous, no copy
        return base[:, :c, :, ::2]
    if layout == "cl_channel_slice":  # channel slice of a channels_last tensor: offset > 0
        return base.contiguous(memory_format=CL)[:, 1 : 1 + c, :, : base.shape[3] // 2]
    raise ValueError(layout)


def make_input(n, c, h, w, layout, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(n, c + 2, h, 2 * w, generator=g).to(dtype)
    return layout_view(base, layout, c), layout_view(base.to("metalx"), layout, c)


def conv_and_grads(x, w, b, transposed, grad_seed=1, **kw):
    x = x.detach().requires_grad_()
    w = w.detach().requires_grad_()
    if b is not None:
        b = b.detach().requires_grad_()
    fn = F.conv_transpose2d if transposed else F.conv2d
    if x.dim() == 3:
        fn = F.conv_transpose1d if transposed else F.conv1d
    out = fn(x, w, b, **kw)
    g = torch.Generator().manual_seed(grad_seed)
    go = torch.randn(out.shape, generator=g).to(out.dtype).to(out.device)
    grads = torch.autograd.grad(out, [t for t in (x, w, b) if t is not None], go, allow_unused=True)
    return out, grads


def compare(dev_res, cpu_res, dtype):
    out_d, grads_d = dev_res
    out_c, grads_c = cpu_res
    t = tol(dtype)
    torch.testing.assert_close(out_d.cpu().float(), out_c.float(), **t)
    for gd, gc in zip(grads_d, grads_c):
        if gc is None:
            assert gd is None
            continue
        # Weight/bias grads sum many products: scale the tolerance with their size.
        torch.testing.assert_close(gd.cpu().float(), gc.float(), rtol=t["rtol"] * 4, atol=t["atol"] * 4)


def reference(x_cpu, w_cpu, b_cpu, dtype, transposed, **kw):
    """CPU result: float32 math on the same (rounded) values for 16-bit dtypes."""
    if dtype in LOW:
        f = lambda t: None if t is None else t.float()
        return conv_and_grads(f(x_cpu), f(w_cpu), f(b_cpu), transposed, **kw)
    return conv_and_grads(x_cpu, w_cpu, b_cpu, transposed, **kw)


GRID = [
    # cin, cout, k, stride, padding, dilation, groups
    (3, 8, (3, 3), 1, 1, 1, 1),
    (4, 6, (3, 2), (2, 1), (1, 0), 1, 2),
    (6, 6, (3, 3), 1, 1, 1, 6),           # depthwise
    (4, 8, (3, 3), 1, 2, 2, 4),           # depthwise multiplier 2, dilation
    (5, 7, (1, 1), 1, 0, 1, 1),           # 1x1
    (8, 4, (1, 1), 2, 0, 1, 1),           # strided 1x1 (projection)
    (4, 4, (3, 3), 1, "same", 1, 1),
    (4, 4, (3, 3), 1, "same", (2, 1), 2),
    (3, 5, (2, 3), 1, "valid", 1, 1),
    (4, 8, (5, 5), 3, 2, 1, 1),
]


@pytest.mark.parametrize("cfg", GRID, ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_conv2d_matches_cpu(cfg, bias, dtype):
    cin, cout, k, stride, padding, dilation, groups = cfg
    x_c, x_d = make_input(2, cin, 9, 7, "contiguous", dtype)
    g = torch.Generator().manual_seed(3)
    w_c = (torch.randn(cout, cin // groups, *k, generator=g) * 0.3).to(dtype)
    b_c = torch.randn(cout, generator=g).to(dtype) if bias else None
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    torch.metalx.reset_fallback_stats()
    dev = conv_and_grads(x_d, w_c.to("metalx"), None if b_c is None else b_c.to("metalx"), False, **kw)
    stats = torch.metalx.fallback_stats()
    assert not any("conv" in op for op in stats), stats
    compare(dev, reference(x_c, w_c, b_c, dtype, False, **kw), dtype)


@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "strided", "cl_channel_slice"])
@pytest.mark.parametrize("weight_cl", [False, True], ids=["w_nchw", "w_cl"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_conv2d_layouts_and_memory_format(layout, weight_cl, dtype):
    x_c, x_d = make_input(2, 5, 8, 6, layout, dtype)
    assert x_d.stride() == x_c.stride() and x_d.storage_offset() == x_c.storage_offset()
    g = torch.Generator().manual_seed(4)
    w_c = (torch.randn(6, 5, 3, 3, generator=g) * 0.3).to(dtype)
    if weight_cl:
        w_c = w_c.contiguous(memory_format=CL)
    b_c = torch.randn(6, generator=g).to(dtype)
    kw = dict(stride=1, padding=1)
    dev = conv_and_grads(x_d, w_c.to("metalx"), b_c.to("metalx"), False, **kw)
    compare(dev, reference(x_c, w_c, b_c, dtype, False, **kw), dtype)
    if dtype == torch.float32:
        out_c = F.conv2d(x_c, w_c, b_c, **kw)
        for fmt in (torch.contiguous_format, CL):
            assert dev[0].is_contiguous(memory_format=fmt) == out_c.is_contiguous(memory_format=fmt), fmt


TRANSPOSED = [
    # cin, cout, k, stride, padding, output_padding, dilation, groups
    (4, 6, (3, 3), 1, 0, 0, 1, 1),
    (4, 6, (3, 3), 2, 1, 1, 1, 2),
    (3, 5, (2, 4), (2, 3), (0, 1), (1, 2), 1, 1),
    (6, 6, (3, 3), 2, 1, 0, 2, 6),
    (5, 3, (1, 1), 1, 0, 0, 1, 1),
]


@pytest.mark.parametrize("cfg", TRANSPOSED, ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_conv_transpose2d_matches_cpu(cfg, bias, dtype, layout):
    cin, cout, k, stride, padding, output_padding, dilation, groups = cfg
    x_c, x_d = make_input(2, cin, 5, 6, layout, dtype)
    g = torch.Generator().manual_seed(5)
    w_c = (torch.randn(cin, cout // groups, *k, generator=g) * 0.3).to(dtype)
    b_c = torch.randn(cout, generator=g).to(dtype) if bias else None
    kw = dict(stride=stride, padding=padding, output_padding=output_padding, dilation=dilation, groups=groups)
    torch.metalx.reset_fallback_stats()
    dev = conv_and_grads(x_d, w_c.to("metalx"), None if b_c is None else b_c.to("metalx"), True, **kw)
    assert not any("conv" in op for op in torch.metalx.fallback_stats())
    compare(dev, reference(x_c, w_c, b_c, dtype, True, **kw), dtype)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_conv1d_matches_cpu(transposed, dtype):
    g = torch.Generator().manual_seed(6)
    x_c = torch.randn(3, 4, 11, generator=g).to(dtype)
    w_c = (torch.randn(4, 6, 3, generator=g) * 0.3).to(dtype)  # cin=4 (cout 6) / cout=4 (cin 6)
    b_c = torch.randn(6 if transposed else 4, generator=g).to(dtype)
    if transposed:
        kw = dict(stride=2, padding=1, output_padding=1, groups=2)
        w_c = w_c.reshape(4, 3, 6)[:, :, :3].contiguous()  # (cin=4, cout/groups=3, k=3)
        b_c = b_c[:6]
    else:
        x_c = torch.randn(3, 6, 11, generator=g).to(dtype)
        kw = dict(stride=2, padding=2, dilation=2, groups=2)
        w_c = (torch.randn(4, 3, 3, generator=g) * 0.3).to(dtype)
    torch.metalx.reset_fallback_stats()
    dev = conv_and_grads(x_c.to("metalx"), w_c.to("metalx"), b_c.to("metalx"), transposed, **kw)
    assert not any("conv" in op for op in torch.metalx.fallback_stats())
    compare(dev, reference(x_c, w_c, b_c, dtype, transposed, **kw), dtype)


@pytest.mark.parametrize("transposed", [False, True])
def test_empty_batch(transposed):
    x = torch.randn(0, 4, 5, 5)
    w = torch.randn(4, 6, 3, 3) if transposed else torch.randn(6, 4, 3, 3)
    b = torch.randn(6)
    dev = conv_and_grads(x.to("metalx"), w.to("metalx"), b.to("metalx"), transposed, padding=1)
    cpu = conv_and_grads(x, w, b, transposed, padding=1)
    assert dev[0].shape == cpu[0].shape
    compare(dev, cpu, torch.float32)


def test_float64_runs_on_cpu_and_matches_exactly():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 4, 7, 6, generator=g, dtype=torch.float64)
    w = torch.randn(6, 2, 3, 3, generator=g, dtype=torch.float64)
    b = torch.randn(6, generator=g, dtype=torch.float64)
    kw = dict(stride=(2, 1), padding=1, groups=2)
    compare(conv_and_grads(x.to("metalx"), w.to("metalx"), b.to("metalx"), False, **kw),
            conv_and_grads(x, w, b, False, **kw), torch.float64)
    xt = torch.randn(2, 6, 4, 5, generator=g, dtype=torch.float64)
    kw = dict(stride=2, padding=1, output_padding=1, groups=2)
    wt = torch.randn(6, 2, 3, 3, generator=g, dtype=torch.float64)
    compare(conv_and_grads(xt.to("metalx"), wt.to("metalx"), None, True, **kw),
            conv_and_grads(xt, wt, None, True, **kw), torch.float64)


def test_gradcheck_float64_and_double_backward():
    g = torch.Generator().manual_seed(8)
    x = torch.randn(1, 2, 5, 4, generator=g, dtype=torch.float64, device="cpu").to("metalx").requires_grad_()
    w = torch.randn(4, 1, 3, 2, generator=g, dtype=torch.float64).to("metalx").requires_grad_()
    b = torch.randn(4, generator=g, dtype=torch.float64).to("metalx").requires_grad_()
    fn = lambda x, w, b: F.conv2d(x, w, b, stride=(1, 2), padding=1, groups=2)
    assert torch.autograd.gradcheck(fn, (x, w, b))
    assert torch.autograd.gradgradcheck(fn, (x, w, b))


@pytest.mark.parametrize("dtype", [torch.float32], ids=str)
def test_double_backward_float32_matches_cpu(dtype):
    g = torch.Generator().manual_seed(9)
    x = torch.randn(2, 4, 6, 5, generator=g)
    w = torch.randn(6, 2, 3, 3, generator=g) * 0.3

    def run(x, w):
        x = x.clone().requires_grad_()
        w = w.clone().requires_grad_()
        out = F.conv2d(x, w, padding=1, groups=2)
        gx, gw = torch.autograd.grad(out.square().sum(), [x, w], create_graph=True)
        return torch.autograd.grad(gx.square().sum() + gw.square().sum(), [x, w])

    dev = run(x.to("metalx"), w.to("metalx"))
    cpu = run(x, w)
    for d, c in zip(dev, cpu):
        torch.testing.assert_close(d.cpu(), c, rtol=1e-3, atol=1e-3)


def test_conv3d_works():
    g = torch.Generator().manual_seed(10)
    x = torch.randn(1, 2, 4, 5, 5, generator=g)
    w = torch.randn(3, 2, 2, 3, 3, generator=g)
    b = torch.randn(3, generator=g)
    compare(conv_and_grads3d(x.to("metalx"), w.to("metalx"), b.to("metalx")),
            conv_and_grads3d(x, w, b), torch.float32)


def conv_and_grads3d(x, w, b):
    x, w, b = (t.detach().requires_grad_() for t in (x, w, b))
    out = F.conv3d(x, w, b, padding=1)
    go = torch.ones_like(out)
    return out, torch.autograd.grad(out, [x, w, b], go)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular", "zeros"])
def test_padding_modes(mode):
    torch.manual_seed(11)
    m = torch.nn.Conv2d(3, 4, 3, padding=1, padding_mode=mode)
    x = torch.randn(2, 3, 6, 5)
    m_d = torch.nn.Conv2d(3, 4, 3, padding=1, padding_mode=mode).to("metalx")
    m_d.load_state_dict(m.state_dict())
    out_c = m(x)
    out_d = m_d(x.to("metalx"))
    torch.testing.assert_close(out_d.cpu(), out_c, rtol=1e-4, atol=1e-4)
    out_c.sum().backward()
    out_d.sum().backward()
    torch.testing.assert_close(m_d.weight.grad.cpu(), m.weight.grad, rtol=1e-3, atol=1e-3)


def _cpu_error(fn):
    try:
        fn("cpu")
    except RuntimeError as e:
        return str(e)
    raise AssertionError("CPU accepted it")


@pytest.mark.parametrize("case", ["channels", "groups", "kernel_too_big", "dtype_mix", "weight_dims"])
def test_errors_match_cpu(case):
    def fn(device):
        x = torch.randn(1, 4, 5, 5, device=device)
        w = torch.randn(6, 4, 3, 3, device=device)
        if case == "channels":
            w = torch.randn(6, 3, 3, 3, device=device)
            return F.conv2d(x, w)
        if case == "groups":
            return F.conv2d(x, torch.randn(6, 4, 3, 3, device=device)[:, :2], groups=3)
        if case == "kernel_too_big":
            return F.conv2d(x, torch.randn(6, 4, 7, 7, device=device))
        if case == "dtype_mix":
            return F.conv2d(x, w.half())
        if case == "weight_dims":
            return F.conv2d(x, w[0])
    message = _cpu_error(fn)
    with pytest.raises(RuntimeError) as err:
        fn("metalx")
    # Same message, up to the device names.
    norm = lambda s: s.replace("metalx:0", "X").replace("metalx", "X").replace("cpu", "X")
    assert norm(str(err.value)).split("\n")[0] == norm(message).split("\n")[0]


def test_mixed_devices_raise():
    x = torch.randn(1, 4, 5, 5, device="metalx")
    w = torch.randn(6, 4, 3, 3)
    with pytest.raises(RuntimeError):
        F.conv2d(x, w)
    with pytest.raises(RuntimeError):
        F.conv2d(x.cpu(), w.to("metalx"))


@pytest.mark.parametrize("make", ["conv2d", "conv_transpose2d", "conv1d"])
def test_training_matches_cpu(make):
    torch.manual_seed(12)
    if make == "conv2d":
        build = lambda: torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                            torch.nn.Conv2d(8, 8, 3, stride=2, groups=8), torch.nn.Flatten(),
                                            torch.nn.LazyLinear(2))
        x = torch.randn(4, 3, 10, 9)
    elif make == "conv_transpose2d":
        build = lambda: torch.nn.Sequential(torch.nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1),
                                            torch.nn.Tanh(), torch.nn.Conv2d(4, 2, 1), torch.nn.Flatten(),
                                            torch.nn.LazyLinear(2))
        x = torch.randn(4, 3, 5, 4)
    else:
        build = lambda: torch.nn.Sequential(torch.nn.Conv1d(3, 6, 5, padding=2), torch.nn.ReLU(),
                                            torch.nn.Conv1d(6, 4, 3, stride=2), torch.nn.Flatten(),
                                            torch.nn.LazyLinear(2))
        x = torch.randn(4, 3, 16)
    y = torch.randn(4, 2)
    m_c = build()
    m_c(x)
    m_d = build()
    m_d(x)
    m_d.load_state_dict(m_c.state_dict())
    m_d.to("metalx")
    opt_c = torch.optim.SGD(m_c.parameters(), lr=0.05)
    opt_d = torch.optim.SGD(m_d.parameters(), lr=0.05)
    for _ in range(4):
        for m, opt, xx, yy in ((m_c, opt_c, x, y), (m_d, opt_d, x.to("metalx"), y.to("metalx"))):
            opt.zero_grad()
            loss = F.mse_loss(m(xx), yy)
            loss.backward()
            opt.step()
    for (name, p_c), p_d in zip(m_c.named_parameters(), m_d.parameters()):
        torch.testing.assert_close(p_d.detach().cpu(), p_c.detach(), rtol=1e-4, atol=1e-4, msg=name)


def test_no_fallback_for_native_dtypes():
    torch.metalx.reset_fallback_stats()
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.randn(2, 4, 6, 6, device="metalx", dtype=dtype, requires_grad=True)
        w = torch.randn(8, 4, 3, 3, device="metalx", dtype=dtype, requires_grad=True)
        b = torch.randn(8, device="metalx", dtype=dtype, requires_grad=True)
        F.conv2d(x, w, b, padding=1).backward(torch.ones(2, 8, 6, 6, device="metalx", dtype=dtype))
    stats = torch.metalx.fallback_stats()
    assert not any("conv" in op for op in stats), stats


WIDE = [
    # cin, cout, k, stride, padding, dilation, groups  (rows wide enough for the
    # kernels' unit-stride fast paths, with partial tiles at the ends)
    (4, 8, (3, 3), 1, 1, 1, 1),
    (8, 8, (3, 5), 1, (1, 2), (1, 2), 2),
    (5, 9, (1, 1), 1, 0, 1, 1),
    (8, 8, (3, 3), 1, 0, 1, 8),
    (4, 8, (3, 3), 2, 1, 1, 1),           # strided: phase-tiled input gradient
    (8, 4, (1, 1), 2, 0, 1, 1),
    (4, 4, (2, 3), (1, 3), (1, 2), 1, 2),
]


@pytest.mark.parametrize("cfg", WIDE, ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("width", [16, 21])
@pytest.mark.parametrize("layout", ["contiguous", "cl_channel_slice"])
def test_conv2d_wide_rows_match_cpu(cfg, width, layout):
    cin, cout, k, stride, padding, dilation, groups = cfg
    x_c, x_d = make_input(2, cin, 5, width * (2 if stride != 1 else 1), layout, torch.float32)
    g = torch.Generator().manual_seed(13)
    w_c = torch.randn(cout, cin // groups, *k, generator=g) * 0.3
    b_c = torch.randn(cout, generator=g)
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    compare(conv_and_grads(x_d, w_c.to("metalx"), b_c.to("metalx"), False, **kw),
            conv_and_grads(x_c, w_c, b_c, False, **kw), torch.float32)
    wt = torch.randn(cin, cout // groups, *k, generator=g) * 0.3
    kw.pop("padding")
    compare(conv_and_grads(x_d, wt.to("metalx"), None, True, **kw),
            conv_and_grads(x_c, wt, None, True, **kw), torch.float32)
