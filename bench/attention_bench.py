"""Scaled dot-product attention on metalx (the fused kernels, kernels/attention.metal)
against CPU torch's SDPA, measured in one run.

    python bench/attention_bench.py [--out bench/results/attention-sim-linux-x86_64.json] [--reps N]

Cases: F.scaled_dot_product_attention forward, and forward + backward, at batch 8, 4
heads, sequence 256, head dim 32 (the attention of a 128-wide Transformer layer), plain
and causal, float32; and forward + backward at head dim 128 (the kernels' wide tile
class). CPU torch runs with torch.set_num_threads(2) (the simulator also
uses the machine's cores) and picks its own SDPA backend (its fused flash kernel).
Reports times and the ratio CPU time / metalx time (target >= 0.5), whether the fused
kernels ran and whether anything fell back, and the machine's load average before and
after (both sides slow down on a shared machine; compare quiet runs).
"""

import argparse
import os

import torch
import torch.nn.functional as F

from matmul_bench import timed  # best of several runs, the same measure as the matmul bench
from report import write_results

B, H, S, D = 8, 4, 256, 32


def cases():
    """(name, make(device) -> a thunk running the case on that device)."""
    g = torch.Generator().manual_seed(0)
    inputs = {d: [torch.randn(B, H, S, d, generator=g) for _ in range(4)] for d in (D, 128)}

    def make_case(causal, backward, d=D):
        q, k, v, grad = inputs[d]

        def make(device):
            dq, dk, dv, dg = (t.detach().clone().to(device).requires_grad_(backward) for t in (q, k, v, grad))

            def run():
                out = F.scaled_dot_product_attention(dq, dk, dv, is_causal=causal)
                if backward:
                    torch.autograd.grad(out, (dq, dk, dv), dg)
            return run
        return make

    shape = f"{B}x{H}x{S}x{D}"
    return [(f"sdpa fwd {shape}", make_case(False, False)), (f"sdpa fwd+bwd {shape}", make_case(False, True)),
            (f"sdpa causal fwd {shape}", make_case(True, False)),
            (f"sdpa causal fwd+bwd {shape}", make_case(True, True)),
            (f"sdpa fwd+bwd {B}x{H}x{S}x128", make_case(False, True, 128))]


def fused_ran(fn):
    with torch.metalx.profiler.profile() as prof:
        fn()
        torch.metalx.synchronize()
    return any(c["name"].startswith("attention_forward") for c in prof.commands)  # either tile class


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(2)
    load_before = os.getloadavg()
    rows = []
    print(f"{'case':36} {'metalx ms':>10} {'cpu ms':>9} {'ratio':>6}")
    for name, make in cases():
        torch.metalx.reset_fallback_stats()
        run = make("metalx")
        fused = fused_ran(run)
        m = timed(run, args.reps, torch.metalx.synchronize)
        native = torch.metalx.fallback_stats() == {}
        c = timed(make("cpu"), args.reps, lambda: None)
        r = dict(case=name, metalx_ms=m * 1e3, cpu_ms=c * 1e3, ratio=c / m, target=">= 0.5", met=c / m >= 0.5,
                 fused=fused, native=native)
        rows.append(r)
        print(f"{name:36} {r['metalx_ms']:10.2f} {r['cpu_ms']:9.2f} {r['ratio']:6.2f}"
              f"{'' if fused else '  (not fused)'}{'' if native else '  (fell back)'}", flush=True)
    if args.out:
        write_results(args.out, load_before, rows)


if __name__ == "__main__":
    main()
