"""complex32 convolutions on metalx are torch's decomposition into float16 real
convolutions (view_as_real through the fallback keeps the view's float16 dtype)."""

import torch
import torch.nn.functional as F


def _gauss(x, w, b, stride):
    # torch's complex convolution: three real convolutions, (a - b) + i(c - a - b).
    xr, xi = torch.view_as_real(x).unbind(-1)
    wr, wi = torch.view_as_real(w).unbind(-1)
    br, bi = torch.view_as_real(b).unbind(-1)
    a = F.conv_transpose1d(xr, wr, br, stride)
    bb = F.conv_transpose1d(xi, wi, None, stride)
    c = F.conv_transpose1d(xr + xi, wr + wi, br + bi, stride)
    return a - bb + 1j * (c - a - bb)


def test_view_as_real_of_complex32_is_float16():
    x = torch.randn(3, 4, dtype=torch.complex64).to(torch.complex32)
    v = torch.view_as_real(x.to("metalx"))
    assert v.dtype == torch.float16 and v.shape == (3, 4, 2)
    assert torch.equal(v.cpu(), torch.view_as_real(x))


def test_complex32_conv_transpose_is_the_real_decomposition():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 6, dtype=torch.complex64, generator=g).to(torch.complex32).to("metalx")
    w = torch.randn(3, 4, 3, dtype=torch.complex64, generator=g).to(torch.complex32).to("metalx")
    b = torch.randn(4, dtype=torch.complex64, generator=g).to(torch.complex32).to("metalx")
    native = F.conv_transpose1d(x, w, b, 2)
    assert native.dtype == torch.complex32 and native.is_metalx
    assert torch.equal(torch.view_as_real(native).cpu(), torch.view_as_real(_gauss(x, w, b, 2)).cpu())
    # And it is close to CPU's (the real float16 convolutions round differently).
    expected = F.conv_transpose1d(x.cpu(), w.cpu(), b.cpu(), 2)
    torch.testing.assert_close(torch.view_as_real(native).cpu().float(), torch.view_as_real(expected).float(),
                               atol=2e-2, rtol=1e-2)
