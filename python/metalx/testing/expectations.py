"""Known failures and skips of upstream test suites on metalx, kept as data.

One JSON file per torch minor version (tests/upstream/expectations/torch-2.13.json),
because test ids and OpInfo samples change between torch releases; a file written for
2.13 says nothing about 2.14. Format:

    {"torch": "2.13",
     "entries": [
        {"test": "test_ops_compare.py::TestCommon*::test_compare_cpu_foo_metalx_float32",
         "status": "xfail",            # or "skip" (for tests that crash or hang)
         "cause": "upstream-cpu",      # upstream-cpu | metal-impossible | metalx-bug
         "reason": "why it fails",
         "missing": "what metalx lacks (for metalx-bug)"}]}

`test` is an fnmatch pattern over the pytest node id with the directory stripped
("file.py::Class::test"), so one entry can cover all dtypes of an op ("..._metalx_*"),
or a list of them, so that one root cause is one entry.
xfail entries are applied strictly: a listed test that passes FAILS the run as
"unexpectedly passing", so the list can only shrink.
"""

from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

CAUSES = ("upstream-cpu", "metal-impossible", "metalx-bug")
STATUSES = ("xfail", "skip")


@dataclass
class Entry:
    test: str | list
    status: str
    cause: str
    reason: str
    missing: str = ""
    matched: int = field(default=0, compare=False)


def torch_minor() -> str:
    import torch

    major, minor = torch.__version__.split(".")[:2]
    return f"{major}.{minor}"


def default_path(start: str | os.PathLike | None = None) -> Path | None:
    """The expectations file for the running torch, found from the checkout.

    METALX_EXPECTATIONS wins; otherwise tests/upstream/expectations/torch-X.Y.json
    in `start` (default: cwd) or one of its parents, i.e. the metalx checkout.
    """
    env = os.environ.get("METALX_EXPECTATIONS")
    if env:
        return Path(env)
    name = f"torch-{torch_minor()}.json"
    here = Path(start or os.getcwd()).resolve()
    for d in (here, *here.parents):
        candidate = d / "tests" / "upstream" / "expectations" / name
        if candidate.is_file():
            return candidate
    return None


class Expectations:
    def __init__(self, entries: list[Entry], path: Path | None = None):
        self.entries = entries
        self.path = path

    @classmethod
    def load(cls, path: str | os.PathLike | None) -> "Expectations":
        if path is None:
            return cls([], None)
        path = Path(path)
        data = json.loads(path.read_text())
        want = torch_minor()
        # A file for another torch would silently mis-skip: refuse it.
        if str(data.get("torch")) != want:
            raise ValueError(f"{path} is for torch {data.get('torch')}, running torch {want}")
        entries = []
        for raw in data.get("entries", []):
            e = Entry(**raw)
            if e.status not in STATUSES:
                raise ValueError(f"{path}: {e.test}: status must be one of {STATUSES}")
            if e.cause not in CAUSES:
                raise ValueError(f"{path}: {e.test}: cause must be one of {CAUSES}")
            if not e.reason:
                raise ValueError(f"{path}: {e.test}: every entry needs a reason")
            if e.cause == "metalx-bug" and not e.missing:
                raise ValueError(f"{path}: {e.test}: metalx-bug entries must say what is missing")
            entries.append(e)
        return cls(entries, path)

    def lookup(self, nodeid: str) -> Entry | None:
        """First entry whose pattern matches the node id (directory stripped)."""
        short = short_id(nodeid)
        for e in self.entries:
            patterns = [e.test] if isinstance(e.test, str) else e.test
            if any(fnmatch.fnmatchcase(short, p) for p in patterns):
                e.matched += 1
                return e
        return None

    def unmatched(self) -> list[str]:
        return [e.test if isinstance(e.test, str) else e.test[0] + " ..." for e in self.entries if e.matched == 0]


def short_id(nodeid: str) -> str:
    """'tests/upstream/test_x.py::C::t' -> 'test_x.py::C::t' (ids independent of cwd)."""
    path, sep, rest = nodeid.partition("::")
    return os.path.basename(path) + sep + rest
