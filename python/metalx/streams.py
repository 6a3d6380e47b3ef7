"""Streams and events on metalx (torch.metalx.Stream, Event, current_stream, ...).

A metalx stream is an ordered queue of device work: a Metal command queue. Each
device has a default stream and a pool of more, handed out round-robin (see
backend/core/stream_pool.h); the current stream is per thread and per device, and
every op runs on the current stream of its device. Work on different streams may run
concurrently; order it with events (`Event.record`/`Event.wait`,
`Stream.wait_stream`), and call `Tensor.record_stream(s)` when a tensor allocated on
one stream is used on another, so its memory is not reused while `s` still uses it.

These classes are torch.Stream and torch.Event with the signatures of torch.cuda's,
so code written for CUDA runs unchanged; torch.Stream("metalx") and
torch.accelerator.current_stream() work as well, through the same backend.
"""

import torch

from metalx import _C
from metalx._device import _device_index
from metalx._lazy_init import _lazy_init


class Stream(torch.Stream):
    """A stream of `device` (default: the current device).

    `priority` is accepted for compatibility with torch.cuda.Stream; Metal command
    queues have no priorities, so every stream runs at the same one.
    """

    def __new__(cls, device=None, priority=0, **kwargs):
        _lazy_init()
        if "stream_id" in kwargs:  # wrapping an existing stream (stream_id, device_index, device_type)
            return super().__new__(cls, priority=priority, **kwargs)
        index = _device_index(device)
        return super().__new__(cls, device=torch.device("metalx", index), priority=priority)

    def wait_event(self, event) -> None:
        """Work submitted to this stream from now on waits for `event` (on the device;
        the host does not wait)."""
        event.wait(self)

    def wait_stream(self, stream) -> None:
        """Work submitted to this stream from now on waits for all work submitted to
        `stream` so far."""
        self.wait_event(stream.record_event())

    def synchronize(self) -> None:
        """Waits until all work submitted to this stream has finished. Ctrl-C interrupts
        the wait (KeyboardInterrupt); the work keeps running."""
        _C._stream_synchronize(self.stream_id, self.device_index)

    def record_event(self, event=None):
        """Records `event` (a new Event if None) on this stream and returns it."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    def __repr__(self):
        return f"<torch.metalx.Stream device=metalx:{self.device_index} stream_id={self.stream_id}>"


def _wrap(stream: torch.Stream) -> Stream:
    return Stream(stream_id=stream.stream_id, device_index=stream.device_index, device_type=stream.device_type)


class _MetalxEventType(type):
    # isinstance(e, torch.metalx.Event) holds for every torch.Event of metalx.
    def __instancecheck__(cls, obj):
        return isinstance(obj, torch.Event) and obj.device.type == "metalx"


class Event(metaclass=_MetalxEventType):
    """An event: a point in a stream's work that other streams and the host can wait
    for, and, with enable_timing=True, measure device time to.

    Creates a torch.Event of metalx (record/wait default to the current stream). It is
    not a subclass: torch.Event.elapsed_time accepts only exact torch.Event objects,
    and timing must work between any two metalx events. `blocking` is accepted for
    compatibility (synchronize() always blocks the calling thread until the event
    completes); interprocess events do not exist on metalx.
    """

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        if interprocess:
            raise ValueError("metalx events cannot be shared between processes (interprocess=True)")
        _lazy_init()
        return torch.Event(device="metalx", enable_timing=enable_timing, blocking=blocking)


def current_stream(device=None) -> Stream:
    """The calling thread's current stream of `device` (default: the current device)."""
    _lazy_init()
    return _wrap(torch.accelerator.current_stream(_device_index(device)))


def default_stream(device=None) -> Stream:
    """The default stream of `device` (default: the current device)."""
    _lazy_init()
    index = _device_index(device)
    # Stream id 0 is each device's default stream (backend/core/stream_pool.h).
    device_type = torch.accelerator.current_stream(index).device_type
    return Stream(stream_id=0, device_index=index, device_type=device_type)


def _check_metalx_stream(stream) -> None:
    if stream.device.type != "metalx":
        raise ValueError(f"expected a metalx stream, got a stream of {stream.device}")


def set_stream(stream) -> None:
    """Makes `stream` current on this thread (and its device the current device)."""
    if stream is None:
        return
    _check_metalx_stream(stream)
    _lazy_init()
    torch.accelerator.set_stream(stream)


class StreamContext:
    """Makes `stream` current for the block (and its device current), then restores
    the previous device and its stream and the previous stream of `stream`'s device.
    None does nothing."""

    def __init__(self, stream):
        self.stream = stream
        self._restore = []

    def __enter__(self):
        if self.stream is None:
            return self.stream
        _check_metalx_stream(self.stream)
        _lazy_init()
        previous_device = torch.accelerator.current_device_index()
        self._restore = [current_stream(self.stream.device_index)]
        if previous_device != self.stream.device_index:
            self._restore.append(current_stream(previous_device))
        torch.accelerator.set_stream(self.stream)
        return self.stream

    def __exit__(self, exc_type, exc_value, traceback):
        # The previous device's stream is restored last, which makes that device current again.
        for previous in self._restore:
            torch.accelerator.set_stream(previous)
        self._restore = []
        return False


def stream(stream) -> StreamContext:
    """Context manager: runs its block with `stream` current (see StreamContext)."""
    return StreamContext(stream)
