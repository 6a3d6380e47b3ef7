"""arange on the device (backend/ops/range.cpp) against CPU torch: dtypes, negative
steps, empty ranges, out=, CPU's errors, and fractional ranges on CPU's kernel."""

import pytest
import torch

from device_checks import assert_native

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.float32,
                                   torch.float16, torch.bfloat16])
@pytest.mark.parametrize("args", [(10,), (3, 17), (20, 2, -3), (-5, 5, 2), (4, 4), (0, 100, 7), (0, 250, 3)])
def test_arange_matches_cpu(dtype, args):
    if dtype == torch.uint8 and min(args) < 0:
        pytest.skip("negative values in uint8")
    got = torch.arange(*args, dtype=dtype, device=DEV)
    ref = torch.arange(*args, dtype=dtype)
    assert got.device.type == DEV and got.dtype == ref.dtype
    assert torch.equal(got.cpu(), ref)
    assert_native()


def test_default_dtype_out_and_float_bounds():
    assert torch.equal(torch.arange(5, device=DEV).cpu(), torch.arange(5))
    assert torch.equal(torch.arange(0.0, 6.0, 2.0, device=DEV).cpu(), torch.arange(0.0, 6.0, 2.0))
    assert torch.equal(torch.arange(0, 5.5, device=DEV).cpu(), torch.arange(0, 5.5))
    out = torch.empty(0, device=DEV, dtype=torch.int32)
    torch.arange(2, 9, out=out)
    assert torch.equal(out.cpu(), torch.arange(2, 9, dtype=torch.int32))
    assert_native()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("args", [(-0.5, 0.5, 0.5), (0, 3, 0.25), (-2.75, 4, 0.125), (1, -1, -0.0625),
                                  (0.5, 40.5), (2 ** -20, 2 ** -18, 2 ** -22)])
def test_dyadic_steps_run_on_the_device(dtype, args):
    # Multiples of a power of two are exact in every floating dtype (as in mvlgamma's
    # steps of 0.5), so the device's scaled integer arithmetic gives CPU's values.
    got = torch.arange(*args, dtype=dtype, device=DEV)
    ref = torch.arange(*args, dtype=dtype)
    assert torch.equal(got.cpu(), ref)
    assert_native()


def test_dyadic_ranges_that_would_round_or_truncate_take_cpus_kernel():
    cases = [((0, 2048, 0.5), torch.float16),  # 1024.5 rounds in half
             ((0.5, 5, 1), torch.int64),  # CPU truncates each double value
             ((0, 1, 2 ** -30), torch.float32)]  # more binary places than the device path takes
    for args, dtype in cases:
        got = torch.arange(*args, dtype=dtype, device=DEV)
        assert torch.equal(got.cpu(), torch.arange(*args, dtype=dtype))
    assert torch.metalx.fallback_stats() == {"aten::arange.start_out": 3}


def test_mvlgamma_runs_natively():
    x = torch.rand(5, 7) * 4 + 2
    for p in (1, 3):
        torch.testing.assert_close(torch.mvlgamma(x.to(DEV), p).cpu(), torch.mvlgamma(x, p))
        out = torch.empty(0, device=DEV)
        torch.mvlgamma(x.to(DEV), p, out=out)
        torch.testing.assert_close(out.cpu(), torch.mvlgamma(x, p))
    edge = torch.tensor([0.0, 0.5, 1.0, -1.5])  # poles of lgamma's terms: inf as on CPU
    torch.testing.assert_close(torch.mvlgamma(edge.to(DEV), 3).cpu(), torch.mvlgamma(edge, 3))
    assert_native()


def test_fractional_and_rounding_ranges_match_cpu_through_its_kernel():
    got = torch.arange(0, 1, 0.1, device=DEV)
    assert torch.equal(got.cpu(), torch.arange(0, 1, 0.1))
    big = torch.arange(10000, dtype=torch.bfloat16, device=DEV)  # values that round in bfloat16
    assert torch.equal(big.cpu(), torch.arange(10000, dtype=torch.bfloat16))
    assert torch.metalx.fallback_stats() == {"aten::arange.start_out": 2}


def test_errors_match_cpu():
    for args in [(0, 10, 0), (0, 10, -1), (0, float("inf"))]:
        with pytest.raises(RuntimeError) as cpu:
            torch.arange(*args)
        with pytest.raises(RuntimeError) as got:
            torch.arange(*args, device=DEV)
        assert str(got.value) == str(cpu.value)
