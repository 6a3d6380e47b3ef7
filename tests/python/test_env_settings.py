"""Every METALX_*/METALSIM_* setting is parsed the same way: a value that does not parse
or is out of range gives an error naming the variable, the value and what is accepted,
at the first use of the device (never silently the default)."""

import os
import subprocess
import sys

import pytest

USE = "import torch; torch.ones(2, device='metalx').add_(1).cpu(); print('ok')"


def run(**env):
    full = dict(os.environ)
    full.update(env)
    return subprocess.run([sys.executable, "-c", USE], capture_output=True, text=True, timeout=120, env=full)


@pytest.mark.parametrize(
    "name, value, accepted",
    [
        ("METALSIM_THREADS", "abc", "an integer from 1 to 1024"),
        ("METALSIM_MEMORY_MB", "-5", "an integer >= 1"),
        ("METALSIM_CACHE_MB", "x", "an integer from 1 to"),
        ("METALSIM_STRICT", "yes", "0 or 1"),
        ("METALSIM_DEVICE_COUNT", "2.5", "an integer from 0 to 64"),
        ("METALSIM_KERNEL_ISA", "avx9", "one of auto, baseline, x86-64-v3, x86-64-v4"),
        ("METALSIM_SHADER_VALIDATION", "on", "one of 0, 1, all"),
        ("METALSIM_KERNEL_TIMEOUT_S", "soon", "an integer from 0 to 86400"),
        ("METALX_DRIVER", "cuda", "one of metal, sim"),
        ("METALX_PIPELINE_CACHE_SIZE", "0", "an integer >= 1"),
        ("METALX_HIGH_WATERMARK_RATIO", "lots", "a number > 0"),
    ],
)
def test_bad_value_names_variable_and_accepted_values(name, value, accepted):
    out = run(**{name: value})
    assert out.returncode != 0 and "ok" not in out.stdout
    assert f"{name} must be {accepted}" in out.stderr and f"not '{value}'" in out.stderr, out.stderr[-2000:]


def test_good_values_and_empty_are_accepted():
    out = run(METALSIM_THREADS="1", METALSIM_STRICT="0", METALSIM_CACHE_MB="64", METALX_HIGH_WATERMARK_RATIO="1.5",
              METALSIM_MEMORY_MB="")
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
