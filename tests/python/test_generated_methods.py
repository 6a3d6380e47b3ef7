"""The names torch generates for the renamed PrivateUse1 device, checked as their CUDA
counterparts behave: torch.device("metalx"), Tensor/Module/Storage/PackedSequence
.metalx() and .is_metalx, device-typed storages, the profiler and autograd enums."""

import warnings

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence

from conftest import check_python


def test_backend_name_and_device_module():
    assert torch._C._get_privateuse1_backend_name() == "metalx"
    assert torch.get_device_module("metalx") is torch.metalx
    assert torch.accelerator.current_accelerator() == torch.device("metalx")


@pytest.mark.parametrize("spec, index", [
    (("metalx",), None), (("metalx:0",), 0), (("metalx", 0), 0), ((torch.device("metalx:0"),), 0)])
def test_torch_device(spec, index):
    device = torch.device(*spec)
    assert (device.type, device.index) == ("metalx", index)
    assert str(device) == ("metalx" if index is None else f"metalx:{index}")


def test_tensor_metalx_and_is_metalx():
    cpu = torch.arange(6.0).reshape(2, 3)
    assert cpu.is_metalx is False
    on = cpu.metalx()
    assert on.is_metalx is True and on.device == torch.device("metalx:0")
    assert torch.equal(on.cpu(), cpu)
    assert on.metalx() is on  # already there: no copy, as Tensor.cuda()
    assert cpu.metalx(0).device == cpu.metalx("metalx:0").device == torch.device("metalx:0")
    assert cpu.metalx(non_blocking=True).device.type == "metalx"
    with pytest.raises(RuntimeError, match="metalx device 9 does not exist"):
        cpu.metalx(9)


def test_module_metalx_moves_parameters_and_buffers():
    module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    assert module.metalx() is module
    tensors = list(module.parameters()) + list(module.buffers())
    assert {t.device for t in tensors} == {torch.device("metalx:0")}
    assert module(torch.randn(5, 3, device="metalx")).is_metalx


def test_packed_sequence_metalx():
    packed = pack_padded_sequence(torch.randn(3, 2, 4), [3, 2])
    assert packed.is_metalx is False
    moved = packed.metalx()
    assert moved.is_metalx and moved.data.device.type == "metalx"
    assert torch.equal(moved.data.cpu(), packed.data)


def test_untyped_storage_on_metalx():
    storage = torch.UntypedStorage(16, device="metalx")
    assert storage.device == torch.device("metalx:0") and storage.is_metalx and storage.nbytes() == 16
    assert torch.UntypedStorage(4).is_metalx is False
    storage.copy_(torch.UntypedStorage(16).fill_(7))
    assert list(storage.cpu()) == [7] * 16
    storage.resize_(32)
    assert storage.nbytes() == 32 and list(storage.cpu())[:16] == [7] * 16


def test_storage_metalx_untyped_and_typed():
    data = torch.tensor([1, -2, 3], dtype=torch.int16)
    untyped = data.untyped_storage().metalx()
    assert isinstance(untyped, torch.UntypedStorage) and untyped.device.type == "metalx"
    assert bytes(untyped.cpu()) == bytes(data.untyped_storage())
    assert untyped.metalx() is untyped  # already there: no copy
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # TypedStorage is deprecated
        typed = data.storage().metalx()
        assert isinstance(typed, torch.TypedStorage) and typed.dtype == torch.int16
        assert typed.is_metalx and typed.device == torch.device("metalx:0")
        assert typed.tolist() == [1, -2, 3]
        # Already there: a new wrapper of the same memory, as TypedStorage.cuda() gives.
        assert typed.metalx()._untyped_storage is typed._untyped_storage


def test_storages_on_a_second_device():
    check_python(
        """
        import torch
        s = torch.UntypedStorage(8, device="metalx:1")
        assert s.device == torch.device("metalx:1")
        assert torch.UntypedStorage(8).metalx(1).device == torch.device("metalx:1")
        assert torch.ones(2).metalx(1).device == torch.device("metalx:1")
        """,
        METALSIM_DEVICE_COUNT="2",
    )


def test_profiler_activity_and_device_type_aliases():
    from torch._C._autograd import DeviceType
    from torch.profiler import ProfilerActivity

    assert ProfilerActivity.METALX is ProfilerActivity.PrivateUse1
    assert str(ProfilerActivity.METALX) == "ProfilerActivity.METALX" and ProfilerActivity.METALX.name == "METALX"
    assert DeviceType.METALX is DeviceType.PrivateUse1
    assert str(DeviceType.METALX) == "DeviceType.METALX"
    assert str(ProfilerActivity.CPU) == "ProfilerActivity.CPU"  # the others are untouched
