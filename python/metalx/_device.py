"""Choosing and counting metalx devices (torch.metalx.device_count, set_device, ...)."""

import torch

from metalx import _C
from metalx._lazy_init import _lazy_init


def _device_index(device, optional: bool = True) -> int:
    """The index of `device` (an int, "metalx:1", torch.device; None: current)."""
    if device is None:
        if not optional:
            raise ValueError("a metalx device is required, got None")
        return _C.current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "metalx":
            raise ValueError(f"expected a metalx device, got {device}")
        return _C.current_device() if device.index is None else device.index
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    raise TypeError(f"expected a metalx device (int, str or torch.device), got {device!r}")


def is_available() -> bool:
    return _C.device_count() > 0


def device_count() -> int:
    return _C.device_count()


def current_device() -> int:
    return _C.current_device()


def set_device(device) -> None:
    """Sets the calling thread's current metalx device."""
    _lazy_init()
    _C.set_device(_device_index(device))


def synchronize(device=None) -> None:
    """Waits until all work queued on `device` (default: current) has finished."""
    _lazy_init()
    _C.synchronize(_device_index(device))


def host_wait_count() -> int:
    """How many times the host has waited for device work so far (synchronize, .item(),
    .cpu(), event waits, the CPU fallback's waits), on every device: the difference
    around a piece of code counts its host waits, which break the asynchrony of a
    training step."""
    return _C._host_wait_count()


def driver_name() -> str:
    """The runtime driving the devices: "metal" (Apple GPU) or "sim" (simulator)."""
    return _C.driver_name()


class device:
    """Context manager that makes `device` current for its block, then restores
    the previous device. None leaves the current device unchanged."""

    def __init__(self, device):
        self.idx = -1 if device is None else _device_index(device)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx != -1:
            _lazy_init()
            self.prev_idx = _C.exchange_device(self.idx)
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        if self.idx != -1:
            _C.set_device(self.prev_idx)
        return False
