"""The way-2 runner (python -m metalx.testing.upstream) on a fake PyTorch checkout.

No PyTorch source checkout is available to CI, so a tiny one is made under a temp
dir: a device-generic test file written the way upstream writes them (passing,
failing, listed-as-failing, listed-but-passing and skipped tests) and a file whose
process aborts, to show that a crash costs only that file.
"""

import json
import os
import subprocess
import sys
import textwrap

FAKE_TESTS = '''
import unittest
import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase, run_tests

class TestFake(TestCase):
    def test_passes(self, device):
        self.assertEqual(torch.ones(2, device=device).sum().item(), 2)

    def test_known_bad(self, device):
        raise RuntimeError("listed in the expectations")

    def test_listed_but_passes(self, device):
        pass

    def test_new_failure(self, device):
        self.assertEqual(torch.zeros(1, device=device).item(), 1)

    @unittest.skip("upstream skips this")
    def test_skipped(self, device):
        pass

    @dtypes(torch.float32, torch.float64)
    def test_dtypes(self, device, dtype):
        self.assertEqual(torch.zeros(3, device=device, dtype=dtype).add_(1).sum().item(), 3)

instantiate_device_type_tests(TestFake, globals())

class TestNotDeviceGeneric(TestCase):
    def test_cpu_only(self):
        pass

if __name__ == "__main__":
    run_tests()
'''

CRASHING_TESTS = '''
import os
import torch

def test_aborts_metalx():
    os.abort()
'''


# A file written for another torch can fail at import, before any test runs.
UNCOLLECTABLE_TESTS = '''
import torch

class TestOld:
    raise AssertionError("Are you using this decorator correctly?")
'''


def _fake_checkout(root):
    (root / "test").mkdir(parents=True)
    (root / "version.txt").write_text("2.13.0a0\n")
    (root / "test" / "test_fake.py").write_text(FAKE_TESTS)
    (root / "test" / "test_crash.py").write_text(CRASHING_TESTS)
    (root / "test" / "test_uncollectable.py").write_text(UNCOLLECTABLE_TESTS)
    exp = root / "expectations.json"
    exp.write_text(json.dumps({"torch": "2.13", "entries": [
        {"test": "test_fake.py::TestFakePRIVATEUSE1::test_known_bad_metalx", "status": "xfail",
         "cause": "upstream-cpu", "reason": "fails on CPU too"},
        {"test": "test_fake.py::*::test_listed_but_passes_*", "status": "xfail",
         "cause": "metalx-bug", "reason": "was broken", "missing": "nothing any more"},
    ]}))
    return exp


def test_runner_on_fake_checkout(tmp_path):
    exp = _fake_checkout(tmp_path / "pytorch")
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "metalx.testing.upstream", "--pytorch-src", str(tmp_path / "pytorch"),
         "--expectations", str(exp), "--out", str(out), "test_fake.py", "test_crash.py", "test_missing.py",
         "test_uncollectable.py"],
        capture_output=True, text=True, timeout=600, env=dict(os.environ),
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = {r["file"]: r for r in json.loads((out / "summary.json").read_text())}

    fake = rows["test_fake.py"]
    assert fake["status"] == "failures"
    d = fake["data"]
    # Only metalx-instantiated tests ran: test_cpu_only and CPU copies were not selected.
    assert d["tests"] == 7, d
    assert (d["passed"], d["failed"], d["xfailed"], d["unexpected_pass"], d["skipped"]) == (3, 1, 1, 1, 1), d
    assert list(d["failures"]) == ["test_fake.py::TestFakePRIVATEUSE1::test_new_failure_metalx"]
    assert d["unexpected_passes"] == ["test_fake.py::TestFakePRIVATEUSE1::test_listed_but_passes_metalx"]
    assert d["skip_reasons"] and "upstream skips this" in next(iter(d["skip_reasons"]))
    assert d["collected"] == 7 and d["partial"] is False, d
    assert "interrupted_test" not in fake

    # The abort cost its own file only, and is reported as a crash in the test it hit.
    assert rows["test_crash.py"]["status"] == "crash:SIGABRT"
    assert rows["test_crash.py"]["interrupted_test"] == "test_crash.py::test_aborts_metalx"
    assert rows["test_crash.py"]["data"]["collected"] == 1 and rows["test_crash.py"]["data"]["partial"]
    assert rows["test_missing.py"]["status"] == "missing"
    # A file that cannot be collected is an error with its reason, not a 100% pass rate.
    bad = rows["test_uncollectable.py"]
    assert bad["status"] == "rc=2" and "Are you using this decorator correctly?" in bad["reason"], bad
    text = (out / "summary.txt").read_text()
    assert "test_fake.py" in text and "TOTAL" in text and "NOW PASSING" in text
    assert "test_crash.py: crash:SIGABRT after 0 of 1 tests" in text
    assert "it ended in test_crash.py::test_aborts_metalx" in text
    assert "test_uncollectable.py: rc=2, no test ran: ERROR collecting" in text
    table_row = next(line for line in text.splitlines() if line.startswith("test_uncollectable.py "))
    assert "100.00%" not in table_row and table_row.split()[5] == "1", table_row  # err column


def test_runner_refuses_non_checkout(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "metalx.testing.upstream", "--pytorch-src", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "source checkout" in proc.stderr
