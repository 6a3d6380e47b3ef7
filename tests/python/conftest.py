"""Shared helpers for the metalx Python tests.

Tests that depend on how a process starts (autoload, environment variables such as
METALSIM_DEVICE_COUNT) run Python in a subprocess with a clean environment; the
rest run in this process against the installed metalx.
"""

import os
import subprocess
import sys
import textwrap

import pytest

# Variables a clean child still needs to find Python, the installed packages and the
# compiler the simulator uses for run-time shader compiles.
_PASSED_THROUGH = ("PATH", "HOME", "PYTHONPATH", "LD_LIBRARY_PATH", "TMPDIR", "METALX_DRIVER")


def run_python(code, **env):
    """Runs `code` in a fresh interpreter; extra keyword arguments set env vars."""
    clean = {k: os.environ[k] for k in _PASSED_THROUGH if k in os.environ}
    clean.update({k: str(v) for k, v in env.items()})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=clean,
        capture_output=True,
        text=True,
        timeout=300,
    )


def check_python(code, **env):
    """Like run_python, but fails the test (showing the child's output) on error."""
    result = run_python(code, **env)
    assert result.returncode == 0, f"child failed:\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


@pytest.fixture
def fallback_stats_reset():
    """The fallback report starts empty for the test (device_checks.assert_native)."""
    import torch

    torch.metalx.reset_fallback_stats()
    yield


@pytest.fixture
def no_fallback():
    """The test runs nothing on the CPU fallback."""
    import torch

    torch.metalx.reset_fallback_stats()
    yield
    assert torch.metalx.fallback_stats() == {}


@pytest.fixture(scope="session")
def torch():
    import torch

    import metalx  # noqa: F401  (a no-op after autoload; loads it when autoload is off)

    return torch
