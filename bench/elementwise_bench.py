"""Native elementwise ops and reductions against CPU torch, as ratios in one run.

    python bench/elementwise_bench.py [--clock wall|process] [--out bench/results/elementwise-sim-<os>-<arch>.json]

ratio = CPU torch's time / metalx's time for the same op on the same data (above 1:
metalx is faster). Targets (issue 12):
  contiguous float32 unary/binary, 1M-16M elements    >= 0.8
  broadcast and strided float32 binary                >= 0.5
  full reduction at 16M                               >= 0.8
  per-dim reductions at 16M                           >= 0.5
Each metalx time includes synchronising the device, so the op's whole cost is counted.
CPU torch runs with its default threads (every core); the simulator uses every core too.
"""

import argparse
import json
import os
import platform
import statistics
import time

import torch


def timed(fn, sync, clock=time.perf_counter, min_time=0.25, min_reps=5):
    """Best seconds per call (by `clock`) over at least `min_reps` runs and `min_time` seconds."""
    fn()
    sync()
    samples = []
    start = time.perf_counter()
    while len(samples) < min_reps or time.perf_counter() - start < min_time:
        t = clock()
        fn()
        sync()
        samples.append(clock() - t)
    return min(samples)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    # wall: elapsed time. process: CPU time of every thread of this process (the
    # simulator's workers and CPU torch's threads are both in it): on a loaded machine
    # the wall time mostly measures how long each side waited for a core, which hits CPU
    # torch's threads hardest, while CPU time counts the work (and any spinning).
    parser.add_argument("--clock", choices=("wall", "process"), default="wall")
    args = parser.parse_args()
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    load_before = os.getloadavg()
    rows = []
    sync_dev = torch.metalx.synchronize

    def compare(group, name, fn, *tensors, target):
        dev = [t.to("metalx") for t in tensors]
        t_dev = timed(lambda: fn(*dev), sync_dev, clock)
        t_cpu = timed(lambda: fn(*tensors), lambda: None, clock)
        ratio = t_cpu / t_dev
        rows.append(dict(group=group, name=name, metalx_ms=t_dev * 1e3, cpu_ms=t_cpu * 1e3, ratio=ratio,
                         target=target, met=ratio >= target))
        print(f"{group:<22} {name:<34} metalx {t_dev * 1e3:8.3f} ms  cpu {t_cpu * 1e3:8.3f} ms  "
              f"ratio {ratio:5.2f}  (target >= {target})", flush=True)

    for n in (1 << 20, 1 << 24):
        a, b = torch.randn(n), torch.randn(n)
        tag = f"{n >> 20}M"
        compare("contiguous", f"add {tag}", torch.add, a, b, target=0.8)
        compare("contiguous", f"mul {tag}", torch.mul, a, b, target=0.8)
        compare("contiguous", f"relu {tag}", torch.relu, a, target=0.8)
        compare("contiguous", f"exp {tag}", torch.exp, a, target=0.8)
        compare("contiguous", f"sigmoid {tag}", torch.sigmoid, a, target=0.8)
        compare("contiguous", f"gelu {tag}", torch.nn.functional.gelu, a, target=0.8)
        compare("contiguous", f"x * 2 (scalar) {tag}", lambda x: x * 2, a, target=0.8)

    m = torch.randn(4096, 4096)
    row = torch.randn(4096)
    compare("broadcast/strided", "add [4096,4096] + [4096]", torch.add, m, row, target=0.5)
    compare("broadcast/strided", "add [4096,4096] + [4096,1]", torch.add, m, row[:, None], target=0.5)
    compare("broadcast/strided", "add x + x.t()", lambda x: x + x.t(), m, target=0.5)
    compare("broadcast/strided", "exp x[:, ::2]", lambda x: torch.exp(x[:, ::2]), m, target=0.5)

    compare("reduction", "sum 16M (full)", torch.sum, m, target=0.8)
    compare("reduction", "amax 16M (full)", torch.amax, m, target=0.8)
    compare("reduction", "sum dim=1 [4096,4096]", lambda x: x.sum(1), m, target=0.5)
    compare("reduction", "sum dim=0 [4096,4096]", lambda x: x.sum(0), m, target=0.5)
    compare("reduction", "mean dim=1 [4096,4096]", lambda x: x.mean(1), m, target=0.5)
    compare("reduction", "amax dim=1 [4096,4096]", lambda x: x.amax(1), m, target=0.5)
    compare("reduction", "var dim=1 [4096,4096]", lambda x: x.var(1), m, target=0.5)
    compare("reduction", "argmax dim=0 [4096,4096]", lambda x: x.argmax(0), m, target=0.5)

    met = sum(r["met"] for r in rows)
    print(f"{met} of {len(rows)} rows meet their target")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(machine=platform.machine(), system=platform.system(), torch=torch.__version__,
                           threads=torch.get_num_threads(), clock=args.clock, load_before=load_before,
                           load_after=os.getloadavg(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
