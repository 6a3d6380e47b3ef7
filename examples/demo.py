"""metalx demo: train a small classifier on the metalx device, check it against the
same training on the CPU, and report which aten ops ran as metalx kernels and which
fell back to the CPU.

    python examples/demo.py [--steps 200]
"""

import argparse
import collections
import math
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode


def spirals(n, seed=0):
    """Two interleaved spirals: a small problem a linear model cannot solve."""
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(n, generator=g) * 3 * math.pi
    label = torch.randint(0, 2, (n,), generator=g)
    r = t / (3 * math.pi)
    angle = t + label * math.pi
    x = torch.stack([r * torch.cos(angle), r * torch.sin(angle)], 1)
    x += 0.02 * torch.randn(n, 2, generator=g)
    return x, label


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(2, 64), torch.nn.Tanh(),
        torch.nn.Linear(64, 64), torch.nn.Tanh(),
        torch.nn.Linear(64, 2))


def train(device, steps, x, y, log_every=0):
    model = make_model().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    x, y = x.to(device), y.to(device)
    losses = []
    for step in range(1, steps + 1):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if log_every and (step % log_every == 0 or step == 1):
            print(f"  step {step:4d}/{steps}  loss {losses[-1]:.4f}", flush=True)
    with torch.no_grad():
        accuracy = (model(x).argmax(1) == y).float().mean().item()
    return losses, accuracy


class OpCounter(TorchDispatchMode):
    """Counts the aten ops one training step dispatches."""

    def __init__(self):
        super().__init__()
        self.counts = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[func.name()] += 1  # "aten::add.Tensor"
        return func(*args, **(kwargs or {}))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()

    print(f"torch {torch.__version__}; metalx devices: {torch.metalx.device_count()} "
          f"(driver: {torch.metalx.driver_name()})")
    x, y = spirals(1024)

    print(f"training on metalx for {args.steps} steps")
    start = time.perf_counter()
    losses, accuracy = train("metalx", args.steps, x, y, log_every=max(1, args.steps // 10))
    seconds = time.perf_counter() - start

    cpu_losses, cpu_accuracy = train("cpu", args.steps, x, y)
    worst = max(abs(a - b) for a, b in zip(losses, cpu_losses))
    print(f"done in {seconds:.1f} s: final loss {losses[-1]:.4f}, accuracy {accuracy:.1%} "
          f"(CPU: {cpu_losses[-1]:.4f}, {cpu_accuracy:.1%}; largest loss difference {worst:.2e})")

    # Which ops one training step needs, and which of them metalx ran itself.
    model = make_model().to("metalx")
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    xm, ym = x.to("metalx"), y.to("metalx")
    torch.metalx.reset_fallback_stats()
    with OpCounter() as counter:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xm), ym).backward()
        opt.step()
    fallbacks = torch.metalx.fallback_stats()
    fell_back = {name.split(".")[0] for name in fallbacks}
    has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
    native = sorted(op for op in counter.counts if has_kernel(op, "PrivateUse1"))
    composite = sorted(op for op in counter.counts
                       if op not in native and op.split(".")[0] not in fell_back)
    print(f"\none training step dispatches {sum(counter.counts.values())} aten calls of "
          f"{len(counter.counts)} ops:")
    print(f"  {len(native)} ran as metalx kernels or views: " + ", ".join(native))
    print(f"  {len(composite)} are composites of other ops: " + ", ".join(composite))
    print(f"  {len(fallbacks)} fell back to the CPU: "
          + ", ".join(f"{op} x{n}" for op, n in sorted(fallbacks.items())))
    native_calls = sum(counter.counts[op] for op in native)
    fallback_calls = sum(fallbacks.values())
    print(f"share of the step's computing calls that ran natively on metalx: "
          f"{native_calls / max(1, native_calls + fallback_calls):.0%} "
          f"({native_calls} native, {fallback_calls} on the CPU fallback)")
    if worst > 1e-3 or accuracy < 0.9:
        raise SystemExit("demo FAILED: metalx training does not match the CPU")


if __name__ == "__main__":
    main()
