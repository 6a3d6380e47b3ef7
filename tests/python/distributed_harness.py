"""Runs a function on N ranks of a Gloo process group, each in its own process.

Ranks are 'spawn'ed processes (metalx cannot be used in a forked child) that meet
through a FileStore in a temporary folder and talk over the loopback interface only.
Every wait is bounded: a rank that fails or hangs fails the test with the ranks'
tracebacks instead of hanging CI.
"""

import datetime
import io
import multiprocessing
import os
import queue as queue_module
import sys
import tempfile
import time
import traceback

# The process group's timeout inside the ranks, and how long the parent waits for
# all of them; a collective that cannot complete fails within the first.
PG_TIMEOUT_S = 30
JOB_TIMEOUT_S = 240


def _loopback_interface():
    return "lo0" if sys.platform == "darwin" else "lo"


def _dump(obj):
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _load(data):
    import torch

    return torch.load(io.BytesIO(data), weights_only=False)


def _entry(fn, rank, world_size, store_path, results, init_kwargs, args):
    os.environ["GLOO_SOCKET_IFNAME"] = _loopback_interface()
    try:
        import torch  # noqa: F401  (loads metalx)
        import torch.distributed as dist

        kwargs = {"backend": "gloo", "timeout": datetime.timedelta(seconds=PG_TIMEOUT_S)}
        kwargs.update(init_kwargs)
        dist.init_process_group(init_method=f"file://{store_path}", rank=rank, world_size=world_size, **kwargs)
        result = fn(rank, world_size, *args)
        dist.destroy_process_group()
        results.put((rank, "ok", _dump(result)))
    except BaseException:
        results.put((rank, "error", traceback.format_exc()))


def run_ranks(fn, world_size=2, *args, init_kwargs=None, timeout=JOB_TIMEOUT_S, dying_ranks=()):
    """fn(rank, world_size, *args) on each rank; returns the ranks' results in order.

    Results travel with torch.save, so tensors should be CPU tensors. Ranks listed in
    `dying_ranks` are expected to exit without a result (None in their place).
    """
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        store_path = os.path.join(tmp, "store")
        procs = [ctx.Process(target=_entry, args=(fn, r, world_size, store_path, results, init_kwargs or {}, args))
                 for r in range(world_size)]
        for p in procs:
            p.start()
        outcome, deadline = {}, time.monotonic() + timeout
        try:
            while len(outcome) < world_size:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    rank, status, payload = results.get(timeout=min(left, 1.0))
                except queue_module.Empty:
                    if all(not p.is_alive() for p in procs) and results.empty():
                        break
                    continue
                outcome[rank] = (status, payload)
        finally:
            for p in procs:
                p.join(timeout=5)
                if p.is_alive():
                    p.kill()
                    p.join()
    errors = [f"rank {r}:\n{payload}" for r, (status, payload) in sorted(outcome.items()) if status != "ok"]
    missing = [r for r in range(world_size) if r not in outcome and r not in dying_ranks]
    if errors or missing:
        raise AssertionError("distributed job failed" + (f"; ranks without a result: {missing}" if missing else "")
                             + "\n" + "\n".join(errors))
    return [_load(outcome[r][1]) if r in outcome else None for r in range(world_size)]
