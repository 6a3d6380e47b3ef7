"""Summaries of upstream-suite runs: one run (a pytest session) and many files.

Pass rate = passed / (tests that ran and were expected to pass), i.e. upstream
skips and listed expectations are shown separately rather than hidden in the rate.
"""

from __future__ import annotations

from collections import Counter

OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "unexpected_pass")


def build(results: dict, seconds: float, *, per_op=None, aten_fallback=None,
          unmatched=None, expectations=None) -> dict:
    counts = Counter(r["outcome"] for r in results.values())
    skip_reasons = Counter(r["message"] for r in results.values() if r["outcome"] == "skipped")
    return {
        "tests": len(results),
        **{k: counts.get(k, 0) for k in OUTCOMES},
        "seconds": round(seconds, 1),
        "failures": {k: r["message"] for k, r in sorted(results.items())
                     if r["outcome"] in ("failed", "error")},
        "unexpected_passes": sorted(k for k, r in results.items() if r["outcome"] == "unexpected_pass"),
        "known_failures": sorted(k for k, r in results.items() if r["outcome"] == "xfailed"),
        "skip_reasons": dict(skip_reasons.most_common()),
        "slowest": {k: round(r["duration"], 1) for k, r in
                    sorted(results.items(), key=lambda kv: -kv[1]["duration"])[:10]},
        "per_op": per_op or {},
        "aten_fallback": dict(Counter(aten_fallback or {}).most_common()),
        "unmatched_expectations": unmatched or [],
        "expectations": expectations,
    }


def pass_rate(d: dict) -> float:
    ran = d["passed"] + d["failed"] + d["error"] + d["unexpected_pass"]
    return 100.0 * d["passed"] / ran if ran else 100.0


def format_run(d: dict, top: int = 15) -> str:
    lines = ["=" * 25 + " metalx upstream summary " + "=" * 25]
    lines.append(
        f"tests {d['tests']}  passed {d['passed']}  failed {d['failed']}  errors {d['error']}  "
        f"skipped {d['skipped']}  known-failing {d['xfailed']}  now-passing {d['unexpected_pass']}  "
        f"pass rate {pass_rate(d):.2f}%  time {d['seconds']:.0f}s"
    )
    lines.append(f"expectations: {d.get('expectations') or '(none)'}")
    ops = d.get("per_op") or {}
    if ops:
        native = sorted(n for n, f in ops.items() if not f)
        fell = {n: f for n, f in ops.items() if f}
        lines.append(f"ops: {len(ops)} tested, {len(native)} fully native, {len(fell)} used the CPU fallback")
        lines.append("  native: " + (", ".join(native) if native else "(none)"))
    if d.get("aten_fallback"):
        # JSON round trips sort keys alphabetically: order by use again.
        items = sorted(d["aten_fallback"].items(), key=lambda kv: -kv[1])
        lines.append(f"aten ops that fell back to CPU: {len(items)} distinct; most used:")
        lines.append("  " + ", ".join(f"{k} x{v}" for k, v in items[:top]))
    if d.get("upstream_xfail_passed"):
        lines.append(f"passed although op_db marks them expectedFailure (CUDA-vs-CPU issues): "
                     f"{len(d['upstream_xfail_passed'])}")
    if d["unexpected_passes"]:
        lines.append("NOW PASSING (remove from the expectations file):")
        lines += [f"  {t}" for t in d["unexpected_passes"]]
    if d["failures"]:
        lines.append(f"failures not in the expectations file ({len(d['failures'])}):")
        lines += [f"  {t}: {' '.join(m.split())[:200]}" for t, m in list(d["failures"].items())[:50]]
    if d["skip_reasons"]:
        lines.append("skips by reason:")
        reasons = sorted(d["skip_reasons"].items(), key=lambda kv: -kv[1])
        lines += [f"  {n:6d}  {' '.join(r.split())[:140]}" for r, n in reasons[:top]]
    if d.get("slowest"):
        slow = sorted(d["slowest"].items(), key=lambda kv: -kv[1])[:5]
        lines.append("slowest: " + ", ".join(f"{k.split('::')[-1]} {v:.0f}s" for k, v in slow))
    if d.get("unmatched_expectations"):
        lines.append(f"expectation entries that matched no collected test: {len(d['unmatched_expectations'])}"
                     " (fine with -k/subsets; stale otherwise)")
    return "\n".join(lines)


def format_files(rows: list[dict]) -> str:
    """Table for the per-file runner: one row per upstream test file."""
    head = f"{'file':32} {'status':14} {'tests':>6} {'pass':>6} {'fail':>5} {'err':>4} {'skip':>6} {'xfail':>6} {'xpass':>6} {'rate':>7} {'time':>7}"
    lines = [head, "-" * len(head)]
    total = Counter()
    for r in rows:
        d = r.get("data")
        if d is None or (r.get("reason") and not d["tests"]):  # nothing ran: the file is an error
            lines.append(f"{r['file']:32} {r['status']:14} {'-':>6} {'-':>6} {'-':>5} {'1':>4} {'-':>6} {'-':>6} {'-':>6} {'-':>7} {r['seconds']:6.0f}s")
            total["error"] += 1
            total["seconds"] += r["seconds"]
            continue
        # No test selected (-k): there is no pass rate (not 100%).
        rate = f"{pass_rate(d):6.2f}%" if d["tests"] else f"{'-':>7}"
        lines.append(
            f"{r['file']:32} {r['status']:14} {d['tests']:6d} {d['passed']:6d} {d['failed']:5d} {d['error']:4d} "
            f"{d['skipped']:6d} {d['xfailed']:6d} {d['unexpected_pass']:6d} {rate} {r['seconds']:6.0f}s"
        )
        for k in ("tests", *OUTCOMES):
            total[k] += d[k]
        total["seconds"] += r["seconds"]
    t = {k: total.get(k, 0) for k in ("tests", *OUTCOMES)}
    lines.append("-" * len(head))
    lines.append(
        f"{'TOTAL':32} {'':14} {t['tests']:6d} {t['passed']:6d} {t['failed']:5d} {t['error']:4d} "
        f"{t['skipped']:6d} {t['xfailed']:6d} {t['unexpected_pass']:6d} {pass_rate(t):6.2f}% {total['seconds']:6.0f}s"
    )
    # Files whose process did not finish: how far it got, and in which test it ended.
    for r in rows:
        if r.get("reason"):
            lines.append(f"{r['file']}: {r['status']}, no test ran: {r['reason']}")
        d = r.get("data") or {}
        if not (d.get("partial") or r.get("interrupted_test")):
            continue
        ran = f"{d['tests']} of {d['collected']}" if d.get("collected") is not None else f"{d.get('tests', 0)}"
        note = f"{r['file']}: {r['status']} after {ran} tests (counts above are partial"
        note += ", written every 200 tests)" if d else ")"
        if r.get("interrupted_test"):
            note += f"; it ended in {r['interrupted_test']}"
        lines.append(note)
    return "\n".join(lines)


def merge(parts: list[dict]) -> dict:
    """One summary from the summaries of several shards/processes."""
    out = build({}, 0.0)
    for d in parts:
        for k in ("tests", *OUTCOMES):
            out[k] += d[k]
        out["seconds"] = round(out["seconds"] + d["seconds"], 1)
        out["failures"].update(d["failures"])
        out["unexpected_passes"] = sorted(out["unexpected_passes"] + d["unexpected_passes"])
        out["known_failures"] = sorted(out.get("known_failures", []) + d.get("known_failures", []))
        out["upstream_xfail_passed"] = sorted(out.get("upstream_xfail_passed", []) + d.get("upstream_xfail_passed", []))
        out["skip_reasons"] = dict(Counter(out["skip_reasons"]) + Counter(d["skip_reasons"]))
        out["slowest"] = dict(sorted({**out.get("slowest", {}), **d.get("slowest", {})}.items(),
                                     key=lambda kv: -kv[1])[:10])
        for op, fb in d.get("per_op", {}).items():
            out["per_op"][op] = dict(Counter(out["per_op"].get(op, {})) + Counter(fb))
        out["aten_fallback"] = dict(Counter(out["aten_fallback"]) + Counter(d.get("aten_fallback", {})))
        out["expectations"] = d.get("expectations")
    collected = [d.get("collected") for d in parts]
    out["collected"] = sum(collected) if parts and None not in collected else None
    # An entry is stale only if no shard matched it.
    stale = [set(d.get("unmatched_expectations", [])) for d in parts]
    out["unmatched_expectations"] = sorted(set.intersection(*stale)) if stale else []
    return out


if __name__ == "__main__":
    # python -m metalx.testing.summary OUT.json IN.json...: merge shard summaries, print.
    import json
    import sys

    merged = merge([json.load(open(p)) for p in sys.argv[2:]])
    with open(sys.argv[1], "w") as f:
        json.dump(merged, f, indent=1, sort_keys=True)
    print(format_run(merged))
