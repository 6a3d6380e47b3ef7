"""`python -m metalx`: the environment report, run as users run it (a subprocess),
checked against what this process finds through torch and metalx."""

import json
import os
import subprocess
import sys

import torch

from conftest import _PASSED_THROUGH, run_python
from test_autoload import SIMULATE_ABI_BREAK


def _report(*args, **env):
    clean = {k: os.environ[k] for k in _PASSED_THROUGH if k in os.environ}
    clean.update(env)
    return subprocess.run([sys.executable, "-m", "metalx", *args], env=clean, capture_output=True, text=True,
                          timeout=300)


def test_text_report_names_versions_driver_devices_memory_and_settings():
    import metalx
    from metalx import _C, _build_info

    result = _report(METALX_FALLBACK="warn", METALSIM_DEVICE_COUNT="2", METALX_HIGH_WATERMARK_RATIO="0.5",
                     METALX_DRIVERR="sim")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("metalx environment\n")
    lines = out.splitlines()[2:]  # below the title

    def value(name):
        return next(line[len(name):].strip() for line in lines if line.startswith(name + " "))

    assert value("metalx") == metalx.__version__
    assert value("torch") == f"{torch.__version__} (metalx built for torch {_build_info.TORCH_VERSION})"
    assert _build_info.BUILD_TYPE in value("build") and _build_info.CXX_COMPILER in value("build")
    assert value("driver").startswith(_C.driver_name() + " - ")
    assert value("CPU fallback mode") == "warn"
    assert "devices: 2" in lines
    info = _C._device_info(0)
    assert f"  metalx:0  {info['name']}" in lines
    assert any(line.startswith("  metalx:1  ") for line in lines)
    assert "(0.5 x working set)" in out  # the memory limit the variable set
    assert any(line.split()[:2] == ["METALX_FALLBACK", "'warn'"] for line in lines)
    assert any(line.split()[:3] == ["METALX_DRIVER", "not", "set"] for line in lines)
    assert any(line.split()[:2] == ["METALX_DRIVERR", "'sim'"] and "not a metalx runtime setting" in line
               for line in lines)  # a typo shows up as such


def test_json_report_agrees_with_the_running_process():
    from metalx import _C

    result = _report("--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["loaded"] is True
    assert report["torch"] == torch.__version__
    assert report["driver"] == _C.driver_name()
    assert report["drivers_available"] == list(_C.available_drivers())
    assert report["fallback_mode"] == "allow"
    assert len(report["devices"]) == torch.metalx.device_count()
    device = report["devices"][0]
    expected = dict(_C._device_info(0))
    for key in ("name", "is_simulated", "max_threads_per_threadgroup", "simd_width",
                "recommended_max_working_set_size", "max_buffer_length"):
        assert device[key] == expected[key], key
    memory = device["memory"]
    assert memory["limit"] == torch.metalx.mem_get_info(0)[1]  # same device, same default limit
    assert memory["fraction"] == torch.metalx.get_per_process_memory_fraction(0)
    assert memory["free"] == memory["limit"] - memory["allocated"]
    assert report["configuration"]["TORCH_DEVICE_BACKEND_AUTOLOAD"]["value"] is None


def test_report_with_no_device_says_why_and_fails():
    result = _report(METALX_DRIVER="metal")  # not built on Linux: the runtime cannot start
    assert result.returncode == 1
    assert "driver                      none: METALX_DRIVER='metal' is not built" in result.stdout
    assert "devices: 0" in result.stdout


def test_report_when_metalx_failed_to_load():
    result = run_python(
        SIMULATE_ABI_BREAK
        + """
import sys, warnings
warnings.simplefilter("ignore")
import torch  # autoload fails and warns; metalx stays importable
from metalx.env_report import main
sys.exit(main([]))
"""
    )
    assert result.returncode == 1
    assert "metalx could not be loaded:" in result.stdout
    assert "undefined symbol" in result.stdout
    assert f"torch                       {torch.__version__}" in result.stdout


def test_report_as_a_module_function_in_process():
    from metalx.env_report import collect, format_report

    report = collect({"METALX_FALLBACK": "error", "UNRELATED": "x"})
    assert report["configuration"]["METALX_FALLBACK"]["value"] == "error"
    assert "UNRELATED" not in report["other_variables"]
    text = format_report(report)
    assert text.startswith("metalx environment\n")
