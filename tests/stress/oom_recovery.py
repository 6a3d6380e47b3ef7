"""Allocating until the device is out of memory, then recovering: the error is
torch.OutOfMemoryError naming the request, nothing already allocated is lost, and
after freeing, allocation and compute work again."""

import gc

import torch

DEVICE = "metalx"


def run(rounds, tally):
    previous = torch.metalx.get_per_process_memory_fraction()
    # A small limit makes each round quick, and leaves the rest for the other phases.
    torch.metalx.set_per_process_memory_fraction(min(previous, 0.05))
    try:
        for round_index in range(rounds):
            keep = torch.arange(1000, dtype=torch.float32, device=DEVICE)
            held, chunk = [], 8 << 20
            try:
                while True:
                    held.append(torch.empty(chunk // 4, device=DEVICE).fill_(len(held)))
                    if len(held) > 100000:
                        tally.error("oom", "no OutOfMemoryError below the memory limit")
                        break
            except torch.OutOfMemoryError as e:
                if "metalx" not in str(e) and "memory" not in str(e):
                    tally.error("oom", f"unclear message: {e}")
                tally.count("out-of-memory errors")
            # What was allocated before the error is intact.
            for i in range(0, len(held), max(1, len(held) // 8)):
                if held[i][-1].item() != i:
                    tally.error("oom", f"round {round_index}: allocation {i} changed")
            if not torch.equal(keep.cpu(), torch.arange(1000, dtype=torch.float32)):
                tally.error("oom", "a tensor allocated before the error changed")
            del held
            gc.collect()
            # Recovered: a large allocation and a kernel work again.
            y = torch.ones(1 << 20, device=DEVICE).mul_(2).sum()
            if y.item() != 2 * (1 << 20):
                tally.error("oom", "compute after recovery is wrong")
            tally.count("oom recoveries")
    finally:
        torch.metalx.empty_cache()
        torch.metalx.set_per_process_memory_fraction(previous)
