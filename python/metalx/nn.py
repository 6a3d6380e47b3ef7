"""Inference modules that keep their weights in the layout metalx's kernels read.

    from metalx.nn import PrepackedConv2d
    conv = torch.nn.Conv2d(64, 128, 3, padding=1).to("metalx").eval()
    fast = PrepackedConv2d(conv)      # packs the weight once
    y = fast(x)                       # == conv(x), without repacking on every call

A plain conv2d on metalx packs its weight (blocks of 8 output channels, float32) before
every call; PrepackedConv2d does it once, at construction, through the custom op
torch.ops.metalx.conv2d_weight_pack, and runs torch.ops.metalx.conv2d_packed. It is
for inference: the packed weight is a buffer, not a parameter, and no gradient flows
through it. Convolutions the packed kernel does not run (depthwise, or a horizontal
stride with a kernel wider than one column) keep the plain weight and call conv2d, so
every nn.Conv2d can be converted.
"""

import torch
import torch.nn.functional as F

__all__ = ["PrepackedConv2d"]


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


class PrepackedConv2d(torch.nn.Module):
    """An nn.Conv2d on metalx with its weight packed once (see the module docstring).

    Built from a Conv2d whose parameters live on a metalx device; later changes to
    that Conv2d's weight are not seen (pack again). Accepts every nn.Conv2d setting:
    padding as ints or "same"/"valid", padding_mode zeros/reflect/replicate/circular,
    groups, dilation, bias or none, batched (N, C, H, W) or unbatched (C, H, W) input.
    """

    def __init__(self, conv: torch.nn.Conv2d):
        super().__init__()
        if not isinstance(conv, torch.nn.Conv2d):
            raise TypeError(f"PrepackedConv2d needs a torch.nn.Conv2d, got {type(conv).__name__}")
        weight = conv.weight.detach()
        if weight.device.type != "metalx":
            raise ValueError(f"PrepackedConv2d: the Conv2d's weight is on {weight.device}; "
                             "move the module to metalx first (conv.to('metalx'))")
        if weight.dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise TypeError(f"PrepackedConv2d: weight dtype {weight.dtype} is not supported "
                            "(float32, float16, bfloat16)")
        self.in_channels = conv.in_channels
        self.out_channels = conv.out_channels
        self.kernel_size = _pair(conv.kernel_size)
        self.stride = _pair(conv.stride)
        self.dilation = _pair(conv.dilation)
        self.groups = conv.groups
        self.padding_mode = conv.padding_mode
        self.weight_shape = tuple(weight.shape)
        # Padding: explicit (top, left) pads for the kernel, plus what must be added
        # to the input first (padding_mode other than zeros, or the odd extra pixel
        # "same" puts at the bottom/right for even kernel extents).
        self._pre_pad = None
        if isinstance(conv.padding, str):
            if conv.padding == "valid":
                pads = (0, 0)
            else:  # "same": stride 1 (nn.Conv2d checks it)
                total = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
                pads = (total[0] // 2, total[1] // 2)
                extra = (total[0] - 2 * pads[0], total[1] - 2 * pads[1])
                if any(extra):
                    self._pre_pad = (0, extra[1], 0, extra[0])
        else:
            pads = _pair(conv.padding)
        if self.padding_mode != "zeros":
            # As nn.Conv2d does: pad the input with the mode, then convolve unpadded.
            if self._pre_pad is not None:
                raise ValueError("PrepackedConv2d: padding='same' with an even kernel extent and "
                                 f"padding_mode={self.padding_mode!r} is not supported")
            self._pre_pad = (pads[1], pads[1], pads[0], pads[0])
            pads = (0, 0)
        self.padding = pads
        self.uses_packed_weight = torch.ops.metalx.conv2d_uses_packed_weight(list(self.weight_shape),
                                                                             list(self.stride), self.groups)
        if self.uses_packed_weight:
            self.register_buffer("packed_weight", torch.ops.metalx.conv2d_weight_pack(weight, self.groups))
            self.weight = None
        else:
            self.register_buffer("weight", weight.clone())
            self.packed_weight = None
        self.register_buffer("bias", None if conv.bias is None else conv.bias.detach().clone())

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if input.dim() not in (3, 4):
            raise ValueError(f"PrepackedConv2d: expected a 3-D (unbatched) or 4-D (batched) input, "
                             f"got {input.dim()}-D input of size {tuple(input.shape)}")
        unbatched = input.dim() == 3
        x = input.unsqueeze(0) if unbatched else input
        if self._pre_pad is not None:
            mode = "constant" if self.padding_mode == "zeros" else self.padding_mode
            x = F.pad(x, self._pre_pad, mode=mode)
        if self.uses_packed_weight:
            y = torch.ops.metalx.conv2d_packed(x, self.packed_weight, list(self.weight_shape), self.bias,
                                               list(self.stride), list(self.padding), list(self.dilation),
                                               self.groups)
        else:
            y = F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
        return y.squeeze(0) if unbatched else y

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, groups={self.groups}, "
                f"padding_mode={self.padding_mode!r}, packed={self.uses_packed_weight}")
