"""Moving tensors between the CPU and metalx, and the tensor/module helpers."""

import pytest

DTYPES = [
    "float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32",
    "int64", "bool", "complex64",
]


def _sample(torch, dtype):
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(3, 5, dtype=dtype)
    if dtype == torch.bool:
        return torch.rand(3, 5) > 0.5
    return torch.randint(-100 if dtype.is_signed else 0, 100, (3, 5), dtype=dtype)


@pytest.mark.parametrize("name", DTYPES)
def test_round_trip_preserves_bytes(torch, name):
    dtype = getattr(torch, name)
    cpu = _sample(torch, dtype)
    device = cpu.to("metalx")
    assert device.device.type == "metalx"
    assert device.dtype == dtype and device.shape == cpu.shape
    back = device.cpu()
    assert back.device.type == "cpu"
    # Bytes, not values: float64 must really be stored as float64 on the device.
    assert torch.equal(back.view(-1).view(torch.uint8), cpu.view(-1).view(torch.uint8))


def test_float64_keeps_full_precision_and_special_values(torch):
    values = torch.tensor([1 + 2**-52, -0.0, float("inf"), float("nan"), 5e-324],
                          dtype=torch.float64)
    back = values.to("metalx").cpu()
    assert back.dtype == torch.float64
    assert torch.equal(back.view(torch.int64), values.view(torch.int64))


def test_tensor_and_module_helpers(torch):
    t = torch.arange(4)
    assert not t.is_metalx
    m = t.metalx()
    assert m.is_metalx and m.device == torch.device("metalx:0")
    assert torch.equal(m.cpu(), t)

    module = torch.nn.Linear(3, 2)
    module.metalx()
    assert all(p.is_metalx for p in module.parameters())
    assert module.weight.device.type == "metalx"

    storage = torch.arange(3).untyped_storage().metalx()
    assert storage.is_metalx and storage.device.type == "metalx"


def test_metalx_to_metalx_copy_and_clone(torch):
    a = torch.arange(6.0).reshape(2, 3).to("metalx")
    b = torch.empty(2, 3, device="metalx")
    b.copy_(a)
    assert torch.equal(b.cpu(), torch.arange(6.0).reshape(2, 3))
    c = a.clone()
    assert c.is_metalx and c.data_ptr() != a.data_ptr()
    assert torch.equal(c.cpu(), a.cpu())


def test_transposed_dense_tensor_round_trips(torch):
    # .to() keeps the dense (non-contiguous) layout, which is still a plain memcpy.
    cpu = torch.arange(12.0).reshape(3, 4).t()
    device = cpu.to("metalx")
    assert device.stride() == cpu.stride()
    assert torch.equal(device.cpu(), cpu)


def test_item_reads_one_element(torch):
    assert torch.tensor(2.5, dtype=torch.float64).to("metalx").item() == 2.5
    assert torch.tensor([7], dtype=torch.int64).to("metalx").item() == 7
    assert torch.tensor(True).to("metalx").item() is True
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        torch.ones(2, device="metalx").item()


def test_buffer_registry_finds_views(torch):
    from metalx import _C

    base = torch.zeros(16, dtype=torch.float32, device="metalx")
    # Tensors are blocks of the caching allocator's buffers: any 256-byte aligned offset.
    base_offset, length = _C._buffer_info(base)
    assert base_offset % 256 == 0 and length >= base_offset + 64
    view = base[5:]
    offset, _ = _C._buffer_info(view)
    assert offset == base_offset + 5 * 4
