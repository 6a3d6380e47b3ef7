"""Sorting ops (kernels/sort.metal): metalx against CPU torch, measured in one run.

    python bench/sort_bench.py [--out bench/results/sort-<driver>-<os>-<arch>.json] [--reps R]

Each row times one op on metalx (ending with torch.metalx.synchronize()) and on CPU
torch, median of R runs after a warm-up, and reports ratio = CPU time / metalx time
(above 1: metalx is faster). Shapes cover one long line (block sort plus merge passes),
many medium lines (one block each) and many short lines (many lines per block).

Target (issue 14): every row at ratio >= 1 on an Apple GPU; on the simulator the rows
record where the sort stands (no target: its barriers switch fibers on 2 cores).
"""

import argparse
import json
import os
import platform
import statistics
import time

import torch
import metalx  # noqa: F401  (registers the device)


def seconds(fn, reps, sync):
    fn()
    if sync:
        torch.metalx.synchronize()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        if sync:
            torch.metalx.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def rows():
    """(name, make(device) -> fn)."""
    def sort(shape, dim):
        def make(dev):
            x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(dev)
            return lambda: x.sort(dim=dim)
        return f"sort {tuple(shape)} dim={dim}", make

    def topk(shape, k):
        def make(dev):
            x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(dev)
            return lambda: x.topk(k, dim=-1)
        return f"topk {tuple(shape)} k={k}", make

    def unique(n, distinct):
        def make(dev):
            x = torch.randint(0, distinct, (n,), generator=torch.Generator().manual_seed(0)).to(dev)
            return lambda: torch.unique(x, return_counts=True)
        return f"unique {n} of {distinct}", make

    def randperm(n):
        return f"randperm {n}", lambda dev: (lambda: torch.randperm(n, device=dev))

    def multinomial(rows_, n, samples):
        def make(dev):
            p = torch.rand(rows_, n, generator=torch.Generator().manual_seed(0)).to(dev)
            return lambda: torch.multinomial(p, samples, replacement=True)
        return f"multinomial {rows_}x{n} {samples} samples", make

    return [sort((1 << 20,), 0), sort((1000, 1000), 1), sort((1000, 1000), 0), sort((100000, 16), 1),
            topk((1000, 1000), 5), unique(1 << 20, 1000), randperm(1 << 20), multinomial(64, 1000, 1000)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    results = []
    for name, make in rows():
        cpu = seconds(make("cpu"), args.reps, False)
        dev = seconds(make("metalx"), args.reps, True)
        results.append({"op": name, "cpu_ms": cpu * 1e3, "metalx_ms": dev * 1e3, "ratio": cpu / dev})
        print(f"{name:40s} cpu {cpu * 1e3:9.1f} ms  metalx {dev * 1e3:9.1f} ms  ratio {cpu / dev:5.2f}")
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump({"machine": platform.machine(), "system": platform.system(), "torch": torch.__version__,
                       "load_average": os.getloadavg(), "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
