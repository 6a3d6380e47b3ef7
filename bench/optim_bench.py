"""One AdamW step on metalx (fused=True and foreach=True) against CPU torch's foreach
AdamW, measured in one run.

    python bench/optim_bench.py [--out bench/results/optim-<driver>-<os>-<arch>.json] [--reps N]

The model: 100 float32 parameter tensors of 100,000 elements (10M parameters), each
with a gradient; AdamW(lr=1e-3, weight_decay=1e-2) as torch.optim runs it. A step's
time is wall time until the device has finished (torch.metalx.synchronize). CPU torch
runs with torch.set_num_threads(2) (the simulator also uses the machine's cores).
Ratio = CPU foreach time / metalx time (target: >= 1.0). The machine's load average
before and after is recorded: on a shared machine both sides slow down.
"""

import argparse
import json
import os
import platform
import time

import torch

TENSORS = 100
ELEMENTS = 100_000


def timed(fn, reps, sync, min_seconds=1.0):
    """Best of at least `reps` runs after two warm-up steps (which create the state),
    and of as many more as fit in `min_seconds`: the least disturbed run, both sides."""
    fn()
    fn()
    sync()
    samples = []
    begin = time.perf_counter()
    while len(samples) < reps or time.perf_counter() - begin < min_seconds:
        start = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - start)
    return min(samples)


def adamw_step(device, reps, **flags):
    g = torch.Generator().manual_seed(0)
    params = [torch.randn(ELEMENTS, generator=g).to(device).requires_grad_() for _ in range(TENSORS)]
    for p in params:
        p.grad = torch.randn(ELEMENTS, generator=g).to(device)
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=1e-2, **flags)
    sync = (lambda: torch.metalx.synchronize()) if device == "metalx" else (lambda: None)
    return timed(opt.step, reps, sync)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(2)
    load_before = os.getloadavg()
    cpu = adamw_step("cpu", args.reps, foreach=True)
    rows = []
    for name, flags in (("fused", dict(fused=True)), ("foreach", dict(foreach=True))):
        torch.metalx.reset_fallback_stats()
        t = adamw_step("metalx", args.reps, **flags)
        fallbacks = torch.metalx.fallback_stats()
        rows.append(dict(case=f"AdamW {name}", metalx_ms=t * 1e3, cpu_foreach_ms=cpu * 1e3, ratio=cpu / t,
                         target=">= 1.0", met=cpu / t >= 1.0, fallbacks=fallbacks))
    print(f"{'case':16} {'metalx ms':>10} {'cpu foreach ms':>15} {'ratio':>6}")
    for r in rows:
        print(f"{r['case']:16} {r['metalx_ms']:10.2f} {r['cpu_foreach_ms']:15.2f} {r['ratio']:6.2f}"
              f"{'' if not r['fallbacks'] else '  fallbacks: ' + str(r['fallbacks'])}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(machine=platform.platform(), torch=torch.__version__, threads=2, tensors=TENSORS,
                           elements_per_tensor=ELEMENTS, load_average_before=load_before,
                           load_average_after=os.getloadavg(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
