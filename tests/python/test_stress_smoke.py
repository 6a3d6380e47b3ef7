"""A short run of the stress suite (tests/stress/run_stress.py; scripts/stress.sh runs
the long one): every phase runs, every result matches CPU, memory does not grow."""

import json
import os
import subprocess
import sys

SUITE = os.path.join(os.path.dirname(__file__), "..", "stress", "run_stress.py")


def test_short_stress_run_is_clean(tmp_path):
    report_path = tmp_path / "stress.json"
    result = subprocess.run(
        [sys.executable, SUITE, "--seconds", "10", "--threads", "8", "--oom-rounds", "1",
         "--shader-processes", "2", "--shader-sources", "2", "--report", str(report_path)],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, f"stress run failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    report = json.loads(report_path.read_text())
    assert report["errors"] == []
    ops = report["ops"]
    for kind in ("native ops", "fallback ops", "non_blocking copies", "record_stream frees",
                 "save/load round trips", "oom recoveries", "compile_shader kernels checked"):
        assert ops.get(kind, 0) > 0, f"the phase behind {kind!r} did not run: {ops}"
    assert ops["corrupted cache entries"] == 2
    assert report["memory_at_end"]["allocated"] <= report["memory_at_start"]["allocated"]
