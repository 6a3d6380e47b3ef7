"""The threaded part of the stress suite: each thread works on a stream of its own,
mixing native ops, CPU-fallback ops, non_blocking copies through pinned memory,
record_stream and frees of tensors other streams still use. Every result is checked
against CPU torch on the same inputs."""

import random
import threading
import traceback

import torch

DEVICE = "metalx"


class Tally:
    """What the threads did and what went wrong (shared, locked)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.ops = {}
        self.errors = []

    def count(self, kind, n=1):
        with self._lock:
            self.ops[kind] = self.ops.get(kind, 0) + n

    def error(self, where, message):
        with self._lock:
            if len(self.errors) < 50:  # the first ones tell the story
                self.errors.append(f"{where}: {message}")
            self.ops["errors"] = self.ops.get("errors", 0) + 1


def _close(actual, expected, what, tally, rtol=1e-4, atol=1e-5):
    try:
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)
    except AssertionError as e:
        tally.error(what, str(e).splitlines()[0] if str(e) else "mismatch")


def _shape(rng):
    return (rng.randint(1, 64), rng.randint(1, 300))


def native_ops(rng, tally):
    cpu = torch.randn(_shape(rng), generator=torch.Generator().manual_seed(rng.randrange(1 << 30)))
    x = cpu.to(DEVICE)
    y = ((x * 1.5 + 0.25).exp() - x.sigmoid()).sum(dim=1)
    _close(y.cpu(), ((cpu * 1.5 + 0.25).exp() - cpu.sigmoid()).sum(dim=1), "native elementwise+sum", tally,
           rtol=1e-4, atol=1e-3)
    w = torch.randn(cpu.shape[1], 17)
    _close((x @ w.to(DEVICE)).softmax(dim=-1).cpu(), (cpu @ w).softmax(dim=-1), "native matmul+softmax", tally,
           rtol=1e-3, atol=1e-4)
    tally.count("native ops", 8)


def fallback_ops(rng, tally):
    # Ops metalx runs through the CPU fallback (kthvalue, median): its synchronisation
    # with this thread's stream is what is under test.
    cpu = torch.randn(_shape(rng))
    x = cpu.to(DEVICE) + 1  # queued native work the fallback must wait for
    k = rng.randint(1, cpu.shape[1])
    values, indices = torch.kthvalue(x, k, dim=1)
    ref_values, _ = torch.kthvalue(cpu + 1, k, dim=1)
    _close(values.cpu(), ref_values, "fallback kthvalue", tally, rtol=0, atol=0)
    _close((x.gather(1, indices[:, None]).squeeze(1)).cpu(), ref_values, "kthvalue indices", tally, rtol=0, atol=0)
    _close(torch.median(x).cpu(), torch.median(cpu + 1), "fallback median", tally, rtol=0, atol=0)
    tally.count("fallback ops", 3)


def pinned_copies(rng, tally):
    n = rng.randint(1, 1 << 16)
    source = torch.randn(n).pin_memory()
    expected = source * 2 + 1
    device = source.to(DEVICE, non_blocking=True)
    result = torch.empty(n, pin_memory=True)
    result.copy_(device * 2 + 1, non_blocking=True)
    torch.metalx.current_stream().synchronize()
    _close(result, expected, "pinned round trip", tally, rtol=0, atol=0)
    tally.count("non_blocking copies", 2)


def cross_stream_frees(rng, tally, side):
    # A tensor made on this thread's stream, used on `side`, then freed here while
    # `side` may still run: record_stream keeps its memory from being reused too early.
    n = rng.randint(1, 1 << 15)
    cpu = torch.randn(n)
    x = cpu.to(DEVICE)
    side.wait_stream(torch.metalx.current_stream())
    with torch.metalx.stream(side):
        y = x.mul(3).add_(1)
    x.record_stream(side)
    del x  # freed while side still uses it
    torch.metalx.current_stream().wait_stream(side)
    y.record_stream(torch.metalx.current_stream())
    scratch = [torch.full((n,), -7.0, device=DEVICE) for _ in range(3)]  # would reuse x's memory
    _close(y.cpu(), cpu * 3 + 1, "record_stream", tally, rtol=1e-6, atol=1e-6)
    del scratch, y
    tally.count("record_stream frees", 1)


def worker(index, seed, stop, tally):
    rng = random.Random(seed * 1000 + index)
    stream = torch.metalx.Stream()
    side = torch.metalx.Stream()
    steps = [native_ops, fallback_ops, pinned_copies, lambda r, t: cross_stream_frees(r, t, side)]
    names = ["native", "fallback", "pinned", "record_stream"]
    with torch.metalx.stream(stream):
        while not stop.is_set():
            pick = rng.randrange(len(steps))
            try:
                steps[pick](rng, tally)
            except Exception as e:  # any exception is a finding, not a crash of the run
                tally.error(f"thread {index} {names[pick]}", f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
        stream.synchronize()
        side.synchronize()


def run(threads, seconds, seed, tally):
    stop = threading.Event()
    pool = [threading.Thread(target=worker, args=(i, seed, stop, tally), name=f"stress-{i}") for i in range(threads)]
    for t in pool:
        t.start()
    stop.wait(seconds)
    stop.set()
    for t in pool:
        t.join()
