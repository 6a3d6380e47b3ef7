"""torch.metalx.profiler: what ran on the device in a region, as torch.mps.profiler
offers it.

    with torch.metalx.profiler.profile() as prof:
        model(x)
    print(prof.table())          # per command: count, total and mean device time
    prof.commands                # every kernel, copy and fill, in order

Each command carries its name (the kernel function, or "copy"/"fill"), kind, device,
stream, device start/end in seconds on the runtime's clock, and bytes for copies and
fills. While profiling, each command is committed on its own so the runtime times it
exactly; that costs batching, so profile representative regions, not whole runs.
torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])
shows the same commands, linked to the ops that launched them. Only one of the two
collects at a time.
"""

import collections

import torch

from metalx import _C
from metalx._lazy_init import _lazy_init


class ProfileResult:
    """The commands of one profiled region."""

    def __init__(self, commands):
        self.commands = commands
        for c in commands:
            c["duration_ms"] = (c["gpu_end_s"] - c["gpu_start_s"]) * 1e3

    def summary(self):
        """{name: (count, total device ms)}, largest total first."""
        totals = collections.defaultdict(lambda: [0, 0.0])
        for c in self.commands:
            totals[c["name"]][0] += 1
            totals[c["name"]][1] += c["duration_ms"]
        return dict(sorted(((k, tuple(v)) for k, v in totals.items()), key=lambda kv: -kv[1][1]))

    def table(self):
        rows = [f"{'command':<48} {'count':>6} {'total ms':>10} {'mean ms':>10}"]
        for name, (count, total) in self.summary().items():
            rows.append(f"{name[:48]:<48} {count:>6} {total:>10.3f} {total / count:>10.3f}")
        return "\n".join(rows)


def start():
    """Starts recording device commands (dropping any earlier unread record)."""
    _lazy_init()
    _C._command_trace_start()


def stop() -> ProfileResult:
    """Waits for the device work encoded so far, stops recording and returns it."""
    for index in range(torch.metalx.device_count()):
        torch.metalx.synchronize(index)
    _C._command_trace_stop()
    return ProfileResult(_C._command_trace_take())


class profile:
    """Context manager: records the device commands of its block; the result is
    available as the `as` target's `.commands` / `.table()` after the block."""

    def __enter__(self):
        self._result = ProfileResult([])
        start()
        return self._result

    def __exit__(self, exc_type, exc_value, traceback):
        result = stop()
        self._result.commands = result.commands
        return False
