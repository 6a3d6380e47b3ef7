"""The metalx stress suite (issue 17): runs the phases below against one metalx
device, checks every result against CPU torch, and reports what ran, what failed and
the device memory at start and end. Exit status 1 if anything failed or memory grew.

  python tests/stress/run_stress.py --seconds 300 --report bench/results/stress.json

Phases: 8 threads on their own streams (stream_mix) with torch.save/load beside them
(save_load); allocate-to-OOM rounds (oom_recovery); compile_shader from several
processes sharing one disk cache, then with corrupted entries (shader_cache)."""

import argparse
import gc
import json
import os
import platform
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from metalx import _C  # noqa: E402

import oom_recovery  # noqa: E402
import save_load  # noqa: E402
import shader_cache  # noqa: E402
import stream_mix  # noqa: E402


def device_memory():
    gc.collect()
    torch.metalx.synchronize()
    return {"allocated": torch.metalx.memory_allocated(), "reserved": torch.metalx.memory_reserved()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=300, help="length of the threaded phase")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--oom-rounds", type=int, default=5)
    parser.add_argument("--shader-processes", type=int, default=4)
    parser.add_argument("--shader-sources", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report", help="write the report as JSON here")
    args = parser.parse_args()

    tally = stream_mix.Tally()
    torch.metalx.synchronize()
    warm = torch.ones(8, device="metalx").sum().item()  # first use: device, pools, pipelines
    assert warm == 8
    start_memory = device_memory()
    started = time.monotonic()

    stop = threading.Event()
    saver = save_load.start(stop, tally, args.seed)
    stream_mix.run(args.threads, args.seconds, args.seed, tally)
    stop.set()
    saver.join()
    threaded_s = time.monotonic() - started

    oom_recovery.run(args.oom_rounds, tally)
    shader_cache.run(args.shader_processes, args.shader_sources, args.seed, tally)

    torch.metalx.empty_cache()
    end_memory = device_memory()
    # Everything the phases allocated is freed: what is still allocated is what was
    # before (no leak); the cache was emptied, so nothing beyond that is reserved.
    if end_memory["allocated"] > start_memory["allocated"]:
        tally.error("memory", f"allocated grew from {start_memory['allocated']} to {end_memory['allocated']} bytes")
    if end_memory["reserved"] > max(start_memory["reserved"], end_memory["allocated"]):
        tally.error("memory", f"reserved grew from {start_memory['reserved']} to {end_memory['reserved']} bytes")

    report = {
        "machine": platform.machine(), "system": platform.system(), "torch": torch.__version__,
        "driver": _C.driver_name(),
        "cores": os.cpu_count(), "load_average_at_end": os.getloadavg()[0],
        "threads": args.threads, "threaded_seconds": round(threaded_s, 1),
        "total_seconds": round(time.monotonic() - started, 1),
        "ops": dict(sorted(tally.ops.items())), "errors": tally.errors,
        "memory_at_start": start_memory, "memory_at_end": end_memory,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.report:
        with open(args.report, "w") as f:
            f.write(text + "\n")
    return 1 if tally.errors else 0


if __name__ == "__main__":
    sys.exit(main())
