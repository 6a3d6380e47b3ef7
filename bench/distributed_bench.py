"""torch.distributed on metalx: all_reduce of metalx tensors against CPU tensors with
Gloo, and a DDP training step, on 2 processes of this machine (127.0.0.1).

    python bench/distributed_bench.py [--out bench/results/distributed-<driver>-<os>-<arch>.json]

For each size (1-256 MB of float32) both ranks all_reduce (SUM) a metalx tensor and a
CPU tensor of that size, in interleaved rounds; reported: each one's median time and
bus bandwidth, and ratio = CPU time / metalx time. Gloo reads and writes metalx memory
in place (no staging copy), so the target is ratio >= 0.9. The DDP step (forward,
backward with gradient all_reduce, SGD) of a small MLP is timed the same way, metalx
model vs the CPU model.
"""

import argparse
import datetime
import json
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import time

SIZES_MB = (1, 4, 16, 64, 256)
# Interleaved rounds per size (each a median of reps): on a shared machine load drifts
# within a run; more rounds at the cheap sizes let both sides see the same drift.
ROUNDS = 5


def _median_seconds(fn, reps, barrier):
    fn()  # warm-up (allocator, Gloo buffers)
    samples = []
    for _ in range(reps):
        barrier()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _rank(rank, world_size, store, args, results):
    os.environ["GLOO_SOCKET_IFNAME"] = "lo0" if sys.platform == "darwin" else "lo"
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=600))
    barrier = dist.barrier
    rows = []
    for mb in args.sizes:
        n = mb * (1 << 20) // 4
        cpu = torch.ones(n)
        dev = torch.ones(n, device="metalx")
        reps = max(3, min(args.reps, 256 // mb))
        t_cpu, t_dev = [], []
        for _ in range(ROUNDS):  # interleaved rounds: machine-load drift hits both alike
            t_cpu.append(_median_seconds(lambda: dist.all_reduce(cpu), reps, barrier))
            t_dev.append(_median_seconds(lambda: dist.all_reduce(dev), reps, barrier))
        c, d = statistics.median(t_cpu), statistics.median(t_dev)
        busbw = lambda s: 2 * (world_size - 1) / world_size * mb / 1024 / s  # GB/s, as nccl-tests
        rows.append(dict(size_mb=mb, cpu_ms=c * 1e3, metalx_ms=d * 1e3, cpu_busbw_gbs=busbw(c),
                         metalx_busbw_gbs=busbw(d), ratio=c / d))
        del cpu, dev

    from torch.nn.parallel import DistributedDataParallel as DDP

    def ddp_step_seconds(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256))
        ddp = DDP(model.to(device))
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        x, y = torch.randn(64, 256, device=device), torch.randn(64, 256, device=device)

        def step():
            opt.zero_grad()
            torch.nn.functional.mse_loss(ddp(x), y).backward()
            opt.step()
            if device == "metalx":
                torch.metalx.synchronize()

        return _median_seconds(step, args.reps, barrier)

    ddp = dict(cpu_ms=ddp_step_seconds("cpu") * 1e3, metalx_ms=ddp_step_seconds("metalx") * 1e3)
    ddp["ratio"] = ddp["cpu_ms"] / ddp["metalx_ms"]
    if rank == 0:
        results.put(dict(all_reduce=rows, ddp_step=ddp, driver=torch.metalx.driver_name(),
                         torch=torch.__version__))
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES_MB))
    args = parser.parse_args()
    load_before = os.getloadavg()
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        procs = [ctx.Process(target=_rank, args=(r, 2, store, args, results)) for r in range(2)]
        for p in procs:
            p.start()
        measured = results.get(timeout=3600)
        for p in procs:
            p.join()
    ratios = [r["ratio"] for r in measured["all_reduce"]]
    result = dict(
        machine=platform.platform(),
        ranks=2,
        transport="Gloo over TCP, 127.0.0.1",
        # The machine may be shared: its 1/5/15-minute load averages around the run.
        load_average=dict(before=load_before, after=os.getloadavg(), cpus=os.cpu_count()),
        **measured,
        target="all_reduce ratio (CPU time / metalx time) >= 0.9 at every size",
        met=bool(min(ratios) >= 0.9),
    )
    print(json.dumps(result, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
