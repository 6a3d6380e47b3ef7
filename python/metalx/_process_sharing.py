"""Passing metalx tensors between processes (torch.multiprocessing queues and pipes,
DataLoader workers, `Process(args=...)` with the 'spawn' start method).

torch shares a CPU tensor by moving its storage into OS shared memory and sending the
handle; the receiver maps the same pages. A metalx storage is shared the same way: it is
moved into a CPU shared-memory storage (torch's, with torch's handles and reference
counting) and from then on uses that memory as its device memory (zero-copy, Metal's
newBufferWithBytesNoCopy on a Mac); the receiver wraps the mapped pages as a buffer of
its own metalx device. Both processes see each other's writes, as with CPU and CUDA
tensors. Ordering device work across processes is the user's job, as with CUDA IPC:
synchronize before telling the other process the data is ready.

A shared storage can no longer be resized, and it does not count in the allocator's
statistics (it is not the caching allocator's memory).
"""

import multiprocessing.reduction

import torch
from torch.multiprocessing import reductions as _torch_reductions

_DEVICE_TYPE = "metalx"


def _bytes_over(storage, device):
    return torch.empty(0, dtype=torch.uint8, device=device).set_(storage)


def _rebuild_storage(host_storage, device_index):
    """In the receiving process: a metalx storage over the mapped shared memory."""
    from metalx import _C

    return _C._wrap_shared_memory(_bytes_over(host_storage, "cpu"), device_index).untyped_storage()


def _rebuild_empty_storage(device_index):
    return torch.UntypedStorage(0, device=torch.device(_DEVICE_TYPE, device_index))


def _host_storage_of(storage):
    """The CPU shared-memory storage behind `storage`, moving it there on first use."""
    from metalx import _C

    device_bytes = _bytes_over(storage, storage.device)
    host = _C._shared_host_bytes(device_bytes)
    if host is not None:
        return host.untyped_storage()
    host_storage = torch.UntypedStorage._new_shared(storage.nbytes())
    _C._move_to_shared_memory(device_bytes, _bytes_over(host_storage, "cpu"))
    return host_storage


def reduce_storage(storage):
    """The pickling of untyped storages in multiprocessing: metalx's, then torch's."""
    if storage.device.type != _DEVICE_TYPE:
        return _torch_reductions.reduce_storage(storage)
    index = storage.device.index
    if storage.nbytes() == 0:
        return (_rebuild_empty_storage, (index,))
    # The host storage is pickled by torch's own reducer (file descriptor or file name,
    # whichever sharing strategy is set).
    return (_rebuild_storage, (_host_storage_of(storage), index))


def install():
    """Registers the reducer (for every process that imports metalx, so both sides)."""
    multiprocessing.reduction.ForkingPickler.register(torch.UntypedStorage, reduce_storage)
