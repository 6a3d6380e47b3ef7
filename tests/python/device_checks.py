"""Checks the device tests share: which kernels a call ran, and that nothing fell back
to the CPU. The fixtures that reset the fallback report around each test are in
conftest.py (`fallback_stats_reset`, `no_fallback`)."""

import torch


def kernels_run(fn):
    """The device kernels `fn` runs, by name."""
    with torch.metalx.profiler.profile() as prof:
        fn()
    return [c["name"] for c in prof.commands]


def assert_native():
    """Nothing ran on the CPU fallback since the report was last reset."""
    assert torch.metalx.fallback_stats() == {}
