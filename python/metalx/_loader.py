"""Loading the C++ backend into torch, once per process.

This module imports torch only inside functions: it is imported while torch itself
may still be importing (autoload).
"""

import sys
import threading
import warnings

from metalx import _diagnostics

_lock = threading.RLock()
_loaded = False
_failure = None  # the MetalxLoadError of a failed load, re-raised on later calls


class MetalxLoadError(ImportError):
    """metalx could not register its device with torch."""


def torch_is_importing() -> bool:
    """True while `import torch` is still running (we are inside its autoload)."""
    torch = sys.modules.get("torch")
    spec = getattr(torch, "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


def load() -> None:
    """Registers the metalx device with torch. Idempotent; raises MetalxLoadError."""
    global _loaded, _failure
    with _lock:
        if _loaded:
            return
        if _failure is not None:
            raise _failure
        try:
            _load_once()
        except Exception as error:
            _failure = MetalxLoadError(_diagnostics.load_failure_message(error))
            _failure.__cause__ = error
            _explain_metalx_checkpoints(_failure)
            raise _failure
        _loaded = True


def autoload() -> None:
    """The `torch.backends` entry point: like load(), but never raises.

    An exception here would make `import torch` itself fail, so a broken metalx
    (torch upgraded under it, a bad build) is reported as a warning instead.
    """
    try:
        load()
    except Exception as error:
        warnings.warn(str(error), RuntimeWarning, stacklevel=2)


def _explain_metalx_checkpoints(failure) -> None:
    # Best effort: reporting the load failure itself matters more than this.
    try:
        import torch

        from metalx._checkpoint_guard import refuse_metalx_storages

        refuse_metalx_storages(torch, failure)
    except Exception:
        pass


def _load_once() -> None:
    import torch

    _diagnostics.check_torch_version()
    # Loading the extension registers the C++ side: device guard, hooks, allocator,
    # generators and ops.
    from metalx import _C  # noqa: F401
    from metalx import _torch_registration

    _torch_registration.register(torch)
