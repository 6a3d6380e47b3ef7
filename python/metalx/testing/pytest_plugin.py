"""pytest plugin for upstream test suites on metalx: expectations, outcomes, fallback.

Load with `-p metalx.testing.pytest_plugin` (the way-2 runner does, for unmodified
upstream files) or register it from a conftest (tests/upstream does). Configured by
environment so that it works the same in both places and in child processes:

  METALX_EXPECTATIONS   expectations JSON (default: found from cwd, see expectations.py)
  METALX_SUMMARY_JSON   write the run's summary there (the runner merges these)
  METALX_SHARD          "i/n": run only shard i of n (scripts/test_upstream_full.sh)
  METALX_CURRENT_TEST   write the id of each test there as it starts, so that a process
                        killed by a crash or a timeout still tells which test it was in

Expectations become pytest markers: xfail(strict=True) so a listed test that starts
passing fails the run, skip for tests that must not run (crash/hang). Nothing else is
skipped by this plugin; upstream's own skips are counted and listed by reason.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from collections import Counter

import pytest

from metalx.testing import coverage, summary
from metalx.testing.expectations import Expectations, default_path, short_id


class MetalxUpstreamPlugin:
    def __init__(self):
        path = default_path()
        self.expectations = Expectations.load(path)
        self.results: dict[str, dict] = {}  # short id -> {"outcome", "message", "duration"}
        self.aten_fallback: Counter = Counter()
        self.upstream_xfail_passed: list[str] = []
        self.collected: int | None = None
        self.current_test_file = os.environ.get("METALX_CURRENT_TEST")
        self.start = time.time()

    # --- sharding and expectations ----------------------------------------------
    def pytest_collection_modifyitems(self, config, items):
        # METALX_SHARD=i/n keeps a stable 1/n of the tests, so a long suite can run as
        # n processes and a crash (segfault in a CPU kernel) costs one shard, not all.
        shard = os.environ.get("METALX_SHARD")
        if shard:
            i, n = (int(x) for x in shard.split("/"))
            keep = [it for it in items if zlib.crc32(short_id(it.nodeid).encode()) % n == i]
            dropped = [it for it in items if zlib.crc32(short_id(it.nodeid).encode()) % n != i]
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep
        for item in items:
            entry = self.expectations.lookup(item.nodeid)
            if entry is None:
                continue
            why = f"[{entry.cause}] {entry.reason}"
            if entry.status == "skip":
                item.add_marker(pytest.mark.skip(reason=f"expectations: {why}"))
            else:
                item.add_marker(pytest.mark.xfail(reason=f"expectations: {why}", strict=True))

    def pytest_collection_finish(self, session):
        # After -k, sharding and deselection: what this process means to run. A partial
        # summary (timeout, crash) can then say how far it got.
        self.collected = len(session.items)
        self._write(partial=True)

    def pytest_runtest_logstart(self, nodeid, location):
        # One small write per test: when the process dies (segfault in a kernel, hang
        # killed by the runner's timeout) this file names the test it died in.
        if self.current_test_file:
            with open(self.current_test_file, "w") as f:
                f.write(short_id(nodeid) + "\n")

    # --- fallback measurement around every test ---------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        before = coverage.fallback_counts()
        try:
            return (yield)
        finally:
            self.aten_fallback.update(coverage.delta(before, coverage.fallback_counts()))

    # --- upstream expected failures that pass on metalx ---------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        rep = yield
        # op_db marks some samples unittest.expectedFailure for test_compare_cpu because
        # CUDA differs from CPU there; metalx computes them on the CPU, so they pass.
        # That is not a metalx regression to fail on: count it as passed and list it.
        # (Our own expectations are pytest xfail markers and stay strict.)
        if (rep.when == "call" and rep.failed and "Unexpected success" in (rep.longreprtext or "")
                and item.get_closest_marker("xfail") is None):
            rep.outcome = "passed"
            rep.longrepr = None
            self.upstream_xfail_passed.append(short_id(item.nodeid))
        return rep

    # --- outcomes ---------------------------------------------------------------
    def pytest_runtest_logreport(self, report):
        sid = short_id(report.nodeid)
        outcome = _classify(report)
        if outcome is not None:
            rec = self.results.setdefault(sid, {"outcome": "passed", "message": "", "duration": 0.0})
            rec["duration"] += report.duration
            # A failing teardown after a passing call makes the test an error; never let
            # a later phase's "passed" hide an earlier problem.
            if outcome != "passed" or report.when == "call":
                if rec["outcome"] == "passed" or outcome in ("failed", "error", "unexpected_pass"):
                    rec["outcome"] = outcome
                    rec["message"] = _message(report)

        # Long runs get killed by timeouts: keep a partial summary on disk as we go.
        if report.when == "teardown" and len(self.results) % 200 == 0:
            self._write(partial=True)

    def pytest_sessionfinish(self, session, exitstatus):
        self._write(partial=False)

    def _write(self, partial):
        data = summary.build(
            self.results,
            time.time() - self.start,
            per_op=coverage.per_op(),
            aten_fallback=dict(self.aten_fallback),
            unmatched=self.expectations.unmatched(),
            expectations=str(self.expectations.path) if self.expectations.path else None,
        )
        data["partial"] = partial
        data["collected"] = self.collected
        data["upstream_xfail_passed"] = sorted(self.upstream_xfail_passed)
        self.data = data
        out = os.environ.get("METALX_SUMMARY_JSON")
        if out:
            with open(out, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)

    def pytest_terminal_summary(self, terminalreporter):
        data = getattr(self, "data", None)
        if data is not None and data["tests"]:
            terminalreporter.write_line("")
            for line in summary.format_run(data).splitlines():
                terminalreporter.write_line(line)


def _classify(report) -> str | None:
    wasxfail = hasattr(report, "wasxfail")
    if report.when == "call":
        if report.passed:
            return "unexpected_pass" if wasxfail else "passed"
        if report.skipped:
            return "xfailed" if wasxfail else "skipped"
        text = report.longreprtext or ""
        if "XPASS(strict)" in text or "Unexpected success" in text:
            return "unexpected_pass"
        return "failed"
    # setup / teardown: only problems matter
    if report.skipped:
        return "xfailed" if wasxfail else "skipped"
    if report.failed:
        return "error"
    return None


def _message(report) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    if getattr(report, "wasxfail", None):
        return str(report.wasxfail)
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message
    return (report.longreprtext or "").strip().splitlines()[-1:][0] if report.longreprtext else ""


def pytest_configure(config):
    # Module-level hook: `-p metalx.testing.pytest_plugin` registers this module, which
    # then registers the stateful plugin object once.
    if not config.pluginmanager.has_plugin("metalx-upstream"):
        config.pluginmanager.register(MetalxUpstreamPlugin(), "metalx-upstream")
