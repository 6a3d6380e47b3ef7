"""docs/op-coverage.md is generated from the dispatcher's registrations and must match
what this build registers (regenerate with `python scripts/op_coverage.py`)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_op_coverage_table_is_current():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "op_coverage.py"), "--check"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr


def test_table_lists_native_families_and_fallback_routing():
    text = open(os.path.join(ROOT, "docs", "op-coverage.md")).read()
    for family in ("| unary |", "| binary |", "| reduce |", "| scan |", "| fill |"):
        assert family in text
    assert "`cumsum.out`" in text and "`add.out`" in text
