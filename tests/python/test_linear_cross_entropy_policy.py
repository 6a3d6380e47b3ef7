"""linear_cross_entropy's chunked path picks its accumulation policy by device type;
metalx must get CPU's (float32 accumulation for float16/bfloat16), not torch's
fallback for unlisted devices (accumulation in the input's half precision)."""

import pytest
import torch
import torch.nn.functional as F


def test_auto_options_resolve_like_cpu():
    opts = torch.nn.LinearCrossEntropyOptions()
    for dtype in (torch.float16, torch.bfloat16):
        cpu = opts._adjust(8, 4, 16, dtype, torch.device("cpu"))
        dev = opts._adjust(8, 4, 16, dtype, torch.device("metalx"))
        assert (dev.acc_policy, dev.acc_dtype) == (cpu.acc_policy, cpu.acc_dtype) == ("accurate", torch.float32)
    # float32 inputs are untouched (no wider accumulation exists on Metal).
    assert opts._adjust(8, 4, 16, torch.float32, torch.device("metalx")).acc_dtype == torch.float32


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_chunked_loss_and_gradients_match_cpu(dtype, reduction):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 3, generator=g).to(dtype)
    w = torch.randn(4, 3, generator=g).to(dtype)
    target = torch.randint(0, 4, (8,), generator=g)
    opts = torch.nn.LinearCrossEntropyOptions(batch_chunk_size=2)

    def run(device):
        xi = x.to(device).requires_grad_()
        wi = w.to(device).requires_grad_()
        loss = F.linear_cross_entropy(xi, wi, target.to(device), reduction=reduction, options=opts)
        loss.sum().backward()
        return [t.detach().cpu() for t in (loss, xi.grad, wi.grad)]

    # Same ops on the same (CPU) kernels with the same policy: bitwise equal.
    for actual, expected in zip(run("metalx"), run("cpu")):
        assert torch.equal(actual, expected)
