"""Lazy runtime start-up and fork safety, as torch.cuda does it.

torch calls `torch.metalx._lazy_init()` before creating a metalx tensor from
Python. The runtime's devices and worker threads do not survive fork(): a child
forked after metalx started is marked "bad" and refuses to use metalx, with a
message saying to use the 'spawn' start method instead.
"""

import os
import threading

from metalx import _C

_lock = threading.Lock()
_initialized = False
_in_bad_fork = False


def _after_fork_in_child():
    global _initialized, _in_bad_fork
    if _initialized:
        _in_bad_fork = True
        _initialized = False


os.register_at_fork(after_in_child=_after_fork_in_child)


def is_initialized() -> bool:
    return _initialized


def _is_in_bad_fork() -> bool:
    return _in_bad_fork


def _lazy_init() -> None:
    global _initialized
    if _initialized:
        return
    with _lock:
        if _initialized:
            return
        if _in_bad_fork:
            raise RuntimeError(
                "Cannot re-initialize metalx in a forked subprocess. To use metalx with "
                "multiprocessing, use the 'spawn' start method"
            )
        _C.init()
        _initialized = True
