"""metalx loads with torch, respects TORCH_DEVICE_BACKEND_AUTOLOAD, and never breaks
`import torch`."""

from conftest import check_python, run_python

# Makes `import metalx._C` fail the way a metalx built for another torch fails.
SIMULATE_ABI_BREAK = """
import importlib.abc, sys
class _BrokenExtension(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "metalx._C":
            raise ImportError("_C.so: undefined symbol: _ZN3c1017simulatedMismatchEv")
sys.meta_path.insert(0, _BrokenExtension())
"""

# Makes metalx believe it was built for another torch release.
SIMULATE_OTHER_TORCH = """
import sys, types
_info = types.ModuleType("metalx._build_info")
_info.TORCH_VERSION = "2.12.0"
sys.modules["metalx._build_info"] = _info
"""


def test_import_torch_alone_loads_metalx():
    result = check_python(
        """
        import torch
        t = torch.ones(2).to("metalx")
        assert t.device.type == "metalx", t.device
        assert "metalx" in __import__("sys").modules
        print(torch.metalx.driver_name())
        """
    )
    assert result.stdout.strip() in ("sim", "metal")
    assert "Warning" not in result.stderr, result.stderr


def test_autoload_disabled_is_respected_and_explicit_import_works():
    check_python(
        """
        import sys
        import torch
        assert "metalx" not in sys.modules
        assert not hasattr(torch, "metalx")
        import metalx
        assert torch.ones(2).to("metalx").is_metalx
        """,
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
    )


def test_import_metalx_before_torch_with_autoload():
    # `import metalx` imports torch, whose autoload re-enters the half-imported package.
    check_python(
        """
        import metalx, torch
        assert torch.ones(2).to("metalx").is_metalx
        """
    )


def test_broken_extension_warns_instead_of_breaking_import_torch():
    result = check_python(
        SIMULATE_ABI_BREAK
        + """
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import torch
assert torch.ones(2).add(1).tolist() == [2.0, 2.0]  # torch works
assert not hasattr(torch, "metalx")
messages = [str(w.message) for w in caught if "metalx" in str(w.message)]
assert len(messages) == 1, messages
print(messages[0])
# An explicit load reports the same failure as an exception.
import metalx
try:
    metalx.load()
except ImportError as error:
    print("load raised:", error.__cause__)
else:
    raise AssertionError("metalx.load() should raise after a failed autoload")
"""
    )
    out = result.stdout
    assert "could not be loaded" in out
    assert "undefined symbol" in out
    assert f"built for torch {_torch_version()}" in out
    assert f"the installed torch is {_torch_version()}" in out
    assert "rebuild metalx" in out
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in out
    assert "load raised:" in out


def test_torch_version_mismatch_names_both_versions_and_the_fix():
    result = check_python(
        SIMULATE_OTHER_TORCH
        + """
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import torch
assert not hasattr(torch, "metalx")
print([str(w.message) for w in caught if "metalx" in str(w.message)][0])
"""
    )
    out = result.stdout
    assert "built for torch 2.12.0" in out
    assert f"installed torch is {_torch_version()}" in out
    assert "pip install torch==2.12.0" in out


def test_explicit_import_of_broken_metalx_raises_import_error():
    result = run_python(
        SIMULATE_ABI_BREAK + "import metalx\n", TORCH_DEVICE_BACKEND_AUTOLOAD="0"
    )
    assert result.returncode != 0
    assert "ImportError" in result.stderr and "undefined symbol" in result.stderr


def _torch_version():
    import torch

    return torch.__version__
