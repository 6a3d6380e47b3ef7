"""copy_ between CPU and metalx, table-driven: layouts x dtypes x directions, compared
with the same copy done by CPU torch. Destinations keep the bytes between their
elements; nothing falls back to the CPU."""

import itertools

import pytest
import torch

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
          torch.complex128]


def sample(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64) * 50
    if dtype.is_complex:
        return torch.complex(x, x.flip(-1) if x.dim() else x).to(dtype)
    return x.to(dtype)


# Each layout makes a (source, destination-maker) pair from a base tensor on a device.
def layouts():
    def contiguous(t):
        return t

    def transposed(t):
        return t.reshape(6, 20).t()

    def permuted_nhwc(t):
        return t.reshape(2, 3, 4, 5).permute(0, 2, 3, 1)

    def sliced_with_gaps(t):
        return t.reshape(12, 10)[1:11:2, ::3]

    def offset_view(t):
        return t[7:97]

    def expanded(t):
        return t[:5].reshape(5, 1).expand(5, 8)

    def channels_last_slice(t):
        return t.reshape(2, 6, 5, 2).contiguous(memory_format=torch.channels_last)[:, 1:4]

    def zero_dim(t):
        return t[3]

    return [contiguous, transposed, permuted_nhwc, sliced_with_gaps, offset_view, expanded,
            channels_last_slice, zero_dim]


LAYOUTS = layouts()
IDS = [f.__name__ for f in LAYOUTS]


@pytest.mark.parametrize("layout", LAYOUTS, ids=IDS)
@pytest.mark.parametrize("src_dtype", DTYPES, ids=str)
@pytest.mark.parametrize("direction", ["cpu->metalx", "metalx->cpu", "metalx->metalx"])
def test_copy_into_fresh_tensor(layout, src_dtype, direction):
    base = sample(120, src_dtype)
    src_cpu = layout(base)
    expected = src_cpu.clone()
    src_dev, dst_dev = direction.split("->")
    src = layout(base.to(src_dev))
    torch.metalx.reset_fallback_stats()
    out = src.to(dst_dev)
    assert out.device.type == dst_dev
    torch.testing.assert_close(out.cpu(), expected, rtol=0, atol=0, equal_nan=True)
    assert torch.metalx.fallback_stats() == {}


CASTS = [(torch.float32, torch.float16), (torch.float64, torch.float32), (torch.int64, torch.float64),
         (torch.float32, torch.int32), (torch.bool, torch.float32), (torch.float32, torch.bool),
         (torch.complex64, torch.float32), (torch.float32, torch.complex128),
         (torch.bfloat16, torch.float64), (torch.uint8, torch.int8)]


@pytest.mark.parametrize("layout", LAYOUTS, ids=IDS)
@pytest.mark.parametrize("src_dtype,dst_dtype", CASTS, ids=lambda d: str(d))
@pytest.mark.parametrize("direction", ["cpu->metalx", "metalx->cpu", "metalx->metalx"])
def test_casting_copy_into_strided_destination(layout, src_dtype, dst_dtype, direction):
    import warnings
    base = sample(120, src_dtype, seed=1)
    src_dev, dst_dev = direction.split("->")
    src = layout(base.to(src_dev))
    # The destination: a strided view into a larger tensor whose other bytes must survive.
    canvas_cpu = sample(300, dst_dtype, seed=2)
    shape = layout(base).shape
    n = max(1, layout(base).numel())
    def dst_view(canvas):
        return canvas[5:5 + 2 * n:2][:layout(base).numel()].reshape(shape)
    canvas = canvas_cpu.to(dst_dev)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # complex -> real discards the imaginary part
        dst_view(canvas).copy_(src)
        expected = canvas_cpu.clone()
        dst_view(expected).copy_(layout(base))
    torch.testing.assert_close(canvas.cpu(), expected, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("direction", ["cpu->metalx", "metalx->cpu", "metalx->metalx"])
def test_conjugate_and_negative_bits_are_resolved(direction):
    src_dev, dst_dev = direction.split("->")
    z = sample((4, 6), torch.complex64).to(src_dev)
    conj = z.conj()
    assert conj.is_conj()
    torch.testing.assert_close(conj.to(dst_dev).cpu(), z.cpu().conj().resolve_conj())
    neg = torch._neg_view(z)
    assert neg.is_neg()
    torch.testing.assert_close(neg.to(dst_dev).cpu(), -z.cpu())


def test_overlapping_copy_on_device_matches_cpu():
    a_cpu = torch.arange(20.0)
    a = a_cpu.to("metalx")
    a[2:12].copy_(a[0:10])  # source and destination overlap
    a_cpu[2:12].copy_(a_cpu[0:10].clone())
    assert torch.equal(a.cpu(), a_cpu)


def test_destination_with_internal_overlap_is_rejected_like_cpu():
    dst = torch.zeros(1, device="metalx").expand(4)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        dst.copy_(torch.arange(4.0))


def test_copy_after_queued_kernels_sees_their_writes():
    x = torch.empty(1 << 16, device="metalx")
    for value in range(5):
        x.fill_(value)  # queued fills, no synchronisation in between
    y = torch.empty(1 << 16, device="metalx")
    y.copy_(x)
    assert y.cpu().eq(4).all()
    host = torch.empty(1 << 16)
    host.copy_(x)
    assert host.eq(4).all()


def test_print_and_float64_printing():
    assert "device='metalx:0'" in repr(torch.tensor([1.5, 2.0], device="metalx"))
    assert "dtype=torch.float64" in repr(torch.tensor([1.5], dtype=torch.float64, device="metalx"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64], ids=str)
def test_to_with_memory_formats(dtype):
    x = torch.randn(2, 3, 4, 5).to(dtype)
    cl = x.to("metalx", memory_format=torch.channels_last)
    assert cl.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(cl.cpu(), x)
    # preserve_format keeps channels_last through a dtype change; contiguous() undoes it.
    kept = cl.to(torch.float32)
    assert kept.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(kept.cpu(), x.float())
    flat = cl.contiguous()
    assert flat.is_contiguous() and torch.equal(flat.cpu(), x)
    # and back to the CPU in either format
    assert cl.cpu().is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(cl.to("cpu", memory_format=torch.contiguous_format), x)
