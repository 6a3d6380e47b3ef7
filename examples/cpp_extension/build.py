"""Builds the example extension and runs it once.

    python examples/cpp_extension/build.py

The first build compiles one C++ file against torch (about a minute); later runs reuse
torch.utils.cpp_extension's build directory.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def build(build_directory=None, extra_sources=(), verbose=False):
    """Compiles scaled_add.cpp (plus `extra_sources`) and loads it.

    Loading registers torch.ops.metalx_example.scaled_add; the returned module has the
    inspection helpers buffer_offset() and current_stream_id().
    """
    import torch  # noqa: F401  (loads metalx, which the extension reaches at run time)
    from metalx import cpp_extension

    return cpp_extension.load(
        name="metalx_scaled_add",
        sources=[os.path.join(HERE, "scaled_add.cpp"), *extra_sources],
        build_directory=build_directory,
        verbose=verbose,
    )


def main():
    import torch

    build(verbose="-v" in sys.argv)
    x = torch.randn(5, device="metalx")
    y = torch.randn(5, device="metalx")
    out = torch.ops.metalx_example.scaled_add(x, y, 0.5)
    print("x + 0.5 * y =", out.cpu())
    print("matches CPU:", torch.allclose(out.cpu(), x.cpu() + 0.5 * y.cpu()))


if __name__ == "__main__":
    main()
