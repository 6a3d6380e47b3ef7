"""Which aten ops fell back to the CPU, attributed per OpInfo / ModuleInfo.

fallback_stats() counts aten ops for the whole process; users and the lead think in
OpInfos ("add", "nn.functional.conv2d"). Tests wrap the device call of an op in
`measure(name)`; the pytest plugin prints and saves the per-op table. Deltas, never
reset_fallback_stats(), so that nested measurements (the plugin measures every test
as a whole too) do not disturb each other.
"""

from __future__ import annotations

import contextlib
from collections import Counter, defaultdict

# op name -> Counter(aten op -> times it fell back); an op with an empty Counter ran
# natively (every aten op it used had a metalx kernel).
_per_op: dict[str, Counter] = defaultdict(Counter)


def fallback_counts() -> Counter:
    try:
        from metalx.fallback import fallback_stats
    except Exception:  # metalx not loaded: nothing can fall back through it
        return Counter()
    return Counter(fallback_stats())


def delta(before: Counter, after: Counter) -> Counter:
    return Counter({k: after[k] - before.get(k, 0) for k in after if after[k] > before.get(k, 0)})


@contextlib.contextmanager
def measure(name: str):
    before = fallback_counts()
    try:
        yield
    except Exception as e:
        # A device call that raised proves nothing about native coverage: list the
        # op as not native, with the exception type as its "fallback".
        _per_op[name][f"(raised {type(e).__name__})"] += 1
        raise
    finally:
        _per_op[name].update(delta(before, fallback_counts()))
        _per_op[name]  # noqa: B018  (an op that never fell back is still listed)


def per_op() -> dict[str, dict[str, int]]:
    return {name: dict(c) for name, c in sorted(_per_op.items())}
