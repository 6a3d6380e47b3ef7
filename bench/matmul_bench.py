"""Matrix multiply on metalx against CPU torch, measured in one run.

    python bench/matmul_bench.py [--out bench/results/matmul.json] [--reps N]

float32 square GEMMs (512, 1024, 2048), a batched matmul of 64 x (128x64 @ 64x128),
and the matrix products of one Transformer layer of a 128-wide model (batch 8, sequence
256, 4 heads of 32, MLP 4x): the QKV, output and MLP projections (nn.Linear: addmm)
and the attention scores and weighted values (bmm). CPU torch runs with
torch.set_num_threads(2) (the simulator also uses the machine's cores). Reports times,
GFLOP/s (2 * M * N * K / time) and the ratio CPU time / metalx time (target >= 0.5).
The machine's load average before and after is recorded: on a shared machine both
sides slow down; compare runs made when it was quiet.
"""

import argparse
import os
import time

import torch
import torch.nn.functional as F

from report import write_results

B, S, D, H = 8, 256, 128, 4  # the Transformer layer: batch, sequence, width, heads


def timed(fn, reps, sync, min_seconds=0.25):
    """Best of at least `reps` runs after a warm-up, and of as many as fit in
    `min_seconds` (the least disturbed run on a shared machine, for both sides)."""
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


def cases():
    """(name, make(device) -> a thunk running the product on that device, flops)."""
    g = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, generator=g)

    def binary(fn, x, y):
        def make(device):
            dx, dy = x.to(device), y.to(device)
            return lambda: fn(dx, dy)
        return make

    def linear(x, w, bias):
        def make(device):
            dx, dw, db = x.to(device), w.to(device), bias.to(device)
            return lambda: F.linear(dx, dw, db)
        return make

    out = []
    for n in (512, 1024, 2048):
        out.append((f"mm {n}x{n}x{n}", binary(torch.mm, rand(n, n), rand(n, n)), 2 * n ** 3))
    out.append(("bmm 64x(128x64 @ 64x128)", binary(torch.bmm, rand(64, 128, 64), rand(64, 64, 128)),
                2 * 64 * 128 * 64 * 128))
    for name, fan_in, fan_out in (("linear qkv 2048x128 -> 384", D, 3 * D), ("linear out 2048x128 -> 128", D, D),
                                  ("linear mlp up 2048x128 -> 512", D, 4 * D),
                                  ("linear mlp down 2048x512 -> 128", 4 * D, D)):
        w, bias = rand(fan_out, fan_in) * 0.05, rand(fan_out)
        out.append((name, linear(rand(B * S, fan_in), w, bias), 2 * B * S * fan_in * fan_out))
    hd = D // H
    out.append(("attn scores q @ k^T 32x(256x32 @ 32x256)",
                binary(lambda q, k: torch.bmm(q, k.transpose(1, 2)), rand(B * H, S, hd), rand(B * H, S, hd)),
                2 * B * H * S * S * hd))
    out.append(("attn values p @ v 32x(256x256 @ 256x32)", binary(torch.bmm, rand(B * H, S, S), rand(B * H, S, hd)),
                2 * B * H * S * S * hd))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(2)
    load_before = os.getloadavg()
    rows = []
    print(f"{'case':44} {'metalx ms':>10} {'cpu ms':>9} {'mx GF/s':>8} {'cpu GF/s':>8} {'ratio':>6}")
    for name, make, flops in cases():
        torch.metalx.reset_fallback_stats()
        m = timed(make("metalx"), args.reps, torch.metalx.synchronize)
        native = torch.metalx.fallback_stats() == {}
        c = timed(make("cpu"), args.reps, lambda: None)
        r = dict(case=name, metalx_ms=m * 1e3, cpu_ms=c * 1e3, metalx_gflops=flops / m / 1e9,
                 cpu_gflops=flops / c / 1e9, ratio=c / m, target=">= 0.5", met=c / m >= 0.5, native=native)
        rows.append(r)
        print(f"{name:44} {r['metalx_ms']:10.2f} {r['cpu_ms']:9.2f} {r['metalx_gflops']:8.2f} "
              f"{r['cpu_gflops']:8.2f} {r['ratio']:6.2f}{'' if native else '  (fell back)'}", flush=True)
    if args.out:
        write_results(args.out, load_before, rows)


if __name__ == "__main__":
    main()
