"""metalx against CPU torch and memcpy, as ratios measured in one run.

    python bench/torch_bench.py [--out bench/results/torch-<driver>-<os>-<arch>.json]

Each row times a metalx operation and its baseline on this machine, in this process:
  copy H2D / D2H 64 MiB    contiguous copies against a plain memmove of the same bytes
                           (target: >= 0.8x the bandwidth)
  NCHW->NHWC on metalx     the strided copy kernel against CPU torch's permute copy
                           (target: >= 0.8x CPU's speed)
  native op latency        a small fill_ (1024 floats) against CPU torch's fill_
                           (target: <= 2x CPU's time)
  fallback op, 1M elements an op with no metalx kernel (runs on the CPU over device
                           memory) against the same op on CPU torch (target: <= 1.25x)
"""

import argparse
import ctypes
import json
import platform
import statistics
import time

import torch


def timed(fn, reps=15, inner=1, sync=False):
    """Median seconds per call over `reps` runs of `inner` calls."""
    fn()
    if sync:
        torch.metalx.synchronize()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        if sync:
            torch.metalx.synchronize()
        samples.append((time.perf_counter() - start) / inner)
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    args = parser.parse_args()
    rows = []

    def row(name, metalx_s, baseline_s, ratio, target, ok):
        rows.append(dict(name=name, metalx_ms=metalx_s * 1e3, baseline_ms=baseline_s * 1e3,
                         ratio=ratio, target=target, met=bool(ok)))

    # Contiguous copies of 64 MiB against memmove of the same bytes.
    n = 16 << 20
    host = torch.randn(n)
    host_out = torch.empty(n)
    dev = torch.empty(n, device="metalx")
    memmove = timed(lambda: ctypes.memmove(host_out.data_ptr(), host.data_ptr(), n * 4))
    h2d = timed(lambda: dev.copy_(host), sync=True)
    d2h = timed(lambda: host_out.copy_(dev))
    row("copy cpu->metalx 64 MiB (memmove time / copy time)", h2d, memmove, memmove / h2d, ">= 0.8",
        memmove / h2d >= 0.8)
    row("copy metalx->cpu 64 MiB (memmove time / copy time)", d2h, memmove, memmove / d2h, ">= 0.8",
        memmove / d2h >= 0.8)

    # A strided copy: an activation from NCHW to NHWC.
    act = torch.randn(8, 64, 56, 56)
    act_dev = act.to("metalx")
    cpu_t = timed(lambda: act.permute(0, 2, 3, 1).contiguous())
    dev_t = timed(lambda: act_dev.permute(0, 2, 3, 1).contiguous(), sync=True)
    row("NCHW->NHWC [8,64,56,56] float32 (CPU time / metalx time)", dev_t, cpu_t, cpu_t / dev_t, ">= 0.8",
        cpu_t / dev_t >= 0.8)

    # A small native op, many times: per-op latency.
    small = torch.empty(1024, device="metalx")
    small_cpu = torch.empty(1024)
    dev_t = timed(lambda: small.fill_(1.5), inner=2000, sync=True)
    cpu_t = timed(lambda: small_cpu.fill_(1.5), inner=2000)
    row("native fill_ of 1024 floats (metalx time / CPU time)", dev_t, cpu_t, dev_t / cpu_t, "<= 2",
        dev_t / cpu_t <= 2)

    # Ops without a metalx kernel, on 1M elements.
    a, b = torch.randn(1 << 20), torch.randn(1 << 20)
    a_dev, b_dev = a.to("metalx"), b.to("metalx")
    for name, cpu_fn, dev_fn in [("add", lambda: a + b, lambda: a_dev + b_dev),
                                 ("sin", lambda: a.sin(), lambda: a_dev.sin()),
                                 ("sum", lambda: a.sum(), lambda: a_dev.sum())]:
        cpu_t = timed(cpu_fn, reps=31, inner=5)
        dev_t = timed(dev_fn, reps=31, inner=5, sync=True)
        row(f"fallback {name}, 1M float32 (metalx time / CPU time)", dev_t, cpu_t, dev_t / cpu_t, "<= 1.25",
            dev_t / cpu_t <= 1.25)

    width = max(len(r["name"]) for r in rows)
    print(f"{'measurement':{width}}  {'metalx':>10}  {'baseline':>10}  {'ratio':>6}  target")
    for r in rows:
        print(f"{r['name']:{width}}  {r['metalx_ms']:8.3f}ms  {r['baseline_ms']:8.3f}ms  {r['ratio']:6.2f}  "
              f"{r['target']} {'met' if r['met'] else 'NOT MET'}")
    if args.out:
        info = dict(torch=torch.__version__, driver=torch.metalx.driver_name(), machine=platform.machine(),
                    threads=torch.get_num_threads(), results=rows)
        with open(args.out, "w") as f:
            json.dump(info, f, indent=2)


if __name__ == "__main__":
    main()
