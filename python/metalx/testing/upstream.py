"""Run unmodified upstream PyTorch test files on metalx, one process per file.

    python -m metalx.testing.upstream --pytorch-src ~/pytorch [test_ops.py ...]

PATH is a PyTorch source checkout at the tag of the installed torch (v2.13.0): the
test files come from there, torch itself from the installed wheel. Each file runs in
its own pytest process (a crash or hang costs that file only), with only the metalx
device type instantiated and only its tests selected (-k metalx), under
metalx.testing.pytest_plugin (expectations + fallback report). Prints a table per
file (passed/failed/skipped/errors/time) and writes it, with every file's JSON
summary and log, to --out.

Exit status: 0 when every file ran and nothing failed unexpectedly (known failures
from the expectations file are fine; listed tests that now pass are not).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from metalx.testing import summary
from metalx.testing.expectations import default_path, torch_minor

# Device-generic upstream files that exercise op semantics: the ones a backend runs.
DEFAULT_FILES = (
    "test_ops.py", "test_torch.py", "test_view_ops.py", "test_nn.py", "test_binary_ufuncs.py",
    "test_unary_ufuncs.py", "test_reductions.py", "test_indexing.py", "test_type_promotion.py",
    "test_shape_ops.py", "test_sort_and_select.py", "test_tensor_creation_ops.py",
    "test_modules.py", "test_foreach.py", "test_linalg.py", "test_autograd.py",
)


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m metalx.testing.upstream", description=__doc__.split("\n\n")[0])
    p.add_argument("--pytorch-src", required=True, type=Path, help="PyTorch checkout at the installed torch's tag")
    p.add_argument("files", nargs="*", help=f"test files under test/ (default: {len(DEFAULT_FILES)} files)")
    p.add_argument("--out", type=Path, default=Path("upstream-results"), help="logs and summaries (default: %(default)s)")
    p.add_argument("--expectations", type=Path, default=None,
                   help="expectations JSON (default: tests/upstream/expectations/torch-X.Y.json from cwd)")
    p.add_argument("--timeout", type=float, default=3 * 3600, help="seconds per file (default: %(default)s)")
    p.add_argument("--jobs", type=int, default=1, help="files run at once (default: %(default)s)")
    p.add_argument("-k", dest="keyword", default="metalx",
                   help="pytest -k expression (default: %(default)s, i.e. the metalx-instantiated tests)")
    p.add_argument("--pytest-arg", action="append", default=[], help="extra pytest argument (repeatable)")
    return p.parse_args(argv)


def check_checkout(src: Path) -> list[str]:
    """Problems that make results meaningless; a version mismatch only warns."""
    if not (src / "test").is_dir():
        return [f"{src}/test does not exist: --pytorch-src must be a PyTorch source checkout"]
    version = src / "version.txt"
    if version.is_file():
        v = version.read_text().strip()
        if not v.startswith(torch_minor() + "."):
            print(f"warning: checkout is PyTorch {v}, installed torch is {torch_minor()}: "
                  f"check out the tag matching the installed torch", file=sys.stderr)
    return []


def child_env(out_json: Path, expectations: Path | None, current: Path | None = None) -> dict:
    env = dict(os.environ)
    # Only metalx's device-type classes are instantiated (no CPU/CUDA copies).
    env["PYTORCH_TESTING_DEVICE_ONLY_FOR"] = "privateuse1"
    env["METALX_SUMMARY_JSON"] = str(out_json)
    if current is not None:
        env["METALX_CURRENT_TEST"] = str(current)
    if expectations is not None:
        env["METALX_EXPECTATIONS"] = str(expectations)
    # Upstream's error_inputs tests expect an out-of-range index to raise at the op, as
    # CPU does; metalx checks index values on the device and raises at the next host
    # wait unless METALX_SYNC_INDEX_CHECKS=1 (README, Configuration).
    env.setdefault("METALX_SYNC_INDEX_CHECKS", "1")
    # Upstream prints a repro command per failure; logs stay readable without it.
    env.setdefault("PYTORCH_PRINT_REPRO_ON_FAILURE", "0")
    return env


def run_file(name: str, args, expectations: Path | None) -> dict:
    test_dir = args.pytorch_src / "test"
    stem = name.replace("/", "_").removesuffix(".py")
    out_json, log = args.out / f"{stem}.json", args.out / f"{stem}.log"
    current = args.out / f"{stem}.current"
    out_json.unlink(missing_ok=True)
    current.unlink(missing_ok=True)
    if not (test_dir / name).is_file():
        return {"file": name, "status": "missing", "seconds": 0.0, "data": None}
    cmd = [sys.executable, "-m", "pytest", name, "-p", "metalx.testing.pytest_plugin",
           "-p", "no:cacheprovider", "-q", "--tb=short", "-rN", *args.pytest_arg]
    if args.keyword:
        cmd += ["-k", args.keyword]
    start = time.time()
    with open(log, "w") as f:
        # Own session: on timeout the whole process group (pytest and any workers it
        # started) is killed, never anything else.
        proc = subprocess.Popen(cmd, cwd=test_dir, env=child_env(out_json, expectations, current),
                                stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
    seconds = time.time() - start
    data = json.loads(out_json.read_text()) if out_json.is_file() else None
    row = {"file": name, "status": _status(rc), "rc": rc, "seconds": seconds, "data": data}
    # A crash or timeout ends the process inside a test: name it (a skip entry in the
    # expectations file lets the rest of the file run).
    if row["status"] not in ("ok", "failures", "no-tests") and current.is_file():
        row["interrupted_test"] = current.read_text().strip() or None
    current.unlink(missing_ok=True)
    # pytest gave up before running anything (rc 2: errors while collecting, e.g. a test
    # file written for another torch; 3/4: internal or usage error): say why.
    if rc in (2, 3, 4) and not (data and data["tests"]):
        row["reason"] = _first_error(log)
    return row


def _first_error(log: Path) -> str:
    """The first error pytest reported in a log: the 'E   ' line after 'ERROR collecting'."""
    lines = log.read_text(errors="replace").splitlines()
    where = next((i for i, l in enumerate(lines) if "ERROR collecting" in l), None)
    for line in lines[where or 0:]:
        if line.startswith("E   ") or line.startswith("ERROR: "):
            what = line.strip()
            return f"{lines[where].strip(' _')}: {what}" if where is not None else what
    return "pytest stopped before running any test; see the log"


def _status(rc) -> str:
    if rc is None:
        return "timeout"
    if rc < 0:
        return f"crash:{signal.Signals(-rc).name}" if -rc in signal.Signals._value2member_map_ else f"crash:{-rc}"
    # pytest: 0 all passed, 1 some failed, 5 nothing collected; anything else broke.
    return {0: "ok", 1: "failures", 5: "no-tests"}.get(rc, f"rc={rc}")


def main(argv=None) -> int:
    args = parse_args(argv)
    problems = check_checkout(args.pytorch_src)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    args.pytorch_src = args.pytorch_src.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    expectations = (args.expectations or default_path())
    expectations = expectations.resolve() if expectations else None
    print(f"expectations: {expectations or '(none found: every failure counts)'}", flush=True)
    files = args.files or list(DEFAULT_FILES)
    rows = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(run_file, f, args, expectations): f for f in files}
        for fut in concurrent.futures.as_completed(futures):
            row = fut.result()
            rows.append(row)
            print(f"{row['file']}: {row['status']} in {row['seconds']:.0f}s", flush=True)
    rows.sort(key=lambda r: files.index(r["file"]))
    table = summary.format_files(rows)
    details = [summary.format_run(r["data"]).replace("metalx upstream summary", r["file"])
               for r in rows if r["data"] and r["data"]["tests"]]
    text = table + "\n\n" + "\n\n".join(details)
    print("\n" + text)
    (args.out / "summary.txt").write_text(text + "\n")
    (args.out / "summary.json").write_text(json.dumps(rows, indent=1, sort_keys=True))
    print(f"\nlogs and summaries: {args.out}/")
    bad = [r for r in rows if r["status"] not in ("ok", "no-tests")
           or (r["data"] and (r["data"]["failed"] or r["data"]["error"] or r["data"]["unexpected_pass"]))]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
