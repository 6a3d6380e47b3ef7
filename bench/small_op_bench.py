"""Host cost of one small op: metalx against CPU torch, measured in one run.

    python bench/small_op_bench.py [--out bench/results/small-ops-<driver>-<os>-<arch>.json]
                                   [--ops N] [--reps R]

Each row runs a loop of N (10k) ops on 16-element float32 tensors, on metalx and on
CPU torch, and reports microseconds per op. A metalx loop ends with
torch.metalx.synchronize(), so the time includes the device running what was encoded,
not only the host encoding it. The median of R loops is reported, as wall time (what
the target is about) and as the calling thread's CPU time (time.thread_time: the host
cost alone, and much less disturbed than wall time when other processes load the
machine; the simulator's own threads are not in it).

Target (issue 12): a native op costs at most 2 us on the simulator. Rows whose op has
no metalx kernel yet run through the CPU fallback; they are reported, marked
"fallback", and their target is the same (it becomes binding once they are native).
"""

import argparse
import json
import os
import platform
import statistics
import time

import torch
import metalx  # noqa: F401  (registers the device)

TARGET_US = 2.0


def loop_seconds(fn, ops, sync):
    """(wall, this thread's CPU) seconds for `ops` calls of fn, including the device finishing them."""
    start, start_cpu = time.perf_counter(), time.thread_time()
    for _ in range(ops):
        fn()
    if sync:
        torch.metalx.synchronize()
    return time.perf_counter() - start, time.thread_time() - start_cpu


def per_op_us(fn, ops, reps, sync):
    """Median (wall, thread CPU) microseconds per call over `reps` loops of `ops` calls (after a warm-up loop)."""
    loop_seconds(fn, ops, sync)
    loops = [loop_seconds(fn, ops, sync) for _ in range(reps)]
    return tuple(statistics.median(loop[i] for loop in loops) / ops * 1e6 for i in (0, 1))


def is_native(fn):
    """Whether `fn` runs without the CPU fallback (per metalx's fallback counts)."""
    torch.metalx.reset_fallback_stats()
    fn()
    torch.metalx.synchronize()
    return not torch.metalx.fallback_stats()


def cases():
    """(name, metalx op, CPU op) for 16-element float32 tensors."""
    dev = torch.empty(16, device="metalx")
    dev_b = torch.ones(16, device="metalx")
    cpu = torch.empty(16)
    cpu_b = torch.ones(16)
    return [
        ("fill_(1.0)", lambda: dev.fill_(1.0), lambda: cpu.fill_(1.0)),
        ("zero_()", lambda: dev.zero_(), lambda: cpu.zero_()),
        ("empty(16)", lambda: torch.empty(16, device="metalx"), lambda: torch.empty(16, device="cpu")),
        ("add_(b)", lambda: dev.add_(dev_b), lambda: cpu.add_(cpu_b)),
        ("mul_(b)", lambda: dev.mul_(dev_b), lambda: cpu.mul_(cpu_b)),
        ("a + b", lambda: dev + dev_b, lambda: cpu + cpu_b),
    ]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--ops", type=int, default=10000, help="ops per timed loop")
    parser.add_argument("--reps", type=int, default=7, help="timed loops per row (median)")
    args = parser.parse_args()

    rows = []
    for name, dev_fn, cpu_fn in cases():
        native = is_native(dev_fn)
        dev_us, dev_thread_us = per_op_us(dev_fn, args.ops, args.reps, sync=True)
        cpu_us, cpu_thread_us = per_op_us(cpu_fn, args.ops, args.reps, sync=False)
        rows.append(dict(name=f"{name} on 16 float32", native=native, metalx_us=dev_us, cpu_us=cpu_us,
                         ratio=dev_us / cpu_us, metalx_thread_us=dev_thread_us, cpu_thread_us=cpu_thread_us,
                         thread_ratio=dev_thread_us / cpu_thread_us, target=f"<= {TARGET_US} us per op",
                         met=bool(dev_us <= TARGET_US)))

    width = max(len(r["name"]) for r in rows)
    print(f"{'op (loop of ' + str(args.ops) + ')':{width}}  {'metalx':>9}  {'CPU':>9}  {'ratio':>6}  "
          f"{'thread CPU: metalx':>18}  {'CPU':>9}  {'ratio':>6}  target (wall)")
    for r in rows:
        kind = "" if r["native"] else " (fallback)"
        print(f"{r['name']:{width}}  {r['metalx_us']:7.2f}us  {r['cpu_us']:7.2f}us  {r['ratio']:6.2f}  "
              f"{r['metalx_thread_us']:16.2f}us  {r['cpu_thread_us']:7.2f}us  {r['thread_ratio']:6.2f}  "
              f"{r['target']} {'met' if r['met'] else 'NOT MET'}{kind}")
    if args.out:
        info = dict(torch=torch.__version__, driver=torch.metalx.driver_name(), machine=platform.machine(),
                    threads=torch.get_num_threads(), load_average=list(os.getloadavg()), ops_per_loop=args.ops,
                    loops=args.reps, results=rows)
        with open(args.out, "w") as f:
            json.dump(info, f, indent=2)


if __name__ == "__main__":
    main()
