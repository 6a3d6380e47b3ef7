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


def mem_get_info(device=None) -> tuple:
    """(free, total) bytes, as torch.cuda.mem_get_info.

    total is the most memory metalx may hold on the device (its limit, see
    set_per_process_memory_fraction); free is what tensors leave of it. Cached blocks
    count as free: the allocator gives them back when it needs the room. Same numbers
    as torch.accelerator.get_memory_info("metalx").
    """
    _lazy_init()
    return tuple(_C._mem_get_info(_device_index(device)))


def set_per_process_memory_fraction(fraction, device=None) -> None:
    """Caps the memory metalx may hold on `device` at `fraction` x the device's
    recommended working set (the unit of METALX_HIGH_WATERMARK_RATIO and of
    torch.mps.set_per_process_memory_fraction; default 1.7).

    An allocation that would pass the cap first releases cached memory and retries,
    then raises torch.OutOfMemoryError naming the cap; existing tensors are untouched.
    Lowering the cap below what is already held frees nothing by itself: later
    allocations fail until enough is released.
    """
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
        raise TypeError(f"set_per_process_memory_fraction: fraction must be a number, got {type(fraction).__name__}")
    _lazy_init()
    _C._set_memory_fraction(float(fraction), _device_index(device))


def get_per_process_memory_fraction(device=None) -> float:
    """The cap on metalx's memory on `device`, as a multiple of its recommended working set."""
    _lazy_init()
    return _C._memory_fraction(_device_index(device))


def memory_snapshot(device=None) -> list:
    """The caching allocator's segments (device buffers) and their blocks, by address.

    As torch.cuda.memory_snapshot(): a list of segments, each a dict with device,
    address, total_size, allocated_size, active_size, requested_size, segment_type
    ("small": buffers of 2 MiB shared by requests up to 1 MiB; "large") and blocks;
    each block has address, offset, size, requested_size, stream and state:
    "active_allocated" (held by a tensor), "active_pending_free" (freed, still used by
    queued GPU work) or "inactive" (cached, free). `device=None` covers every device.
    """
    _lazy_init()
    devices = range(_C.device_count()) if device is None else [_device_index(device)]
    return [segment for index in devices for segment in _C._memory_snapshot(index)]


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A readable table of the allocator's state on `device`, as torch.cuda.memory_summary.

    `abbreviated` leaves out the per-pool breakdown.
    """
    from metalx._memory_summary import format_summary

    _lazy_init()
    index = _device_index(device)
    return format_summary(
        index,
        _C._device_info(index),
        memory_stats(index),
        _C._memory_snapshot(index),
        _C._memory_limit(index),
        _C._memory_fraction(index),
        abbreviated,
    )
