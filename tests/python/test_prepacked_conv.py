"""metalx.nn.PrepackedConv2d and the custom ops behind it (torch.ops.metalx.conv2d_*):
the same results as nn.Conv2d on CPU for every Conv2d setting, the weight packed once
and reused, and clear errors for bad input."""

import pytest
import torch

from metalx.nn import PrepackedConv2d

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=1e-2, atol=1e-2),
       torch.bfloat16: dict(rtol=4e-2, atol=4e-2)}

CONVS = [
    dict(in_channels=16, out_channels=24, kernel_size=3, padding=1),
    dict(in_channels=12, out_channels=20, kernel_size=(3, 2), padding=(1, 0), bias=False),
    dict(in_channels=16, out_channels=32, kernel_size=1, stride=2),
    dict(in_channels=8, out_channels=16, kernel_size=3, padding=2, dilation=2),
    dict(in_channels=32, out_channels=32, kernel_size=3, padding=1, groups=4),
    dict(in_channels=8, out_channels=8, kernel_size=4, padding="same"),      # even extent: extra bottom/right pad
    dict(in_channels=8, out_channels=8, kernel_size=3, padding="valid"),
    dict(in_channels=8, out_channels=12, kernel_size=3, padding=1, padding_mode="reflect"),
    dict(in_channels=8, out_channels=12, kernel_size=3, padding=(2, 1), padding_mode="circular"),
    dict(in_channels=8, out_channels=8, kernel_size=3, padding=1, groups=8),  # depthwise: plain weight
    dict(in_channels=8, out_channels=8, kernel_size=3, stride=2, padding=1),  # strided 3x3: plain weight
]


def make(cfg, dtype=torch.float32):
    torch.manual_seed(0)
    cpu = torch.nn.Conv2d(**cfg).to(dtype).eval()
    dev = torch.nn.Conv2d(**cfg).to(dtype)
    dev.load_state_dict(cpu.state_dict())
    return cpu, PrepackedConv2d(dev.to("metalx").eval())


@pytest.mark.parametrize("cfg", CONVS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_matches_cpu_conv2d(cfg):
    cpu, packed = make(cfg)
    expect_packed = cfg.get("groups", 1) != cfg["in_channels"] and cfg.get("stride", 1) == 1 or cfg["kernel_size"] == 1
    assert packed.uses_packed_weight == expect_packed
    for shape in ((2, cfg["in_channels"], 11, 9), (cfg["in_channels"], 6, 7)):  # batched and unbatched
        x = torch.randn(*shape)
        with torch.no_grad():
            torch.testing.assert_close(packed(x.to("metalx")).cpu(), cpu(x), **TOL[torch.float32])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_16bit_dtypes(dtype):
    cpu, packed = make(dict(in_channels=16, out_channels=16, kernel_size=3, padding=1), dtype)
    x = torch.randn(2, 16, 10, 10).to(dtype)
    with torch.no_grad():
        ref = torch.nn.functional.conv2d(x.float(), cpu.weight.float(), cpu.bias.float(), padding=1)
        torch.testing.assert_close(packed(x.to("metalx")).cpu().float(), ref, **TOL[dtype])


def test_channels_last_input_gives_channels_last_output():
    cpu, packed = make(dict(in_channels=16, out_channels=16, kernel_size=3, padding=1))
    x = torch.randn(2, 16, 9, 9).contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        y = packed(x.to("metalx"))
        torch.testing.assert_close(y.cpu(), cpu(x), **TOL[torch.float32])
    assert y.is_contiguous(memory_format=torch.channels_last)


def test_packed_once_and_reused():
    cpu, packed = make(dict(in_channels=16, out_channels=24, kernel_size=3, padding=1))
    before = packed.packed_weight.clone()
    assert before.dtype == torch.float32 and before.dim() == 1
    # 3 blocks of 8 output channels x 9 taps x 16 input channels x 8.
    assert before.numel() == 3 * 9 * 16 * 8
    for _ in range(3):
        with torch.no_grad():
            x = torch.randn(1, 16, 8, 8)
            torch.testing.assert_close(packed(x.to("metalx")).cpu(), cpu(x), **TOL[torch.float32])
    assert torch.equal(packed.packed_weight.cpu(), before.cpu())
    assert "packed_weight" in packed.state_dict() and not list(packed.parameters())


def test_packed_layout_is_blocks_of_output_channels():
    w = torch.randn(10, 3, 2, 2)
    packed = torch.ops.metalx.conv2d_weight_pack(w.to("metalx"), 1).cpu()
    # [tile][kh][kw][ic][8]: tile 0 holds channels 0..7, tile 1 channels 8, 9 and zeros.
    p = packed.view(2, 2, 2, 3, 8)
    torch.testing.assert_close(p[0].permute(3, 2, 0, 1), w[:8])
    torch.testing.assert_close(p[1, ..., :2].permute(3, 2, 0, 1), w[8:])
    assert torch.all(p[1, ..., 2:] == 0)


def test_errors():
    _, packed = make(dict(in_channels=16, out_channels=16, kernel_size=3, padding=1))
    with pytest.raises(RuntimeError, match="expected input.* to have 16 channels, but got 8"):
        packed(torch.randn(1, 8, 9, 9, device="metalx"))
    with pytest.raises(ValueError, match="3-D .* or 4-D"):
        packed(torch.randn(16, 9, device="metalx"))
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input size"):
        torch.ops.metalx.conv2d_packed(torch.randn(1, 16, 2, 2, device="metalx"), packed.packed_weight,
                                       [16, 16, 3, 3], None, [1, 1], [0, 0], [1, 1], 1)
    with pytest.raises(RuntimeError, match="packed for another weight shape"):
        torch.ops.metalx.conv2d_packed(torch.randn(1, 16, 9, 9, device="metalx"), packed.packed_weight,
                                       [16, 16, 1, 1], None, [1, 1], [0, 0], [1, 1], 1)
    with pytest.raises(RuntimeError, match="same metalx device"):
        torch.ops.metalx.conv2d_packed(torch.randn(1, 16, 9, 9), packed.packed_weight,
                                       [16, 16, 3, 3], None, [1, 1], [1, 1], [1, 1], 1)
    with pytest.raises(RuntimeError, match="expected bias to be 1-dimensional with 16 elements"):
        torch.ops.metalx.conv2d_packed(torch.randn(1, 16, 9, 9, device="metalx"), packed.packed_weight,
                                       [16, 16, 3, 3], torch.zeros(3, device="metalx"), [1, 1], [1, 1], [1, 1], 1)
    with pytest.raises(RuntimeError, match="does not run from a packed weight"):
        torch.ops.metalx.conv2d_packed(torch.randn(1, 8, 9, 9, device="metalx"), packed.packed_weight,
                                       [8, 1, 3, 3], None, [1, 1], [1, 1], [1, 1], 8)
    with pytest.raises(RuntimeError, match="expected a metalx weight"):
        torch.ops.metalx.conv2d_weight_pack(torch.randn(4, 4, 3, 3), 1)
    with pytest.raises(RuntimeError, match="divisible by 3"):
        torch.ops.metalx.conv2d_weight_pack(torch.randn(4, 4, 3, 3, device="metalx"), 3)
    with pytest.raises(TypeError, match="needs a torch.nn.Conv2d"):
        PrepackedConv2d(torch.nn.Linear(3, 3))
    with pytest.raises(ValueError, match="move the module to metalx"):
        PrepackedConv2d(torch.nn.Conv2d(3, 8, 3))


def test_no_gradient_through_the_packed_weight():
    _, packed = make(dict(in_channels=16, out_channels=16, kernel_size=3, padding=1))
    x = torch.randn(1, 16, 6, 6, device="metalx", requires_grad=True)
    with pytest.raises(RuntimeError, match="for inference and has no gradient"):
        packed(x)
    with torch.no_grad():
        assert not packed(x).requires_grad
    with torch.inference_mode():
        assert packed(x).shape == (1, 16, 6, 6)
