"""fill_ / zero_ run as metalx kernels for dense tensors of every dtype, with CPU's
value conversions; views with gaps natively, overlapping tensors through the CPU fallback."""

import pytest
import torch

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32,
          torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("value", [0, 1, -3.75, 1e20, float("nan")], ids=repr)
def test_fill_matches_cpu_and_runs_natively(dtype, value):
    if dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8) and (
            value != value or abs(value) > 1e4 or value < 0 and dtype == torch.uint8):
        pytest.skip("converting this value to the integer dtype is undefined in C++")
    torch.metalx.reset_fallback_stats()
    x = torch.empty(1000, dtype=dtype, device="metalx")
    try:
        expected = torch.empty(1000, dtype=dtype).fill_(value)
    except RuntimeError as cpu_error:  # e.g. 1e20 does not fit float16: same error
        with pytest.raises(RuntimeError, match=str(cpu_error)):
            x.fill_(value)
        return
    x.fill_(value)
    torch.testing.assert_close(x.cpu(), expected, equal_nan=True, rtol=0, atol=0)
    assert torch.metalx.fallback_stats() == {}


def test_one_element_fill_converts_like_cpu():
    # CPU checks for overflow only when filling two or more elements.
    one = torch.empty(1, dtype=torch.float16, device="metalx").fill_(1e20)
    assert torch.equal(one.cpu(), torch.empty(1, dtype=torch.float16).fill_(1e20))


def test_factories_fill_on_the_device():
    torch.metalx.reset_fallback_stats()
    assert torch.zeros(3, 5, device="metalx").cpu().eq(0).all()
    assert torch.ones(7, dtype=torch.float64, device="metalx").cpu().eq(1).all()
    assert torch.full((2, 3), 2.5, dtype=torch.float16, device="metalx").cpu().eq(2.5).all()
    assert torch.metalx.fallback_stats() == {}


def test_dense_permuted_layouts_fill_natively():
    torch.metalx.reset_fallback_stats()
    x = torch.empty(2, 3, 4, 5, device="metalx", memory_format=torch.channels_last)
    x.fill_(4.0)
    assert x.is_contiguous(memory_format=torch.channels_last)
    assert x.cpu().eq(4.0).all()
    assert torch.metalx.fallback_stats() == {}


def test_offset_view_fills_only_its_elements():
    base = torch.zeros(10, device="metalx")
    base[3:7].fill_(1.0)  # a dense view at a storage offset
    expected = torch.zeros(10)
    expected[3:7] = 1.0
    assert torch.equal(base.cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.int8, torch.bool])
def test_non_dense_view_is_native(dtype):
    base = torch.zeros(4, 6, dtype=dtype, device="metalx")
    torch.metalx.reset_fallback_stats()
    base[:, ::2].fill_(1)  # gaps: one element filled, then broadcast by the strided copy
    base.t()[1:3, 1].zero_()
    expected = torch.zeros(4, 6, dtype=dtype)
    expected[:, ::2] = 1
    expected.t()[1:3, 1] = 0
    assert torch.equal(base.cpu(), expected)
    assert torch.metalx.fallback_stats() == {}


def test_broadcast_tensor_fills_its_elements_natively():
    base = torch.zeros(3, 1, device="metalx")
    torch.metalx.reset_fallback_stats()
    base.expand(3, 4).fill_(2.0)  # every column is the same memory
    assert torch.equal(base.cpu(), torch.full((3, 1), 2.0))
    strided = torch.zeros(5, device="metalx")
    strided[::2].unsqueeze(1).expand(3, 4).zero_()
    strided[::2].unsqueeze(1).expand(3, 4).fill_(1.5)
    assert torch.equal(strided.cpu(), torch.tensor([1.5, 0, 1.5, 0, 1.5]))
    assert torch.metalx.fallback_stats() == {}


def test_other_overlapping_views_fall_back_and_are_correct():
    base = torch.zeros(6, device="metalx")
    torch.metalx.reset_fallback_stats()
    view = base.as_strided((3, 3), (1, 1))  # rows overlap by two elements
    view.fill_(4.0)  # CPU allows it: every alias gets the value
    assert torch.equal(base.cpu(), torch.tensor([4.0, 4, 4, 4, 4, 0]))
    assert torch.metalx.fallback_stats().get("aten::fill_.Scalar") == 1


def test_large_fill_uses_the_grid_stride_loop():
    n = (256 * 4096) * 3 + 17  # more elements than threads dispatched
    x = torch.empty(n, dtype=torch.int16, device="metalx").fill_(-7)
    y = x.cpu()
    assert y.eq(-7).all() and y.numel() == n
