"""Which aten ops ran on the CPU because metalx has no kernel for them.

METALX_FALLBACK=allow (default) runs them on the CPU and counts them; warn also warns
once per op; error raises instead, naming the op. set_fallback_mode() changes the
mode at run time.
"""

from metalx import _C


def fallback_stats() -> dict:
    """{aten op name: times it ran on the CPU} since the last reset_fallback_stats()."""
    return dict(_C._fallback_counts())


def reset_fallback_stats() -> None:
    _C._reset_fallback_counts()


def fallback_mode() -> str:
    return _C._fallback_mode()


def set_fallback_mode(mode: str) -> None:
    """'allow', 'warn' or 'error' (as METALX_FALLBACK)."""
    _C._set_fallback_mode(mode)
