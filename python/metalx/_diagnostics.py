"""Why metalx failed to load, in terms a user can act on.

The usual cause is a torch that changed under an installed metalx: the C++
extension is compiled against one exact torch, and loading it into another fails
with "undefined symbol" or, worse, crashes. So the versions are compared before the
extension is loaded, and every failure message names both versions and the fix.
"""

import importlib
import os


def built_for_torch():
    """The torch version this metalx was compiled against, or None if unknown."""
    try:
        return importlib.import_module("metalx._build_info").TORCH_VERSION
    except Exception:
        return None


def installed_torch():
    try:
        import torch

        return torch.__version__
    except Exception:
        return None


def _public(version):
    # "2.13.0+cpu" and "2.13.0" are the same release built for different hardware; the
    # wheel's requirement (torch==2.13.0) accepts both, so the check does too.
    return version.split("+", 1)[0]


def check_torch_version():
    """Raises RuntimeError if the installed torch is not the one metalx was built for."""
    built, installed = built_for_torch(), installed_torch()
    if built is None or installed is None:
        return  # nothing to compare (a source tree without a build); loading will tell
    if os.environ.get("METALX_SKIP_TORCH_VERSION_CHECK") == "1":
        return
    if _public(built) != _public(installed):
        raise RuntimeError(
            f"torch version mismatch: metalx was built for torch {built} but torch "
            f"{installed} is installed; refusing to load its C++ extension into a "
            f"different torch"
        )


def load_failure_message(error):
    from metalx import __version__

    built = built_for_torch() or "an unknown torch (no build info found)"
    installed = installed_torch() or "not importable"
    rebuild = (
        "rebuild metalx against the installed torch "
        "(`pip install --no-build-isolation --force-reinstall --no-deps <metalx source>`)"
    )
    versions_differ = built_for_torch() and installed_torch() and (
        _public(built_for_torch()) != _public(installed_torch())
    )
    fix = f"`pip install torch=={_public(built)}`, or {rebuild}" if versions_differ else rebuild
    return (
        f'metalx {__version__} could not be loaded, so the "metalx" device is '
        f"unavailable (torch itself works).\n"
        f"  metalx was built for torch {built}; the installed torch is {installed}.\n"
        f"  error: {type(error).__name__}: {error}\n"
        f"  fix: {fix}.\n"
        f"  To skip loading metalx with torch, set TORCH_DEVICE_BACKEND_AUTOLOAD=0."
    )
