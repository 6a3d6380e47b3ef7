"""One AdamW step on metalx (fused=True and foreach=True) against CPU torch's foreach
AdamW, measured in one run.

    python bench/optim_bench.py [--out bench/results/optim-<driver>-<os>-<arch>.json] [--reps N]

The model: 100 float32 parameter tensors of 100,000 elements (10M parameters), each
with a gradient; AdamW(lr=1e-3, weight_decay=1e-2) as torch.optim runs it. A step's
time is wall time until the device has finished (torch.metalx.synchronize). CPU torch
runs with torch.set_num_threads(2) (the simulator also uses the machine's cores).
The three cases are timed in turn, round after round, and each keeps its best round.
Ratio = CPU foreach time / metalx time (target: >= 1.0). The machine's load average
before and after is recorded: on a shared machine CPU torch (whose two threads wait
for each other) slows down more than the simulator, so loaded runs flatter metalx.
"""

import argparse
import json
import os
import platform
import time

import torch

TENSORS = 100
ELEMENTS = 100_000


def make_step(device, **flags):
    """One AdamW step over a fresh model on `device`, warmed up twice (which creates the
    optimizer state)."""
    g = torch.Generator().manual_seed(0)
    params = [torch.randn(ELEMENTS, generator=g).to(device).requires_grad_() for _ in range(TENSORS)]
    for p in params:
        p.grad = torch.randn(ELEMENTS, generator=g).to(device)
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=1e-2, **flags)
    sync = (lambda: torch.metalx.synchronize()) if device == "metalx" else (lambda: None)

    def step():
        opt.step()
        sync()

    step()
    step()
    return step


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(2)
    load_before = os.getloadavg()
    cases = {"cpu foreach": make_step("cpu", foreach=True), "fused": make_step("metalx", fused=True),
             "foreach": make_step("metalx", foreach=True)}
    # Rounds that time each case once, in turn, so that a shared machine's load falls on
    # all of them alike; each case's best round counts (the least disturbed one).
    best = {name: float("inf") for name in cases}
    torch.metalx.reset_fallback_stats()
    for _ in range(args.reps):
        for name, step in cases.items():
            start = time.perf_counter()
            step()
            best[name] = min(best[name], time.perf_counter() - start)
    fallbacks = torch.metalx.fallback_stats()
    cpu = best["cpu foreach"]
    rows = [dict(case=f"AdamW {name}", metalx_ms=best[name] * 1e3, cpu_foreach_ms=cpu * 1e3, ratio=cpu / best[name],
                 target=">= 1.0", met=cpu / best[name] >= 1.0) for name in ("fused", "foreach")]
    print(f"{'case':16} {'metalx ms':>10} {'cpu foreach ms':>15} {'ratio':>6}")
    for r in rows:
        print(f"{r['case']:16} {r['metalx_ms']:10.2f} {r['cpu_foreach_ms']:15.2f} {r['ratio']:6.2f}")
    print("CPU fallbacks:", fallbacks or "none")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(machine=platform.platform(), torch=torch.__version__, threads=2, tensors=TENSORS,
                           elements_per_tensor=ELEMENTS, rounds=args.reps, load_average_before=load_before,
                           load_average_after=os.getloadavg(), fallbacks=fallbacks, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
