"""pytest setup for the in-wheel upstream suites (test_ops_compare.py, test_modules.py).

metalx must be registered before torch.testing._internal.common_device_type is first
imported, or instantiate_device_type_tests never sees the device: importing torch
autoloads metalx, and `import metalx` covers TORCH_DEVICE_BACKEND_AUTOLOAD=0.
"""

import torch  # noqa: F401

import metalx  # noqa: F401

from metalx.testing import pytest_plugin


def pytest_configure(config):
    # Registered here rather than via `pytest_plugins` (only allowed in the rootdir
    # conftest); the plugin's own pytest_configure then installs its state once.
    if not config.pluginmanager.has_plugin("metalx-upstream"):
        pytest_plugin.pytest_configure(config)
