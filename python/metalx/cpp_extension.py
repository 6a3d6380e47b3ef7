"""Building C++ extensions that run their own Metal kernels on metalx tensors.

The C++ side is the header `metalx/extension.h` (installed with metalx under
`metalx/include`): a tensor's (buffer, offset), kernels compiled from the extension's
own Metal source through metalx's pipeline cache, and encoding on the current metalx
stream. This module adds that header's directory to `torch.utils.cpp_extension`:

    from metalx import cpp_extension
    my_ops = cpp_extension.load(name="my_ops", sources=["my_ops.cpp"])

A complete example, built and run by the tests: examples/cpp_extension/.
"""

from __future__ import annotations

import os

_INCLUDE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")


def include_paths() -> list[str]:
    """Directories to add to a C++ extension's include path for `metalx/extension.h`."""
    header = os.path.join(_INCLUDE_DIR, "metalx", "extension.h")
    if not os.path.isfile(header):
        raise RuntimeError(
            f"metalx's C++ headers are missing ({header} does not exist); reinstall metalx "
            "from a wheel or with `pip install --no-build-isolation .`, which installs them"
        )
    return [_INCLUDE_DIR]


def load(name: str, sources, *, extra_include_paths=None, **kwargs):
    """torch.utils.cpp_extension.load with metalx's include paths added.

    Every other keyword argument (extra_cflags, build_directory, verbose, ...) goes to
    torch.utils.cpp_extension.load unchanged.
    """
    from torch.utils import cpp_extension

    paths = include_paths() + list(extra_include_paths or [])
    return cpp_extension.load(name=name, sources=sources, extra_include_paths=paths, **kwargs)
