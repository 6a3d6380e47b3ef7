"""Memory of metalx devices, as torch.cuda's memory API reports it.

The numbers come from metalx's caching allocator: "allocated" is memory in blocks
held by tensors, "reserved" is memory the allocator holds from the device (allocated
plus cached free blocks). empty_cache() gives cached memory back to the device.
"""

from metalx import _C
from metalx._device import _device_index
from metalx._lazy_init import _lazy_init


def memory_stats(device=None) -> dict:
    """The allocator's statistics (keys as torch.cuda.memory_stats where they exist)."""
    _lazy_init()
    return dict(_C._memory_stats(_device_index(device)))


def memory_allocated(device=None) -> int:
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device=None) -> int:
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device=None) -> int:
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device=None) -> int:
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device=None) -> None:
    _lazy_init()
    _C._reset_peak_memory_stats(_device_index(device))


def empty_cache() -> None:
    """Releases every cached block no tensor uses back to the device."""
    _lazy_init()
    _C._empty_cache()


def host_memory_stats() -> dict:
    """Statistics of pinned host memory (pin_memory=True, Tensor.pin_memory()).

    allocated_bytes: held by pinned tensors; reserved_bytes: all pinned memory metalx
    holds (allocated, cached for reuse, and pending); pending_free_bytes: freed by
    tensors but still used by queued non_blocking copies, so not yet reusable.
    torch.accelerator.empty_host_cache() gives cached pinned memory back to the system
    (torch makes it a no-op until a metalx tensor has been created from Python).
    """
    return dict(_C._host_memory_stats())
