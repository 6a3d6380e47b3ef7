"""float64 reciprocal on the device (kernels/float64_bits.h: integer arithmetic, as
Metal has no double) against CPU torch, bit for bit: every exponent range, subnormal
inputs and results, overflow, zeros, infinities and NaN payloads; layouts and out=."""

import pytest
import torch

from device_checks import assert_native

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"


def bits(t):
    return t.contiguous().view(torch.int64)


def assert_same_bits(got, ref):
    assert got.device.type == DEV and got.dtype == torch.float64 and got.shape == ref.shape
    got = got.cpu()
    mismatch = (bits(got) != bits(ref)).nonzero()
    assert mismatch.numel() == 0, (
        f"{mismatch.shape[0]} values differ, first: 1/{ref.flatten()[0]!r}: "
        f"got {got.flatten()[mismatch[0]].item()!r} expected {ref.flatten()[mismatch[0]].item()!r}"
    )


def edge_values():
    f = torch.finfo(torch.float64)
    values = [0.0, -0.0, float("inf"), float("-inf"), 1.0, -1.0, 3.0, 0.1, f.max, -f.max, f.tiny, f.smallest_normal,
              2.0**1023, 2.0**-1022, 2.0**-1023, 2.0**-1074, -(2.0**-1074), 2.0**-1073, 3 * 2.0**-1074,
              1 / f.max, 0.5 * (2.0**-1022), (2.0**1022) * 1.5, (2.0**1022) * 1.9999999999999998]
    t = torch.tensor(values, dtype=torch.float64)
    # NaNs with payloads and signs (the CPU returns the operand, quieted).
    nan_bits = torch.tensor([0x7FF8000000000000, 0x7FF0000000000001, 0xFFF0000000000123 - (1 << 64),
                             0x7FFFFFFFFFFFFFFF], dtype=torch.int64)
    return torch.cat([t, nan_bits.view(torch.float64)])


def random_bit_patterns(n, seed=0):
    # Every exponent, sign and mantissa: uniform over all 2^64 patterns, plus values
    # near 1 (the common case) and subnormals.
    g = torch.Generator().manual_seed(seed)
    raw = torch.randint(-(2**63), 2**63 - 1, (n,), dtype=torch.int64, generator=g).view(torch.float64)
    near_one = torch.rand(n, dtype=torch.float64, generator=g) * 4 - 2
    subnormal = torch.randint(1, 2**52, (n,), dtype=torch.int64, generator=g).view(torch.float64)
    return torch.cat([raw, near_one, subnormal])


def test_edge_values_match_cpu_bit_for_bit():
    x = edge_values()
    assert_same_bits(x.to(DEV).reciprocal(), x.reciprocal())
    assert_native()


def test_random_bit_patterns_match_cpu_bit_for_bit():
    x = random_bit_patterns(200_000)
    assert_same_bits(x.to(DEV).reciprocal(), x.reciprocal())
    assert_native()


def test_results_at_the_subnormal_boundary_round_as_cpu():
    # 1/x around 2^-1022 (x around 2^1022): the last normal, the first subnormal and the
    # ties that round into the normal range.
    g = torch.Generator().manual_seed(1)
    base = torch.tensor(2.0**1022, dtype=torch.float64)
    mantissas = torch.randint(0, 2**52, (20_000,), dtype=torch.int64, generator=g)
    x = (bits(base.expand(20_000)) + mantissas).view(torch.float64)
    x = torch.cat([x, x * 2, x / 2, -x])
    assert_same_bits(x.to(DEV).reciprocal(), x.reciprocal())


def test_layouts_out_and_in_place():
    x = random_bit_patterns(3000, seed=2).reshape(90, 100)
    d = x.to(DEV)
    assert_same_bits(d.t().reciprocal(), x.t().reciprocal())  # strided
    assert_same_bits(d[::3, 1::2].reciprocal(), x[::3, 1::2].reciprocal())  # offset and steps
    out = torch.empty(0, dtype=torch.float64, device=DEV)
    torch.reciprocal(d, out=out)
    assert_same_bits(out, x.reciprocal())
    y = d.clone()
    y.reciprocal_()
    assert_same_bits(y, x.reciprocal())
    assert_native()


def test_grad_scaler_inverse_scale_stays_on_device():
    scale = torch.full((1,), 65536.0, device=DEV)
    inv = scale.double().reciprocal().float()
    assert inv.item() == 1 / 65536
    assert_native()
