"""METALSIM_KERNEL_ISA picks which build of the simulator's built-in kernels runs
(third_party/metalsim/src/kernel_isa.h): asked for by name, the x86-64-v4 build gives
CPU's results, and a value it cannot honour is a clear error, not a silent fallback.
(The baseline and x86-64-v3 builds run the whole fast-path conv suite in
test_conv2d_fast_paths.py::test_other_isa_builds_match_cpu.)"""

import os
import platform
import subprocess
import sys

import pytest

SCRIPT = """
import torch, torch.nn.functional as F
g = torch.Generator().manual_seed(0)
x, w = torch.randn(2, 16, 14, 14, generator=g), torch.randn(24, 16, 3, 3, generator=g)
y = F.conv2d(x.to("metalx"), w.to("metalx"), padding=1).cpu()
torch.testing.assert_close(y, F.conv2d(x, w, padding=1), rtol=1e-4, atol=1e-4)
print("ok")
"""


def run_with(isa):
    env = dict(os.environ, METALSIM_KERNEL_ISA=isa)
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def test_the_avx512_build_by_name_matches_cpu():
    needs = {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"}
    if platform.machine() not in ("x86_64", "AMD64") or not needs <= cpu_flags():
        pytest.skip("this CPU does not run x86-64-v4")
    r = run_with("x86-64-v4")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout[-2000:] + r.stderr[-2000:]


def test_an_unknown_level_is_a_clear_error():
    r = run_with("x86-64-v9")
    assert r.returncode != 0
    assert "METALSIM_KERNEL_ISA must be one of auto, baseline, x86-64-v3, x86-64-v4, not 'x86-64-v9'" in r.stderr
